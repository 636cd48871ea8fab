"""Configs: tracked files, each one's history, a diff view, and revert with one key and a confirm.

Looking is enough to notice an edit made outside the workbench: it is stored as a version first.
The screen follows the journal: a version written elsewhere (a fix on the Doctor or Diagnose
screen, the CLI) shows without a refresh. ``r`` and ``m`` act on the history table only.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Label, Static

from workbench.errors import WorkbenchError
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.diff import DiffView
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background


class VersionsTable(Table):
    """The history: its letters act on the highlighted version."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "screen.revert", "Revert", id="configs.revert", tooltip="revert to the highlighted version"),
        Binding(
            "m", "screen.mark", "Mark base", id="configs.mark", tooltip="mark the highlighted version as the diff base"
        ),
    ]


class ConfigsScreen(WorkbenchScreen):
    CSS_PATH = "configs.tcss"
    KEYS_OF = (VersionsTable,)
    AUTO_FOCUS = "#versions"
    BINDINGS: ClassVar[list[BindingType]] = [
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
            yield Label("Track", classes="field-label")
            yield Input(
                placeholder="a config.json (local path or HOST:/path), then Enter", id="track-path", compact=True
            )
        with Horizontal(id="configs-body"):
            with Vertical(id="files-pane"):
                yield Label("Tracked files", classes="title")
                files: Table[str] = Table(id="files", cursor_type="row")
                files.add_columns("file", "vers", "state")
                yield files
            with Vertical(id="history-pane"):
                yield Label("History", classes="title", id="history-title")
                yield VersionsTable(id="versions", cursor_type="row", zebra_stripes=True)
                yield Label("Diff", classes="title", id="diff-title")
                with VerticalScroll(id="diff-pane"):
                    yield DiffView("", id="diff")

    def on_mount(self) -> None:
        self.action_refresh()

    def follow_journal(self) -> None:
        self.load_files()

    def _fit_width(self, width: int) -> None:
        narrow = self.has_class("-narrow")
        super()._fit_width(width)
        if narrow != self.has_class("-narrow") and self.versions:
            self._fill_versions()  # the narrow history leaves out sha256 and bytes

    # -- loading ---------------------------------------------------------------------------------
    def action_refresh(self) -> None:
        self.load_files()

    @background("configs", done="_show_files", what="")
    def load_files(self) -> list:
        return self.app.wb.config_list()

    def _show_files(self, tracked) -> None:
        self.tracked = tracked
        table = self.query_one("#files", Table)
        keep = self.location
        table.clear()
        for t in tracked:
            state = {"clean": "ok", "external edit stored": "edited"}.get(t.state, t.state.split(":")[0])
            table.add_row(_short(t.location), str(t.versions), state, key=t.location)
        if tracked:
            locs = [t.location for t in tracked]
            location = keep if keep is not None and keep in locs else locs[0]
            if not table.move_to_key(location) and table.row_count:
                table.move_cursor(row=0)
            self.select(location, again=True)
        else:
            self.query_one("#diff", Static).update("No tracked configs yet: type a path above (ctrl+t).")

    def select(self, location: str, again: bool = False) -> None:
        if location == self.location and not again:
            return
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
        self._fill_versions()
        if hist.versions:
            self._show_diff(hist.versions[-1].number)

    def _fill_versions(self) -> None:
        """Newest first; the reason before the hashes, which a narrow screen leaves out (the diff's
        title names the highlighted version in full)."""
        table = self.query_one("#versions", VersionsTable)
        keep = table.cursor_key
        table.clear(columns=True)
        wide = not self.has_class("-narrow")
        table.add_columns("", "version", "when", "reason", *(["sha256", "bytes"] if wide else []))
        for v in reversed(self.versions):
            mark = "◆" if v.number == self.base else ""
            when = dt.datetime.fromtimestamp(v.ts).strftime("%Y-%m-%d %H:%M" + (":%S" if wide else ""))
            extra = [v.sha256[:12], str(v.size)] if wide else []
            table.add_row(mark, f"v{v.number}", when, v.reason, *extra, key=str(v.number))
        if self.versions and (keep is None or not table.move_to_key(keep)):
            table.move_cursor(row=0)

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
        key = self.query_one("#versions", VersionsTable).cursor_key
        return int(key) if key is not None else None

    def _show_diff(self, number: int) -> None:
        if self.location is None:
            return
        a = self.base if self.base is not None else (number - 1 if number > 1 else None)
        title = self.query_one("#diff-title", Label)
        diff_widget = self.query_one("#diff", Static)
        version = next((v for v in self.versions if v.number == number), None)
        about = (
            f"  ({dt.datetime.fromtimestamp(version.ts).strftime('%Y-%m-%d %H:%M:%S')}, sha256 "
            f"{version.sha256[:12]}, {version.size} bytes: {version.reason})"
            if version is not None
            else ""
        )
        if a is None:
            title.update(f"v{number}: the first version{about}")
            diff_widget.update(Text(self.app.wb.config_show(self.location, number).text))
            return
        try:
            diff = self.app.wb.config_diff(self.location, a, number)
        except WorkbenchError as exc:
            diff_widget.update(str(exc))
            return
        title.update(f"Diff v{a} -> v{number}" + ("  (marked base)" if self.base is not None else "") + about)
        if diff.diff:
            self.query_one("#diff", DiffView).show_diff(diff.diff)
        else:
            diff_widget.update("identical")

    def action_mark(self) -> None:
        number = self.selected_version()
        if number is None:
            return
        self.base = None if self.base == number else number
        table = self.query_one("#versions", VersionsTable)
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
        self.query_one("#track-path", Input).value = ""  # the keys stay here: tab goes to the tables
        self.load_files()


def _short(location: str) -> str:
    """'local:/data/eagle3/output/4/config.json' -> 'eagle3/output/4/config.json'; hosts stay visible."""
    host, _, path = location.partition(":")
    tail = "/".join(path.split("/")[-3:])
    return tail if host == "local" else f"{host}:{tail}"


SPEC = ScreenSpec("configs", "Configs", "f4", ConfigsScreen, order=30)
