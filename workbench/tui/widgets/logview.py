"""A server's log as toolong shows one: every line whole, wrapped at the pane's width (drawn again
when the pane changes size, so no column is ever lost between two widths), ``/`` to search with
the matches highlighted, ``n``/``N`` to go from one to the next."""

from __future__ import annotations

from collections import deque
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import RichLog

MATCH_STYLE = "bold black on yellow"


class LogView(RichLog):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search", id="log.search", tooltip="highlight the lines that hold what you type"),
        Binding("n", "next_match", "Next match", id="log.next", show=False),
        Binding("N", "previous_match", "Previous match", id="log.previous", show=False),
    ]
    searches = True  # the filter bar says "search": lines are highlighted, none hidden

    def __init__(self, *, max_lines: int = 5000, **kw) -> None:
        # min_width=1: a RichLog draws lines at least 78 cells wide, and a narrower pane showed
        # the start of each piece of a wrapped line and dropped the rest
        super().__init__(wrap=True, highlight=False, markup=False, min_width=1, **kw)
        self.entries: deque[Text] = deque(maxlen=max_lines)
        self.filter_text = ""
        self._starts: list[int] = []  # the first drawn line of each entry
        self._matches: list[int] = []  # entries that match the search
        self._current = -1
        self._drawn_width = 0

    # -- lines ------------------------------------------------------------------------------------------
    def add_lines(self, texts: list[Text], *, scroll_end: bool = True) -> None:
        """Append lines (a poll's worth at once: when the oldest go, the rest is drawn once)."""
        if not texts:
            return
        overflow = len(self.entries) + len(texts) > (self.entries.maxlen or 0)
        first = len(self.entries)
        self.entries.extend(texts)
        if overflow or not self._size_known:
            self._redraw(scroll_end=scroll_end)  # the oldest lines went: the drawn ones move up
            return
        for i, text in enumerate(texts, start=first):
            if self._words() and self._hit(text):
                self._matches.append(i)
            self._draw(text, scroll_end=scroll_end)

    def clear_lines(self) -> None:
        self.entries.clear()
        self._matches, self._current = [], -1
        self._redraw(scroll_end=True)

    def _width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def _draw(self, text: Text, *, scroll_end: bool) -> None:
        self._starts.append(len(self.lines))
        shown = self._highlighted(text) if self._words() else text
        self.write(shown, width=self._width(), scroll_end=scroll_end)

    def _redraw(self, *, scroll_end: bool) -> None:
        if not self._size_known:
            return
        at_end = scroll_end or self.is_vertical_scroll_end
        self.clear()
        self._starts = []
        self._drawn_width = self._width()
        for text in self.entries:
            self._draw(text, scroll_end=False)
        self._matches = [i for i, t in enumerate(self.entries) if self._hit(t)] if self._words() else []
        if at_end:
            self.scroll_end(animate=False, immediate=False)

    def on_resize(self, event: Resize) -> None:
        if event.size.width and self._width() != self._drawn_width:
            self._size_known = True
            self._redraw(scroll_end=False)

    # -- search ---------------------------------------------------------------------------------------
    def _words(self) -> list[str]:
        """What is searched: the typed text as one phrase, any case (as less and toolong do)."""
        return [self.filter_text.lower()] if self.filter_text else []

    def _hit(self, text: Text) -> bool:
        plain = text.plain.lower()
        return any(w in plain for w in self._words())

    def _highlighted(self, text: Text) -> Text:
        out = text.copy()
        plain = text.plain.lower()
        for word in self._words():
            start = plain.find(word)
            while start >= 0:
                out.stylize(MATCH_STYLE, start, start + len(word))
                start = plain.find(word, start + len(word))
        return out

    def set_filter(self, text: str) -> str:
        """Highlight the lines holding ``text`` and go to the last of them."""
        self.filter_text = text.strip()
        self._redraw(scroll_end=False)
        self._current = len(self._matches)
        if self._matches:
            self.previous_match()
        if not self.filter_text:
            return ""
        return f"{len(self._matches)} matching line{'s' if len(self._matches) != 1 else ''} (n/N: next/previous)"

    def _go(self, step: int) -> None:
        if not self._matches:
            return
        self._current = (self._current + step) % len(self._matches)
        entry = self._matches[self._current]
        if entry < len(self._starts):
            self.scroll_to(y=max(0, self._starts[entry] - self.scrollable_content_region.height // 2), animate=False)

    def next_match(self) -> None:
        self._go(+1)

    def previous_match(self) -> None:
        self._go(-1)

    def action_search(self) -> None:
        from workbench.tui.widgets.filter import FilterBar

        for bar in self.screen.query(FilterBar):
            bar.open(self)
            return

    def action_next_match(self) -> None:
        self.next_match()

    def action_previous_match(self) -> None:
        self.previous_match()
