"""``eagle-workbench demo``: the Predictor on the numbers of a real debugging session.

Training showed ~75% per-token accuracy; the server ran 5 steps, topk 1, 6 draft tokens and
logged accept length 1.12. In a terminal this opens the TUI on the Predictor; otherwise it prints
the same prediction, table and plot as text.
"""

from __future__ import annotations

import sys

STORY = {"acc": [0.75], "steps": 5, "topk": 1, "draft_tokens": 6, "observed_accept_length": 1.12}


def register(sub) -> None:
    p = sub.add_parser("demo", help="the Predictor on a real case (TUI in a terminal, text otherwise)",
                       description="Predicted vs observed accept length for a drafter with ~75%% training "
                                   "accuracy served at 5/1/6 that logged 1.12.")
    p.add_argument("--text", action="store_true", help="print the text version even in a terminal")
    p.set_defaults(func=run)


def run(args, ctx) -> int:
    if sys.stdout.isatty() and sys.stdin.isatty() and not args.text:
        from workbench.tui.app import run_app

        return run_app(workspace=args.workspace, start="predictor")
    print(demo_text(ctx.wb.predict(**STORY)))
    return 0


def demo_text(result) -> str:
    from workbench.cli.cmd_predict import prediction_text
    from workbench.textplot import bar_lines, render

    curve = result.curve
    hi = float(int(max(p.accept_length for p in curve)) + 1)
    plot = render(bar_lines([f"{p.steps} steps" for p in curve], [p.accept_length for p in curve], lo=1.0, hi=hi,
                            width=40, marker=STORY["observed_accept_length"],
                            highlight=[p.steps for p in curve].index(result.steps)))
    table = ["steps  draft_tokens  accept_length  accepted_drafts",
             *(f"{p.steps:>5}  {p.draft_tokens:>12}  {p.accept_length:>13.3f}  {p.accepted_drafts:>15.3f}"
               for p in curve)]
    return "\n".join([
        "Predictor: training accuracy 0.75 (acc), served with --speculative-num-steps 5 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6, logged accept len 1.12", "",
        prediction_text(result), "",
        "accept length for steps 1..8 (chain, bonus token included)", *table, "",
        f"accept length vs steps (scale 1..{hi:g}; ┃ = observed 1.12, < = configured)", plot,
    ])
