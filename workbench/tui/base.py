"""The frame every screen shares: header, the screen's body, and a footer built from the bindings."""

from __future__ import annotations

from typing import Iterable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Header


class WorkbenchScreen(Screen):
    """Subclasses implement ``compose_body``; the footer lists their bindings (with keymap applied)."""

    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> Iterable[Widget]:
        return ()
