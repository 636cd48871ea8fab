"""A modal screen for confirming a destructive action: it names exactly what will happen."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from workbench.confirm import Plan


class ConfirmModal(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmModal { align: center middle; }
    ConfirmModal > Vertical { width: 80%; max-width: 100; height: auto; max-height: 80%;
        border: thick $error; background: $surface; padding: 1 2; }
    ConfirmModal #confirm-summary { text-style: bold; margin-bottom: 1; }
    ConfirmModal #confirm-details { height: auto; max-height: 20; overflow-y: auto; color: $text-muted; }
    ConfirmModal Horizontal { height: auto; align: right middle; margin-top: 1; }
    ConfirmModal Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("y", "confirm", "Yes", id="confirm.yes"),
        Binding("n,escape", "cancel", "No", id="confirm.no"),
    ]

    def __init__(self, plan: Plan):
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.plan.summary, id="confirm-summary", markup=False)
            if self.plan.details:
                yield Static("\n".join(self.plan.details), id="confirm-details", markup=False)
            with Horizontal():
                yield Button("No [n]", id="no", variant="primary")
                yield Button("Yes [y]", id="yes", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
