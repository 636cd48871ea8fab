"""A followed server's acceptance over time, from the engine's own counters, and the alarm when it
falls well below the server's own first hour.

Recording (``next_row``): each reading of the engine's cumulative counters (``SpecCounters``) is
differenced against the last one the journal holds for the server, and a window is kept once at
least ``window_s`` have passed: tokens per verify round over that window alone, never the running
average. The first reading (and one after the engine started again: a counter went down) is a base.
Followers of one server (the TUI, ``server acceptance --follow``, a script) append to the same rows,
each after the latest one in one write transaction; a reading older than the latest adds nothing.
An engine whose page has no counters (SGLang without ``--enable-metrics``) gets windows of its
``/server_info`` running average instead, marked ``fallback``: those are labelled so in every face
and never raise the alarm (an average since the last flush cannot say what one window did).

The alarm (``analyse``): the baseline is the windows of the server's first ``baseline_s`` (an hour);
its accept length is its tokens over its rounds, and its dispersion per round is estimated from its
own windows, ``s2 = sum(n_i (AL_i - AL_b)^2) / (m - 1)`` (``n_i`` rounds in window i): windows vary more
than independent rounds would (prompts differ, rounds of one request are alike), and that spread is
what a steady server shows. A later window with ``n`` rounds is tested one-sided,
``t = (AL_b - AL) / sqrt(s2 (1/n + 1/N_b))`` against Student's t with ``m - 1`` degrees of freedom, and
is low when ``p < ALPHA`` and it is at least ``MIN_DROP`` below the baseline (significant and large),
and ``RUN`` low windows in a row raise the alarm. The test repeats at every window of a long-running
server (one-minute windows make 1,440 a day): a window of a steady server is low with probability at
most ALPHA, two in a row at most ALPHA squared (windows apart in time are near independent), so about
one false alarm in two years of one-minute windows, and the size condition removes most of the rest;
a degrading server is caught at its second low window. A baseline of fewer than ``MIN_BASELINE``
windows raises nothing (it says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.results import Result
from workbench.servers.engines import SpecCounters

KIND = "acceptance"  # the journal's measurements kind of a window (or base) row
WINDOW_S = 60.0
BASELINE_S = 3600.0
ALPHA = 1e-3
MIN_DROP = 0.10
MIN_BASELINE = 6
RUN = 2  # low windows in a row that raise the alarm
FALLBACK = "running average (/server_info)"


@dataclass
class Window(Result):
    t0: float
    t1: float
    accept_length: float | None  # None: no round in the window (an idle server)
    rounds: int = 0
    tokens: int = 0
    source: str = ""  # "vllm /metrics", "sglang /metrics", or FALLBACK
    fallback: bool = False
    counters: dict[str, Any] | None = None  # the counters' difference over the window
    low: bool = False  # this window fails the alarm's test


@dataclass
class Alarm(Result):
    raised: bool = False
    at: float | None = None  # the first failing window's end
    window: int | None = None  # its index in ``windows``
    accept_length: float | None = None
    baseline: float | None = None
    drop: float | None = None
    p: float | None = None
    current: bool = False  # the latest window fails too
    message: str = ""


@dataclass
class AcceptanceSeries(Result):
    server_id: int
    source: str  # where the windows come from ("" before any)
    windows: list[Window]
    baseline: dict[str, Any]
    alarm: Alarm
    rule: str
    notes: list[Any] = field(default_factory=list)
    window_s: float = WINDOW_S
    baseline_s: float = BASELINE_S


def counters_of(d: dict[str, Any]) -> SpecCounters:
    keys = SpecCounters.__dataclass_fields__
    return SpecCounters(**{k: v for k, v in d.items() if k in keys})


def next_row(
    last: dict[str, Any] | None,
    total: SpecCounters | None,
    now: float,
    window_s: float,
    running_average: float | None = None,
) -> dict[str, Any] | None:
    """The journal row a reading (asked for at ``now``) adds after ``last`` (the server's latest row),
    or None. Several followers of one server read its counters at once: a reading asked for before the
    kept one, or one whose counters are below it that came within a window of it (answered in another
    order than asked), is another follower's older view and adds nothing."""
    if last is not None and now <= float(last["t1"]):
        return None
    if total is None:
        if running_average is None or (last is not None and now - float(last["t1"]) < window_s):
            return None
        t0 = float(last["t1"]) if last is not None else now
        return {"t0": t0, "t1": now, "accept_length": running_average, "source": FALLBACK, "fallback": True}
    base = {"t1": now, "total": total.to_dict(), "source": total.source}
    if last is None or "total" not in last:
        return {**base, "base": True}
    prev = counters_of(last["total"])
    if now - float(last["t1"]) < window_s:
        return None
    if total.restarted_since(prev):  # a counter went down a window after: the engine started again
        return {**base, "base": True, "reset": True}
    d = total - prev
    return {
        **base,
        "t0": float(last["t1"]),
        "counters": d.to_dict(),
        "rounds": d.rounds,
        "tokens": d.round_tokens,
        "accept_length": d.accept_length,
    }


def windows_of(rows: Sequence[dict[str, Any]]) -> list[Window]:
    out = []
    for r in rows:
        if r.get("base") or "t0" not in r:
            continue
        out.append(
            Window(
                float(r["t0"]),
                float(r["t1"]),
                r.get("accept_length"),
                int(r.get("rounds") or 0),
                int(r.get("tokens") or 0),
                str(r.get("source") or ""),
                bool(r.get("fallback")),
                r.get("counters"),
            )
        )
    return out


RULE = (
    f"{RUN} windows in a row each at least {MIN_DROP:.0%} below the first hour's accept length, one-sided "
    f"t-test p < {ALPHA:g} with the dispersion of the first hour's own windows"
)


def analyse(
    server_id: int,
    rows: Sequence[dict[str, Any]],
    *,
    baseline_s: float = BASELINE_S,
    window_s: float = WINDOW_S,
    alpha: float = ALPHA,
    min_drop: float = MIN_DROP,
) -> AcceptanceSeries:
    from workbench.stattests import t_sf

    ws = windows_of(rows)
    rule = RULE.replace("first hour", "first hour" if baseline_s == BASELINE_S else f"first {baseline_s:g} s")
    counted = [w for w in ws if not w.fallback and w.rounds > 0 and w.accept_length is not None]
    source = ws[-1].source if ws else ""
    series = AcceptanceSeries(server_id, source, ws, {}, Alarm(), rule, window_s=window_s, baseline_s=baseline_s)
    if ws and not counted and any(w.fallback for w in ws):
        series.notes.append(
            f"no counters on the server's /metrics: the windows are its {FALLBACK}, which averages since the last "
            "flush, not over a window; the alarm needs the counters (SGLang: --enable-metrics, 0.5.13 or later)"
        )
        return series
    if not counted:
        return series
    start = counted[0].t0
    base = [w for w in counted if w.t1 <= start + baseline_s]
    n_b = sum(w.rounds for w in base)
    mu = sum(w.tokens for w in base) / n_b if n_b else math.nan
    m = len(base)
    s2 = sum(w.rounds * (float(w.accept_length or 0) - mu) ** 2 for w in base) / (m - 1) if m > 1 else math.nan
    series.baseline = {
        "from": start,
        "to": start + baseline_s,
        "windows": m,
        "rounds": n_b,
        "accept_length": mu if n_b else None,
        "dispersion": s2 if m > 1 else None,
        "complete": counted[-1].t1 > start + baseline_s,
    }
    if m < MIN_BASELINE:
        series.notes.append(f"baseline forming: {m} of the {MIN_BASELINE} windows of its first {baseline_s:g} s")
        return series
    alarm = series.alarm
    run: list[Window] = []
    for w in counted[len(base) :]:
        al = float(w.accept_length or 0)
        se = math.sqrt(s2 * (1.0 / w.rounds + 1.0 / n_b))
        p = t_sf((mu - al) / se, m - 1) if se > 0 else (0.0 if al < mu else 1.0)
        drop = 1.0 - al / mu
        w.low = p < alpha and drop >= min_drop
        run = [*run, w] if w.low else []
        if len(run) >= RUN and not alarm.raised:
            alarm.raised, alarm.at, alarm.window = True, w.t1, ws.index(w)
            alarm.accept_length = sum(x.tokens for x in run) / sum(x.rounds for x in run)
            alarm.baseline, alarm.drop, alarm.p = mu, 1.0 - alarm.accept_length / mu, p
    if alarm.raised:
        alarm.current = counted[-1].low
        alarm.message = (
            f"accept length {alarm.accept_length:.2f} over {RUN} windows in a row against {alarm.baseline:.2f} "
            f"over the server's first {baseline_s:g} s ({alarm.drop:.0%} lower; p = {alarm.p:.1g} for the last) "
            "at an unchanged config" + ("; still low" if alarm.current else "; back since")
        )
    return series
