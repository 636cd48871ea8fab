"""One-key fix: write the fix through the config history, relaunch the same profile, measure again,
and put before and after side by side.

The relaunch uses the profile the server was launched from, so the only difference between the
two servers is the config version the fix wrote (the journal shows both versions and both
measurements, and which config each server loaded).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypedDict

from workbench.confirm import Plan
from workbench.errors import InputError
from workbench.live.ops import LiveOps
from workbench.live.report import Comparison
from workbench.live.types import ComparisonRow, ComparisonSide
from workbench.servers.measure import accept_length
from workbench.servers.registry import LIVE, ServerRecord, ServerState

if TYPE_CHECKING:
    from workbench.doctor.findings import Fix
    from workbench.servers.measure import Measurement


def last_fix(ops: LiveOps, server_id: int) -> Fix:
    """The fix of the newest live doctor report on this server (journal), as a Fix."""
    from workbench.live.report import fix_from_dict

    for ev in reversed(ops.events(kind="live.doctor", subject=str(server_id))):
        fix = (ev.payload or {}).get("fix")
        if fix:
            return fix_from_dict(fix)
    raise InputError(f"server {server_id}: no live doctor report with a fix (run the doctor on it first)")


def relaunch_plan(ops: LiveOps, server_id: int) -> Plan:
    rec = ops.server(server_id)
    running = rec.state in LIVE
    preview = ops.launch_preview(rec.profile)
    details = [preview.display]
    if running:
        details.insert(0, f"stop server {rec.id}: SIGTERM to process group {rec.pgid or rec.pid}, grace, SIGKILL")
    # the port this server holds is free by the time the plan launches: not a problem of the plan
    freed = [
        f for f in preview.findings if running and f.code == "port-taken" and f.message.startswith(f"server {rec.id} (")
    ]
    details += [f"{f.severity}: {f.message}" for f in preview.findings if f.severity != "info" and f not in freed]
    details += [f"port {rec.port}: freed when server {rec.id} stops, then reused" for _ in freed[:1]]
    return Plan(
        "relaunch",
        f"server {rec.id}",
        (f"stop server {rec.id} and " if running else "") + f"launch {rec.profile} again on {rec.host}",
        details,
    )


class MeasureSettings(TypedDict, total=False):
    concurrency: int
    max_new_tokens: int | None


def measure_settings(ops: LiveOps, server_id: int) -> MeasureSettings:
    """The protocol settings of the server's last measurement, so the next one is comparable."""
    rows = [r for r in ops.measurements(server_id) if r.get("kind") == "protocol"]
    if not rows:
        return {}
    r = rows[-1]
    return {"concurrency": r.get("concurrency", 4), "max_new_tokens": r.get("max_new_tokens")}


def relaunch(
    ops: LiveOps,
    server_id: int,
    *,
    measure: bool = True,
    measure_tokens: int | None = None,
    measure_concurrency: int | None = None,
    timeout: float | None = None,
    poll: float = 0.5,
    prompts: str | None = None,
) -> tuple[ServerRecord, Any, Measurement | None]:
    """Stop the server if it runs, launch its profile, wait, measure like before. Returns
    (new server record, status, measurement or None)."""
    rec = ops.server(server_id)
    if rec.state in LIVE:
        ops.server_stop(rec.id, confirm=True)
    new = ops.launch(rec.profile, confirm=True)
    st = ops.server_wait(new.id, timeout=timeout, poll=poll)
    m = None
    if st.state == ServerState.READY and measure:
        prev = measure_settings(ops, server_id)
        m = ops.server_measure(
            new.id,
            concurrency=measure_concurrency or prev.get("concurrency") or 4,
            max_new_tokens=measure_tokens or prev.get("max_new_tokens"),
            prompts=prompts,
            label="after fix",
        )
    return ops.server(new.id), st, m


def _loaded(ops: LiveOps, server_id: int) -> tuple[dict[str, Any] | None, str | None]:
    """(the draft's config.json the server loaded: any keys its trainer wrote, its sha256)."""
    rec = ops.server(server_id)
    if not rec.draft_config_sha256:
        return None, None
    raw = ops.journal.blob(rec.draft_config_sha256)
    try:
        return (json.loads(raw) if raw is not None else None), rec.draft_config_sha256
    except ValueError:
        return None, rec.draft_config_sha256


def _version_of(ops: LiveOps, sha: str | None) -> int | None:
    return ops.journal.config_version_number(sha)


def _side(ops: LiveOps, server_id: int) -> ComparisonSide:
    rec = ops.server(server_id)
    rows = [r for r in ops.measurements(server_id) if r.get("kind") == "protocol"]
    m = rows[-1] if rows else {}
    cfg, sha = _loaded(ops, server_id)
    ec = (cfg or {}).get("eagle_config") or {}
    ids = ec.get("eagle_aux_hidden_state_layer_ids") if isinstance(ec, dict) else None
    if rec.extra.get("engine") == "vllm" and (cfg or {}).get("eagle_aux_hidden_state_layer_ids"):
        ids = (cfg or {})["eagle_aux_hidden_state_layer_ids"]  # vLLM reads the top-level key first
    return {
        "server": server_id,
        "profile": rec.profile,
        "state": rec.state,
        "accept_length": accept_length(m),
        "tokens_per_s": m.get("tokens_per_s"),
        "measurement": m.get("id"),
        "layer_ids": ids,
        "config_sha256": sha,
        "config_version": _version_of(ops, sha),
    }


def compare(ops: LiveOps, before: int, after: int) -> Comparison:
    b, a = _side(ops, before), _side(ops, after)

    def ratio(x: Any, y: Any) -> str | None:
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x:
            return f"x{y / x:.2f}"
        return None

    rows: list[ComparisonRow] = [
        {
            "name": "server",
            "before": f"#{b['server']} {b['profile']}",
            "after": f"#{a['server']} {a['profile']}",
            "change": None,
        },
        {
            "name": "accept length",
            "before": b["accept_length"],
            "after": a["accept_length"],
            "change": ratio(b["accept_length"], a["accept_length"]),
        },
        {
            "name": "tokens/s",
            "before": b["tokens_per_s"],
            "after": a["tokens_per_s"],
            "change": ratio(b["tokens_per_s"], a["tokens_per_s"]),
        },
        {
            "name": "layer ids",
            "before": b["layer_ids"],
            "after": a["layer_ids"],
            "change": None if b["layer_ids"] == a["layer_ids"] else "changed",
        },
        {"name": "draft config", "before": _ver(b), "after": _ver(a), "change": None},
    ]
    return Comparison(before, after, rows, b, a)


def _ver(side: ComparisonSide) -> str:
    v = side.get("config_version")
    sha = side.get("config_sha256")
    return (f"v{v} " if v else "") + (sha[:10] if sha else "-")
