"""One server: a toolong-style log pane (tail by byte offset; milestones and failures
highlighted; every line whole at any width; ``/`` searches it, ``n``/``N`` walk the matches)
beside its state, startup progress, failure with its fix, metrics, and its acceptance over time from
the engine's counters (kept in the journal as the screen follows it) with the alarm. Narrower than
NARROW_WIDTH columns the state goes above the log, which keeps the full width."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Label, Static

from workbench.api import SERVER_STAGES
from workbench.display import rank_lines, server_where, sparkline
from workbench.tui.base import WorkbenchScreen
from workbench.tui.polling import PollingScreenMixin
from workbench.tui.screens import ScreenSpec
from workbench.tui.screens.servers import gpu_text, state_text
from workbench.tui.widgets.acceptance import AcceptancePanel
from workbench.tui.widgets.logview import LogView
from workbench.tui.workers import background

STAGE_NAMES = SERVER_STAGES


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)")


def short_time(line: str) -> str:
    """'[2026-12-01 10:00:00 TP0] Decode ...' -> '[10:00:00 TP0] Decode ...': the date is the same
    on every line of a run, and its columns are the ones the numbers need."""
    return _STAMP.sub(r"[\2", line, count=1)


class ServerScreen(PollingScreenMixin, WorkbenchScreen):
    CSS_PATH = "server.tcss"
    AUTO_FOCUS = "#log"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "refresh", "Refresh", id="server.refresh"),
        Binding("ctrl+t", "tail", "Tail on/off", id="server.tail"),
        Binding("ctrl+g", "measure", "Measure", id="server.measure"),
        Binding("ctrl+e", "context", "By context", id="server.context"),
        Binding("ctrl+k", "stop", "Stop", id="server.stop"),
    ]

    def __init__(self, server_id: int | None = None, poll_interval: float | None = None):
        super().__init__()
        self.server_id = server_id
        if poll_interval is not None:
            self.poll_interval = poll_interval
        self.seen = 0
        self.tail = True
        self.status = None

    def compose_body(self):
        with Horizontal(id="server-body"):
            with Vertical(id="log-pane"):
                yield Label("Log", id="log-title", classes="title")
                # wrapped: a decode line's numbers (accept len, gen throughput) sit past 100 columns
                yield LogView(id="log", max_lines=5000)
            with VerticalScroll(id="info-pane"):
                yield Label("Server", classes="title")
                yield Static("", id="state", markup=False)
                yield Label("Startup", classes="title")
                yield Static("", id="progress", markup=False)
                yield Label("Metrics", classes="title")
                yield Static("", id="metrics", markup=False)
                yield Label("Acceptance over time", classes="title")
                yield AcceptancePanel(id="acceptance")
                yield Label("Acceptance by context", classes="title")
                yield Static("ctrl+e: measure from 64 tokens to the served limit", id="context", markup=False)
                yield Static("", id="failure", markup=False)

    def on_mount(self) -> None:
        self.start_polling()

    def on_screen_resume(self) -> None:
        sid = getattr(self.app, "selected_server", None)
        if sid is not None and sid != self.server_id:
            self.server_id = sid
            self.seen = 0
            for log in self.query("#log").results(LogView):  # (none before the first compose)
                log.clear_lines()
        self.poll_now()

    def follow_journal(self) -> None:
        self.poll_now()

    def _sid(self) -> int | None:
        if self.server_id is None:
            self.server_id = getattr(self.app, "selected_server", None)
        if self.server_id is None:
            servers = self.app.wb.servers()
            self.server_id = servers[-1].id if servers else None
        return self.server_id

    # -- polling ----------------------------------------------------------------------------------
    def poll(self):
        sid = self._sid()
        if sid is None:
            return None
        wb = self.app.wb
        status = wb.server_status([sid])[0]  # one round trip: process, new log bytes, GPUs
        lines = wb.server_lines(sid, self.seen)
        marks = {e["line"]: e for e in wb.server_events(sid)}
        # reads the engine's counters and keeps a window once one has passed (a finished server's
        # windows are shown from the journal)
        acceptance = wb.server_acceptance(sid, record=status.state == "ready")
        return status, lines, marks, wb.server(sid), acceptance

    def render_poll(self, result) -> None:
        if result is None:
            self.query_one("#state", Static).update("no server yet: launch one from the Launch screen")
            return
        status, lines, marks, rec, acceptance = result
        self.query_one("#acceptance", AcceptancePanel).show(acceptance)
        self.status = status
        if self.app.selected_server != status.id:
            self.app.select_server(status.id, status.host)
        log = self.query_one("#log", LogView)
        texts = []
        for n, text in lines:
            self.seen = max(self.seen, n)
            mark = marks.get(n)
            if mark is None:
                style = "green" if "Decode batch" in text else ("dim" if "] INFO:" in text else "")
            elif mark["kind"] == "failure":
                style = "bold white on dark_red"
            else:
                style = "bold cyan"
            texts.append(Text(short_time(text), style=style))
        log.add_lines(texts, scroll_end=self.tail)
        self.query_one("#log-title", Label).update(
            f"Log  {rec.log}  ({status.log_size or 0} bytes{', tail' if self.tail else ''})"
        )
        self.query_one("#state", Static).update(
            Text.assemble(
                f"{status.id} {status.profile} on {server_where(status)}  ",
                state_text(status.state, status.stale),
                f"\npid {status.pid}, port {status.port}, process {status.process}"
                + "".join(f"\n{r}" for r in rank_lines(status))
                + (f"\n{status.error}" if status.error else ""),
            )
        )
        reached = set(status.progress)
        prog = Text()
        for key, name in STAGE_NAMES:
            prog.append(("✔ " if key in reached else "· ") + name + "\n", style="green" if key in reached else "dim")
        if status.state == "starting":
            prog.append(f"now: {status.stage}", style="yellow")
        self.query_one("#progress", Static).update(prog)
        m = status.metrics or {}
        al = status.series.get("accept_len", [])
        gt = status.series.get("gen_throughput", [])
        self.query_one("#metrics", Static).update(
            f"accept len  {m.get('accept_len', '-')}  {sparkline(al, 24)}\n"
            f"accept rate {m.get('accept_rate', '-')}\n"
            f"gen tok/s   {m.get('gen_throughput', '-')}  {sparkline(gt, 24)}\n"
            f"running {m.get('running_req', '-')}  queued {m.get('queue_req', '-')}  "
            f"token usage {m.get('token_usage', '-')}\n"
            f"GPUs {gpu_text(status.gpus)}"
        )
        f = status.failure
        self.query_one("#failure", Static).update(
            Text(f"{f.get('class')}: {f.get('text', '')}\nfix: {f.get('hint', '')}", style="bold red") if f else ""
        )

    # -- actions ----------------------------------------------------------------------------------
    def action_refresh(self) -> None:
        self.poll_now()

    def action_tail(self) -> None:
        self.tail = not self.tail
        if self.tail:
            self.query_one("#log", LogView).scroll_end(animate=False)
        self.notify(f"tail {'on' if self.tail else 'off'}")

    def action_stop(self) -> None:
        sid = self._sid()
        if sid is None:
            return
        self.app.confirm(self.app.wb.stop_plan(sid), lambda: self.stop_server(sid))

    @background("server-stop", done="_stopped", what="stop server {sid}", exclusive=False)
    def stop_server(self, sid: int) -> str:
        res = self.app.wb.server_stop(sid, confirm=True)
        return f"server {sid}: {res.message}"

    def _stopped(self, note: str) -> None:
        self.notify(note)
        self.poll_now()

    def action_measure(self) -> None:
        sid = self._sid()
        if sid is not None:
            self.notify(f"measuring server {sid} (flush, fixed prompt set)…")
            self.measure(sid)

    @background("server-measure", done="_measured", what="measure server {sid}", exclusive=False)
    def measure(self, sid: int) -> str:
        wb = self.app.wb
        m = wb.server_measure(sid, prompts=wb.live_prompts())  # the workspace's prompt set, as Diagnose
        al = m.accept_len
        text = (
            f"accept length {al['mean']:.2f} ± {al['stdev']:.2f}, " if al["mean"] is not None else ""
        ) + f"{m.tokens_per_s:.1f} tok/s"
        d = m.distribution or {}
        if d.get("n"):
            text += f"; per request p10 {d['p10']:.2f}, median {d['p50']:.2f}, p90 {d['p90']:.2f}"
            if m.low_requests:
                low = ", ".join(f"{x['prompt']} ({x['accept_len']:.2f})" for x in m.low_requests[:3])
                text += f"; far below the rest: prompt {low}"
        return f"server {sid}: {text}"

    def _measured(self, note: str) -> None:
        self.notify(note, timeout=10)

    def action_context(self) -> None:
        """Accept length by context: the workspace's prompt set (``[live] prompts``) after more and more
        of itself, from 64 tokens to the served limit."""
        sid = self._sid()
        if sid is not None:
            self.query_one("#context", Static).update(
                Text("measuring from 64 tokens to the served limit…", style="dim")
            )
            self.context_sweep(sid)

    @background("server-context", done="_context_done", failed="_context_failed", what="context sweep of server {sid}")
    def context_sweep(self, sid: int):
        wb = self.app.wb
        return wb.server_measure(sid, context="auto", prompts=wb.live_prompts())

    def _context_done(self, m) -> None:
        self.query_one("#context", Static).update(context_text(m))

    def _context_failed(self, error) -> None:
        self.query_one("#context", Static).update(Text(str(error), style="bold red"))


def context_text(m) -> Text:
    """A context sweep's rows as bars, the rows past the drafter's trained length marked, its findings."""
    from workbench.textplot import bar_lines

    rows = [r for r in m.by_context if r.get("accept_length") is not None]
    f = m.context_facts or {}
    out = Text(
        f"trained length {f.get('trained_length') or 'unknown'}, "
        f"max_position_embeddings {f.get('max_position_embeddings') or '?'}\n",
        style="dim",
    )
    if rows:
        hi = max(r["accept_length"] for r in rows)
        lines = bar_lines(
            [str(r["context_tokens"]) for r in rows],
            [r["accept_length"] for r in rows],
            lo=1.0,
            hi=max(hi, 2.0),
            width=16,
        )
        width = max(len(b.label) for b in lines)
        for b, r in zip(lines, rows):
            past = bool(r.get("past_trained_length"))
            out.append(f"{b.label:>{width}} ", style="dim")
            out.append(b.bar, style="yellow" if past else "green")
            out.append(f" {b.value}" + ("  past trained" if past else "") + "\n")
    for x in m.findings:
        out.append(x["message"] + "\n", style="bold red" if x["severity"] == "warning" else "dim")
    return out


SPEC = ScreenSpec("server", "Server", "f6", ServerScreen, order=41)
