"""``eagle-workbench demo``: the whole diagnosis loop on this machine, no GPU.

Builds the lab world (cached), writes a demo workspace (the local host, a lab profile serving the
story's draft config), launches it and, in a terminal, opens the TUI with a guided path: accept
length -> Doctor -> Alignment -> apply fix -> relaunch -> compare. ``--no-tui`` (and no terminal)
runs the same story scripted and prints before/after; ``--json`` prints
``{"before": {"accept_length"}, "findings": [...], "fix": {...}, "after": {"accept_length"}}``.
``--engine vllm`` tells the story on a real vLLM (``make vllm``): the JSON's ``engine`` is ``vllm==X`` and
each side carries vLLM's own ``counters`` beside its accept length.
``--predictor`` prints the Predictor on the numbers of the original story instead.
"""

from __future__ import annotations

import sys
from typing import Any

STORY: dict[str, Any] = {"acc": [0.75], "steps": 5, "topk": 1, "draft_tokens": 6, "observed_accept_length": 1.12}


def register(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="the diagnosis loop in the lab: TUI in a terminal, scripted otherwise",
        description="Build the lab (cached), launch its server with the story's broken draft "
        "config, and walk the loop: accept length, doctor, alignment, fix, relaunch, "
        "compare. The workspace defaults to ~/.eagle-workbench/demo.",
    )
    p.add_argument("--no-tui", action="store_true", help="run the story scripted and print the outcome")
    p.add_argument(
        "--size",
        choices=["tiny", "small"],
        default="small",
        help="lab world: small (default; about two minutes to build once) or tiny (tests)",
    )
    p.add_argument("--lab-dir", metavar="DIR", help="lab cache folder (default: ~/.cache/eagle-workbench/lab)")
    p.add_argument(
        "--measure-tokens",
        type=int,
        default=32,
        metavar="N",
        help="tokens per prompt in each measurement (default 32; the lab runs on a CPU)",
    )
    p.add_argument("--keep", action="store_true", help="leave the lab servers running when the TUI exits")
    p.add_argument(
        "--predictor",
        action="store_true",
        help="print the Predictor on the original story's numbers (75%% accuracy, 5/1/6, 1.12)",
    )
    p.add_argument("--json", action="store_true", help="with --no-tui: print the outcome as JSON")
    p.add_argument(
        "--engine",
        choices=["sglang", "vllm"],
        default="sglang",
        help="sglang: the lab server as SGLang's stand-in (default); vllm: a real vLLM (`make vllm`)",
    )
    p.set_defaults(func=run)


def run(args, ctx) -> int:
    if args.predictor:
        print(demo_text(ctx.wb.predict(**STORY)))
        return 0
    from pathlib import Path

    from workbench.api import Workbench

    root = Path(args.workspace).expanduser() if args.workspace else Path(Workbench.demo_default_dir())
    tui = not args.no_tui and not args.json and sys.stdout.isatty() and sys.stdin.isatty()
    progress = ctx.progress
    with Workbench.open(root, progress=progress) as wb:
        setup = wb.demo_prepare(args.size, lab_dir=args.lab_dir, progress=progress, engine=args.engine)
        if not tui:
            try:
                result = wb.demo_run(setup, measure_tokens=args.measure_tokens, progress=progress)
            finally:
                if not args.keep:
                    wb.demo_stop_servers()
            if args.json:
                import json

                print(json.dumps(result.to_dict(), indent=2))
            else:
                print(result.text())
            return 0
        rec = wb.demo_launch(setup, progress=progress)
        m = wb.demo_measure(rec.id, args.measure_tokens)
    from workbench.tui.demo import run_demo_app

    progress.finish()  # the TUI takes the terminal from here

    try:
        return run_demo_app(str(root), rec.id, accept_length=m.accept_length, measure_tokens=args.measure_tokens)
    finally:
        if not args.keep:
            with Workbench.open(root) as wb:
                wb.demo_stop_servers()


def demo_text(result) -> str:
    from workbench.cli.cmd_predict import prediction_text
    from workbench.textplot import bar_lines, render

    curve = result.curve
    hi = float(int(max(p.accept_length for p in curve)) + 1)
    plot = render(
        bar_lines(
            [f"{p.steps} steps" for p in curve],
            [p.accept_length for p in curve],
            lo=1.0,
            hi=hi,
            width=40,
            marker=STORY["observed_accept_length"],
            highlight=[p.steps for p in curve].index(result.steps),
        )
    )
    table = [
        "steps  draft_tokens  accept_length  accepted_drafts",
        *(f"{p.steps:>5}  {p.draft_tokens:>12}  {p.accept_length:>13.3f}  {p.accepted_drafts:>15.3f}" for p in curve),
    ]
    return "\n".join(
        [
            "Predictor: training accuracy 0.75 (acc), served with --speculative-num-steps 5 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6, logged accept len 1.12",
            "",
            prediction_text(result),
            "",
            "accept length for steps 1..8 (chain, bonus token included)",
            *table,
            "",
            f"accept length vs steps (scale 1..{hi:g}; ┃ = observed 1.12, < = configured)",
            plot,
        ]
    )
