"""One line under the header naming every screen by its key (keymap applied), the one in front
highlighted; a click switches. At 80 columns the names are shortened so every key stays visible."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from rich.text import Text
from textual.events import Click
from textual.widget import Widget


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


def fit(entries: list[tuple[str, str, str]], width: int) -> list[str]:
    """Each entry as "KEY Title", titles shortened evenly until the line fits ``width``."""
    longest = max((len(t) for _, _, t in entries), default=0)
    for room in range(longest, 0, -1):
        labels = [f"{k} {t[:room]}" for _, k, t in entries]
        if sum(len(s) for s in labels) + (len(labels) - 1) <= width:
            return labels
    return [k for _, k, _ in entries]


class ScreenBar(Widget):
    DEFAULT_CSS = """
    ScreenBar { height: 1; width: 1fr; background: $panel; color: $text-muted; }
    ScreenBar > .screen-bar--current { background: $accent; color: $text; text-style: bold; }
    ScreenBar > .screen-bar--key { color: $text-accent; text-style: bold; }
    """
    COMPONENT_CLASSES = {"screen-bar--current", "screen-bar--key"}

    def __init__(self) -> None:
        super().__init__()
        self._spans: list[tuple[int, int, str]] = []

    def on_mount(self) -> None:
        # the keymap can move a screen's key after this bar was first drawn
        self.watch(self.app, "current_mode", cast("Callable[[Any], None]", lambda _m: self.refresh()))

    def render(self) -> Text:
        app = self.app
        entries = screen_entries(app) if hasattr(app, "specs") else []
        current = getattr(app, "current_mode", None)
        labels = fit(entries, max(10, self.size.width))
        out, x, self._spans = Text(no_wrap=True, overflow="crop"), 0, []
        cur_style = self.get_component_rich_style("screen-bar--current")
        key_style = self.get_component_rich_style("screen-bar--key")
        for (sid, key, _title), label in zip(entries, labels):
            if x:
                out.append(" ")
                x += 1
            if sid == current:
                out.append(label, style=cur_style)
            else:
                out.append(label[: len(key)], style=key_style)
                out.append(label[len(key) :])
            self._spans.append((x, x + len(label), sid))
            x += len(label)
        return out

    def on_click(self, event: Click) -> None:
        for start, end, sid in self._spans:
            if start <= event.x < end:
                self.app.show_screen(sid)  # type: ignore[attr-defined]
                return
