"""Notebook widgets for servers, on the same ``Workbench`` methods as the TUI and the CLI.

from workbench.notebook import ServersWidget, LaunchWidget, LogsWidget
LaunchWidget(wb, profile="kimi-debug")     # command, diff, checks; launch with arm-then-confirm
ServersWidget(wb)                          # hosts and servers: state, accept length, tok/s, GPUs; stop
LogsWidget(wb, server_id=3)                # the log with milestones and failures marked
"""

from __future__ import annotations

import html
import time

import ipywidgets as w

from workbench.errors import WorkbenchError
from workbench.notebook._arm import ArmButton

STATE_COLOUR = {
    "ready": "#080",
    "starting": "#a60",
    "failing": "#c00",
    "failed": "#c00",
    "exited": "#c00",
    "stopped": "#777",
    "stopping": "#a60",
    "unknown": "#777",
}
BARS = "▁▂▃▄▅▆▇█"


def _wb(wb, workspace):
    if wb is None:
        from workbench.api import Workbench

        wb = Workbench.open(workspace)
    return wb


def _err(text: str) -> str:
    return f"<b style='color:#c00'>{html.escape(text)}</b>"


def _spark(values, width: int = 16) -> str:
    from workbench.display import sparkline

    return sparkline(values, width)


def _table(headers: list, rows: list) -> str:
    head = "".join(f"<th style='text-align:left;padding:0 8px'>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='padding:0 8px'>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class ServersWidget(w.VBox):
    """Hosts and servers; Refresh runs one status round trip per host; Stop is arm-then-confirm."""

    def __init__(self, wb=None, *, workspace: str | None = None, show_all: bool = False):
        self.wb = _wb(wb, workspace)
        self.statuses: list = []
        self.show_all = w.Checkbox(value=show_all, description="finished too")
        self.refresh_button = w.Button(description="Refresh")
        self.hosts_view = w.HTML()
        self.table = w.HTML()
        self.select = w.Dropdown(options=[], description="server")
        self.error_line = w.HTML()
        self.stop_button = ArmButton("Stop", self._stop_plan, self._stop, on_error=self._error)
        self.result = w.HTML()
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.show_all.observe(lambda _c: self.refresh(), names="value")
        super().__init__(
            [
                w.HBox([self.refresh_button, self.show_all]),
                self.error_line,
                self.hosts_view,
                self.table,
                w.HBox([self.select]),
                self.stop_button,
                self.result,
            ]
        )
        self.refresh()

    def _error(self, text: str) -> None:
        self.error_line.value = _err(text)

    def refresh(self) -> None:
        self.error_line.value = ""
        try:
            if self.show_all.value:
                ids = [r.id for r in self.wb.servers()]
                self.statuses = self.wb.server_status(ids) if ids else []
            else:
                self.statuses = self.wb.server_status()
            hosts = self.wb.hosts()
        except WorkbenchError as exc:
            self._error(str(exc))
            return
        gpus = {h.name: self.wb.host_gpus(h.name) for h in hosts}
        self.hosts_view.value = _table(
            ["host", "kind", "address", "GPUs used/total MiB"],
            [
                [
                    html.escape(h.name),
                    h.kind,
                    html.escape(h.address or "-"),
                    " ".join(f"{g.index}: {g.used_mib:g}/{g.total_mib:g}" for g in gpus.get(h.name, [])) or "-",
                ]
                for h in hosts
            ],
        )
        rows = []
        for s in self.statuses:
            m = s.metrics or {}
            state = s.state + (" (stale)" if s.stale else "")
            colour = "#777" if s.stale else STATE_COLOUR.get(s.state, "#000")
            up = time.strftime("%H:%M:%S", time.gmtime(s.uptime_s)) if s.uptime_s else "-"
            problem = (s.failure or {}).get("class") or (s.stage if s.state == "starting" else "")
            rows.append(
                [
                    str(s.id),
                    html.escape(s.profile),
                    html.escape(s.host),
                    f"<b style='color:{colour}'>{html.escape(state)}</b>",
                    up,
                    "-" if m.get("accept_len") is None else f"{m['accept_len']:.2f}",
                    _spark(s.series.get("accept_len", [])),
                    "-" if m.get("gen_throughput") is None else f"{m['gen_throughput']:.1f}",
                    _spark(s.series.get("gen_throughput", [])),
                    " ".join(f"{g.index}:{(g.used_mib or 0) / 1024:.0f}G" for g in s.gpus) or "-",
                    html.escape(problem or ""),
                ]
            )
        self.table.value = (
            _table(
                [
                    "id",
                    "profile",
                    "host",
                    "state",
                    "uptime",
                    "accept len",
                    "",
                    "tok/s",
                    "",
                    "GPU mem",
                    "stage / problem",
                ],
                rows,
            )
            if rows
            else "<i>no servers</i>"
        )
        self.select.options = [(f"{s.id} {s.profile}", s.id) for s in self.statuses]

    def _stop_plan(self):
        if self.select.value is None:
            raise WorkbenchError("pick a server to stop")
        return self.wb.stop_plan(self.select.value)

    def _stop(self):
        res = self.wb.server_stop(self.select.value, confirm=True)
        self.result.value = html.escape(f"server {res.id}: {res.message} (signals: {', '.join(res.signals) or 'none'})")
        self.refresh()
        return res


class LaunchWidget(w.VBox):
    """Pick a profile, Check (command, diff, every problem), then Launch (arm-then-confirm)."""

    def __init__(
        self,
        wb=None,
        *,
        workspace: str | None = None,
        profile: str | None = None,
        sglang_version: str | None = None,
    ):
        self.wb = _wb(wb, workspace)
        self.preview = None
        self.record = None
        self.sglang_version = sglang_version
        names = [p.name for p in self.wb.profiles()]
        self.profile = w.Dropdown(
            options=names, value=profile if profile in names else (names[0] if names else None), description="profile"
        )
        self.check_button = w.Button(description="Check")
        self.view = w.HTML()
        self.error_line = w.HTML()
        self.launch_button = ArmButton("Launch", self._plan, self._launch, on_error=self._error)
        self.result = w.HTML()
        self.check_button.on_click(lambda _b: self.check())
        self.profile.observe(lambda _c: self.check(), names="value")
        super().__init__(
            [w.HBox([self.profile, self.check_button]), self.error_line, self.view, self.launch_button, self.result]
        )
        if self.profile.value:
            self.check()

    def _error(self, text: str) -> None:
        self.error_line.value = _err(text)

    def check(self):
        self.error_line.value = ""
        try:
            p = self.preview = self.wb.launch_preview(self.profile.value, self.sglang_version)
        except WorkbenchError as exc:
            self._error(str(exc))
            return None
        findings = _table(
            ["severity", "code", "problem", "fix"],
            [
                [
                    f"<b style='color:{'#c00' if f.severity == 'error' else '#a60' if f.severity == 'warning' else '#777'}'>"
                    f"{f.severity}</b>",
                    html.escape(f.code),
                    html.escape(f.message),
                    html.escape(f.fix),
                ]
                for f in p.findings
            ],
        )
        self.view.value = (
            f"<b>on {html.escape(p.host)}, SGLang {html.escape(p.version or 'unknown')}</b>"
            f"<pre style='white-space:pre-wrap'>{html.escape(p.display)}</pre>"
            f"<b>against the last launch</b><pre>{html.escape(chr(10).join(p.diff))}</pre>"
            f"{findings}" + "".join(f"<div style='color:#a60'>warning: {html.escape(x)}</div>" for x in p.warnings)
        )
        return p

    def _plan(self):
        if self.preview is None or self.preview.profile != self.profile.value:
            self.check()
        if self.preview is None:
            raise WorkbenchError("check the profile first")
        if not self.preview.ok:
            raise WorkbenchError(f"{self.preview.profile}: fix the errors before launching")
        return self.wb.launch_plan(self.preview)

    def _launch(self):
        rec = self.record = self.wb.launch(self.preview.profile, confirm=True, preview=self.preview)
        self.result.value = html.escape(f"server {rec.id} started: pid {rec.pid} on {rec.host}, log {rec.log}")
        return rec


class LogsWidget(w.VBox):
    """The end of a server's log (fetched by a status refresh: one round trip), milestones in
    blue, failures in red, with the startup progress and the failure's fix."""

    def __init__(self, wb=None, server_id: int | None = None, *, workspace: str | None = None, lines: int = 200):
        self.wb = _wb(wb, workspace)
        if server_id is None:
            servers = self.wb.servers()
            server_id = servers[-1].id if servers else None
        self.server_id = server_id
        self.max_lines = lines
        self.refresh_button = w.Button(description="Refresh")
        self.summary = w.HTML()
        self.log_view = w.HTML()
        self.refresh_button.on_click(lambda _b: self.refresh())
        super().__init__([w.HBox([self.refresh_button]), self.summary, self.log_view])
        self.refresh()

    def refresh(self):
        if self.server_id is None:
            self.summary.value = "<i>no server</i>"
            return None
        try:
            s = self.wb.server_status([self.server_id])[0]
        except WorkbenchError as exc:
            self.summary.value = _err(str(exc))
            return None
        marks = {e["line"]: e for e in self.wb.server_events(self.server_id)}
        out = []
        for n, text in self.wb.server_lines(self.server_id)[-self.max_lines :]:
            e = marks.get(n)
            colour = (
                "#c00"
                if e and e["kind"] == "failure"
                else "#06c"
                if e
                else "#080"
                if "Decode batch" in text
                else "#000"
            )
            weight = "bold" if e else "normal"
            out.append(f"<span style='color:{colour};font-weight:{weight}'>{html.escape(text)}</span>")
        self.log_view.value = "<pre style='max-height:30em;overflow:auto;font-size:85%'>" + "\n".join(out) + "</pre>"
        fail = s.failure
        self.summary.value = (
            f"<b>server {s.id} {html.escape(s.profile)}: {html.escape(s.state)}</b> "
            f"({html.escape(', '.join(s.progress) or s.stage)})"
            + (
                f"<br>{_err(fail.get('class', '') + ': ' + fail.get('text', ''))}"
                f"<br>fix: {html.escape(fail.get('hint', ''))}"
                if fail
                else ""
            )
        )
        return s
