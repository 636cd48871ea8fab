"""Timeline: every launch, config version, measurement and finding in time order.

Selecting an entry shows it as a view (its numbers labelled with their units, its findings one
line each: ``workbench.display.entry_view``) and the draft config that was live for it (the version
its server loaded at launch), which answers "what was the config when accept length was 1.12?".
It follows the journal: what any screen or process records shows at once. ``/`` filters the rows.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Label, Select, Static

from workbench.display import collapse_runs, entry_view
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
    COMPONENT_CLASSES: ClassVar[set[str]] = {f"timeline--{c}" for c in CATEGORIES}

    def category(self, name: str) -> Text:
        return Text(
            name, style=self.get_component_rich_style(f"timeline--{name}", partial=True) if name in CATEGORIES else ""
        )


class TimelineScreen(WorkbenchScreen):
    CSS_PATH = "timeline.tcss"
    AUTO_FOCUS = "#entries"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "refresh", "Refresh", id="timeline.refresh"),
        Binding("ctrl+f", "focus_filter", "Filters", id="timeline.filter", tooltip="category, server, profile, config"),
    ]

    def __init__(self):
        super().__init__()
        self.entries: list = []
        self._rows: list[tuple[Any, int]] = []

    def compose_body(self):
        with Horizontal(id="timeline-filters"):
            yield Select([(c, c) for c in CATEGORIES], prompt="all categories", id="category", compact=True)
            yield Input(placeholder="server", id="server", compact=True, restrict=r"\d*")
            yield Input(placeholder="profile", id="profile", compact=True)
            yield Input(placeholder="config path", id="config", compact=True)
        with Horizontal(id="timeline-body"):
            yield EntriesTable(id="entries", cursor_type="row", zebra_stripes=True)
            with Vertical(id="detail-pane"):
                with VerticalScroll(id="detail-scroll"):
                    yield Static("", id="detail")
                yield Label("Config live for it", classes="title")
                with VerticalScroll(id="live-scroll"):
                    yield Static("", id="live", markup=False)

    def on_mount(self) -> None:
        self.action_refresh()

    def follow_journal(self) -> None:
        self.action_refresh()

    def _fit_width(self, width: int) -> None:
        narrow = self.has_class("-narrow")
        super()._fit_width(width)
        if narrow != self.has_class("-narrow") and self.entries:
            self._fill()  # narrow: shorter times, the category in the kind's colour only

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
        self._rows = collapse_runs(entries, key=lambda e: (e.kind, e.server, e.profile, e.subject, e.summary))
        self._fill()
        if entries:
            last = self._rows[-1][0]
            table = self.query_one("#entries", EntriesTable)
            if not table.move_to_key(str(last.id)):
                table.move_cursor(row=table.row_count - 1)
            entry = self._entry(table.cursor_key) or last
            self._select(entry)
        else:
            self.query_one("#detail", Static).update("(no entries: everything the workbench does is recorded here)")
            self.query_one("#live", Static).update("")

    def _fill(self) -> None:
        table = self.query_one("#entries", EntriesTable)
        keep = table.cursor_key
        table.clear(columns=True)
        wide = not self.has_class("-narrow")
        table.add_columns(*(["#", "time", "category"] if wide else ["time"]), "kind", "server/profile", "summary")
        for e, n in self._rows:
            who = f"server {e.server}" if e.server is not None else (e.profile or _short(e.subject or ""))
            kind = Text(e.kind if n == 1 else f"{e.kind} x{n}", style=table.category(e.category).style)
            lead = [str(e.id), e.time, table.category(e.category)] if wide else [e.time[5:16]]
            table.add_row(*lead, kind, who, e.summary, key=str(e.id))
        if keep is not None:
            table.move_to_key(keep)

    def _entry(self, key: str | None):
        return next((e for e in self.entries if str(e.id) == key), None)

    @on(DataTable.RowHighlighted, "#entries")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None or event.row_key.value is None:
            return
        entry = self._entry(event.row_key.value)
        if entry is not None:
            self._select(entry)

    def _select(self, entry) -> None:
        self.query_one("#detail", Static).update(entry_text(entry, self.query_one("#entries", EntriesTable)))
        self.live_config(entry.id)

    @background("timeline-live", done="_show_live", failed="_show_live")
    def live_config(self, entry_id: int) -> str:
        live = self.app.wb.timeline_live_config(entry_id)
        return (
            "(nothing ties this entry to a draft config)"
            if live is None
            else f"{_short(live.location)}  v{live.version}  {live.sha256[:12]}  ({live.reason})\n"
            f"{live.basis}\n\n{live.content}"
        )

    def _show_live(self, text: str) -> None:
        """The config live for the selected entry, or why there is none (a WorkbenchError's line)."""
        self.query_one("#live", Static).update(text)


def _short(subject: str) -> str:
    """A path's last two parts ('.../eagle3-broken/config.json'): the column stays narrow, the
    entry's view names it whole."""
    host, sep, path = subject.rpartition(":") if subject.count(":") == 1 else ("", "", subject)
    parts = path.split("/")
    if len(parts) <= 3:
        return subject
    return (f"{host}{sep}" if host and host != "local" else "") + "…/" + "/".join(parts[-2:])


def entry_text(entry, table: EntriesTable) -> Text:
    """An entry as a view: its kind (in its category's colour), when, about what, what it says in
    one line, then its fields and parts (``workbench.display.entry_view``)."""
    out = Text()
    colour = table.category(entry.category).style
    out.append(
        entry.kind, style=(colour if isinstance(colour, Style) else Style.parse(colour or "none")) + Style(bold=True)
    )
    out.append(f"  {entry.time}", style="dim")
    about = [f"server {entry.server}" if entry.server is not None else "", entry.profile or "", entry.config or ""]
    about = [a for a in about if a] or ([entry.subject] if entry.subject else [])
    if about:
        out.append("\n" + " · ".join(about), style="dim")
    out.append(f"\n{entry.summary}\n", style="bold")
    lines = entry_view(entry.payload)
    width = max((len(v.label) + 2 * v.depth for v in lines if v.kind == "field"), default=0)
    for v in lines:
        pad = "  " * v.depth
        if v.kind == "heading":
            out.append(f"\n{pad}{v.label}" + (f" ({v.value})" if v.value else ""), style="bold")
        elif v.kind == "item":
            out.append(f"\n{pad}• {v.value}")
        else:
            out.append(f"\n{pad}{v.label:<{width - 2 * v.depth}}  ", style="dim")
            out.append(v.value)
    return out


SPEC = ScreenSpec("timeline", "Timeline", "f10", TimelineScreen, order=90)
