"""Plain-text horizontal bar plots (no terminal library): the CLI prints them, the TUI styles them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_EIGHTHS = " ▏▎▍▌▋▊▉"


@dataclass
class BarLine:
    label: str
    bar: str  # exactly `width` characters
    value: str
    highlight: bool


def bar(value: float, lo: float, hi: float, width: int, marker: float | None = None) -> str:
    """A bar of ``width`` cells filled from ``lo`` to ``value`` in eighths; ``marker`` drawn as '┃'."""
    span = max(hi - lo, 1e-12)
    eighths = round(max(0.0, min(value - lo, span)) / span * width * 8)
    full, part = divmod(eighths, 8)
    cells = list("█" * full + (_EIGHTHS[part] if part else "") + " " * width)[:width]
    if marker is not None and lo <= marker <= hi:
        cells[min(width - 1, int((marker - lo) / span * width))] = "┃"
    return "".join(cells)


def bar_lines(
    labels: Sequence[str],
    values: Sequence[float],
    *,
    lo: float,
    hi: float,
    width: int = 40,
    marker: float | None = None,
    highlight: int | None = None,
    fmt: str = "{:.2f}",
) -> list[BarLine]:
    """One bar per value on a shared scale lo..hi; ``highlight`` is an index to emphasise."""
    return [
        BarLine(lab, bar(v, lo, hi, width, marker), fmt.format(v), i == highlight)
        for i, (lab, v) in enumerate(zip(labels, values))
    ]


def render(lines: Sequence[BarLine]) -> str:
    wl = max((len(b.label) for b in lines), default=0)
    return "\n".join(f"{b.label:>{wl}} ▕{b.bar}▏ {b.value}{'  <' if b.highlight else ''}" for b in lines)
