"""The ``/`` bar: what a table shows (filter) or where the log's lines match (search), typed in one
line above the footer, as in less, k9s and toolong.

A widget that takes a filter implements ``set_filter(text) -> str`` (the bar shows what it says,
"3 of 12 rows") and keeps ``filter_text``. Enter goes back to the widget with the filter kept (the
bar stays, naming it); Esc clears it and goes back."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Input, Label


class FilterBar(Horizontal):
    DEFAULT_CSS = """
    FilterBar { height: 1; padding: 0 1; display: none; background: $boost; }
    FilterBar.-shown { display: block; }
    FilterBar > #filter-what { width: auto; color: $text-accent; text-style: bold; margin-right: 1; }
    FilterBar > Input { width: 1fr; }
    FilterBar > #filter-count { width: auto; color: $text-muted; margin-left: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear", "Clear filter", id="filter.clear", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.target: Widget | None = None

    def compose(self) -> ComposeResult:
        yield Label("/", id="filter-what")
        yield Input(placeholder="words to find (esc clears)", id="filter-input", compact=True)
        yield Label("", id="filter-count", markup=False)

    def open(self, target: Widget) -> None:
        """Show the bar for ``target`` (a table or the log) and give it the keys."""
        self.target = target
        what = "search" if getattr(target, "searches", False) else "filter"
        self.query_one("#filter-what", Label).update(f"/ {what}")
        box = self.query_one("#filter-input", Input)
        box.value = getattr(target, "filter_text", "")
        self.add_class("-shown")
        box.focus()

    @on(Input.Changed, "#filter-input")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        self._apply(event.value)

    @on(Input.Submitted, "#filter-input")
    def _done(self, event: Input.Submitted) -> None:
        event.stop()
        target: Any = self.target
        if target is not None and hasattr(target, "next_match") and target.filter_text:
            target.next_match()
        if target is not None:
            target.focus()
        if not getattr(target, "filter_text", ""):
            self.remove_class("-shown")

    def _apply(self, text: str) -> None:
        target: Any = self.target
        if target is None or not target.is_attached:
            return
        said = target.set_filter(text)
        self.query_one("#filter-count", Label).update(said or "")

    def action_clear(self) -> None:
        self._apply("")
        self.query_one("#filter-input", Input).value = ""
        self.remove_class("-shown")
        if self.target is not None and self.target.is_attached:
            self.target.focus()
