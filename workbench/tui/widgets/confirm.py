"""A modal screen for confirming a destructive action: it names exactly what will happen.

Yes and No stay on screen at any terminal size (the details scroll instead), nothing covers them
(notifications wait under the dialog until it closes), and an unanswered dialog cancels itself
after ``timeout`` seconds: nothing destructive happens without an answer.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from workbench.confirm import Plan
from workbench.tui.widgets.diff import DiffView, is_diff

#: Seconds an unanswered confirmation waits before it cancels.
CONFIRM_TIMEOUT_S = 120.0


class ConfirmModal(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmModal { align: center middle; }
    ConfirmModal > Vertical { width: 90%; max-width: 110; height: auto; max-height: 100%;
        border: thick $error; background: $surface; padding: 0 1; }
    ConfirmModal #confirm-summary { text-style: bold; margin-bottom: 1; height: auto; max-height: 6; }
    ConfirmModal #confirm-scroll { height: auto; max-height: 50vh; }
    ConfirmModal #confirm-details { height: auto; color: $text-muted; }
    ConfirmModal #confirm-buttons { height: auto; align: right middle; margin-top: 1; }
    ConfirmModal #confirm-hint { width: 1fr; height: auto; color: $text-muted; }
    ConfirmModal Button { margin-left: 2; width: auto; min-width: 8; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Yes", id="confirm.yes"),
        Binding("n,escape", "cancel", "No", id="confirm.no"),
    ]

    def __init__(self, plan: Plan, timeout: float | None = CONFIRM_TIMEOUT_S):
        super().__init__()
        self.plan = plan
        self.timeout = timeout
        self.timed_out = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.plan.summary, id="confirm-summary", markup=False)
            if self.plan.details:
                with VerticalScroll(id="confirm-scroll"):
                    yield DiffView("\n".join(self.plan.details), id="confirm-details", markup=False)
            with Horizontal(id="confirm-buttons"):
                hint = "y yes, n or Esc no" + (f"; {self.timeout:.0f} s without an answer: no" if self.timeout else "")
                yield Static(hint, id="confirm-hint", markup=False)
                # the keys in brackets, as text (markup would take "[n]" for a style)
                yield Button(Text("No [n]"), id="no", variant="primary", compact=True)
                yield Button(Text("Yes [y]"), id="yes", variant="error", compact=True)

    def on_mount(self) -> None:
        # no toast over the buttons: notifications wait on the screen under the dialog, and show
        # when it closes (the app shows them on the screen in front that has a rack)
        self.query("ToastRack").remove()
        if is_diff(list(self.plan.details)):  # a fix or a revert: coloured like the Configs screen
            self.query_one("#confirm-details", DiffView).show_diff("\n".join(self.plan.details))
        if self.timeout:
            self.set_timer(self.timeout, self._expire, name="confirm-timeout")

    def _expire(self) -> None:
        if self.is_attached and self.app.screen is self:
            self.timed_out = True
            self.app.notify(f"no answer: {self.plan.action} {self.plan.target} not done", severity="warning")
            self.dismiss(False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
