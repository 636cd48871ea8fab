"""``ConfigsWidget``: tracked configs in a notebook: history, diff between any two versions, and
revert as an arm-then-confirm button (on the same ``Workbench.config_*`` methods).

    from workbench.notebook import ConfigsWidget
    ConfigsWidget(wb, path="/data/eagle3/output/4/config.json")
"""

from __future__ import annotations

import datetime as dt
import html

import ipywidgets as w

from workbench.errors import WorkbenchError
from workbench.notebook._arm import ArmButton


class ConfigsWidget(w.VBox):
    def __init__(self, wb=None, *, workspace: str | None = None, path: str = ""):
        if wb is None:
            from workbench.api import Workbench

            wb = Workbench.open(workspace)
        self.wb = wb
        self.error: str | None = None
        self.history = None
        self.path = w.Text(
            value=path, description="config.json", placeholder="path to track", layout=w.Layout(width="70%")
        )
        self.track_button = w.Button(description="Track", button_style="primary")
        self.refresh_button = w.Button(description="Refresh")
        self.files = w.Dropdown(options=[], description="tracked", layout=w.Layout(width="100%"))
        self.table = w.HTML()
        self.diff_a = w.Dropdown(options=[], description="diff from")
        self.diff_b = w.Dropdown(options=[], description="to")
        self.diff = w.HTML()
        self.revert_to = w.Dropdown(options=[], description="revert to")
        self.revert_button = ArmButton("Revert", self._revert_plan, self._revert, on_error=self._show_error)
        self.error_line = w.HTML()
        self.status = w.HTML()
        self.track_button.on_click(lambda _b: self.track())
        self.refresh_button.on_click(lambda _b: self.refresh())
        self._muted = False
        self.files.observe(lambda _c: None if self._muted else self.show_history(), names="value")
        self.diff_a.observe(lambda _c: None if self._muted else self.show_diff(), names="value")
        self.diff_b.observe(lambda _c: None if self._muted else self.show_diff(), names="value")
        super().__init__(
            [
                w.HBox([self.path, self.track_button, self.refresh_button]),
                self.error_line,
                self.files,
                self.table,
                w.HBox([self.diff_a, self.diff_b]),
                self.diff,
                w.HBox([self.revert_to]),
                self.revert_button,
                self.status,
            ]
        )
        if path:
            self.track()
        else:
            self.refresh()

    def _show_error(self, message: str) -> None:
        self.error = message
        self.error_line.value = f'<span style="color:#c62828;font-weight:bold">{html.escape(message)}</span>'

    def _clear_error(self) -> None:
        self.error, self.error_line.value = None, ""

    def track(self):
        try:
            t = self.wb.config_track(self.path.value.strip())
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return None
        self._clear_error()
        self.refresh(select=t.location)
        return t

    def refresh(self, select: str | None = None) -> None:
        try:
            tracked = self.wb.config_list()
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return
        current = select or self.files.value
        options = [(f"{t.location} ({t.versions} versions, {t.state})", t.location) for t in tracked]
        self._muted = True
        try:
            self.files.options = options
            locs = [o[1] for o in options]
            self.files.value = current if current in locs else (locs[0] if locs else None)
        finally:
            self._muted = False
        self.show_history()

    def show_history(self) -> None:
        loc = self.files.value
        if loc is None:
            self.table.value = "<i style='color:#666'>No tracked configs yet.</i>"
            return
        try:
            self.history = hist = self.wb.config_history(loc)
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return
        rows = "".join(
            f"<tr><td>v{v.number}</td><td>{dt.datetime.fromtimestamp(v.ts):%Y-%m-%d %H:%M:%S}</td>"
            f"<td><code>{v.sha256[:12]}</code></td><td>{v.size}</td><td>{html.escape(v.reason)}</td></tr>"
            for v in reversed(hist.versions)
        )
        self.table.value = (
            f"<table><tr><th>version</th><th>time</th><th>sha256</th><th>bytes</th><th>reason</th></tr>{rows}</table>"
        )
        opts = [(f"v{v.number} ({v.reason[:40]})", v.number) for v in hist.versions]
        n = len(opts)
        self._muted = True
        try:
            for dd, value in (
                (self.diff_a, n - 1 if n > 1 else n),
                (self.diff_b, n),
                (self.revert_to, n - 1 if n > 1 else n),
            ):
                dd.options = opts
                dd.value = value if n else None
        finally:
            self._muted = False
        self.revert_button.disarm()
        self.show_diff()

    def show_diff(self) -> None:
        loc, a, b = self.files.value, self.diff_a.value, self.diff_b.value
        if loc is None or a is None or b is None:
            self.diff.value = ""
            return
        try:
            d = self.wb.config_diff(loc, a, b)
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return
        self.diff.value = diff_html(d.diff) if d.diff else f"<i>v{a} and v{b} are identical</i>"

    def _revert_plan(self):
        return self.wb.config_revert_plan(self.files.value, self.revert_to.value)

    def _revert(self):
        change = self.wb.config_revert(self.files.value, self.revert_to.value, confirm=True)
        self.status.value = f"reverted: now v{change.version.number} ({html.escape(change.version.reason)})"
        self.refresh()
        return change


def diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        colour = (
            "#2e7d32"
            if line.startswith("+") and not line.startswith("+++")
            else "#c62828"
            if line.startswith("-") and not line.startswith("---")
            else "#1565c0"
            if line.startswith("@@")
            else "inherit"
        )
        lines.append(f"<span style='color:{colour}'>{html.escape(line)}</span>")
    return "<pre style='max-height:24em;overflow:auto'>" + "\n".join(lines) + "</pre>"
