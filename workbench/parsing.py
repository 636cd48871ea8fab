"""Text fields to values, shared by every face (CLI flags, TUI inputs, notebook text boxes).

Errors are one-line ``InputError``s naming the input and what was expected.
"""

from __future__ import annotations

from typing import Any, Callable

from workbench.errors import InputError


def parse_floats(text: str, name: str) -> list[float]:
    """'0.75,0.7 0.6' -> [0.75, 0.7, 0.6]; a one-line InputError naming the input otherwise."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise InputError(f"{name}: empty list; expected numbers like 0.8,0.7,0.6")
    out = []
    for p in parts:
        try:
            out.append(float(p))
        except ValueError:
            raise InputError(f"{name}: {p!r} is not a number") from None
    return out


def parse_pairs(text: str, name: str, key: Callable[[str], Any] = int,
                value: Callable[[str], Any] = float) -> dict[Any, Any]:
    """'2:20.5,4:22' -> {2: 20.5, 4: 22.0}; a one-line InputError naming the input otherwise."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise InputError(f"{name}: empty list; expected pairs like 2:20.5,4:22")
    out: dict[Any, Any] = {}
    for p in parts:
        k, sep, v = p.partition(":")
        if not sep:
            raise InputError(f"{name}: {p!r} is not a KEY:VALUE pair like 4:22.5")
        try:
            kk = key(k)
        except ValueError:
            raise InputError(f"{name}: {k!r} in {p!r} is not a {key.__name__}") from None
        try:
            vv = value(v)
        except ValueError:
            raise InputError(f"{name}: {v!r} in {p!r} is not a number") from None
        if kk in out:
            raise InputError(f"{name}: {kk} given twice")
        out[kk] = vv
    return out


def parse_ints(text: str, name: str) -> list[int]:
    """'1..8' or '1-8' (inclusive ranges) and/or '1,2,4' -> sorted unique ints."""
    out: set[int] = set()
    for p in [p for p in text.replace(",", " ").split() if p]:
        lo, sep, hi = p.replace("..", "-").partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise InputError(f"{name}: {p!r} is not an integer or a range like 1..8") from None
        if b < a:
            raise InputError(f"{name}: range {p!r} is empty")
        out.update(range(a, b + 1))
    if not out:
        raise InputError(f"{name}: empty; expected integers like 1..8 or 1,2,4")
    return sorted(out)


def parse_float_rows(text: str, name: str, sep: str = "/") -> list[list[float]]:
    """'0.75,0.85/0.7,0.8' -> [[0.75, 0.85], [0.7, 0.8]] (rows separated by ``sep``)."""
    rows = [r for r in text.split(sep) if r.strip()]
    if not rows:
        raise InputError(f"{name}: empty; expected numbers like 0.75,0.85,0.9 (depths separated by {sep})")
    return [parse_floats(r, name) for r in rows]


def optional(text: str) -> "str | None":
    """An empty or blank text field means 'not given'."""
    return text.strip() or None


def parse_ids(text: str, name: str) -> list[int]:
    """'2,30,58', '[2, 30, 58]' or '2 30 58' -> [2, 30, 58] in the order given (layer ids may be
    negative: -1 is the embedding)."""
    parts = [x for x in text.replace(",", " ").replace("[", " ").replace("]", " ").split() if x]
    if not parts:
        raise InputError(f"{name}: empty; expected integers like 2,30,58")
    try:
        return [int(x) for x in parts]
    except ValueError:
        raise InputError(f"{name}: {text!r} is not a list of integers like 2,30,58") from None
