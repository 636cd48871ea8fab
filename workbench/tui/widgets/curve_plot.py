"""Accept length against steps as horizontal bars, with the observed value drawn as a marker line."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.widgets import Static

from workbench.textplot import bar_lines


class CurvePlot(Static):
    """The bars take the room the plot is given (drawn again when it changes size)."""

    DEFAULT_CSS = "CurvePlot { height: auto; }"
    #: Cells beside the bars: the step label, the value and the "◀ configured" mark.
    AROUND = 22
    MIN_BARS, MAX_BARS = 20, 80

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._shown: tuple | None = None

    def show(
        self,
        steps: Sequence[int],
        values: Sequence[float],
        *,
        current: int | None = None,
        observed: float | None = None,
        width: int | None = None,
    ) -> None:
        self._shown = (list(steps), list(values), current, observed, width)
        self._draw()

    def _draw(self) -> None:
        if self._shown is None:
            return
        steps, values, current, observed, width = self._shown
        room = self.content_size.width - self.AROUND
        bars = width or max(self.MIN_BARS, min(self.MAX_BARS, room if room > 0 else 36))
        self.update(curve_markup(steps, values, current=current, observed=observed, width=bars))

    def on_resize(self, _event) -> None:
        self._draw()


def curve_markup(
    steps: Sequence[int],
    values: Sequence[float],
    *,
    current: int | None = None,
    observed: float | None = None,
    width: int = 36,
) -> str:
    """Textual markup for the plot (bars and labels contain no markup characters)."""
    hi = float(math.ceil(max([*values, observed or 1.0, 2.0]) + 1e-9))
    lines = bar_lines(
        [str(s) for s in steps],
        values,
        lo=1.0,
        hi=hi,
        width=width,
        marker=observed,
        highlight=list(steps).index(current) if current is not None and current in steps else None,
    )
    legend = f"chain, bonus included, scale 1..{hi:g}" + (", [$warning]┃[/] observed" if observed is not None else "")
    out = [f"[b]accept length vs steps[/b]  [dim]({legend})[/dim]"]
    for b in lines:
        colour = "$accent" if b.highlight else "$primary"
        bar = b.bar.replace("┃", f"[/][b $warning]┃[/][{colour}]")
        row = f"{b.label:>2} [{colour}]{bar}[/] {b.value}"
        out.append(f"[b]{row}  ◀ configured[/b]" if b.highlight else row)
    return "\n".join(out)
