"""Notebook widgets for acceptance where it breaks, on the same ``Workbench`` methods as the TUI and
the CLI.

from workbench.notebook import AcceptanceWidget, ContextWidget
AcceptanceWidget(wb, server_id=3)      # accept length over time from the engine's counters; the alarm
ContextWidget(wb, server_id=3)         # accept length against context, the trained length marked
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence

import ipywidgets as w

from workbench.errors import WorkbenchError
from workbench.notebook.servers import _err, _wb

BLUE, RED, GREY, ORANGE = "#1565c0", "#c62828", "#999", "#ef6c00"


def line_svg(
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    title: str,
    xlabels: Sequence[str],
    low: Sequence[bool] | None = None,
    hline: tuple[float, str] | None = None,
    vlines: Sequence[tuple[float, str]] = (),
    width: int = 420,
    height: int = 220,
) -> str:
    """A small dependency-free SVG line plot (accept length on the y axis, from 1)."""
    left, right, top, bottom = 40, 12, 16, 28
    hi = max([*ys, (hline or (2.0, ""))[0], 2.0]) * 1.08
    lo_x, hi_x = min([*xs, *(v for v, _ in vlines)]), max([*xs, *(v for v, _ in vlines)])

    def x(v: float) -> float:
        return left + (v - lo_x) / max(hi_x - lo_x, 1e-9) * (width - left - right)

    def y(v: float) -> float:
        return top + (hi - v) / (hi - 1.0) * (height - top - bottom)

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' class='acceptance-plot'>",
        f"<text x='{left}' y='11' font-size='11'>{html.escape(title)}</text>",
        f"<line x1='{left}' y1='{y(1.0):.1f}' x2='{width - right}' y2='{y(1.0):.1f}' stroke='{GREY}'/>",
        f"<line x1='{left}' y1='{top}' x2='{left}' y2='{y(1.0):.1f}' stroke='{GREY}'/>",
    ]
    for tick in range(1, int(hi) + 1):
        parts.append(f"<text x='{left - 6}' y='{y(tick) + 4:.1f}' font-size='10' text-anchor='end'>{tick}</text>")
    for v, text in vlines:
        parts.append(
            f"<line x1='{x(v):.1f}' y1='{top}' x2='{x(v):.1f}' y2='{y(1.0):.1f}' stroke='{ORANGE}' "
            f"stroke-dasharray='4 3'/><text x='{x(v) + 3:.1f}' y='{top + 10}' font-size='10' fill='{ORANGE}'>"
            f"{html.escape(text)}</text>"
        )
    if hline is not None:
        v, text = hline
        parts.append(
            f"<line x1='{left}' y1='{y(v):.1f}' x2='{width - right}' y2='{y(v):.1f}' stroke='{GREY}' "
            f"stroke-dasharray='4 3'/><text x='{width - right}' y='{y(v) - 4:.1f}' font-size='10' "
            f"text-anchor='end'>{html.escape(text)}</text>"
        )
    pts = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in zip(xs, ys))
    parts.append(f"<polyline points='{pts}' fill='none' stroke='{BLUE}' stroke-width='2'/>")
    step = max(1, len(xs) // 8)
    for i, (a, b, label) in enumerate(zip(xs, ys, xlabels)):
        bad = bool(low and low[i])
        parts.append(
            f"<circle cx='{x(a):.1f}' cy='{y(b):.1f}' r='{4 if bad else 3}' fill='{RED if bad else BLUE}'>"
            f"<title>{html.escape(label)}: {b:.3f}</title></circle>"
        )
        if i % step == 0 or i == len(xs) - 1:
            parts.append(
                f"<text x='{x(a):.1f}' y='{height - 10}' font-size='10' text-anchor='middle'>"
                f"{html.escape(label)}</text>"
            )
    parts.append("</svg>")
    return "".join(parts)


def acceptance_html(series) -> str:
    """A ``server_acceptance`` result: the windows plotted against the baseline, the alarm."""
    ws = [x for x in series.windows if x.accept_length is not None]
    head = (
        f"<b>server {series.server_id}: accept length over time</b> ({html.escape(series.source or 'no window yet')})"
    )
    if not ws:
        body = f"<div><i>no window yet: one every {series.window_s:g} s of the engine's counters</i></div>"
    elif ws[-1].fallback:
        body = (
            f"<div style='color:{ORANGE}'>running average of /server_info: {ws[-1].accept_length:.3f} "
            "(no counters on /metrics: not a window, and no alarm)</div>"
        )
    else:
        b = series.baseline
        base = b.get("accept_length")
        body = line_svg(
            [x.t1 for x in ws],
            [float(x.accept_length) for x in ws],
            title="accept length per window (the engine's counters, differenced)",
            xlabels=[dt.datetime.fromtimestamp(x.t1).strftime("%H:%M:%S") for x in ws],
            low=[x.low for x in ws],
            hline=(base, f"first {series.baseline_s:g} s: {base:.2f}") if base is not None else None,
        )
    a = series.alarm
    alarm = (
        f"<div style='color:#fff;background:{RED};padding:2px 6px'><b>ALARM</b> {html.escape(a.message)}</div>"
        if a.raised
        else f"<div style='color:#2e7d32'>no alarm <span style='color:{GREY}'>({html.escape(series.rule)})</span></div>"
    )
    notes = "".join(f"<div style='color:{GREY}'>{html.escape(n)}</div>" for n in series.notes)
    return head + body + alarm + notes


def context_html(m) -> str:
    """A measurement's ``by_context`` rows: accept length against context, the drafter's trained
    length and ``max_position_embeddings`` marked, and the findings."""
    rows = [r for r in m.by_context if r.get("accept_length") is not None]
    if not rows:
        return "<i>no context row measured</i>"
    f = m.context_facts or {}
    marks = []
    if f.get("trained_length"):
        marks.append((float(f["trained_length"]), f"trained {f['trained_length']}"))
    if f.get("max_position_embeddings") and f["max_position_embeddings"] <= 2 * rows[-1]["context_tokens"]:
        marks.append((float(f["max_position_embeddings"]), f"max_position_embeddings {f['max_position_embeddings']}"))
    svg = line_svg(
        [float(r["context_tokens"]) for r in rows],
        [float(r["accept_length"]) for r in rows],
        title="accept length against context (tokens)",
        xlabels=[str(r["context_tokens"]) for r in rows],
        low=[bool(r.get("past_trained_length")) for r in rows],
        vlines=marks,
    )
    table = (
        "<table><tr><th>context</th><th>accept length</th><th>requests</th><th>source</th></tr>"
        + "".join(
            f"<tr><td>{r['context_tokens']}</td><td>{r['accept_length']:.3f}</td><td>{r['requests']}</td>"
            f"<td>{html.escape(r.get('source', ''))}</td></tr>"
            for r in rows
        )
        + "</table>"
    )
    trained = f"trained length {f.get('trained_length') or 'unknown'}" + (
        f" ({html.escape(f['trained_from'])})" if f.get("trained_from") else ""
    )
    finds = "".join(
        f"<div style='color:{RED if x['severity'] == 'warning' else GREY}'>{html.escape(x['severity'])}: "
        f"{html.escape(x['message'])}</div>"
        for x in m.findings
    )
    return f"<div>{trained}</div>{svg}{table}{finds}"


def per_request_html(m) -> str:
    """A measurement's per-request accept lengths: their spread, the requests far below the rest (with
    their prompt's start) and whether their sums agree with the engine's counters."""
    d = m.distribution or {}
    if not d.get("n"):
        notes = "".join(f"<div style='color:{GREY}'>{html.escape(n)}</div>" for n in m.notes)
        return f"<div><i>no per-request accept lengths</i></div>{notes}"
    out = (
        f"<div>per request ({html.escape(m.per_request_source)}): p10 {d['p10']:.2f} · median {d['p50']:.2f} · "
        f"p90 {d['p90']:.2f} (min {d['min']:.2f}, max {d['max']:.2f}, {d['n']} requests)</div>"
    )
    c = m.counters_check
    if c:
        agree = "agree with" if c["agree"] else "DIFFER from"
        out += (
            f"<div style='color:{GREY if c['agree'] else RED}'>their sums {agree} the engine's counters: "
            f"{c['rounds']['requests']} rounds ({c['rounds']['counters']}), "
            f"{c['tokens']['requests']} tokens ({c['tokens']['counters']})</div>"
        )
    if m.low_requests:
        rows = "".join(
            f"<tr><td>{x['accept_len']:.2f}</td><td>{x['prompt']}</td><td>{x.get('context_tokens') or ''}</td>"
            f"<td>{html.escape(x['prompt_start'])}</td></tr>"
            for x in m.low_requests
        )
        out += (
            f"<div style='color:{RED}'>far below the rest (under {d['low']:.2f}):</div><table><tr><th>accept length"
            f"</th><th>prompt</th><th>context</th><th>prompt starts</th></tr>{rows}</table>"
        )
    return out


class AcceptanceWidget(w.VBox):
    """Read: the engine's counters now (a window is kept once one has passed), then the windows so
    far against the server's first hour, and the alarm."""

    def __init__(self, wb=None, server_id: int | None = None, *, workspace: str | None = None):
        self.wb = _wb(wb, workspace)
        if server_id is None:
            servers = self.wb.servers()
            server_id = servers[-1].id if servers else None
        self.server_id = server_id
        self.series = None
        self.read_button = w.Button(description="Read")
        self.view = w.HTML()
        self.read_button.on_click(lambda _b: self.refresh())
        super().__init__([w.HBox([self.read_button]), self.view])
        self.refresh()

    def refresh(self, record: bool = True):
        if self.server_id is None:
            self.view.value = "<i>no server</i>"
            return None
        try:
            self.series = self.wb.server_acceptance(self.server_id, record=record)
        except WorkbenchError as exc:
            self.view.value = _err(str(exc))
            return None
        self.view.value = acceptance_html(self.series)
        return self.series


class ContextWidget(w.VBox):
    """Contexts (``auto``: from 64 tokens to the served limit, doubling; blank: the prompt set as it is)
    and Measure: the measurement protocol over the context sweep, its curve with the drafter's trained
    length marked, and the per-request accept lengths with the requests far below the rest."""

    def __init__(
        self,
        wb=None,
        server_id: int | None = None,
        *,
        workspace: str | None = None,
        contexts: str = "auto",
        prompts: str = "",
        max_new_tokens: int | None = None,
    ):
        self.wb = _wb(wb, workspace)
        if server_id is None:
            servers = self.wb.servers(active=True)
            server_id = servers[-1].id if servers else None
        self.server_id = server_id
        self.measurement = None
        self.contexts = w.Text(value=contexts, description="contexts")
        self.trained = w.Text(value="", description="trained len", placeholder="from the training data")
        self.prompts = w.Text(value=prompts, description="prompts", placeholder="the protocol's prompt set")
        self.max_new_tokens = max_new_tokens
        self.measure_button = w.Button(description="Measure")
        self.view = w.HTML()
        self.measure_button.on_click(lambda _b: self.measure())
        super().__init__([w.HBox([self.contexts, self.trained, self.measure_button]), self.prompts, self.view])

    def measure(self):
        if self.server_id is None:
            self.view.value = "<i>no server</i>"
            return None
        trained = self.trained.value.strip()  # validated by the API (one line, naming the field)
        contexts = self.contexts.value.strip()
        try:
            self.measurement = m = self.wb.server_measure(
                self.server_id,
                context=contexts or None,
                trained_length=trained or None,
                prompts=self.prompts.value.strip() or None,
                max_new_tokens=self.max_new_tokens,
            )
        except (WorkbenchError, ValueError) as exc:
            self.view.value = _err(str(exc))
            return None
        al = f"{m.accept_length:.3f}" if m.accept_length is not None else "-"
        source = f" ({html.escape(m.counters['source'])})" if m.counters and m.counters.get("source") else ""
        head = f"<div><b>accept length {al}</b>{source}, {m.tokens_per_s:.1f} tok/s</div>"
        self.view.value = head + (context_html(m) if m.by_context else "") + per_request_html(m)
        return m
