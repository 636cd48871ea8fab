"""``eagle-workbench drafter``: evaluate a drafter on training data; check its weights strictly."""

from __future__ import annotations

import argparse

from workbench.cli.common import add_json, emit, int_flag


def register(sub) -> None:
    p = sub.add_parser(
        "drafter",
        help="standalone drafter: eval on training data, strict weight check",
        description="Run an EAGLE-3 draft checkpoint on its training data the way training "
        "measures it, or check its weights strictly.",
    )
    ds = p.add_subparsers(dest="drafter_command", metavar="SUBCOMMAND")

    e = ds.add_parser(
        "eval", help="per-depth SpecForge acc_k, speculators full/cond_acc, chain rates, top-k, predicted AL"
    )
    e.add_argument("--draft", required=True, metavar="DIR", help="draft checkpoint (config.json + weights)")
    e.add_argument(
        "--data",
        required=True,
        metavar="DIR",
        help="training data: SpecForge rows_*/data_{i}.ckpt[.gz] or speculators hs_{i}.safetensors",
    )
    e.add_argument(
        "--target",
        required=True,
        metavar="DIR",
        help="target model folder (embedding and lm_head are read, memory-mapped)",
    )
    e.add_argument("--depth", type=int_flag(1, 64), metavar="K", help="unrolled steps (default 3)")
    e.add_argument("--topk", type=int_flag(1, 1024), default=4, metavar="K", help="top-k columns (default 4)")
    e.add_argument("--max-samples", type=int_flag(1), metavar="N", help="evaluate the first N samples")
    e.add_argument("--device", metavar="DEV", help="torch device (default: cuda when present)")
    e.add_argument("--lenient", action="store_true", help="run despite a failed weight check (reported)")
    e.add_argument(
        "--reading",
        choices=("specforge", "speculators", "sglang"),
        metavar="TOOL",
        help="read the draft's flags as this tool does (default: the trainer of its layout; "
        "norm_output means different things in SpecForge and in speculators/SGLang)",
    )
    add_json(e)
    e.set_defaults(func=_eval)

    c = ds.add_parser("check", help="strict weight check: missing, unexpected, mis-shaped (exit 1 on a problem)")
    c.add_argument(
        "--draft", required=True, metavar="DIR", help="the draft checkpoint directory (config.json + safetensors)"
    )
    add_json(c)
    c.set_defaults(func=_check)


def _eval(args: argparse.Namespace, ctx) -> int:
    res = ctx.wb.drafter_eval(
        args.draft,
        args.data,
        args.target,
        depth=args.depth,
        topk=args.topk,
        max_samples=args.max_samples,
        device=args.device,
        strict=not args.lenient,
        convention=args.reading,
    )
    emit(res, args.json, lambda r: r.text())
    return 0


def _check(args: argparse.Namespace, ctx) -> int:
    rep = ctx.wb.drafter_check(args.draft)

    def text(r) -> str:
        lines = [f"{'ok' if r.ok else 'PROBLEMS'}: {r.present} tensors as expected ({r.naming} names)"]
        if r.unsupported:
            lines.append(f"  not evaluated: {r.unsupported}")
        lines += [f"  variant: {v}" for v in r.variants]
        lines += [f"  missing     {n}" for n in r.missing]
        lines += [f"  unexpected  {n} (SGLang would silently drop it)" for n in r.unexpected]
        lines += [f"  mis-shaped  {m['name']}: {m['actual']}, expected {m['expected']}" for m in r.mismatched]
        lines += [f"  optional, absent: {n}" for n in r.optional_missing]
        return "\n".join(lines)

    emit(rep, args.json, text)
    return 0 if rep.ok else 1
