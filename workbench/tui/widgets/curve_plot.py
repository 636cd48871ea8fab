"""Accept length against steps as horizontal bars, with the observed value drawn as a marker line."""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.widgets import Static

from workbench.textplot import bar_lines


class CurvePlot(Static):
    DEFAULT_CSS = "CurvePlot { height: auto; }"

    def show(
        self,
        steps: Sequence[int],
        values: Sequence[float],
        *,
        current: int | None = None,
        observed: float | None = None,
        width: int = 36,
    ) -> None:
        self.update(curve_markup(steps, values, current=current, observed=observed, width=width))


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
