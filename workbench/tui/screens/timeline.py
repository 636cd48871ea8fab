"""Timeline: every launch, config version, measurement and finding in time order.

Selecting an entry shows its payload and the draft config that was live for it (the version its
server loaded at launch), which answers "what was the config when accept length was 1.12?".
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Label, Select, Static

from workbench.display import collapse_runs, payload_lines
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background

CATEGORIES = ("launch", "config", "measurement", "finding", "other")


class EntriesTable(Table):
    """Timeline rows, a colour per category from tcss (a config change is news, not an error)."""

    DEFAULT_CSS = """
    EntriesTable > .timeline--launch { color: $text-primary; text-style: bold; }
    EntriesTable > .timeline--config { color: $text-secondary; }
    EntriesTable > .timeline--measurement { color: $text-success; }
    EntriesTable > .timeline--finding { color: $text-warning; }
    EntriesTable > .timeline--other { color: $text-muted; }
    """
    COMPONENT_CLASSES = {f"timeline--{c}" for c in CATEGORIES}

    def category(self, name: str) -> Text:
        return Text(
            name, style=self.get_component_rich_style(f"timeline--{name}", partial=True) if name in CATEGORIES else ""
        )


class TimelineScreen(WorkbenchScreen):
    CSS_PATH = "timeline.tcss"
    AUTO_FOCUS = "#entries"
    BINDINGS = [
        Binding("ctrl+r", "refresh", "Refresh", id="timeline.refresh"),
        Binding("ctrl+f", "focus_filter", "Filter", id="timeline.filter"),
    ]

    def __init__(self):
        super().__init__()
        self.entries: list = []

    def compose_body(self):
        with Horizontal(id="timeline-filters"):
            yield Select([(c, c) for c in CATEGORIES], prompt="all categories", id="category", compact=True)
            yield Input(placeholder="server id", id="server", compact=True, restrict=r"\d*")
            yield Input(placeholder="profile", id="profile", compact=True)
            yield Input(placeholder="config path contains", id="config", compact=True)
        with Horizontal(id="timeline-body"):
            table = EntriesTable(id="entries", cursor_type="row", zebra_stripes=True)
            table.add_columns("#", "time", "category", "kind", "server/profile", "summary")
            yield table
            with Vertical(id="detail-pane"):
                yield Label("Entry", classes="title")
                with VerticalScroll(id="detail-scroll"):
                    yield Static("", id="detail", markup=False)
                yield Label("Config live for it", classes="title")
                with VerticalScroll(id="live-scroll"):
                    yield Static("", id="live", markup=False)

    def on_mount(self) -> None:
        self.action_refresh()

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def _filters(self) -> dict:
        server = self.query_one("#server", Input).value.strip()
        cat = self.query_one("#category", Select).value
        return {
            "server": int(server) if server else None,
            "profile": self.query_one("#profile", Input).value.strip() or None,
            "config": self.query_one("#config", Input).value.strip() or None,
            "category": cat if isinstance(cat, str) else None,
        }

    def action_refresh(self) -> None:
        self.load(self._filters())

    def action_focus_filter(self) -> None:
        self.query_one("#category", Select).focus()

    @on(Input.Changed)
    @on(Select.Changed)
    def _filters_changed(self, _event) -> None:
        self.action_refresh()

    @background("timeline", done="_show", failed="_load_failed")
    def load(self, filters: dict) -> list:
        return self.app.wb.timeline(**filters).entries

    def _load_failed(self, message: str) -> None:
        self.notify(message, severity="error")

    def _show(self, entries: list) -> None:
        self.entries = entries
        table = self.query_one("#entries", EntriesTable)
        table.clear()
        rows: list[tuple[Any, int]] = collapse_runs(
            entries, key=lambda e: (e.kind, e.server, e.profile, e.subject, e.summary)
        )
        for e, n in rows:
            who = f"server {e.server}" if e.server is not None else (e.profile or e.subject or "")
            kind = e.kind if n == 1 else f"{e.kind} x{n}"
            table.add_row(str(e.id), e.time, table.category(e.category), kind, who, e.summary, key=str(e.id))
        if entries:
            table.move_cursor(row=len(rows) - 1)
            self._select(entries[-1])
        else:
            self.query_one("#detail", Static).update("(no entries: everything the workbench does is recorded here)")
            self.query_one("#live", Static).update("")

    @on(DataTable.RowHighlighted, "#entries")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None or event.row_key.value is None:
            return
        entry = next((e for e in self.entries if str(e.id) == event.row_key.value), None)
        if entry is not None:
            self._select(entry)

    def _select(self, entry) -> None:
        self.query_one("#detail", Static).update(
            f"{entry.time}  {entry.kind}  {entry.subject}\n\n" + "\n".join(payload_lines(entry.payload))
        )
        self.live_config(entry.id)

    @background("timeline-live", done="_show_live", failed="_show_live")
    def live_config(self, entry_id: int) -> str:
        live = self.app.wb.timeline_live_config(entry_id)
        return (
            "(nothing ties this entry to a draft config)"
            if live is None
            else f"{live.location}  v{live.version}  {live.sha256[:12]}  ({live.reason})\n"
            f"{live.basis}\n\n{live.content}"
        )

    def _show_live(self, text: str) -> None:
        """The config live for the selected entry, or why there is none (a WorkbenchError's line)."""
        self.query_one("#live", Static).update(text)


SPEC = ScreenSpec("timeline", "Timeline", "f10", TimelineScreen, order=90)
