"""The top line of every screen: what is in play. The workspace, the host and the server the
screens act on (the one last opened, launched or diagnosed), the server's state as the journal
last recorded it, and what is wrong with ``workbench.toml`` when it does not read."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.widget import Widget

STATE_STYLE = {"ready": "success", "starting": "warning", "launching": "warning", "failing": "error", "failed": "error"}


@dataclass(frozen=True)
class Context:
    """What the context line shows; the app keeps one and replaces it when something changes."""

    workspace: str = ""
    host: str | None = None
    server: int | None = None
    profile: str | None = None
    state: str | None = None
    problem: str | None = None  # workbench.toml's error, in one line


def short_path(path: str, room: int) -> str:
    """The workspace as a person names it: under the home folder ``~/...`` whole when it fits,
    else its last two folders ("…/gpu-runs/ws")."""
    home = os.path.expanduser("~")
    if path == home or path.startswith(home + os.sep):
        whole = "~" + path[len(home) :]
        if len(whole) <= room:
            return whole
    tail = "/".join(path.rstrip("/").split("/")[-2:])
    return tail if tail == path else "…/" + tail


class ContextLine(Widget):
    DEFAULT_CSS = """
    ContextLine { height: 1; width: 1fr; background: $primary-background; color: $text; padding: 0 1; }
    ContextLine > .context--app { text-style: bold; color: $text-accent; }
    ContextLine > .context--label { color: $text-muted; }
    ContextLine > .context--success { color: $text-success; text-style: bold; }
    ContextLine > .context--warning { color: $text-warning; text-style: bold; }
    ContextLine > .context--error { color: $text-error; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "context--app",
        "context--label",
        "context--success",
        "context--warning",
        "context--error",
    }

    def on_mount(self) -> None:
        self.watch(self.app, "context", self._changed, init=False)

    def _changed(self, _context: Context) -> None:
        self.refresh()

    def render(self) -> Text:
        ctx: Context = getattr(self.app, "context", None) or Context()
        style = self.get_component_rich_style
        width = self.content_size.width
        parts: list[tuple[str, str, str]] = []  # (label, value, style class)
        if ctx.server is not None:
            what = f"{ctx.server}" + (f" {ctx.profile}" if ctx.profile else "")
            parts.append(("server", what, ""))
            if ctx.state:
                parts.append(("", ctx.state, STATE_STYLE.get(ctx.state, "")))
        else:
            parts.append(("server", "none selected", ""))
        parts.append(("host", ctx.host or "local", ""))
        fixed = sum(len(label) + len(value) + 3 for label, value, _ in parts)
        if ctx.problem:  # last, so that a narrow line cuts the error's tail, not the context
            reason = ctx.problem.split(": ", 1)[-1]
            parts.append(("", f"⚠ workbench.toml: {reason}", "error"))
        head = "◆ eagle-workbench"
        room = width - fixed - len(head) - 8
        if room < 12:  # 80 columns: the program's name gives way to what is in play
            head, room = "◆", width - fixed - 6
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(head, style=style("context--app"))
        out.append("  ws ", style=style("context--label"))
        out.append(short_path(ctx.workspace, max(8, room)))
        for label, value, kind in parts:
            out.append("  ")
            if label:
                out.append(f"{label} ", style=style("context--label"))
            out.append(value, style=style(f"context--{kind}") if kind else "")
        return out
