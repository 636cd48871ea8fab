"""A one-line text sparkline (for table cells), NaN-tolerant."""

from __future__ import annotations

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values, width: int = 16, lo=None, hi=None) -> str:
    vals = [v for v in list(values)[-width:] if v is not None and v == v]
    if not vals:
        return ""
    lo = min(vals) if lo is None else lo
    hi = max(vals) if hi is None else hi
    span = (hi - lo) or 1.0
    return "".join(BARS[min(len(BARS) - 1, max(0, int((v - lo) / span * (len(BARS) - 1) + 0.5)))] for v in vals)
