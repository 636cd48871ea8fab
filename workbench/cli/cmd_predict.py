"""``eagle-workbench predict``: expected accept length, the best (steps, topk, draft_tokens), fits.

eagle-workbench predict --acc 0.75 --steps 5 --topk 1 --draft-tokens 6 --observed-accept-length 1.12
eagle-workbench predict sweep --acc 0.75 --verify-ms 2:20,4:22,6:25 --draft-ms 1.2 --baseline-ms 19
eagle-workbench predict fit --measured 1:1.83,2:2.45,3:2.94
"""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli.common import add_json, emit, float_flag, int_flag, parse_floats, parse_ints, parse_pairs, warn
from workbench.errors import InputError

CONVENTION_FLAGS = ("acc", "conditional", "marginal", "alpha")


def register(sub) -> None:
    p = sub.add_parser(
        "predict",
        help="expected accept length from per-depth accuracy (sweep, fit)",
        description="Expected accept length (bonus token included, as SGLang logs `accept len`) from "
        "per-depth accuracies in one explicit convention.",
        epilog="conventions: --acc = SpecForge/EAGLE training acc_k (conditional at depth k+1); "
        "--conditional = c_1..c_K; --marginal = vLLM per-position rates P(first k accepted); "
        "--alpha = one rate for every depth. A shorter list reuses its last value.",
    )
    _rates(p)
    p.add_argument("--steps", type=int_flag(0, 64), metavar="N", help="--speculative-num-steps")
    p.add_argument("--topk", type=int_flag(0, 1024), metavar="K", help="--speculative-eagle-topk")
    p.add_argument("--draft-tokens", type=int_flag(0, 1 << 16), metavar="M", help="--speculative-num-draft-tokens")
    p.add_argument(
        "--observed-accept-length",
        type=float_flag(0, 1e6),
        metavar="X",
        help="accept len the server logs: adds a verdict",
    )
    _timings(p, required=False)
    add_json(p)
    p.set_defaults(func=run_predict)

    groups = p.add_subparsers(dest="predict_command", metavar="{sweep,fit}")
    s = groups.add_parser(
        "sweep",
        help="rank (steps, topk, draft tokens) by predicted tokens/s",
        description="Rank configurations by AL / (t_verify(draft_tokens) + steps * t_draft). "
        "Trees (topk > 1) only with --topk-hits; only draft-token counts inside "
        "the measured verify times are ranked.",
    )
    _rates(s)
    _timings(s, required=True)
    s.add_argument("--steps", default="1..8", metavar="RANGE", help="step counts, e.g. 1..8 or 2,3,5 (default 1..8)")
    s.add_argument("--topk", metavar="LIST", help="topk values (default 1, or 1..len(--topk-hits))")
    s.add_argument("--top", type=int_flag(1), metavar="N", help="print only the N fastest (JSON: table truncated too)")
    add_json(s)
    s.set_defaults(func=run_sweep)

    f = groups.add_parser(
        "fit",
        help="per-depth rates from accept lengths measured at several step counts",
        description="Recover per-depth conditional rates from chain accept lengths measured "
        "at several --speculative-num-steps, and extrapolate.",
    )
    f.add_argument("--measured", required=True, metavar="STEPS:AL,...", help="e.g. 1:1.83,2:2.45,3:2.94")
    f.add_argument(
        "--max-steps", type=int_flag(1, 64), default=8, metavar="N", help="extrapolate to N steps (default 8)"
    )
    add_json(f)
    f.set_defaults(func=run_fit)


def _rates(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--acc", metavar="LIST", help="SpecForge/EAGLE acc_0,acc_1,... (e.g. 0.75 or 0.8,0.7,0.6)")
    g.add_argument("--conditional", metavar="LIST", help="conditional acceptance c_1,c_2,...")
    g.add_argument("--marginal", metavar="LIST", help="vLLM per-position rates P_1,P_2,...")
    g.add_argument("--alpha", metavar="X", help="one acceptance rate for every depth")
    p.add_argument(
        "--topk-hits",
        metavar="LIST",
        help="cumulative top-1..top-k hit rates, e.g. 0.75,0.85,0.9; per depth separated by /",
    )


def _timings(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--verify-ms",
        required=required,
        metavar="NDT:MS,...",
        help="measured target verify time per draft-token count, e.g. 2:20,4:22.5",
    )
    p.add_argument(
        "--draft-ms", required=required, type=float_flag(0, 1e9), metavar="MS", help="time of one draft step"
    )
    p.add_argument("--baseline-ms", type=float_flag(0, 1e9), metavar="MS", help="decode step time without speculation")


def _rates_kw(args) -> dict:
    given = [(name, getattr(args, name)) for name in CONVENTION_FLAGS if getattr(args, name, None) is not None]
    if not given:
        raise InputError("rates: give one of --acc, --conditional, --marginal, --alpha")
    name, text = given[0]
    kw: dict[str, Any] = {name: parse_floats(text, f"--{name}")}
    if args.topk_hits is not None:
        depths = [d for d in args.topk_hits.split("/") if d.strip()]
        kw["topk_hits"] = [parse_floats(d, "--topk-hits") for d in depths] or parse_floats("", "--topk-hits")
    return kw


def _timing_kw(args) -> dict:
    kw = {}
    if args.verify_ms is not None:
        kw["verify_ms"] = parse_pairs(args.verify_ms, "--verify-ms")
    if args.draft_ms is not None:
        kw["draft_ms"] = args.draft_ms
    if args.baseline_ms is not None:
        kw["baseline_ms"] = args.baseline_ms
    return kw


def run_predict(args, ctx) -> int:
    result = ctx.wb.predict(
        **_rates_kw(args),
        steps=args.steps,
        topk=args.topk,
        draft_tokens=args.draft_tokens,
        observed_accept_length=args.observed_accept_length,
        **_timing_kw(args),
    )
    emit(result, args.json, prediction_text)
    return 0


def run_sweep(args, ctx) -> int:
    topks = parse_ints(args.topk, "--topk") if args.topk else None
    result = ctx.wb.predict_sweep(
        **_rates_kw(args), steps=parse_ints(args.steps, "--steps"), topks=topks, **_timing_kw(args)
    )
    if args.top is not None and args.top < 1:
        raise InputError("--top: must be at least 1")
    if args.json:
        data = result.to_dict()
        if args.top:
            data["table"] = data["table"][: args.top]
        emit(data, True)
    else:
        print(sweep_text(result, args.top or 10))
        warn(result.warnings)
    return 0


def run_fit(args, ctx) -> int:
    result = ctx.wb.fit(parse_pairs(args.measured, "--measured"), max_steps=args.max_steps)
    emit(result, args.json, fit_text)
    return 0


# -- text ----------------------------------------------------------------------------------------
def prediction_text(r) -> str:
    rate = r.sglang_accept_rate
    lines = [
        f"accept length   {r.accept_length:.3f}  (bonus token included, as SGLang logs `accept len`; "
        f"{r.model}, steps {r.steps}, topk {r.topk}, draft tokens {r.draft_tokens})",
        f"accepted drafts {r.accepted_drafts:.3f}  per verify step (accept length without the bonus token)",
        f"SGLang accept rate  {rate['>=0.5.12']:.3f} on >= 0.5.12 ((AL-1)/(draft_tokens-1)),  "
        f"{rate['0.5.5']:.3f} on 0.5.5 (AL/(steps+1))",
        "",
        "depth  conditional  marginal",
        *(f"{d.depth:>5}  {d.conditional:>11.3f}  {d.marginal:>8.3f}" for d in r.per_depth),
        "",
        f"formula: {r.formula}",
    ]
    if r.throughput:
        t = r.throughput
        line = f"throughput: {t.tokens_per_s:.1f} tok/s per request (cycle {t.cycle_ms:.2f} ms)"
        if t.speedup is not None:
            line += f", {t.speedup:.2f}x the baseline {t.baseline_tokens_per_s:.1f} tok/s"
        lines.append(line)
    if r.verdict:
        lines.append(f"verdict: {r.verdict.code} (ratio {r.verdict.ratio:.2f}): {r.verdict.explanation}")
    return "\n".join(lines)


def sweep_text(s, top: int) -> str:
    b = s.best
    lines = [
        f"best: steps {b.steps}, topk {b.topk}, draft tokens {b.draft_tokens}: {b.tokens_per_s:.1f} tok/s"
        + (f" ({b.speedup:.2f}x baseline)" if b.speedup is not None else ""),
        "",
        "steps  topk  draft_tokens  accept_length  cycle_ms  tokens/s" + ("  speedup" if b.speedup else ""),
    ]
    for r in s.rows(top):
        lines.append(
            f"{r.steps:>5}  {r.topk:>4}  {r.draft_tokens:>12}  {r.accept_length:>13.3f}  {r.cycle_ms:>8.2f}"
            f"  {r.tokens_per_s:>8.1f}" + (f"  {r.speedup:>7.2f}" if r.speedup is not None else "")
        )
    if len(s) > top:
        lines.append(f"... {len(s) - top} more (--top N, or --json for all)")
    return "\n".join(lines)


def fit_text(f) -> str:
    lines = ["steps  accept_length  measured  conditional  marginal"]
    for p, c, m in zip(f.curve, f.conditional, f.marginal):
        meas = f"{p.measured:.3f}" if p.measured is not None else ""
        lines.append(f"{p.steps:>5}  {p.accept_length:>13.3f}  {meas:>8}  {c:>11.3f}  {m:>8.3f}")
    lines.append(f"method: {f.method}")
    return "\n".join(lines)
