"""A followed server's acceptance over time: the windows' accept lengths as a sparkline against the
baseline of its first hour, the latest window, where the figures come from, and the alarm.

``AcceptancePanel.show(series)`` takes a ``server_acceptance`` result (None: nothing yet); the running
average of ``/server_info`` (an engine without counters) is labelled as such, never drawn as windows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rich.text import Text
from textual.widgets import Static

from workbench.display import sparkline


def acceptance_text(series: Any, width: int = 32) -> Text:
    if series is None:
        return Text("no reading yet", style="dim")
    ws = [w for w in series.windows if w.accept_length is not None]
    out = Text()
    if not ws:
        out.append("no window yet", style="dim")
        out.append(f" (one every {series.window_s:g} s of the engine's counters)\n", style="dim")
    else:
        last = ws[-1]
        fallback = last.fallback
        out.append(f"{last.accept_length:.2f}", style="bold red" if last.low else "bold")
        out.append("  " + sparkline([w.accept_length for w in ws], width), style="red" if last.low else "green")
        out.append("\n")
        if fallback:
            out.append("running average of /server_info, not a window (no counters on /metrics)\n", style="yellow")
        else:
            t = dt.datetime.fromtimestamp(last.t1).strftime("%H:%M:%S")
            out.append(f"window to {t}: {last.rounds} rounds, {series.source}\n", style="dim")
    b = series.baseline
    if b.get("accept_length") is not None:
        state = "" if b.get("complete") else ", forming"
        out.append(
            f"baseline {b['accept_length']:.2f} ({b['windows']} windows of its first {series.baseline_s:g} s{state})\n"
        )
    a = series.alarm
    if a.raised:
        out.append("ALARM: " + a.message, style="bold white on dark_red")
    else:
        out.append("no alarm", style="green" if b.get("accept_length") is not None else "dim")
    for note in series.notes:
        out.append(f"\n{note}", style="dim italic")
    return out


class AcceptancePanel(Static):
    """The panel; ``show`` is called on the UI thread with a poll's result."""

    def __init__(self, **kw: Any) -> None:
        super().__init__("", markup=False, **kw)
        self.series: Any = None

    def show(self, series: Any) -> None:
        self.series = series
        self.update(acceptance_text(series))
