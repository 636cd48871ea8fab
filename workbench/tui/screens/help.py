"""Help: every key of every screen, generated from the live bindings (keymap applied), so it never
disagrees with the keys; the screen in front first after the keys that work everywhere. ``/``
filters it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from workbench.tui.widgets.filter import FilterBar
from workbench.tui.widgets.table import Table


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 100%; max-width: 120; height: 100%; max-height: 50;
        border: thick $primary; background: $surface; padding: 0 1; }
    HelpScreen #help-title { height: auto; }
    HelpScreen DataTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,f1", "dismiss", "Close", id="help.close")]
    AUTO_FOCUS = "#help-keys"

    def __init__(self, rows: list[tuple[str, str, str, str]], front: str = ""):
        super().__init__()
        self.rows = rows
        self.front = front

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                "[b]Keys[/b] of every screen, "
                + (f"[b]{self.front}[/b]'s after those that work everywhere" if self.front else "")
                + '.  [dim]/ filters · remap in keymap.toml in the workspace: binding id = "key"[/dim]',
                id="help-title",
            )
            table: Table[str] = Table(zebra_stripes=True, cursor_type="row", id="help-keys")
            table.add_columns("key", "action", "where", "binding id")
            for row in self.rows:
                table.add_row(*row)
            yield table
            yield FilterBar()

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
