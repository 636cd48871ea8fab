"""``eagle-workbench engine``: what an SGLang release captures, read from that release's code.

eagle-workbench engine capture --engine sglang==0.5.14 --target-config DIR --ids 2,30,58 [--json]
eagle-workbench engine rules --engine sglang==0.5.14 [--json]
"""

from __future__ import annotations

import re

from workbench.cli.common import add_json, emit
from workbench.errors import InputError


def register(sub) -> None:
    p = sub.add_parser(
        "engine",
        help="what an SGLang release captures for EAGLE-3 (read from its code)",
        description="Capture rules read from SGLang's own code: the host's installation, the "
        "generated table, or the release's wheel.",
    )
    g = p.add_subparsers(dest="engine_command", metavar="{capture,rules}")
    c = g.add_parser("capture", help="the points an engine captures for config ids on a target")
    c.add_argument("--engine", required=True, metavar="SPEC", help="sglang==X.Y.Z (or sglang: the newest)")
    c.add_argument("--target-config", required=True, metavar="DIR", help="the target's HF config dir")
    c.add_argument(
        "--ids",
        metavar="LIST",
        help="the draft config's eagle_aux_hidden_state_layer_ids (omitted: the config has none)",
    )
    c.add_argument("--disable-cuda-graph", action="store_true", help="the server runs without CUDA graphs")
    c.add_argument("--host", metavar="NAME", help="ask this host's own SGLang first (a host of workbench.toml)")
    c.add_argument(
        "--source",
        choices=("auto", "host", "table", "wheel"),
        default="auto",
        help="where the rule comes from: the host's SGLang, the generated table, the release's wheel "
        "(downloaded, cached), or auto (the host when given and it runs that release, else "
        "the table, else the wheel)",
    )
    add_json(c)
    # "--ids -1,2,30": a value starting with a negative id is a value, not an option
    c._negative_number_matcher = re.compile(r"^-\d[\d,\s-]*$")
    c._has_negative_number_optionals = []
    c.set_defaults(func=run_capture)
    r = g.add_parser("rules", help="every EAGLE-3 rule of a release")
    r.add_argument("--engine", required=True, metavar="SPEC", help="sglang==X.Y.Z (or sglang: the newest)")
    r.add_argument(
        "--source",
        choices=("auto", "table", "wheel"),
        default="auto",
        help="the generated table, the release's wheel, or auto",
    )
    add_json(r)
    r.set_defaults(func=run_rules)


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
    )
    emit(res, args.json, capture_text)
    return 0


def capture_text(res) -> str:
    lines = [
        f"{res.engine} on {res.arch} ({res.num_layers} layers), ids {res.ids if res.ids is not None else 'none'}"
        f" [source: {res.source}]",
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
    rules, version, source = ctx.wb.engine_rules(args.engine, source=args.source)
    if args.json:
        emit({"engine": f"sglang=={version}", "source": source, "rules": [r.to_dict() for r in rules]}, True)
        return 0
    print(f"sglang=={version}: {len(rules)} EAGLE-3 classes [source: {source}]")
    for r in rules:
        print(
            f"  {r.arch:44s} ids {r.id_map:24s} default {list(r.default) if r.default else '?'} "
            f"idx0 {r.index0} idxN {r.boundary} missing {r.missing} start-up {r.startup} "
            f"graph-reset {r.graph_reset}"
        )
    return 0
