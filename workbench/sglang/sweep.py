"""Sweeps over speculative triples and env variants: relaunch per point, measure with the
protocol, resumable from the journal (a point already measured in this sweep is not run again),
ending in a ranked table, the best configuration, and a fitted throughput model.

Throughput model (the predictor's form): tokens/s per request = AL / (t_verify(ndt) + steps * t_draft)
with t_verify(ndt) = a + b * ndt. From each point, cycle time = AL / (tokens/s per request); a
least-squares fit of cycle = a + b*ndt + c*steps gives a, b and t_draft = c.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Optional

from workbench.errors import InputError
from workbench.results import Result


@dataclass
class SweepPoint(Result):
    key: str
    num_steps: int              # 0: the baseline without speculation
    eagle_topk: int
    num_draft_tokens: int
    env: dict
    server_id: Optional[int] = None
    state: str = "pending"      # measured, failed, pending
    tokens_per_s: Optional[float] = None
    tokens_per_s_per_request: Optional[float] = None
    accept_len: Optional[float] = None
    server_accept_len: Optional[float] = None
    error: Optional[str] = None
    resumed: bool = False


@dataclass
class SweepResult(Result):
    sweep_id: str
    profile: str
    points: list                 # ranked, best first (failed last)
    best: Optional[dict]
    model: Optional[dict]
    resumed: int = 0
    baseline_tokens_per_s: Optional[float] = None
    speedup_vs_baseline: Optional[float] = None


def env_label(env: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "-"


def expand(steps: list, topks: list, ndts: Optional[list], envs: list, baseline: bool) -> list[SweepPoint]:
    """The grid; invalid triples (topk 1 needs ndt = steps+1; ndt <= steps*topk+1) are left out."""
    if any(not isinstance(x, int) or x < 1 for x in [*steps, *topks, *(ndts or [])]):
        raise InputError("sweep: steps, topk and draft tokens must be positive integers")
    envs = envs or [{}]
    pts = []
    for env in envs:
        if baseline:
            pts.append(SweepPoint(_key(0, 0, 0, env), 0, 0, 0, env))
        for s in steps:
            for k in topks:
                cands = [s + 1] if k == 1 else (ndts or [s * k + 1])
                for n in cands:
                    if k == 1 and n != s + 1:
                        continue
                    if n > s * k + 1 or n < 2:
                        continue
                    pts.append(SweepPoint(_key(s, k, n, env), s, k, n, env))
    if not pts:
        raise InputError("sweep: no valid (steps, topk, draft tokens) point in the grid")
    seen, out = set(), []
    for p in pts:
        if p.key not in seen:
            seen.add(p.key)
            out.append(p)
    return out


def _key(s: int, k: int, n: int, env: dict) -> str:
    return (f"s{s}-k{k}-n{n}" if s else "baseline") + ("" if not env else "|" + env_label(env))


def sweep_id(profile: str, points: list, measure: dict) -> str:
    blob = json.dumps({"profile": profile, "points": [p.key for p in points], "measure": measure}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def fit_model(points: list) -> Optional[dict]:
    """Fit the cycle-time model to measured speculative points (needs 3 distinct ones)."""
    rows = [p for p in points if p.state == "measured" and p.num_steps and p.accept_len
            and p.tokens_per_s_per_request]
    if len({(p.num_steps, p.num_draft_tokens) for p in rows}) < 3:
        return None
    import numpy as np

    A = np.array([[1.0, p.num_draft_tokens, p.num_steps] for p in rows])
    y = np.array([p.accept_len / p.tokens_per_s_per_request for p in rows])
    note = None
    if np.linalg.matrix_rank(A) < 3:
        # chains only (ndt = steps + 1): the verify slope and the draft step cannot be told apart;
        # fold both into t_draft (same predictions for chains)
        A2 = A[:, [0, 2]]
        coef2, *_ = np.linalg.lstsq(A2, y, rcond=None)
        a, b, c = float(coef2[0]), 0.0, float(coef2[1])
        pred = A2 @ coef2
        note = "chains only: the verify-time slope is folded into t_draft (add topk > 1 points to separate them)"
    else:
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        a, b, c = (float(x) for x in coef)
        pred = A @ coef
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum()) or 1e-30
    out = {"form": "tokens/s per request = AL / (t_verify(ndt) + steps * t_draft), t_verify = a + b*ndt",
           "t_verify_a_s": a, "t_verify_b_s_per_token": b, "t_draft_s": c, "r2": 1 - ss_res / ss_tot,
           "points": len(rows),
           "predicted_tokens_per_s": {p.key: (p.accept_len / float(pv)) if pv > 0 else None
                                      for p, pv in zip(rows, pred)}}
    if note:
        out["note"] = note
    out.update(_predictor_ranking(rows, a, b, c))
    return out


def _predictor_ranking(rows: list, a: float, b: float, t_draft: float) -> dict:
    """Feed the fitted times and the chain accept lengths to the predictor: per-depth rates from
    the measured ALs (predict.fit), then its ranking of chains by tokens/s (predict.sweep)."""
    from workbench import predict

    chain = {p.num_steps: p.accept_len for p in rows if p.eagle_topk == 1}
    if not chain or t_draft < 0:
        return {}
    top = max(chain) + 2
    verify = {n: (a + b * n) * 1000.0 for n in range(2, top + 2)}
    if min(verify.values()) <= 0:
        return {"predictor_note": "fitted verify times are not positive; no predicted ranking"}
    try:
        fitted = predict.fit({s: min(max(al, 1.0), s + 1.0) for s, al in chain.items()}, max_steps=top)
        ranked = predict.sweep("conditional", fitted.conditional, verify_ms=verify, draft_ms=t_draft * 1000.0,
                               steps=range(1, top + 1), topks=[1])
    except Exception as exc:  # a degenerate fit must not lose the sweep's measurements
        return {"predictor_note": f"predictor could not rank: {exc}"}
    table = ranked.to_dict()["table"]
    return {"conditional_rates": fitted.conditional, "predicted_best": table[0], "predicted_table": table[:8]}


def rank(points: list) -> list:
    ok = sorted([p for p in points if p.state == "measured" and p.tokens_per_s], key=lambda p: -p.tokens_per_s)
    return ok + [p for p in points if p not in ok]
