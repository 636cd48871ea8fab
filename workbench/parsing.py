"""Text fields to values, shared by every face (CLI flags, TUI inputs, notebook text boxes).

Errors are one-line ``InputError``s naming the input and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.errors import InputError
from workbench.numbers import integer, number

MAX_ITEMS = 4096  # values in one list flag; far more than any sweep or per-depth list needs


def parse_floats(text: str, name: str) -> list[float]:
    """'0.75,0.7 0.6' -> [0.75, 0.7, 0.6]; a one-line InputError naming the input otherwise."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise InputError(f"{name}: empty list; expected numbers like 0.8,0.7,0.6")
    if len(parts) > MAX_ITEMS:
        raise InputError(f"{name}: {len(parts)} numbers; expected at most {MAX_ITEMS}")
    return [number(p, name) for p in parts]  # finite: NaN, inf and 1e400 are refused


def parse_pairs(
    text: str, name: str, key: Callable[[str], Any] = int, value: Callable[[str], Any] = float
) -> dict[Any, Any]:
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
            kk = integer(k, name) if key is int else key(k)
        except (ValueError, InputError):
            raise InputError(f"{name}: {k[:40]!r} in {p[:60]!r} is not a {key.__name__}") from None
        try:
            vv = number(v, name) if value is float else value(v)
        except (ValueError, InputError):
            raise InputError(f"{name}: {v[:40]!r} in {p[:60]!r} is not a finite number") from None
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
            a = integer(lo, name)
            b = integer(hi, name) if sep else a
        except InputError:
            raise InputError(f"{name}: {p[:40]!r} is not an integer or a range like 1..8") from None
        if b < a:
            raise InputError(f"{name}: range {p!r} is empty")
        if b - a + 1 + len(out) > MAX_ITEMS:  # never build a set sized by an unchecked range
            raise InputError(f"{name}: {p[:40]!r} holds more than {MAX_ITEMS} values")
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


def optional(text: str) -> str | None:
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


def parse_fingerprint(text: str, name: str = "fingerprint") -> str:
    """A host key's fingerprint as OpenSSH prints it (``ssh-keygen -lf``) and the workbench names
    it: ``SHA256:`` and the unpadded base64 of 32 bytes; padding is accepted and dropped. Anything
    else (an MD5 ``aa:bb:..`` form, a cut paste) is a one-line InputError."""
    import base64
    import binascii

    raw = text.strip()
    head, sep, body = raw.partition(":")
    if not sep or head != "SHA256":
        raise InputError(f"{name}: {raw[:60]!r} is not SHA256:<base64> (as `ssh-keygen -lf` prints it)")
    body = body.rstrip("=")
    if len(body) != 43:
        raise InputError(
            f"{name}: {raw[:60]!r} has {len(body)} characters after SHA256:; a SHA256 fingerprint has 43 "
            "(32 bytes in base64: a cut paste?)"
        )
    try:
        base64.b64decode(body + "=", validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{name}: {raw[:60]!r} has characters that are not base64") from None
    return f"SHA256:{body}"
