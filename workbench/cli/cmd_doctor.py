"""``eagle-workbench doctor``: static checks of a draft checkpoint against its target and engine, or
the whole diagnosis of a running server (``--server ID``), and its one-key fix (``--apply-fix``)."""

from __future__ import annotations

import argparse

from workbench.api import MAX_CONTEXT, MAX_LAYERS
from workbench.cli.common import MAX_ID, add_json, emit, int_flag
from workbench.display import evidence_label
from workbench.parsing import parse_ids


def register(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="find silent EAGLE-3 deployment faults (files, or a running server)",
        description="Check a draft directory (config.json + safetensors headers) against the "
        "target config, the engine and what the drafter was trained on; or, with "
        "--server, a running server: the config it loaded, observed vs predicted "
        "accept length, and its hidden states against the training data. "
        "Exit 1 when any finding is an error.",
    )
    p.add_argument("--draft", metavar="DIR", help="draft checkpoint directory (or its config.json)")
    p.add_argument("--target-config", metavar="FILE", help="the target's HF config.json (or its directory)")
    p.add_argument(
        "--engine",
        metavar="ENGINE",
        help="the serving engine: sglang==X.Y.Z, sglang (the newest read), vllm==X.Y.Z or vllm (default: sglang); "
        "a release whose code was not read is an error naming the nearest read and how to read it",
    )
    p.add_argument(
        "--read",
        action="store_true",
        help="read the serving release's wheel (downloaded with pip, kept) when its code was not read yet",
    )
    p.add_argument("--algorithm", metavar="ALGO", help="--speculative-algorithm of the launch (EAGLE3, EAGLE, ...)")
    p.add_argument("--trained-layers", metavar="IDS", help="layers the drafter was trained on, e.g. 2,30,58")
    p.add_argument(
        "--trained-convention",
        default="output-of-layer",
        metavar="CONV",
        help="convention of --trained-layers: output-of-layer (default), capture-before, hf-index",
    )
    p.add_argument(
        "--trained-engine",
        metavar="ENGINE",
        help="what captured the training data: sglang==X.Y.Z, vllm==X.Y.Z, specforge==V (its pinned "
        "SGLang) or speculators; without it a convention-dependent difference is only a warning",
    )
    p.add_argument("--context-length", type=int_flag(1, MAX_CONTEXT), metavar="N", help="the server's context length")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the launch's environment (repeatable), e.g. SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    )
    p.add_argument(
        "--num-layers", type=int_flag(1, MAX_LAYERS), metavar="N", help="target layers, when no target config is given"
    )
    p.add_argument(
        "--disable-cuda-graph",
        action="store_true",
        help="the server runs with --disable-cuda-graph (default: CUDA graphs on, as in production)",
    )
    live = p.add_argument_group("a running server")
    live.add_argument(
        "--server", type=int_flag(1, MAX_ID), metavar="ID", help="diagnose this server (see `server status`)"
    )
    live.add_argument(
        "--training-data",
        metavar="PATH",
        help="SpecForge training data on the server's host (default: [live] training_data)",
    )
    live.add_argument("--acc", metavar="A0,A1,..", help="per-depth accuracies instead of evaluating the drafter")
    live.add_argument(
        "--samples",
        type=int_flag(1, 100000),
        default=4,
        metavar="N",
        help="training samples sent to the server (their tokens are aligned together)",
    )
    live.add_argument(
        "--eval-samples",
        type=int_flag(1, 1000000),
        default=32,
        metavar="N",
        help="training samples for the predicted accept length (default 32)",
    )
    live.add_argument(
        "--measure-tokens", type=int_flag(1, 1 << 20), metavar="N", help="max_new_tokens of the measurement protocol"
    )
    live.add_argument("--no-measure", action="store_true", help="use the last measurement instead of measuring")
    live.add_argument("--no-static", action="store_true", help="skip the static checks (hidden states alone)")
    live.add_argument(
        "--dump",
        choices=["ask", "yes", "no"],
        default="ask",
        help="relaunch with a tensor dump when the layers must be named (default: ask)",
    )
    live.add_argument(
        "--alongside", action="store_true", help="run the dump server next to the live one instead of stopping it first"
    )
    live.add_argument(
        "--apply-fix",
        action="store_true",
        help="apply the last report's fix through the config history, relaunch, measure, compare",
    )
    live.add_argument("--no-relaunch", action="store_true", help="with --apply-fix: only write the config")
    live.add_argument("--yes", action="store_true", help="do not ask before a relaunch or a config write")
    add_json(p)
    p.set_defaults(func=run)


def parse_env(pairs: list[str]) -> dict:
    from workbench.errors import InputError

    out = {}
    for p in pairs:
        name, sep, value = p.partition("=")
        if not sep or not name.strip():
            raise InputError(f"--env: {p!r} is not NAME=VALUE")
        out[name.strip()] = value
    return out


def run(args: argparse.Namespace, ctx) -> int:
    from workbench.errors import InputError

    if args.server is not None:
        if args.draft:
            raise InputError("--draft and --server: give one (a draft folder, or a running server)")
        return run_live(args, ctx)
    if args.apply_fix:
        raise InputError("--apply-fix needs --server ID")
    if not args.draft:
        raise InputError("doctor: give --draft DIR (static checks) or --server ID (a running server)")
    trained = parse_ids(args.trained_layers, "--trained-layers") if args.trained_layers else None
    report = ctx.wb.doctor(
        args.draft,
        args.target_config,
        engine=args.engine,
        algorithm=args.algorithm,
        trained_layers=trained,
        trained_convention=args.trained_convention,
        context_length=args.context_length,
        num_layers=args.num_layers,
        trained_engine=args.trained_engine,
        env=parse_env(args.env),
        cuda_graph=not args.disable_cuda_graph,
        read=args.read,
    )
    if args.json:
        emit(
            {
                "findings": [f.to_dict() for f in report.findings],
                "capture": report.capture.to_dict() if report.capture else None,
                "inputs": report.inputs,
                "skipped": [s.to_dict() for s in report.skipped],
            },
            True,
        )
    else:
        print(render_text(report))
    return 1 if report.errors else 0


def run_live(args, ctx) -> int:
    import sys

    from workbench.cli.common import confirm_or_yes, parse_floats

    wb = ctx.wb
    if not args.json:
        wb.progress = _progress_lines()
    if args.apply_fix:
        plan = wb.live_fix_plan(args.server)
        if not args.no_relaunch:
            plan.summary += f"; then relaunch {wb.server(args.server).profile} and measure"
        if not confirm_or_yes(plan, args.yes):
            print("cancelled", file=sys.stderr)
            return 3
        out = wb.live_fix(args.server, confirm=True, relaunch=not args.no_relaunch)
        emit(out, args.json, lambda o: o.text())
        return 0

    def ask(plan) -> bool:
        if args.yes:
            return True
        if not sys.stdin or not sys.stdin.isatty():
            return False  # reported as pending: run again with --yes or --dump yes
        return confirm_or_yes(plan, False)

    acc = parse_floats(args.acc, "--acc") if args.acc else None
    report = wb.doctor_live(
        args.server,
        args.training_data,
        accuracies=acc,
        samples=args.samples,
        eval_samples=args.eval_samples,
        measure=not args.no_measure,
        measure_tokens=args.measure_tokens,
        dump=args.dump,
        confirm=ask,
        static=not args.no_static,
        dump_alongside=args.alongside,
    )
    emit(report, args.json, lambda r: r.text())
    return 1 if any(f.severity == "error" for f in report.findings) else 0


def _progress_lines():
    """Progress as short lines on stderr (each message once)."""
    import sys

    last = [None]

    def show(p) -> None:
        if p.message and p.message != last[0]:
            last[0] = p.message
            print(f"  .. {p.message}", file=sys.stderr, flush=True)

    return show


def render_text(report) -> str:
    lines = []
    if not report.findings:
        lines.append("no findings in the checks that ran")
    for f in report.findings:
        lines.append(f"{f.severity.upper():7} {f.code} [{evidence_label(f.evidence_class)}]: {f.message}")
        if f.fix:
            lines.append(f"        fix: {f.fix.summary}")
    if report.capture:
        lines.append("")
        lines.append(report.capture.text())
    skipped = getattr(report, "skipped", [])
    if skipped:
        lines.append("")
        lines.append(
            f"skipped {len(skipped)} check{'s' if len(skipped) > 1 else ''} for lack of inputs (not an all-clear):"
        )
        for s in skipped:
            lines.append(f"  - {s.check}: needs {s.needs} ({s.why})")
    return "\n".join(lines)
