"""Accept-length predictor for EAGLE-3 speculative decoding (numpy only).

Conventions (who counts what) decide whether "2.23" and "3.29" describe the same drafter, so every
number here says which one it is. Accept length (AL) is SGLang's ``accept len``: tokens emitted per
verify step, *including* the bonus token the target always contributes; ``accepted_drafts = AL - 1``.

Per-depth inputs, in one of four conventions:

- ``acc``: SpecForge/EAGLE training ``acc_k`` (k = 0, 1, ...), teacher-forced top-1 accuracy at
  depth k. With a prefix equal to the target's own tokens it is the conditional acceptance of the
  draft at depth k+1, so ``c_{k+1} = acc_k``. It is a first estimate: correlated depths make it
  understate chains, domain shift and serving numerics make it overstate them.
- ``conditional``: ``c_1..c_K``, acceptance at depth k given every earlier draft was accepted.
- ``marginal``: vLLM per-position rates ``P_k`` = P(first k drafts accepted); ``c_k = P_k / P_{k-1}``.
- ``alpha``: one rate for every depth (Leviathan et al. 2023).

A list shorter than the number of steps is extended with its last conditional rate (for
``marginal``: the rate implied by its last two values) and the result says so.

Chain (topk = 1): ``AL = 1 + sum_{k=1..K} prod_{j<=k} c_j``.

Tree (topk > 1), the model used here, stated so it can be argued with:

1. At depth d the target's greedy token is the draft's rank-i candidate with probability
   ``q_d(i)`` (given the prefix matched): ``q_d(1) = c_d`` and, from per-depth cumulative top-k
   hit rates ``h_d(i)``, ``q_d(i) = h_d(i) - h_d(i-1)`` for i >= 2 (scaled down if the total
   would pass 1). Depths are independent given the prefix.
2. Candidates are built like SGLang's EAGLE tree: the ``topk`` children of the root, then at each
   further depth the ``topk`` best nodes (by path probability, i.e. a calibrated draft
   confidence) each expand ``topk`` children: ``topk + (steps-1)*topk^2`` candidates.
3. The verified tree keeps the ``draft_tokens - 1`` most probable candidates (SGLang reranks by
   cumulative draft score); ancestors always rank before their descendants, so it is a tree.
4. Greedy verification accepts at most one node per depth, so
   ``AL = 1 + sum over kept nodes of P(node is on the target's greedy path)``.

Because the beam always holds the per-depth most likely path, whenever the budget holds a chain
of the same depth (``draft_tokens >= steps + 1``) the tree is never below that chain. It is the
ceiling the hit rates allow: real drafts are not perfectly calibrated, and published sweeps often
show a 5/3/6 tree below the 5/1/6 chain.

Throughput per request: ``tokens/s = AL / (t_verify(draft_tokens) + steps * t_draft)`` with
``t_verify`` interpolated linearly between measured points.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.errors import InputError
from workbench.results import Result

CONVENTIONS: dict[str, str] = {
    "acc": "SpecForge/EAGLE training acc_k (teacher-forced top-1 at depth k), used as the "
    "conditional acceptance at depth k+1",
    "conditional": "conditional acceptance c_k at depth k, given every earlier draft accepted",
    "marginal": "vLLM per-position rates P_k = P(first k drafts accepted)",
    "alpha": "one acceptance rate for every depth",
}

#: SGLang's logged ``accept rate``, by version (the decode log line of each release's scheduler metrics,
#: e.g. 0.5.23 ``srt/managers/scheduler_components/metrics_reporter.py``). 0.4.9 logs none.
SGLANG_ACCEPT_RATE_FORMULAS: dict[str, str] = {
    ">=0.5.12": "(AL - 1) / (draft_tokens - 1)",
    "0.5.5": "AL / (steps + 1)",
}

#: Used when none of steps/topk/draft_tokens is given: SGLang's auto choice for most targets.
DEFAULT_TRIPLE = (3, 1, 4)
#: The TUI, widget and CLI show AL for steps 1..CURVE_STEPS.
CURVE_STEPS = 8
MAX_STEPS = 64
MAX_TOPK = 32

#: Verdict threshold on the accepted-drafts ratio (observed AL - 1) / (predicted AL - 1).
#: Correctly deployed drafters keep roughly 60-90% of what training accuracy promises (the
#: story's 2.4 against 3.29 is 0.61; a published card: 1.30 against 1.62 is 0.80). Deployment
#: faults (wrong aux-layer ids, missing d2t, short draft context, EAGLE vs EAGLE3) leave 0-15%
#: (1.12 against 3.29 is 0.05). Below 0.4 a deployment fault is the likelier cause.
GAP_DRAFTS_RATIO = 0.4


# -- inputs -------------------------------------------------------------------------------------
@dataclass
class Rates:
    """Validated per-depth rates of one convention, as conditional rates c_1..c_n."""

    convention: str
    values: list[float]  # as given
    conditional: np.ndarray  # c_1..c_n implied by the values

    def extend(self, depth: int) -> np.ndarray:
        """c_1..c_depth: truncated, or extended with the last conditional rate."""
        c = self.conditional
        if depth <= c.size:
            return c[:depth].copy()
        return np.concatenate([c, np.full(depth - c.size, c[-1])])

    def note(self, steps: int) -> str | None:
        n = self.conditional.size
        if self.convention == "alpha" or n == steps:
            return None
        if n > steps:
            return f"{self.convention}: {n} values for {steps} steps; the first {steps} are used"
        depths = f"depth {steps}" if n + 1 == steps else f"depths {n + 1}..{steps}"
        if self.convention == "marginal":
            how = f"the last conditional rate {self.conditional[-1]:.3f}" + (f" (P_{n}/P_{n - 1})" if n > 1 else "")
        else:
            how = f"the last value {self.conditional[-1]:.3f}"
        return f"{self.convention}: {n} value{'s' if n > 1 else ''} for {steps} steps; {depths} reuse {how}"


def parse_rates(convention: str, values: Any) -> Rates:
    """Check one convention's values (each in [0, 1]) and turn them into conditional rates."""
    if convention not in CONVENTIONS:
        raise InputError(f"convention: {convention!r} is not one of {', '.join(CONVENTIONS)}")
    vals = _float_list(values, convention)
    if convention == "alpha" and len(vals) != 1:
        raise InputError(f"alpha: expected one value, got {len(vals)}; use --conditional for per-depth rates")
    if convention == "marginal":
        prev = 1.0
        cond = []
        for i, p in enumerate(vals, 1):
            if p > prev + 1e-9:
                raise InputError(
                    f"marginal: P_{i} = {p:g} exceeds P_{i - 1} = {prev:g}; marginal rates "
                    "P(first k accepted) cannot grow with k (conditional rates? use --conditional)"
                )
            cond.append(min(p / prev, 1.0) if prev > 0 else 0.0)
            prev = p
        c = np.array(cond)
    else:
        c = np.array(vals)
    return Rates(convention, vals, c)


def _float_list(values: Any, name: str) -> list[float]:
    if isinstance(values, (int, float, np.floating, np.integer)) and not isinstance(values, bool):
        values = [values]
    try:
        vals = [float(v) for v in values]
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a list of numbers in [0, 1], got {values!r}") from None
    if not vals:
        raise InputError(f"{name}: empty list; expected numbers in [0, 1] like 0.8,0.7,0.6")
    for i, v in enumerate(vals, 1):
        if not math.isfinite(v) or not 0.0 <= v <= 1.0:
            raise InputError(f"{name}: value {i} ({v:g}) is outside [0, 1]")
    return vals


def resolve_triple(steps: int | None, topk: int | None, draft_tokens: int | None) -> tuple[int, int, int, list[str]]:
    """Apply SGLang's rules to (steps, topk, draft_tokens); returns the values SGLang would run."""
    given = {"steps": steps, "topk": topk, "draft_tokens": draft_tokens}
    warnings: list[str] = []
    if all(v is None for v in given.values()):
        steps, topk, draft_tokens = DEFAULT_TRIPLE
        warnings.append(
            "steps/topk/draft_tokens not given: SGLang then picks them from the target "
            "architecture; assuming (3, 1, 4), its choice for most targets ((5, 4, 8) for Llama)"
        )
    elif any(v is None for v in given.values()):
        have = ", ".join(f"{k}={v}" for k, v in given.items() if v is not None)
        missing = ", ".join(k for k, v in given.items() if v is None)
        raise InputError(
            f"steps/topk/draft_tokens: give all three or none (SGLang fails at start-up "
            f"otherwise); got {have}, missing {missing}"
        )
    steps = _int_in(steps, "steps", 1, MAX_STEPS)
    topk = _int_in(topk, "topk", 1, MAX_TOPK)
    draft_tokens = _int_in(draft_tokens, "draft_tokens", 1, None)
    if topk == 1 and draft_tokens != steps + 1:
        warnings.append(
            f"draft_tokens {draft_tokens} adjusted to steps+1 = {steps + 1}, as SGLang does when "
            "topk == 1 ('speculative_num_draft_tokens is adjusted to speculative_num_steps + 1')"
        )
        draft_tokens = steps + 1
    if draft_tokens > steps * topk + 1:
        raise InputError(
            f"draft_tokens: {draft_tokens} exceeds steps*topk+1 = {steps * topk + 1} "
            f"(SGLang's rule: draft_tokens <= steps*topk + 1, root included)"
        )
    if draft_tokens < 2:
        raise InputError("draft_tokens: must be at least 2 (the root plus one draft)")
    return steps, topk, draft_tokens, warnings


def _int_in(value: Any, name: str, lo: int, hi: int | None) -> int:
    if isinstance(value, bool):
        raise InputError(f"{name}: expected an integer, got {value!r}")
    try:
        iv = int(value)
        ok = float(value) == iv
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise InputError(f"{name}: expected an integer, got {value!r}")
    if iv < lo or (hi is not None and iv > hi):
        bound = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise InputError(f"{name}: {iv} is not {bound}")
    return iv


def parse_topk_hits(hits: Any) -> list[np.ndarray]:
    """Per-depth cumulative top-k hit rates: [[h(1), h(2), ...], ...] or one list for every depth."""
    if hits is None:
        return []
    if isinstance(hits, (list, tuple)) and hits and not isinstance(hits[0], (list, tuple, np.ndarray)):
        hits = [hits]
    out = []
    for d, row in enumerate(hits, 1):
        vals = np.array(_float_list(row, f"topk_hits depth {d}"))
        if np.any(np.diff(vals) < -1e-9):
            raise InputError(
                f"topk_hits depth {d}: cumulative hit rates must not decrease with k, got "
                f"{', '.join(f'{v:g}' for v in vals)}"
            )
        out.append(vals)
    if not out:
        raise InputError("topk_hits: empty list; expected cumulative top-1..top-k hit rates like 0.75,0.85,0.9")
    return out


# -- chain ---------------------------------------------------------------------------------------
def chain_marginals(c: np.ndarray) -> np.ndarray:
    """P_k = prod_{j<=k} c_j."""
    return np.cumprod(np.asarray(c, dtype=float))


def chain_accept_length(c: Sequence[float]) -> float:
    """E[AL] = 1 + sum_k prod_{j<=k} c_j, bonus token included."""
    return 1.0 + float(chain_marginals(np.asarray(c, dtype=float)).sum())


def sglang_accept_rates(accept_length: float, steps: int, draft_tokens: int) -> dict[str, float]:
    """What SGLang logs as ``accept rate`` for this accept length, by version."""
    return {
        ">=0.5.12": (accept_length - 1.0) / (draft_tokens - 1),
        "0.5.5": accept_length / (steps + 1),
    }


# -- tree ----------------------------------------------------------------------------------------
def rank_probabilities(c: np.ndarray, hits: list[np.ndarray], topk: int) -> tuple[np.ndarray, list[str]]:
    """q[d, i]: P(target's token at depth d+1 is the draft's rank-(i+1) candidate | prefix matched)."""
    depth = c.size
    q = np.zeros((depth, topk))
    q[:, 0] = c
    warnings: list[str] = []
    if topk == 1:
        return q, warnings
    if not hits:
        warnings.append(
            f"topk {topk} without top-k hit rates: only rank-1 candidates can be accepted, "
            "so the tree is predicted as the chain (give topk_hits for the tree)"
        )
        return q, warnings
    if len(hits) < depth:
        warnings.append(
            f"topk_hits: {len(hits)} depth{'s' if len(hits) > 1 else ''} for {depth} steps; "
            "deeper depths reuse the last"
        )
    if max(h.size for h in hits) < topk:
        warnings.append(f"topk_hits: ranks beyond {max(h.size for h in hits)} not given; they add no hits")
    drift = []
    for d in range(depth):
        h = hits[min(d, len(hits) - 1)]
        if abs(h[0] - c[d]) > 0.02:
            drift.append(d + 1)
        extra = np.diff(np.concatenate([[h[0]], h[:topk]]))[1:] if h.size > 1 else np.zeros(0)
        extra = np.clip(extra, 0.0, None)
        room = max(0.0, 1.0 - c[d])
        if extra.sum() > room:
            extra = extra * (room / extra.sum())
        q[d, 1 : 1 + extra.size] = extra[: topk - 1]
    if drift:
        warnings.append(
            f"topk_hits: top-1 hit rate differs from the accuracy at depth "
            f"{', '.join(map(str, drift[:4]))}{'...' if len(drift) > 4 else ''}; "
            "rank 1 uses the accuracy, ranks 2..k the hit-rate increments"
        )
    return q, warnings


def tree_candidates(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SGLang-shaped candidate nodes: their path probabilities and depths, in keep order.

    Sorted by probability, then depth, so every prefix of the order is a tree (a parent's
    probability is never below its child's, and ties put the parent first).
    """
    steps, k = q.shape
    probs = [q[0].copy()]
    depths = [np.ones(k, dtype=np.int64)]
    frontier = q[0]
    for d in range(1, steps):
        children = (frontier[:, None] * q[d][None, :]).ravel()
        probs.append(children)
        depths.append(np.full(children.size, d + 1, dtype=np.int64))
        frontier = np.partition(children, children.size - k)[-k:] if children.size > k else children
    p = np.concatenate(probs)
    dep = np.concatenate(depths)
    order = np.lexsort((dep, -p))
    return p[order], dep[order]


def tree_accept_length(q: np.ndarray, draft_tokens: int) -> tuple[float, np.ndarray]:
    """AL and per-depth marginal P(accept length >= depth + 1) of the modelled verified tree."""
    p, dep = tree_candidates(q)
    keep = slice(0, draft_tokens - 1)
    marg = np.bincount(dep[keep] - 1, weights=p[keep], minlength=q.shape[0])
    return 1.0 + float(p[keep].sum()), marg


# -- verify-time curve -----------------------------------------------------------------------------
@dataclass
class VerifyTimes:
    """Measured target-verify times (ms) at some draft-token counts, linearly interpolated."""

    draft_tokens: np.ndarray
    ms: np.ndarray

    @classmethod
    def parse(cls, points: Any) -> VerifyTimes:
        if isinstance(points, VerifyTimes):
            return points
        if isinstance(points, (int, float)) and not isinstance(points, bool):
            raise InputError("verify_ms: expected points NDT:MS (e.g. 2:20.5,4:22), not one number")
        items = list(points.items()) if isinstance(points, Mapping) else list(points or [])
        if not items:
            raise InputError("verify_ms: no points; expected NDT:MS pairs like 2:20.5,4:22")
        seen: dict[int, float] = {}
        for item in items:
            try:
                n, ms = item
            except (TypeError, ValueError):
                raise InputError(f"verify_ms: {item!r} is not a (draft_tokens, ms) pair") from None
            n = _int_in(n, "verify_ms draft tokens", 1, None)
            try:
                ms = float(ms)
            except (TypeError, ValueError):
                raise InputError(f"verify_ms: {ms!r} at {n} draft tokens is not a number") from None
            if not math.isfinite(ms) or ms <= 0:
                raise InputError(f"verify_ms: {ms:g} ms at {n} draft tokens must be a positive time")
            if n in seen:
                raise InputError(f"verify_ms: {n} draft tokens given twice")
            seen[n] = ms
        keys = sorted(seen)
        return cls(np.array(keys, dtype=float), np.array([seen[k] for k in keys]))

    @property
    def span(self) -> tuple[int, int]:
        return int(self.draft_tokens[0]), int(self.draft_tokens[-1])

    def covers(self, ndt: Any) -> np.ndarray:
        lo, hi = self.span
        x = np.asarray(ndt)
        return (x >= lo) & (x <= hi)

    def at(self, ndt: Any) -> np.ndarray:
        """Interpolated inside the measured span; outside it, the nearest segment extended."""
        x = np.asarray(ndt, dtype=float)
        xs, ys = self.draft_tokens, self.ms
        y = np.interp(x, xs, ys)
        if xs.size >= 2:
            lo_slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
            hi_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            y = np.where(x < xs[0], ys[0] + (x - xs[0]) * lo_slope, y)
            y = np.where(x > xs[-1], ys[-1] + (x - xs[-1]) * hi_slope, y)
        out: np.ndarray = np.maximum(y, 1e-6)
        return out


def _positive_ms(value: Any, name: str, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: {value!r} is not a number of milliseconds") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise InputError(f"{name}: {v:g} ms must be {'non-negative' if allow_zero else 'positive'}")
    return v


# -- results -------------------------------------------------------------------------------------
@dataclass
class DepthRate(Result):
    depth: int
    conditional: float  # P(accepted at this depth | all earlier accepted)
    marginal: float  # P(the first `depth` drafts all accepted)


@dataclass
class CurvePoint(Result):
    steps: int
    draft_tokens: int
    accept_length: float
    accepted_drafts: float
    tokens_per_s: float | None = None


@dataclass
class Throughput(Result):
    verify_ms: float
    draft_ms: float
    cycle_ms: float  # t_verify(draft_tokens) + steps * t_draft
    tokens_per_s: float  # per request
    verify_extrapolated: bool
    baseline_tokens_per_s: float | None = None
    speedup: float | None = None


@dataclass
class Verdict(Result):
    code: str  # "ok" | "accept-length-gap"
    ratio: float  # observed AL / predicted AL
    explanation: str
    drafts_ratio: float | None  # (observed - 1) / (predicted - 1), what the threshold applies to
    threshold: float = GAP_DRAFTS_RATIO


@dataclass
class Prediction(Result):
    accept_length: float  # bonus token included (SGLang's accept len)
    accepted_drafts: float  # accept_length - 1
    sglang_accept_rate: dict[str, float]  # by SGLang version, see SGLANG_ACCEPT_RATE_FORMULAS
    per_depth: list[DepthRate]
    convention: str
    formula: str
    warnings: list[Any]
    steps: int
    topk: int
    draft_tokens: int
    model: str  # "chain" | "tree"
    chain_accept_length: float  # the chain with the same steps (equal to AL for chains)
    curve: list[CurvePoint]  # for steps 1..CURVE_STEPS (chains)
    verdict: Verdict | None = None
    throughput: Throughput | None = None

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        for key in ("verdict", "throughput"):
            if d.get(key) is None:
                d.pop(key, None)
        return d


# -- predict -------------------------------------------------------------------------------------
def predict(  # noqa: PLR0913  (the calculator's public options, keyword-only past the triple)
    convention: str,
    values: Any,
    steps: int | None = None,
    topk: int | None = None,
    draft_tokens: int | None = None,
    *,
    topk_hits: Any = None,
    observed_accept_length: float | None = None,
    verify_ms: Any = None,
    draft_ms: float | None = None,
    baseline_ms: float | None = None,
    curve_steps: int = CURVE_STEPS,
) -> Prediction:
    """Expected accept length of one (steps, topk, draft_tokens) configuration."""
    rates = parse_rates(convention, values)
    steps, topk, ndt, warnings = resolve_triple(steps, topk, draft_tokens)
    note = rates.note(steps)
    if note:
        warnings.append(note)
    c = rates.extend(steps)
    marg_chain = chain_marginals(c)
    chain_al = 1.0 + float(marg_chain.sum())
    hits = parse_topk_hits(topk_hits)
    if topk == 1:
        if hits:
            warnings.append("topk_hits ignored: topk is 1 (a chain)")
        al, marg, model = chain_al, marg_chain, "chain"
    else:
        q, w = rank_probabilities(c, hits, topk)
        warnings.extend(w)
        al, marg = tree_accept_length(q, ndt)
        model = "tree"
    prev = np.concatenate([[1.0], marg[:-1]])
    cond = np.divide(marg, prev, out=np.zeros_like(marg), where=prev > 0)
    per_depth = [DepthRate(d + 1, float(cond[d]), float(marg[d])) for d in range(steps)]

    timing = _timing(verify_ms, draft_ms, baseline_ms)
    throughput = None
    if timing:
        vt, t_draft, base = timing
        ms_v = float(vt.at(ndt))
        extrap = not bool(vt.covers(ndt))
        if extrap:
            lo, hi = vt.span
            warnings.append(
                f"verify_ms: {ndt} draft tokens is outside the measured {lo}..{hi}; verify time extrapolated linearly"
            )
        cycle = ms_v + steps * t_draft
        tps = al * 1000.0 / cycle
        base_tps = 1000.0 / base if base else None
        throughput = Throughput(ms_v, t_draft, cycle, tps, extrap, base_tps, tps / base_tps if base_tps else None)

    curve_c = rates.extend(max(curve_steps, steps))
    curve_al = 1.0 + np.cumsum(chain_marginals(curve_c))
    curve = []
    for s in range(1, curve_steps + 1):
        point_tps = None
        if timing:
            point_tps = float(curve_al[s - 1] * 1000.0 / (timing[0].at(s + 1) + s * timing[1]))
        curve.append(CurvePoint(s, s + 1, float(curve_al[s - 1]), float(curve_al[s - 1] - 1.0), point_tps))

    result = Prediction(
        accept_length=al,
        accepted_drafts=al - 1.0,
        sglang_accept_rate=sglang_accept_rates(al, steps, ndt),
        per_depth=per_depth,
        convention=convention,
        formula=_formula(rates, model, c, marg, al, steps, topk, ndt),
        warnings=warnings,
        steps=steps,
        topk=topk,
        draft_tokens=ndt,
        model=model,
        chain_accept_length=chain_al,
        curve=curve,
        throughput=throughput,
    )
    if observed_accept_length is not None:
        result.verdict = verdict(al, observed_accept_length, steps)
    return result


def _timing(verify_ms: Any, draft_ms: Any, baseline_ms: Any) -> tuple[VerifyTimes, float, float | None] | None:
    if verify_ms is None and draft_ms is None:
        if baseline_ms is not None:
            raise InputError("baseline_ms: needs verify_ms and draft_ms to compare against")
        return None
    if verify_ms is None or draft_ms is None:
        raise InputError(
            f"{'verify_ms' if verify_ms is None else 'draft_ms'}: needed with "
            f"{'draft_ms' if verify_ms is None else 'verify_ms'} for a throughput estimate"
        )
    base = _positive_ms(baseline_ms, "baseline_ms") if baseline_ms is not None else None
    return VerifyTimes.parse(verify_ms), _positive_ms(draft_ms, "draft_ms", allow_zero=True), base


def _formula(
    rates: Rates, model: str, c: np.ndarray, marg: np.ndarray, al: float, steps: int, topk: int, ndt: int
) -> str:
    terms = " + ".join(f"{m:.3f}" for m in marg)
    tail = f" = 1 + {terms} = {al:.3f} (bonus token included, as SGLang's accept len)"
    if model == "tree":
        return (
            f"AL = 1 + sum over the {ndt - 1} most likely nodes of a top-{topk}, {steps}-step "
            f"draft tree of P(node on the target's greedy path); per depth{tail}"
        )
    if rates.convention == "alpha":
        a = float(c[0])
        closed = f"(1 - a^{steps + 1}) / (1 - a)" if a < 1 else f"{steps + 1}"
        return f"AL = 1 + sum_{{k=1..{steps}}} a^k = {closed} with a = {a:.3f}{tail}"
    if rates.convention == "marginal":
        return f"AL = 1 + sum_{{k=1..{steps}}} P_k{tail}"
    which = "c_k = acc_{k-1}" if rates.convention == "acc" else "c_k conditional"
    return f"AL = 1 + sum_{{k=1..{steps}}} prod_{{j<=k}} c_j, {which}{tail}"


# -- verdict -------------------------------------------------------------------------------------
def verdict(predicted: float, observed: Any, steps: int) -> Verdict:
    """Compare an observed SGLang accept length with the prediction (see GAP_DRAFTS_RATIO)."""
    try:
        obs = float(observed)
    except (TypeError, ValueError):
        raise InputError(f"observed_accept_length: {observed!r} is not a number") from None
    if not math.isfinite(obs):
        raise InputError(f"observed_accept_length: {obs} is not a finite number")
    if obs < 1.0:
        raise InputError(
            f"observed_accept_length: {obs:g} is below 1; SGLang's accept len includes the "
            "bonus token, so it is at least 1 (accepted drafts? add 1)"
        )
    if obs > steps + 1 + 1e-9:
        raise InputError(
            f"observed_accept_length: {obs:g} exceeds steps+1 = {steps + 1}, the most a {steps}-step draft can reach"
        )
    ratio = obs / predicted
    pred_drafts = predicted - 1.0
    if pred_drafts < 1e-9:
        return Verdict(
            "ok",
            ratio,
            f"The accuracies predict no accepted drafts, and {obs:.2f} was "
            "observed: nothing to gain from this drafter at these rates.",
            None,
        )
    dr = (obs - 1.0) / pred_drafts
    if dr < GAP_DRAFTS_RATIO:
        text = (
            f"Observed {obs:.2f} is {ratio:.0%} of the predicted {predicted:.2f} ({obs - 1:.2f} of "
            f"{pred_drafts:.2f} drafts accepted per step): a loss this large points to a deployment "
            "fault (aux hidden-state layer ids, d2t mapping, draft context length, algorithm flag) "
            "more likely than to a weak drafter."
        )
        return Verdict("accept-length-gap", ratio, text, dr)
    if dr >= 1.0:
        text = (
            f"Observed {obs:.2f} meets the predicted {predicted:.2f}: the drafter does at least what "
            "its accuracies promise (correlated depths make products of accuracies understate chains)."
        )
    else:
        text = (
            f"Observed {obs:.2f} is {ratio:.0%} of the predicted {predicted:.2f} ({dr:.0%} of the "
            "predicted accepted drafts): within the usual loss from training to serving (domain shift, "
            "serving numerics), so the deployment looks sound and the drafter sets the limit."
        )
    return Verdict("ok", ratio, text, dr)


# -- sweep ---------------------------------------------------------------------------------------
@dataclass
class SweepRow(Result):
    steps: int
    topk: int
    draft_tokens: int
    accept_length: float
    cycle_ms: float
    tokens_per_s: float
    speedup: float | None = None


@dataclass
class Sweep(Result):
    """Configurations ranked by tokens/s (columns as arrays; rows built on demand)."""

    steps: np.ndarray
    topk: np.ndarray
    draft_tokens: np.ndarray
    accept_length: np.ndarray
    cycle_ms: np.ndarray
    tokens_per_s: np.ndarray
    convention: str
    baseline_tokens_per_s: float | None
    warnings: list[Any] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.steps.size)

    def row(self, i: int) -> SweepRow:
        tps = float(self.tokens_per_s[i])
        base = self.baseline_tokens_per_s
        return SweepRow(
            int(self.steps[i]),
            int(self.topk[i]),
            int(self.draft_tokens[i]),
            float(self.accept_length[i]),
            float(self.cycle_ms[i]),
            tps,
            tps / base if base else None,
        )

    @property
    def best(self) -> SweepRow:
        return self.row(0)

    def rows(self, limit: int | None = None) -> list[SweepRow]:
        n = len(self) if limit is None else min(limit, len(self))
        return [self.row(i) for i in range(n)]

    def to_dict(self) -> dict[str, Any]:
        base = self.baseline_tokens_per_s
        cols = zip(
            self.steps.tolist(),
            self.topk.tolist(),
            self.draft_tokens.tolist(),
            self.accept_length.tolist(),
            self.cycle_ms.tolist(),
            self.tokens_per_s.tolist(),
        )
        table = [
            {
                "steps": s,
                "topk": k,
                "draft_tokens": n,
                "accept_length": a,
                "cycle_ms": cy,
                "tokens_per_s": t,
                **({"speedup": t / base} if base else {}),
            }
            for s, k, n, a, cy, t in cols
        ]
        return {
            "best": table[0],
            "table": table,
            "convention": self.convention,
            "baseline_tokens_per_s": base,
            "warnings": list(self.warnings),
        }


def sweep(
    convention: str,
    values: Any,
    *,
    verify_ms: Any,
    draft_ms: float,
    baseline_ms: float | None = None,
    steps: Iterable[int] = range(1, CURVE_STEPS + 1),
    topks: Iterable[int] | None = None,
    topk_hits: Any = None,
) -> Sweep:
    """Rank (steps, topk, draft_tokens) by predicted tokens/s per request.

    Chains always; trees (topk > 1, every draft_tokens SGLang allows) only with top-k hit rates.
    Only draft-token counts inside the measured verify span are ranked (no extrapolation).
    """
    rates = parse_rates(convention, values)
    vt = VerifyTimes.parse(verify_ms)
    t_draft = _positive_ms(draft_ms, "draft_ms", allow_zero=True)
    base_tps = 1000.0 / _positive_ms(baseline_ms, "baseline_ms") if baseline_ms is not None else None
    step_list = sorted({_int_in(s, "steps", 1, MAX_STEPS) for s in steps})
    if not step_list:
        raise InputError("steps: empty range")
    hits = parse_topk_hits(topk_hits)
    if topks is None:
        topks = range(1, max(h.size for h in hits) + 1) if hits else [1]
    topk_list = sorted({_int_in(k, "topk", 1, MAX_TOPK) for k in topks})
    warnings: list[str] = []
    if not hits and any(k > 1 for k in topk_list):
        warnings.append("trees (topk > 1) need top-k hit rates: only chains are ranked")
        topk_list = [1]
    smax = step_list[-1]
    c = rates.extend(smax)
    lo, hi = vt.span
    cols: dict[str, list[Any]] = {k: [] for k in ("s", "k", "n", "al")}
    left_out = 0
    for k in topk_list:
        if k == 1:
            al = 1.0 + np.cumsum(chain_marginals(c))
            for s in step_list:
                if lo <= s + 1 <= hi:
                    cols["s"].append(np.array([s]))
                    cols["k"].append(np.array([1]))
                    cols["n"].append(np.array([s + 1]))
                    cols["al"].append(al[s - 1 : s])
                else:
                    left_out += 1
            continue
        q, _ = rank_probabilities(c, hits, k)
        p, dep = tree_candidates(q)
        for s in step_list:
            ps = p[dep <= s]  # the beam is built depth by depth, so shallower trees are its prefix
            top = s * k + 1
            ndt = np.arange(max(2, lo), min(top, hi) + 1)
            left_out += top - 1 - ndt.size
            if ndt.size == 0:
                continue
            cum = np.cumsum(ps[: top - 1])
            cols["s"].append(np.full(ndt.size, s))
            cols["k"].append(np.full(ndt.size, k))
            cols["n"].append(ndt)
            cols["al"].append(1.0 + cum[ndt - 2])
    if not cols["s"]:
        raise InputError(
            f"verify_ms: measured draft tokens {lo}..{hi} cover no configuration of steps "
            f"{step_list[0]}..{smax}; measure verify time at steps+1 draft tokens"
        )
    if left_out:
        warnings.append(
            f"{left_out} configuration{'s' if left_out > 1 else ''} left out: their draft tokens "
            f"fall outside the measured verify times ({lo}..{hi})"
        )
    S = np.concatenate(cols["s"])
    K = np.concatenate(cols["k"])
    N = np.concatenate(cols["n"])
    AL = np.concatenate(cols["al"])
    cycle = vt.at(N) + S * t_draft
    tps = AL * 1000.0 / cycle
    order = np.lexsort((S, N, -np.round(tps, 9)))  # fastest first; ties: fewer tokens, fewer steps
    return Sweep(S[order], K[order], N[order], AL[order], cycle[order], tps[order], convention, base_tps, warnings)


# -- fit -----------------------------------------------------------------------------------------
@dataclass
class FitPoint(Result):
    steps: int
    accept_length: float
    measured: float | None = None


@dataclass
class Fit(Result):
    conditional: list[float]  # c_1..c_max_steps recovered (and extrapolated)
    marginal: list[Any]
    curve: list[FitPoint]  # for steps 1..max_steps
    measured: dict[str, float]  # {steps: observed AL}
    max_residual: float
    method: str
    warnings: list[Any]


def fit(measured: Any, max_steps: int = CURVE_STEPS) -> Fit:
    """Recover per-depth conditional rates from chain accept lengths measured at several steps.

    Between two measured step counts a and b the conditional rate is taken as constant and solved
    exactly from AL(b) - AL(a) = P_a * (c + c^2 + ... + c^(b-a)); consecutive step counts therefore
    give each depth's own rate. Beyond the last measured step count the last rate is repeated.
    """
    items = list(measured.items()) if isinstance(measured, Mapping) else list(measured or [])
    if not items:
        raise InputError("measured: no points; expected STEPS:AL pairs like 1:1.83,2:2.45,3:2.94")
    points: dict[int, float] = {}
    for item in items:
        try:
            s, al = item
        except (TypeError, ValueError):
            raise InputError(f"measured: {item!r} is not a (steps, accept_length) pair") from None
        s = _int_in(s, "measured steps", 1, MAX_STEPS)
        try:
            al = float(al)
        except (TypeError, ValueError):
            raise InputError(f"measured: accept length {al!r} at {s} steps is not a number") from None
        if not math.isfinite(al) or not 1.0 <= al <= s + 1:
            raise InputError(
                f"measured: accept length {al:g} at {s} steps is outside 1..{s + 1} "
                "(SGLang's accept len, bonus token included)"
            )
        if s in points:
            raise InputError(f"measured: {s} steps given twice")
        points[s] = al
    max_steps = max(_int_in(max_steps, "max_steps", 1, MAX_STEPS), max(points))
    warnings: list[str] = []
    cond: list[float] = []
    p_prev, al_prev, s_prev = 1.0, 1.0, 0
    for s in sorted(points):
        n = s - s_prev
        gain = points[s] - al_prev
        cap = p_prev * n
        if gain < -1e-9:
            warnings.append(
                f"accept length falls from {al_prev:.3f} to {points[s]:.3f} at {s} steps "
                "(noise?); depths there set to 0"
            )
        if gain > cap + 1e-9:
            warnings.append(f"accept length gain to {s} steps ({gain:.3f}) needs rates above 1; capped at 1")
        cval = _solve_geometric(max(gain, 0.0) / p_prev if p_prev > 0 else 0.0, n)
        cond.extend([cval] * n)
        p_prev *= cval**n
        al_prev, s_prev = al_prev + min(max(gain, 0.0), cap), s
    if len(points) > 1 and any(b - a > 1 for a, b in zip([0, *sorted(points)], sorted(points))):
        warnings.append("step counts with gaps: depths between two measured counts share one rate")
    c = np.array(cond + [cond[-1]] * (max_steps - len(cond)))
    marg = chain_marginals(c)
    al = 1.0 + np.cumsum(marg)
    curve = [FitPoint(s, float(al[s - 1]), points.get(s)) for s in range(1, max_steps + 1)]
    resid = max(abs(al[s - 1] - v) for s, v in points.items())
    return Fit(
        [float(x) for x in c],
        [float(x) for x in marg],
        curve,
        {str(k): v for k, v in sorted(points.items())},
        float(resid),
        "piecewise-constant conditional rates between measured step counts; the last rate repeated beyond them",
        warnings,
    )


def _solve_geometric(target: float, n: int) -> float:
    """c in [0, 1] with c + c^2 + ... + c^n = target (clipped to the reachable range)."""
    if target <= 0:
        return 0.0
    if target >= n:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        val = mid * n if mid == 1 else mid * (1 - mid**n) / (1 - mid)
        lo, hi = (mid, hi) if val < target else (lo, mid)
    return (lo + hi) / 2
