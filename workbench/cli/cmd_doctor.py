"""``eagle-workbench doctor``: static checks of a draft checkpoint against its target and engine."""

from __future__ import annotations

import argparse

from workbench.cli.common import add_json, emit


def register(sub) -> None:
    p = sub.add_parser("doctor", help="find silent EAGLE-3 deployment faults from the files",
                       description="Check a draft directory (config.json + safetensors headers) against the "
                                   "target config, the engine and what the drafter was trained on. "
                                   "Exit 1 when any finding is an error.")
    p.add_argument("--draft", required=True, metavar="DIR", help="draft checkpoint directory (or its config.json)")
    p.add_argument("--target-config", metavar="FILE", help="the target's HF config.json (or its directory)")
    p.add_argument("--engine", metavar="ENGINE", help="sglang==X.Y.Z, sglang (latest) or vllm (default: sglang)")
    p.add_argument("--algorithm", metavar="ALGO", help="--speculative-algorithm of the launch (EAGLE3, EAGLE, ...)")
    p.add_argument("--trained-layers", metavar="IDS", help="layers the drafter was trained on, e.g. 2,30,58")
    p.add_argument("--trained-convention", default="output-of-layer", metavar="CONV",
                   help="convention of --trained-layers: output-of-layer (default), capture-before, hf-index")
    p.add_argument("--context-length", type=int, metavar="N", help="the server's context length")
    p.add_argument("--num-layers", type=int, metavar="N", help="target layers, when no target config is given")
    add_json(p)
    p.set_defaults(func=run)


def parse_ids(text: str, name: str) -> list[int]:
    from workbench.errors import InputError

    parts = [x for x in text.replace(",", " ").replace("[", " ").replace("]", " ").split() if x]
    if not parts:
        raise InputError(f"{name}: empty; expected integers like 2,30,58")
    try:
        return [int(x) for x in parts]
    except ValueError:
        raise InputError(f"{name}: {text!r} is not a list of integers like 2,30,58") from None


def run(args: argparse.Namespace, ctx) -> int:
    trained = parse_ids(args.trained_layers, "--trained-layers") if args.trained_layers else None
    report = ctx.wb.doctor(args.draft, args.target_config, engine=args.engine, algorithm=args.algorithm,
                           trained_layers=trained, trained_convention=args.trained_convention,
                           context_length=args.context_length, num_layers=args.num_layers)
    if args.json:
        emit({"findings": [f.to_dict() for f in report.findings],
              "capture": report.capture.to_dict() if report.capture else None,
              "inputs": report.inputs}, True)
    else:
        print(render_text(report))
    return 1 if report.errors else 0


def render_text(report) -> str:
    lines = []
    if not report.findings:
        lines.append("no findings")
    for f in report.findings:
        lines.append(f"{f.severity.upper():7} {f.code}: {f.message}")
        if f.fix:
            lines.append(f"        fix: {f.fix.summary}")
    if report.capture:
        lines.append("")
        lines.append(report.capture.text())
    return "\n".join(lines)
