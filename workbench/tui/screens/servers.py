"""The Dashboard: hosts and servers with state, uptime, accept length and tokens/s (with
sparklines) and GPU memory. Stale and unreachable states are shown as such. One remote round
trip per host per refresh, in a worker; refreshes pause while a dialog is open. The highlighted
server is the one the other screens act on (the context line names it); ``/`` filters the rows.
Narrower than NARROW_WIDTH columns the sparklines and GPU memory give way to the numbers."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.notifications import SeverityLevel
from textual.widgets import DataTable, Label, Static

from workbench.display import server_where, sparkline
from workbench.tui.base import WorkbenchScreen
from workbench.tui.polling import PollingScreenMixin
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background

STATE_STYLE = {
    "ready": "bold green",
    "starting": "yellow",
    "failing": "bold red",
    "failed": "bold red",
    "exited": "red",
    "stopped": "dim",
    "unknown": "dim italic",
    "timeout": "red",
}


def state_text(state: str, stale: bool = False) -> Text:
    if stale:
        return Text(f"{state} (stale)", style="dim italic")
    return Text(state, style=STATE_STYLE.get(state, ""))


def gpu_text(gpus) -> str:
    if not gpus:
        return "-"
    return " ".join(f"{g.index}:{(g.used_mib or 0) / 1024:.0f}/{(g.total_mib or 0) / 1024:.0f}G" for g in gpus)


#: Why this accept length is not the one Diagnose shows: two windows over different traffic.
ACCEPT_WINDOW = (
    "accept len (log): the server's own decode log, last window over whatever traffic it had; "
    "Diagnose and `server measure` measure with the protocol (cache flushed, fixed prompts)."
)


class ServersScreen(PollingScreenMixin, WorkbenchScreen):
    CSS_PATH = "servers.tcss"
    AUTO_FOCUS = "#servers"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "refresh", "Refresh", id="servers.refresh"),
        Binding("ctrl+o", "open", "Open", id="servers.open"),
        Binding("ctrl+l", "launch", "Launch", id="servers.launch"),
        Binding("ctrl+k", "stop", "Stop", id="servers.stop"),
        Binding("ctrl+a", "toggle_all", "All/active", id="servers.all"),
    ]

    def __init__(self, poll_interval: float | None = None):
        super().__init__()
        if poll_interval is not None:
            self.poll_interval = poll_interval
        self.show_all = False
        self.statuses: list = []

    def compose_body(self):
        with Vertical(id="servers-body"):
            yield Label("Hosts", classes="title")
            hosts = Table(id="hosts", cursor_type="row", zebra_stripes=True)
            hosts.add_columns("host", "kind", "address", "GPUs (used/total)", "state")
            yield hosts
            yield Label("Servers", classes="title")
            yield Table(id="servers", cursor_type="row", zebra_stripes=True)
            yield Static("", id="servers-note", markup=False)

    def on_mount(self) -> None:
        self.start_polling()

    def on_screen_resume(self) -> None:
        self.poll_now()

    def _fit_width(self, width: int) -> None:
        narrow = self.has_class("-narrow")
        super()._fit_width(width)
        if narrow != self.has_class("-narrow") and self.statuses:
            self._fill_servers()

    # -- polling ----------------------------------------------------------------------------------
    def poll(self):
        wb = self.app.wb
        hosts = wb.hosts()
        if self.show_all:
            ids = [r.id for r in wb.servers()]
            statuses = wb.server_status(ids) if ids else []
        else:
            statuses = wb.server_status()
        gpus = {h.name: wb.host_gpus(h.name) for h in hosts}
        return hosts, statuses, gpus

    def render_poll(self, result) -> None:
        hosts, statuses, gpus = result
        self.statuses = statuses
        ht = self.query_one("#hosts", DataTable)
        ht.clear()
        stale_hosts = {s.host for s in statuses if s.stale}
        for h in hosts:
            state = (
                "unreachable"
                if h.name in stale_hosts
                else ("ok" if gpus.get(h.name) or any(s.host == h.name for s in statuses) else "-")
            )
            ht.add_row(
                h.name,
                h.kind,
                h.address or "-",
                gpu_text(gpus.get(h.name)),
                Text(state, style="red" if state == "unreachable" else ""),
                key=h.name,
            )
        self._fill_servers()
        note = (
            "no servers running: ctrl+l opens the Launch screen"
            if not statuses
            else f"{len(statuses)} server(s); ctrl+o opens the highlighted one, ctrl+k stops it.  {ACCEPT_WINDOW}"
        )
        self.query_one("#servers-note", Static).update(note)

    def _fill_servers(self) -> None:
        st = self.query_one("#servers", Table)
        keep = st.cursor_key
        st.clear(columns=True)
        wide = not self.has_class("-narrow")
        st.add_columns(
            "id",
            "profile",
            "host",
            "state",
            *(["uptime"] if wide else []),
            "accept len (log)",
            *([""] if wide else []),
            "tok/s",
            *(["", "GPU mem"] if wide else []),
            "stage / problem",
        )
        for s in self.statuses:
            m = s.metrics or {}
            al, gt = m.get("accept_len"), m.get("gen_throughput")
            up = "-" if not s.uptime_s else time.strftime("%H:%M:%S", time.gmtime(s.uptime_s))
            problem = (
                (s.failure or {}).get("class")
                or (s.error if s.stale else "")
                or (s.stage if s.state == "starting" else "")
            )
            cells = [
                str(s.id),
                s.profile,
                server_where(s),
                state_text(s.state, s.stale),
                *([up] if wide else []),
                f"{al:.2f}" if al is not None else "-",
                *([sparkline(s.series.get("accept_len", []))] if wide else []),
                f"{gt:.1f}" if gt is not None else "-",
                *([sparkline(s.series.get("gen_throughput", [])), gpu_text(s.gpus)] if wide else []),
                Text(problem or "", style="red" if s.failure else "dim"),
            ]
            st.add_row(*cells, key=str(s.id))
        if self.statuses and (keep is None or not st.move_to_key(keep)):
            st.move_cursor(row=0)

    # -- actions ----------------------------------------------------------------------------------
    def selected(self) -> int | None:
        key = self.query_one("#servers", Table).cursor_key
        return int(key) if key is not None and key.isdigit() else None

    @on(DataTable.RowHighlighted, "#servers")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        sid = self.selected()
        if sid is not None and sid != self.app.selected_server:
            host = next((s.host for s in self.statuses if s.id == sid), None)
            self.app.select_server(sid, host)

    def action_refresh(self) -> None:
        self.poll_now()

    def action_toggle_all(self) -> None:
        self.show_all = not self.show_all
        self.poll_now()

    def action_open(self) -> None:
        sid = self.selected()
        if sid is None:
            self.notify("no server selected", severity="warning")
            return
        self.app.select_server(sid, next((s.host for s in self.statuses if s.id == sid), None))
        self.app.switch_mode("server")

    @on(DataTable.RowSelected, "#servers")
    def _row_selected(self, _event) -> None:
        self.action_open()

    def action_launch(self) -> None:
        self.app.switch_mode("launch")

    def action_stop(self) -> None:
        sid = self.selected()
        if sid is None:
            self.notify("no server selected", severity="warning")
            return
        try:
            plan = self.app.wb.stop_plan(sid)
        except Exception as exc:
            self.app.report(exc, what="stop")
            return
        self.app.confirm(plan, lambda: self.stop_server(sid))

    @background("servers-stop", done="_stopped", what="stop server {sid}", exclusive=False)
    def stop_server(self, sid: int) -> tuple[str, SeverityLevel]:
        res = self.app.wb.server_stop(sid, confirm=True)
        return f"server {sid}: {res.message}", "information" if res.gpus_idle is not False else "warning"

    def _stopped(self, note: tuple[str, SeverityLevel]) -> None:
        text, severity = note
        self.notify(text, severity=severity)
        self.poll_now()


SPEC = ScreenSpec("servers", "Dashboard", "f5", ServersScreen, order=40)
