"""One validated-number type for every numeric input (flags, profile keys, config fields, payloads).

Every number the workbench takes from outside (a CLI flag, a TOML profile key, a JSON config field, a
tensor-dump header, an HTTP payload) goes through :func:`number` or :func:`integer`, so NaN, infinities,
1e400, booleans posing as integers, 5000-digit integers and out-of-range values are refused the same way
everywhere: one ``InputError`` line naming the field and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from workbench.errors import InputError

# Python's int() of a 5000-digit string is slow and nothing we read is that large: refuse early.
MAX_INT_DIGITS = 30


@dataclass(frozen=True)
class Range:
    """Closed or half-open bounds; ``None`` = unbounded on that side."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo < x instead of lo <= x
    hi_open: bool = False

    def describe(self) -> str:
        if self.lo is None and self.hi is None:
            return "a finite number"
        if self.hi is None:
            return f"{'>' if self.lo_open else '>='} {_fmt(self.lo)}"
        if self.lo is None:
            return f"{'<' if self.hi_open else '<='} {_fmt(self.hi)}"
        lb = "(" if self.lo_open else "["
        rb = ")" if self.hi_open else "]"
        return f"in {lb}{_fmt(self.lo)}, {_fmt(self.hi)}{rb}"

    def holds(self, v: float) -> bool:
        if self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo):
            return False
        if self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi):
            return False
        return True


POSITIVE = Range(0, None, lo_open=True)
NON_NEGATIVE = Range(0, None)
UNIT = Range(0, 1)
PORT = Range(1, 65535)


def _fmt(v: float | None) -> str:
    if v is None:
        return ""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def number(value: Any, field: str, where: Range = Range(), *, allow_str: bool = True) -> float:
    """``value`` as a finite float within ``where``; an ``InputError`` naming ``field`` otherwise.

    Strings are accepted when ``allow_str`` (CLI flags, text boxes); booleans never are.
    """
    if isinstance(value, bool) or value is None:
        raise InputError(f"{field}: expected {where.describe()}, got {value!r}")
    if isinstance(value, str):
        if not allow_str:
            raise InputError(f"{field}: expected {where.describe()}, got the string {value!r}")
        text = value.strip()
        if len(text) > 64:
            raise InputError(f"{field}: expected {where.describe()}, got a {len(text)}-character string")
        try:
            v = float(text)
        except ValueError:
            raise InputError(f"{field}: {value!r} is not a number; expected {where.describe()}") from None
    elif isinstance(value, int):
        if abs(value) >= 10**MAX_INT_DIGITS:
            raise InputError(f"{field}: {str(value)[:12]}... has too many digits; expected {where.describe()}")
        v = float(value)
    elif isinstance(value, float):
        v = value
    else:
        try:
            v = float(value)  # numpy scalars, Decimal
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{field}: expected {where.describe()}, got {type(value).__name__}") from None
    if not math.isfinite(v):
        raise InputError(f"{field}: {value!r} is not finite; expected {where.describe()}")
    if not where.holds(v):
        raise InputError(f"{field}: {_fmt(v)} is out of range; expected {where.describe()}")
    return v


def integer(value: Any, field: str, where: Range = Range(), *, allow_str: bool = True) -> int:
    """``value`` as an int within ``where`` (16.0 is accepted, 16.5 and "16" from JSON are not)."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"{field}: expected an integer {where.describe()}, got {value!r}")
    if isinstance(value, str):
        if not allow_str:
            raise InputError(f"{field}: expected an integer {where.describe()}, got the string {value!r}")
        text = value.strip()
        if len(text) > MAX_INT_DIGITS or not text.lstrip("+-").isdigit():
            raise InputError(f"{field}: {value[:40]!r} is not an integer; expected {where.describe()}")
        v = int(text)
    elif isinstance(value, int):
        if abs(value) >= 10**MAX_INT_DIGITS:
            raise InputError(f"{field}: {str(value)[:12]}... has too many digits; expected {where.describe()}")
        v = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise InputError(f"{field}: {value!r} is not an integer; expected {where.describe()}")
        v = int(value)
    else:
        try:
            f = float(value)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{field}: expected an integer, got {type(value).__name__}") from None
        if not math.isfinite(f) or not f.is_integer():
            raise InputError(f"{field}: {value!r} is not an integer; expected {where.describe()}")
        v = int(f)
    if not where.holds(v):
        raise InputError(f"{field}: {v} is out of range; expected an integer {where.describe()}")
    return v
