"""Helpers shared by the CLI subcommands: workspace context, output, number-list parsing."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Optional

from workbench.errors import InputError


class Context:
    """Opens the Workbench on first use (commands that need none stay fast)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self._wb = None

    @property
    def wb(self):
        if self._wb is None:
            from workbench.api import Workbench

            self._wb = Workbench.open(self.args.workspace)
        return self._wb

    def close(self) -> None:
        if self._wb is not None:
            self._wb.close()


def fail(message: str, code: int = 2) -> int:
    first = message.strip().splitlines()[0] if message.strip() else "error"
    print(f"eagle-workbench: error: {first}", file=sys.stderr)
    return code


def emit(result: Any, as_json: bool, text: Optional[Callable[[Any], str]] = None) -> None:
    """Print a result: its ``to_dict()`` as JSON, or the human text."""
    if as_json:
        data = result.to_dict() if hasattr(result, "to_dict") else result
        print(json.dumps(data, indent=2))
    else:
        print(text(result) if text else json.dumps(result.to_dict(), indent=2))


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def confirm_or_yes(plan, yes: bool) -> bool:
    """Show a destructive plan; proceed with --yes or an interactive 'y'."""
    print(plan.text(), file=sys.stderr)
    if yes:
        return True
    if not sys.stdin or not sys.stdin.isatty():
        raise InputError("refusing a destructive action without --yes (no terminal to ask)")
    answer = input("Proceed? [y/N] ").strip().lower()
    return answer in ("y", "yes")


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
                value: Callable[[str], Any] = float) -> dict:
    """'2:20.5,4:22' -> {2: 20.5, 4: 22.0}; a one-line InputError naming the input otherwise."""
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise InputError(f"{name}: empty list; expected pairs like 2:20.5,4:22")
    out: dict = {}
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
