"""Face-neutral presentation of alignment numbers, shared by the TUI and the notebook widgets
(pure Python: no rich, textual or ipywidgets here).

- ``heat_colour(rel_diff)``: a hex colour on a log scale from 1e-6 (identical up to bf16 noise,
  green) to 1 (unrelated, red); ``None`` for a missing or non-finite value.
- ``fmt_rel(v)``: a rel_diff for a table cell (``2.00e-06``, ``0.056``, ``inf``, ``-``).
- ``sparkline(values)``: a one-line text sparkline for a table cell, NaN-tolerant.
"""

from __future__ import annotations

import math
from typing import Optional

HEAT = ["#1b5e20", "#2e7d32", "#558b2f", "#9e9d24", "#f9a825", "#ef6c00", "#c62828"]


def heat_colour(v: Optional[float]) -> Optional[str]:
    if v is None or not math.isfinite(v):
        return None
    x = -6.0 if v <= 1e-6 else min(0.0, math.log10(v))
    return HEAT[min(len(HEAT) - 1, int((x + 6.0) / 6.0 * (len(HEAT) - 1) + 0.5))]


def fmt_rel(v: Optional[float]) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    if v == math.inf:
        return "inf"
    return f"{v:.2e}" if abs(v) < 1e-2 else f"{v:.3f}"


BARS = "▁▂▃▄▅▆▇█"


def sparkline(values, width: int = 16, lo=None, hi=None) -> str:
    vals = [v for v in list(values)[-width:] if v is not None and v == v]
    if not vals:
        return ""
    lo = min(vals) if lo is None else lo
    hi = max(vals) if hi is None else hi
    span = (hi - lo) or 1.0
    return "".join(BARS[min(len(BARS) - 1, max(0, int((v - lo) / span * (len(BARS) - 1) + 0.5)))] for v in vals)
