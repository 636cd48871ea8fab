"""Configs: tracked files, each one's history, a diff view, and revert with one key and a confirm.

Looking is enough to notice an edit made outside the workbench: it is stored as a version first.
"""

from __future__ import annotations

import datetime as dt
from typing import cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Label, Static

from workbench.errors import WorkbenchError
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.diff import DiffView
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background


class ConfigsScreen(WorkbenchScreen):
    CSS_PATH = "configs.tcss"
    AUTO_FOCUS = "#versions"
    BINDINGS = [
        Binding("r", "revert", "Revert", id="configs.revert", tooltip="revert to the selected version"),
        Binding("m", "mark", "Mark base", id="configs.mark", tooltip="mark the selected version as the diff base"),
        Binding("ctrl+r", "refresh", "Refresh", id="configs.refresh"),
        Binding("ctrl+t", "focus_track", "Track", id="configs.track", tooltip="track another config file"),
    ]

    def __init__(self):
        super().__init__()
        self.tracked: list = []
        self.versions: list = []
        self.location: str | None = None
        self.base: int | None = None  # marked version number for diffs

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="track-row"):
            yield Input(placeholder="path of a config.json to track, then Enter", id="track-path", compact=True)
        with Horizontal(id="configs-body"):
            with Vertical(id="files-pane"):
                yield Label("Tracked files", classes="title")
                files: Table[str] = Table(id="files", cursor_type="row")
                files.add_columns("file", "vers", "state")
                yield files
            with Vertical(id="history-pane"):
                yield Label("History", classes="title", id="history-title")
                hist: Table[str] = Table(id="versions", cursor_type="row", zebra_stripes=True)
                hist.add_columns("", "version", "time", "sha256", "bytes", "reason")
                yield hist
                yield Label("Diff", classes="title", id="diff-title")
                with VerticalScroll(id="diff-pane"):
                    yield DiffView("", id="diff")

    def on_mount(self) -> None:
        self.action_refresh()

    # -- loading ---------------------------------------------------------------------------------
    def action_refresh(self) -> None:
        self.load_files()

    @background("configs", done="_show_files", what="")
    def load_files(self) -> list:
        return self.app.wb.config_list()

    def _show_files(self, tracked) -> None:
        self.tracked = tracked
        table = self.query_one("#files", DataTable)
        keep = self.location
        table.clear()
        for t in tracked:
            state = {"clean": "ok", "external edit stored": "edited"}.get(t.state, t.state.split(":")[0])
            table.add_row(_short(t.location), str(t.versions), state, key=t.location)
        if tracked:
            locs = [t.location for t in tracked]
            row = locs.index(keep) if keep in locs else 0
            table.move_cursor(row=row)
            self.select(locs[row])
        else:
            self.query_one("#diff", Static).update("No tracked configs yet: type a path above (ctrl+t).")

    def select(self, location: str) -> None:
        if location != self.location:
            self.base = None
        self.location = location
        self.load_history(location)

    @background("configs-history", done="_show_history", what="")
    def load_history(self, location: str):
        return self.app.wb.config_history(location)

    def _show_history(self, hist) -> None:
        self.versions = hist.versions
        self.query_one("#history-title", Label).update(f"History of {_short(hist.config.location)}")
        table = self.query_one("#versions", DataTable)
        table.clear()
        for v in reversed(hist.versions):  # newest first
            mark = "◆" if v.number == self.base else ""
            when = dt.datetime.fromtimestamp(v.ts).strftime("%Y-%m-%d %H:%M:%S")
            table.add_row(mark, f"v{v.number}", when, v.sha256[:12], str(v.size), v.reason, key=str(v.number))
        if hist.versions:
            table.move_cursor(row=0)
            self._show_diff(hist.versions[-1].number)

    # -- selection and diff ------------------------------------------------------------------------
    @on(DataTable.RowHighlighted, "#files")
    def _file_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value != self.location:
            self.select(cast(str, event.row_key.value))

    @on(DataTable.RowHighlighted, "#versions")
    def _version_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None:
            self._show_diff(int(cast(str, event.row_key.value)))

    def selected_version(self) -> int | None:
        table = self.query_one("#versions", DataTable)
        if not self.versions or table.row_count == 0:
            return None
        return self.versions[len(self.versions) - 1 - table.cursor_row].number

    def _show_diff(self, number: int) -> None:
        if self.location is None:
            return
        a = self.base if self.base is not None else (number - 1 if number > 1 else None)
        title = self.query_one("#diff-title", Label)
        diff_widget = self.query_one("#diff", Static)
        if a is None:
            title.update(f"v{number}: the first version")
            diff_widget.update(Text(self.app.wb.config_show(self.location, number).text))
            return
        try:
            diff = self.app.wb.config_diff(self.location, a, number)
        except WorkbenchError as exc:
            diff_widget.update(str(exc))
            return
        title.update(f"Diff v{a} -> v{number}" + ("  (marked base)" if self.base is not None else ""))
        if diff.diff:
            self.query_one("#diff", DiffView).show_diff(diff.diff)
        else:
            diff_widget.update("identical")

    def action_mark(self) -> None:
        number = self.selected_version()
        if number is None:
            return
        self.base = None if self.base == number else number
        table = self.query_one("#versions", DataTable)
        for v in self.versions:
            table.update_cell(str(v.number), table.ordered_columns[0].key, "◆" if v.number == self.base else "")
        self._show_diff(number)

    # -- actions -------------------------------------------------------------------------------------
    def action_revert(self) -> None:
        number = self.selected_version()
        if self.location is None or number is None:
            self.notify("select a version to revert to", severity="warning")
            return
        try:
            plan = self.app.wb.config_revert_plan(self.location, number)
        except WorkbenchError as exc:
            self.app.report(exc)
            return
        self.app.confirm(plan, lambda: self.revert(cast(str, self.location), number))

    @background("configs-write", done="_reverted", what="", exclusive=False)
    def revert(self, location: str, number: int) -> str:
        change = self.app.wb.config_revert(location, number, confirm=True)
        return f"reverted to v{number}: now v{change.version.number}"

    def _reverted(self, note: str) -> None:
        self.notify(note)
        self.load_files()

    def action_focus_track(self) -> None:
        self.query_one("#track-path", Input).focus()

    @on(Input.Submitted, "#track-path")
    def _track(self, event: Input.Submitted) -> None:
        path = event.value.strip()
        if path:
            self.track(path)

    @background("configs-write", done="_tracked", what="", exclusive=False)
    def track(self, path: str):
        return self.app.wb.config_track(path)

    def _tracked(self, t) -> None:
        self.location = t.location
        self.notify(f"tracking {t.location}")
        self.query_one("#track-path", Input).value = ""
        self.query_one("#files", DataTable).focus()
        self.load_files()


def _short(location: str) -> str:
    """'local:/data/eagle3/output/4/config.json' -> 'eagle3/output/4/config.json'; hosts stay visible."""
    host, _, path = location.partition(":")
    tail = "/".join(path.split("/")[-3:])
    return tail if host == "local" else f"{host}:{tail}"


SPEC = ScreenSpec("configs", "Configs", "f4", ConfigsScreen, order=30)
