"""A unified diff coloured by line kind, the same wherever one is shown (Configs, the confirm
dialog of a fix): colours are component classes in tcss, not inline styles."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.widgets import Static


def is_diff(lines: list[str]) -> bool:
    return any(line.startswith("@@") for line in lines) and any(line.startswith(("+", "-")) for line in lines)


def line_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    if line.startswith("@@"):
        return "hunk"
    return ""


class DiffView(Static):
    DEFAULT_CSS = """
    DiffView > .diff--file { text-style: bold; }
    DiffView > .diff--add { color: $text-success; }
    DiffView > .diff--del { color: $text-error; }
    DiffView > .diff--hunk { color: $text-accent; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"diff--file", "diff--add", "diff--del", "diff--hunk"}

    def show_diff(self, diff: str) -> None:
        out = Text()
        for line in diff.splitlines(keepends=True):
            kind = line_kind(line)
            out.append(line, style=self.get_component_rich_style(f"diff--{kind}", partial=True) if kind else "")
        self.update(out)
