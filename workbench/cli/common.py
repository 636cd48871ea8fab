"""Helpers shared by the CLI subcommands: workspace context, output, number-list parsing."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from workbench.errors import InputError
from workbench.parsing import parse_floats, parse_ints, parse_pairs  # noqa: F401 (re-exported)


class Context:
    """Opens the Workbench on first use (commands that need none stay fast)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self._wb = None
        self.progress = ProgressPrinter()

    @property
    def wb(self):
        if self._wb is None:
            from workbench.api import Workbench

            self._wb = Workbench.open(self.args.workspace, progress=self.progress)
        return self._wb

    def close(self) -> None:
        self.progress.finish()
        if self._wb is not None:
            self._wb.close()


class ProgressPrinter:
    """Core ``Progress`` events on stderr, so a long command is never silent (stdout stays the
    result, JSON included). In a terminal: one line rewritten in place (stage, step of steps, what
    runs, seconds in the stage). Otherwise (a log, a CI job) few lines: the start of each stage,
    each step of a job of a few steps, and of a long list of items only its quarters, or a line
    when a long silence ends (a drafter evaluation of 960 files is 5 lines, not 960)."""

    #: A job of at most this many steps gets a line per step off a terminal.
    FEW_STEPS = 20
    #: Off a terminal, a line at least this often while a stage goes on (seconds).
    QUIET_S = 30.0

    def __init__(self, stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.stream = stream
        self.clock = clock
        self._last: tuple | None = None
        self._stage_start: dict[str, float] = {}
        self._live = False
        self._printed_at = 0.0
        self._quarter = -1

    @property
    def out(self) -> TextIO:
        return self.stream or sys.stderr

    def __call__(self, p) -> None:
        now = self.clock()
        start = self._stage_start.setdefault(p.stage, now)
        step = ""
        if p.total:
            step = f" {p.done:.0f}/{p.total:.0f}" if float(p.done).is_integer() else f" {p.done:.1f}/{p.total:.0f}"
        line = f"[{p.stage}{step}] {p.message}".rstrip()
        tty = getattr(self.out, "isatty", lambda: False)()
        if tty:
            text = f"{line}  ({now - start:.0f} s)"
            self.out.write("\r\x1b[2K" + text[:200])
            self.out.flush()
            self._live = True
        elif self._worth_a_line(p, now):
            print(line, file=self.out, flush=True)
            self._printed_at = now
        self._last = (p.stage, p.message, p.done)

    def _worth_a_line(self, p, now: float) -> bool:
        last = self._last
        if last is None or p.stage != last[0]:
            self._quarter = self._quarter_of(p)
            return True
        if p.total and p.total <= self.FEW_STEPS:
            return (p.message, p.done) != last[1:]
        quarter = self._quarter_of(p)
        if quarter > self._quarter:
            self._quarter = quarter
            return True
        return p.message != last[1] and now - self._printed_at >= self.QUIET_S

    @staticmethod
    def _quarter_of(p) -> int:
        return int(4 * min(1.0, p.done / p.total)) if p.total else -1

    @staticmethod
    def clear_line(stream) -> None:
        """Before a prompt: no progress line left under the cursor."""
        if getattr(stream, "isatty", lambda: False)():
            stream.write("\r\x1b[2K")
            stream.flush()

    def finish(self) -> None:
        if self._live:
            self.out.write("\r\x1b[2K")
            self.out.flush()
            self._live = False


MAX_ID = 2**63 - 1  # journal ids are SQLite integers


def int_flag(lo: int = 1, hi: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for an integer flag in [lo, hi] (``workbench.numbers``: no 5000-digit
    values, no floats); a bad value is argparse's one-line usage error, exit 2."""
    from workbench.numbers import Range, integer

    def convert(text: str) -> int:
        if not text.strip().lstrip("+-").isdigit():
            raise ValueError(text)  # argparse: "invalid int value: 'three'"
        try:
            return integer(text, "value", Range(lo, hi))
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None

    convert.__name__ = "int"
    return convert


def float_flag(lo: float | None = 0.0, hi: float | None = None, *, lo_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type`` for a finite number flag in range (NaN, inf and 1e400 refused)."""
    from workbench.numbers import Range, number

    def convert(text: str) -> float:
        try:
            return number(text, "value", Range(lo, hi, lo_open=lo_open))
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None

    convert.__name__ = "float"
    return convert


def fail(message: str, code: int = 2) -> int:
    first = message.strip().splitlines()[0] if message.strip() else "error"
    print(f"eagle-workbench: error: {first}", file=sys.stderr)
    return code


def emit(result: Any, as_json: bool, text: Callable[[Any], str] | None = None) -> None:
    """Print a result: its ``to_dict()`` as JSON, or the human text; in text mode the result's
    ``warnings`` go to stderr (stdout stays what one copies or pipes; JSON carries them)."""
    if as_json:
        data = result.to_dict() if hasattr(result, "to_dict") else result
        print(json.dumps(data, indent=2))
    else:
        print(text(result) if text else json.dumps(result.to_dict(), indent=2))
        warn(getattr(result, "warnings", None) or [])


def warn(warnings: Iterable[Any]) -> None:
    """Each warning as one line on stderr."""
    ProgressPrinter.clear_line(sys.stderr)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def confirm_or_yes(plan, yes: bool) -> bool:
    """Show exactly what will happen; proceed with --yes, or ask in a terminal (y/N)."""
    print(plan.text(), file=sys.stderr)
    if yes:
        return True
    if not sys.stdin or not sys.stdin.isatty():
        raise InputError(f"{plan.action} {plan.target}: not done without --yes (no terminal here to ask)")
    ProgressPrinter.clear_line(sys.stderr)
    try:
        answer = input(f"{plan.action} {plan.target}? [y/N] ").strip().lower()
    except EOFError:
        answer = ""
    return answer in ("y", "yes")
