"""JSON from outside, read strictly: standard JSON only, every number finite, nesting bounded.

Python's ``json`` accepts ``NaN``/``Infinity`` (not JSON), turns ``1e400`` into ``inf``, raises a
bare ``ValueError`` on a 5000-digit integer and ``RecursionError`` on deep nesting. Every file,
header, payload and command-line value the workbench parses as JSON comes through :func:`loads`
instead, so each of those ends as one ``InputError`` naming the source and the dotted field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from workbench.errors import InputError
from workbench.numbers import MAX_INT_DIGITS

# Configs, headers and payloads are a few levels deep; 64 leaves room and keeps every walker safe.
MAX_DEPTH = 64
_INT_LIMIT = 10**MAX_INT_DIGITS


class JSONSyntaxError(InputError):
    """The text is not JSON at all (as opposed to JSON with a refused value)."""


class _Bad:
    """A value json cannot be allowed to produce, kept in place so its field can be named."""

    __slots__ = ("what",)

    def __init__(self, what: str):
        self.what = what


def _constant(name: str) -> _Bad:  # NaN, Infinity, -Infinity
    return _Bad(f"{name} is not valid JSON; expected a finite number")


def _int(text: str) -> int | _Bad:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return _Bad(f"a {len(text.lstrip('-'))}-digit integer is out of range (at most {MAX_INT_DIGITS} digits)")
    return int(text)


def field_path(parts: Iterable[object]) -> str:
    """("meta_info", "hidden_states", 0, 3) -> "meta_info.hidden_states[0][3]"."""
    out = ""
    for p in parts:
        if not isinstance(p, int):
            p = str(p)
            if not p or not p.isprintable() or "." in p:
                p = repr(p)  # a key with a newline, a dot or nothing in it stays one readable token
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def loads(text: str | bytes, where: str, *, as_field: bool = False) -> Any:
    """Parse ``text``; an ``InputError`` starting with ``where`` (a file name, ``--flag``, ``key``).
    ``as_field``: ``where`` is itself a field, so inner fields read ``key[1]``, ``key.a``."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text, parse_constant=_constant, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(f"{where}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    check(doc, where, as_field=as_field)
    return doc


def check(doc: Any, where: str, *, as_field: bool = False) -> None:
    """Refuse non-finite numbers, the markers :func:`loads` left, and nesting beyond ``MAX_DEPTH``;
    the error names the first offending field. Iterative: safe on any depth."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise InputError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels (at {field_path(path[:8])}...)")
        items: Iterable[tuple[Any, Any]]
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            _leaf(node, path, where, as_field)
            continue
        for k, v in items:
            if type(k) is str and not _unicode(k):
                _leaf(_Bad("a key that is not valid Unicode (a lone surrogate)"), path, where, as_field)
            t = type(v)
            if t is dict or t is list:
                stack.append((v, (*path, k)))
            elif t is float:
                if v - v != 0.0:  # inf or nan
                    _leaf(v, (*path, k), where, as_field)
            elif t is _Bad or (t is int and not -_INT_LIMIT < v < _INT_LIMIT) or (t is str and not _unicode(v)):
                _leaf(v, (*path, k), where, as_field)


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _leaf(v: Any, path: tuple[Any, ...], where: str, as_field: bool = False) -> None:
    if not path:
        at = where
    elif as_field:
        inner = field_path(path)
        at = where + (inner if inner.startswith("[") else "." + inner)
    else:
        at = f"{where}: {field_path(path)}"
    if isinstance(v, _Bad):
        raise InputError(f"{at}: {v.what}")
    if type(v) is int and not -_INT_LIMIT < v < _INT_LIMIT:
        raise InputError(f"{at}: an integer of more than {MAX_INT_DIGITS} digits is out of range")
    if isinstance(v, str) and not _unicode(v):
        raise InputError(f"{at}: text that is not valid Unicode (a lone surrogate)")
    if isinstance(v, float) and not math.isfinite(v):
        raise InputError(
            f"{at}: {v} is not finite (NaN, Infinity, or a number beyond the float range); expected a finite number"
        )


def load_file(path: str | Path, what: str = "JSON") -> Any:
    """Read and parse a JSON file; one ``InputError`` naming the file (and field) otherwise."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a {what} file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    return loads(raw, str(path))


def dumps(value: Any, where: str, **kw: Any) -> str:
    """``json.dumps`` of a value that :func:`check` accepts: never NaN/Infinity (non-standard JSON),
    never a value nested too deep or an integer too long to read back."""
    check(value, where)
    try:
        return json.dumps(value, allow_nan=False, **kw)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: cannot be written as JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{where}: value nested deeper than {MAX_DEPTH} levels") from None
