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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from workbench.errors import InputError, WorkbenchError
from workbench.progress import Progress, ProgressCallback
from workbench.results import Result
from workbench.servers.registry import STOPPABLE, ServerState

if TYPE_CHECKING:
    from workbench.journal import Journal
    from workbench.servers.measure import Measurement
    from workbench.servers.profiles import Profile
    from workbench.servers.registry import ServerRecord
    from workbench.servers.status import ServerStatus


@dataclass
class SweepPoint(Result):
    key: str
    num_steps: int  # 0: the baseline without speculation
    eagle_topk: int
    num_draft_tokens: int
    env: dict[str, Any]
    server_id: int | None = None
    state: str = "pending"  # measured, failed, pending
    tokens_per_s: float | None = None
    tokens_per_s_per_request: float | None = None
    accept_len: float | None = None
    server_accept_len: float | None = None
    error: str | None = None
    resumed: bool = False


@dataclass
class SweepResult(Result):
    sweep_id: str
    profile: str
    points: list[SweepPoint]  # ranked, best first (failed last)
    best: dict[str, Any] | None
    model: dict[str, Any] | None
    resumed: int = 0
    baseline_tokens_per_s: float | None = None
    speedup_vs_baseline: float | None = None


def env_label(env: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "-"


def expand(
    steps: list[Any], topks: list[Any], ndts: list[Any] | None, envs: list[Any], baseline: bool
) -> list[SweepPoint]:
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


def _key(s: int, k: int, n: int, env: dict[str, Any]) -> str:
    return (f"s{s}-k{k}-n{n}" if s else "baseline") + ("" if not env else "|" + env_label(env))


def sweep_id(profile: str, points: list[Any], measure: dict[str, Any]) -> str:
    blob = json.dumps({"profile": profile, "points": [p.key for p in points], "measure": measure}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def fit_model(points: list[Any]) -> dict[str, Any] | None:
    """Fit the cycle-time model to measured speculative points (needs 3 distinct ones)."""
    rows = [p for p in points if p.state == "measured" and p.num_steps and p.accept_len and p.tokens_per_s_per_request]
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
    out = {
        "form": "tokens/s per request = AL / (t_verify(ndt) + steps * t_draft), t_verify = a + b*ndt",
        "t_verify_a_s": a,
        "t_verify_b_s_per_token": b,
        "t_draft_s": c,
        "r2": 1 - ss_res / ss_tot,
        "points": len(rows),
        "predicted_tokens_per_s": {p.key: (p.accept_len / float(pv)) if pv > 0 else None for p, pv in zip(rows, pred)},
    }
    if note:
        out["note"] = note
    out.update(_predictor_ranking(rows, a, b, c))
    return out


def _predictor_ranking(rows: list[Any], a: float, b: float, t_draft: float) -> dict[str, Any]:
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
        ranked = predict.sweep(
            "conditional",
            fitted.conditional,
            verify_ms=verify,
            draft_ms=t_draft * 1000.0,
            steps=range(1, top + 1),
            topks=[1],
        )
    except Exception as exc:  # a degenerate fit must not lose the sweep's measurements
        return {"predictor_note": f"predictor could not rank: {exc}"}
    table = ranked.to_dict()["table"]
    return {"conditional_rates": fitted.conditional, "predicted_best": table[0], "predicted_table": table[:8]}


def rank(points: list[Any]) -> list[Any]:
    ok = sorted([p for p in points if p.state == "measured" and p.tokens_per_s], key=lambda p: -p.tokens_per_s)
    return ok + [p for p in points if p not in ok]


class SweepOps(Protocol):
    """What a sweep needs from the workbench: launch, wait, measure and stop, each journaled."""

    journal: Journal
    progress: ProgressCallback

    def profile(self, name: str) -> Profile: ...
    def server(self, server_id: int) -> ServerRecord: ...
    def launch(self, name: str, *, confirm: bool = False) -> ServerRecord: ...
    def server_wait(self, server_id: int, timeout: float | None = None, poll: float = 1.0) -> ServerStatus: ...
    def server_measure(
        self,
        server_id: int,
        *,
        concurrency: int = ...,
        max_new_tokens: int | None = ...,
        rounds: int = ...,
        prompts: str | None = ...,
        label: str = ...,
    ) -> Measurement: ...
    def server_stop(
        self, server_id: int, *, confirm: bool = False, grace: float | None = None, gpu_wait: float = ...
    ) -> Any: ...
    def measurements(self, server_id: int | None = None, kind: str | None = None) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class PointRun:
    """How each point of a sweep is launched, measured and stopped."""

    concurrency: int = 4
    max_new_tokens: int | None = None
    rounds: int = 1
    prompts: str | None = None
    ready_timeout: float | None = None
    poll: float = 1.0
    stop_grace: float | None = None
    gpu_wait: float = 60.0


def run(
    ops: SweepOps,
    profile: str,
    points: list[SweepPoint],
    sid_: str,
    overlay: dict[str, dict[str, Any]],
    how: PointRun,
) -> SweepResult:
    """Each point: a session profile in ``overlay`` (``PROFILE@KEY``), launch, wait, measure, stop;
    every point's outcome is journaled as a ``sweep`` measurement, so a rerun resumes."""
    base = ops.profile(profile)
    done = {m["key"]: m for m in ops.measurements(kind="sweep") if m.get("sweep_id") == sid_}
    resumed = 0
    for i, p in enumerate(points):
        ops.progress(Progress("server.sweep", i, len(points), p.key))
        if p.key in done and done[p.key].get("state") == "measured":
            prev = done[p.key]
            for k in ("server_id", "tokens_per_s", "tokens_per_s_per_request", "accept_len", "server_accept_len"):
                setattr(p, k, prev.get(k))
            p.state, p.resumed = "measured", True
            resumed += 1
            continue
        name = f"{profile}@{p.key}"
        table: dict[str, Any] = {"extends": profile, "description": f"sweep {sid_} point {p.key}"}
        if p.env:
            table["env"] = {k: str(v) for k, v in p.env.items()}
        if p.num_steps:
            table["speculative"] = {
                "algorithm": base.speculative.get("algorithm", "EAGLE3"),
                "num_steps": p.num_steps,
                "eagle_topk": p.eagle_topk,
                "num_draft_tokens": p.num_draft_tokens,
            }
            overlay[name] = table
        else:  # the baseline: the same server without speculation
            overlay[name] = baseline_profile(base, table)
        sid = None
        try:
            rec = ops.launch(name, confirm=True)
            sid = p.server_id = rec.id
            st = ops.server_wait(rec.id, timeout=how.ready_timeout, poll=how.poll)
            if st.state != ServerState.READY:
                raise WorkbenchError(
                    f"{st.state}: {(st.failure or {}).get('class', '')} {(st.failure or {}).get('text', '')}".strip()
                )
            m = ops.server_measure(
                rec.id,
                concurrency=how.concurrency,
                max_new_tokens=how.max_new_tokens,
                rounds=how.rounds,
                prompts=how.prompts,
                label=f"sweep {sid_} {p.key}",
            )
            p.tokens_per_s = m.tokens_per_s
            p.tokens_per_s_per_request = m.tokens_per_s_per_request["mean"]
            p.accept_len = m.accept_len["mean"]
            p.server_accept_len = m.server_accept_len
            p.state = "measured"
        except WorkbenchError as exc:
            p.state, p.error = "failed", str(exc)
        finally:
            if sid is not None:
                try:
                    if ops.server(sid).state in STOPPABLE:
                        ops.server_stop(sid, confirm=True, grace=how.stop_grace, gpu_wait=how.gpu_wait)
                except WorkbenchError as exc:
                    p.error = (p.error + "; " if p.error else "") + f"stop: {exc}"
        ops.journal.add_measurement(p.server_id, "sweep", {"sweep_id": sid_, "profile": profile, **p.to_dict()})
    ops.progress(Progress("server.sweep", len(points), len(points), "done"))
    ranked = rank(points)
    best = next((p for p in ranked if p.state == "measured" and p.num_steps), None)
    base_pt = next((p for p in points if not p.num_steps and p.state == "measured"), None)
    return SweepResult(
        sid_,
        profile,
        ranked,
        best.to_dict() if best else None,
        fit_model(points),
        resumed,
        base_pt.tokens_per_s if base_pt else None,
        (best.tokens_per_s / base_pt.tokens_per_s)
        if best and best.tokens_per_s and base_pt and base_pt.tokens_per_s
        else None,
    )


def baseline_profile(parent: Profile, table: dict[str, Any]) -> dict[str, Any]:
    """A baseline point drops the draft and the speculative flags of its parent. Profiles merge
    ``speculative`` key-wise, so the baseline is built flat from the resolved parent, not extended."""
    flat: dict[str, Any] = {
        "host": parent.host,
        "model": parent.model,
        "port": parent.port,
        "log": parent.log_path,
        "env": {**parent.env, **table.get("env", {})},
        "args": list(parent.args),
        "description": table["description"],
        "stop_grace": parent.stop_grace,
        "ready_timeout": parent.ready_timeout,
    }
    if parent.launcher:
        flat["launcher"] = parent.launcher
    if parent.run_dir:
        flat["run_dir"] = parent.run_dir
    if parent.gpus is not None:
        flat["gpus"] = parent.gpus
    if parent.sglang_version:
        flat["sglang_version"] = parent.sglang_version
    if parent.vllm_version:
        flat["vllm_version"] = parent.vllm_version
    if parent.engine != "sglang":
        flat["engine"] = parent.engine
    return flat
