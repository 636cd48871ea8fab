"""Help: generated from the live bindings, so it never disagrees with the keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from workbench.tui.widgets.table import Table


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 80; height: 80%; border: thick $primary; background: $surface; padding: 0 1; }
    HelpScreen DataTable { height: 1fr; }
    """
    BINDINGS = [Binding("escape,q,f1", "dismiss", "Close", id="help.close")]

    def __init__(self, rows: list[tuple[str, str, str]]):
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static('[b]Keys[/b]  (remap them in keymap.toml in the workspace: binding id = "key")')
            table: Table[str] = Table(zebra_stripes=True, cursor_type="row")
            table.add_columns("key", "action", "binding id")
            for row in self.rows:
                table.add_row(*row)
            yield table

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
