"""``eagle-workbench engine``: what an SGLang or vLLM release captures, read from that release's code.

eagle-workbench engine capture --engine sglang==0.5.14 --target-config DIR --ids 2,30,58 [--json]
eagle-workbench engine rules --engine vllm==0.11.0 [--json]
eagle-workbench engine read sglang==0.5.99 | vllm==0.12.0 | PATH   (a wheel, an installed package)
"""

from __future__ import annotations

import re

from workbench.cli.common import add_json, emit
from workbench.errors import InputError

SOURCES = ("auto", "table", "installed", "wheel", "host")


def register(sub) -> None:
    p = sub.add_parser(
        "engine",
        help="what an SGLang or vLLM release captures for EAGLE-3 (read from its code)",
        description="Capture rules read from the engines' own code: the generated table, the installed "
        "package, a host's installation, or the release's wheel.",
    )
    g = p.add_subparsers(dest="engine_command", metavar="{capture,rules,read}")
    c = g.add_parser("capture", help="the points a release captures for config ids on a target")
    c.add_argument(
        "--engine",
        required=True,
        metavar="SPEC",
        help="sglang==X.Y.Z or vllm==X.Y.Z (or sglang / vllm: the newest read)",
    )
    c.add_argument("--target-config", required=True, metavar="DIR", help="the target's HF config dir")
    c.add_argument(
        "--ids",
        metavar="LIST",
        help="the ids the release reads from the draft config (omitted: the config has none)",
    )
    c.add_argument("--disable-cuda-graph", action="store_true", help="the server runs without CUDA graphs")
    c.add_argument("--host", metavar="NAME", help="read this host's own installed engine (a host of workbench.toml)")
    _source(c)
    add_json(c)
    # "--ids -1,2,30": a value starting with a negative id is a value, not an option
    c._negative_number_matcher = re.compile(r"^-\d[\d,\s-]*$")
    c._has_negative_number_optionals = []
    c.set_defaults(func=run_capture)
    r = g.add_parser("rules", help="every EAGLE-3 rule, draft class and registry size of a release")
    r.add_argument("--engine", required=True, metavar="SPEC", help="sglang==X.Y.Z or vllm==X.Y.Z (or sglang / vllm)")
    r.add_argument("--host", metavar="NAME", help="read this host's own installed engine")
    _source(r)
    add_json(r)
    r.set_defaults(func=run_rules)
    d = g.add_parser("read", help="read a release's code now and keep the read (its wheel, or a path)")
    d.add_argument(
        "what", metavar="SPEC|PATH", help="sglang==X / vllm==X (downloads its wheel), or a wheel or package folder"
    )
    add_json(d)
    d.set_defaults(func=run_read)


def _source(p) -> None:
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="auto",
        help="where the rule comes from: the generated table, the installed package, the release's wheel "
        "(downloaded, kept), a host's installation, or auto (the table, the installed package of that "
        "release, a kept read; a release not read is an error naming the nearest and how to read it)",
    )
    p.add_argument("--read", action="store_true", help="with auto: read the release's wheel when it was not read")


def _ids(text):
    if text is None:
        return None
    out = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise InputError(f"--ids: {part!r} is not an integer (expected a list like 2,30,58)") from None
    if not out:
        raise InputError("--ids: empty list (omit --ids when the config has none)")
    return out


def run_capture(args, ctx) -> int:
    res = ctx.wb.engine_capture(
        args.engine,
        target_config=args.target_config,
        ids=_ids(args.ids),
        cuda_graph=not args.disable_cuda_graph,
        source=args.source,
        host=args.host,
        read=args.read,
    )
    emit(res, args.json, capture_text)
    return 0


def capture_text(res) -> str:
    lines = [
        f"{res.engine} on {res.arch} ({res.num_layers} layers), ids {res.ids if res.ids is not None else 'none'}"
        f" [read from: {res.source}]",
        f"  captures:          {', '.join(res.points) or '-'}",
    ]
    if res.cuda_graph_points is not None:
        lines.append(
            f"  CUDA-graph decode: {', '.join(res.cuda_graph_points)}"
            + ("   <- differs from the eager paths" if res.graph_differs else "")
        )
    if res.fatal:
        lines.append(f"  FATAL: {res.fatal}")
    lines += [f"  note: {n}" for n in res.notes]
    if res.unknown:
        lines.append(f"  not settled by the code: {', '.join(res.unknown)}")
    lines += [f"  evidence {e}" for e in res.evidence]
    return "\n".join(lines)


def run_rules(args, ctx) -> int:
    rel = ctx.wb.engine_release(args.engine, source=args.source, read=args.read, host=args.host)
    if args.json:
        emit(rel, True)
        return 0
    print(release_text(rel))
    return 0


def release_text(rel) -> str:
    where = rel.source + (f" {rel.read_from}" if rel.read_from else "")
    lines = [
        f"{rel.name}: {len(rel.rules)} EAGLE-3 target classes, {len(rel.registry)} classes registered, "
        f"{len(rel.drafts)} EAGLE-3 draft classes [read from: {where}]"
    ]
    for r in rel.rules:
        lines.append(
            f"  {r.arch:44s} ids {r.id_map:24s} default {list(r.default) if r.default else '?'} "
            f"idx0 {r.index0} idxN {r.boundary} missing {r.missing} start-up {r.startup} "
            f"graph-reset {r.graph_reset} config-ids {r.config_ids} {'/'.join(r.id_source)}"
        )
    for d in rel.drafts.values():
        flags = sorted(k for k in d.reads if "norm" in k or "fc" in k or "aux" in k)
        lines.append(f"  draft {d.arch:38s} fc states {d.fc_states:7s} reads {', '.join(flags) or '-'}")
    return "\n".join(lines)


def run_read(args, ctx) -> int:
    rel = ctx.wb.engine_read(args.what)
    emit(rel, args.json, release_text)
    return 0
