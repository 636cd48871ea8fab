"""The Dashboard: hosts and servers with state, uptime, accept length and tokens/s (with
sparklines) and GPU memory. Stale and unreachable states are shown as such. One remote round
trip per host per refresh, in a worker; refreshes pause while a dialog is open."""

from __future__ import annotations

import time

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.containers import Vertical
from textual.notifications import SeverityLevel
from textual.widgets import DataTable, Label, Static

from workbench.display import sparkline
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
    BINDINGS = [
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
            table = Table(id="servers", cursor_type="row", zebra_stripes=True)
            table.add_columns(
                "id",
                "profile",
                "host",
                "state",
                "uptime",
                "accept len (log)",
                "",
                "tok/s",
                "",
                "GPU mem",
                "stage / problem",
            )
            yield table
            yield Static("", id="servers-note", markup=False)

    def on_mount(self) -> None:
        self.start_polling()

    def on_screen_resume(self) -> None:
        self.poll_now()

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
        st = self.query_one("#servers", DataTable)
        keep = st.cursor_row
        st.clear()
        for s in statuses:
            m = s.metrics or {}
            al, gt = m.get("accept_len"), m.get("gen_throughput")
            up = "-" if not s.uptime_s else time.strftime("%H:%M:%S", time.gmtime(s.uptime_s))
            problem = (
                (s.failure or {}).get("class")
                or (s.error if s.stale else "")
                or (s.stage if s.state == "starting" else "")
            )
            st.add_row(
                str(s.id),
                s.profile,
                s.host,
                state_text(s.state, s.stale),
                up,
                f"{al:.2f}" if al is not None else "-",
                sparkline(s.series.get("accept_len", [])),
                f"{gt:.1f}" if gt is not None else "-",
                sparkline(s.series.get("gen_throughput", [])),
                gpu_text(s.gpus),
                Text(problem or "", style="red" if s.failure else "dim"),
                key=str(s.id),
            )
        if statuses and keep is not None:
            st.move_cursor(row=min(keep, len(statuses) - 1))
        note = (
            "no servers running: ctrl+l opens the Launch screen"
            if not statuses
            else f"{len(statuses)} server(s); ctrl+o opens the selected one, ctrl+k stops it.  {ACCEPT_WINDOW}"
        )
        self.query_one("#servers-note", Static).update(note)

    # -- actions ----------------------------------------------------------------------------------
    def selected(self) -> int | None:
        st = self.query_one("#servers", DataTable)
        if not self.statuses or st.cursor_row is None or st.cursor_row >= len(self.statuses):
            return None
        return self.statuses[st.cursor_row].id

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
        self.app.selected_server = sid
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
