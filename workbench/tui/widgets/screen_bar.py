"""The bar under the context line naming every screen by its key (keymap applied), the one in front
highlighted; a click switches. Names are never cut: where one line is too narrow for all of them
(80 columns), the bar takes a second line."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.events import Click
from textual.geometry import Size
from textual.widget import Widget

#: Between two entries of the bar.
GAP = 2


def key_of(app, binding_id: str) -> str | None:
    """The key a binding id is bound to now (after the keymap), as the footer shows it."""
    for active in app.active_bindings.values():
        if active.binding.id == binding_id:
            return app.get_key_display(active.binding)
    return None


def screen_entries(app) -> list[tuple[str, str, str]]:
    """(screen id, key, title) for every screen, in key order (F2, F3, ... F12, then unbound)."""
    rows = []
    for spec in app.specs:
        key = key_of(app, f"screen.{spec.id}") or spec.key
        rows.append((spec.id, key.upper() if _key_order(key)[0] == 0 else key, spec.title))
    return sorted(rows, key=lambda r: _key_order(r[1]))


def _key_order(key: str) -> tuple:
    k = key.lower()
    if k.startswith("f") and k[1:].isdigit():
        return (0, int(k[1:]), k)
    return (1, 0, k)


def lay_out(entries: list[tuple[str, str, str]], width: int) -> list[list[tuple[int, str, str, str]]]:
    """Each entry as "KEY Title", whole, placed left to right: (x, screen id, key, label) per line,
    a new line where the next label would pass ``width``."""
    lines: list[list[tuple[int, str, str, str]]] = [[]]
    x = 0
    for sid, key, title in entries:
        label = f"{key} {title}"
        if lines[-1] and x + GAP + len(label) > width:
            lines.append([])
            x = 0
        if lines[-1]:
            x += GAP
        lines[-1].append((x, sid, key, label))
        x += len(label)
    return lines


class ScreenBar(Widget):
    DEFAULT_CSS = """
    ScreenBar { height: auto; width: 1fr; background: $panel; color: $text-muted; padding: 0 1; }
    ScreenBar > .screen-bar--current { background: $accent; color: $text; text-style: bold; }
    ScreenBar > .screen-bar--key { color: $text-accent; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"screen-bar--current", "screen-bar--key"}

    def _lines(self, width: int) -> list[list[tuple[int, str, str, str]]]:
        app = self.app
        return lay_out(screen_entries(app) if hasattr(app, "specs") else [], max(10, width))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Text:
        current = getattr(self.app, "current_mode", None)
        cur_style = self.get_component_rich_style("screen-bar--current")
        key_style = self.get_component_rich_style("screen-bar--key")
        out = Text(no_wrap=True, overflow="crop")
        for n, line in enumerate(self._lines(self.content_size.width)):
            if n:
                out.append("\n")
            x = 0
            for start, sid, key, label in line:
                out.append(" " * (start - x))
                if sid == current:
                    out.append(label, style=cur_style)
                else:
                    out.append(key, style=key_style)
                    out.append(label[len(key) :])
                x = start + len(label)
        return out

    def on_click(self, event: Click) -> None:
        lines = self._lines(self.content_size.width)
        y, x = event.y, event.x - self.styles.padding.left
        if 0 <= y < len(lines):
            for start, sid, _key, label in lines[y]:
                if start <= x < start + len(label):
                    self.app.show_screen(sid)  # type: ignore[attr-defined]
                    return
