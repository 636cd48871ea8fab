"""No comment or docstring in the package names a machine's timing: such figures go stale with the
next change and belong in ``benchmarks/results/``. A figure is a number followed by a unit of time
or of throughput ("24.1-26.6 ms", "1.2 s a command", "3.7 -> 2.8 s", "10 GB/s"), found in the
comments (``tokenize``) and the docstrings and other bare strings (``ast``) of every module. A
setting is not a measurement: a figure right after "timeout", "every", "after", "within", "wait"
or "at most" is a timeout, an interval or a limit, and passes."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.conftest import ROOT

_NUM = r"\d+(?:\.\d+)?(?:e-?\d+)?"
_UNIT = (
    r"(?:ns|us|µs|ms|s|secs?|seconds?|milliseconds?|microseconds?|nanoseconds?|minutes?|mins?|hours?|h|days?"
    r"|[kKMG]?\s*[A-Za-z]+/s)"
)
FIGURE = re.compile(rf"(?<![\w.]){_NUM}(?:\s*(?:-|–|->|to|/)\s*{_NUM})*\s*{_UNIT}(?![\w/])")
# the words that make a figure a setting (a timeout, an interval, a limit), not a measurement
SETTING = re.compile(r"\b(?:timeout|timeouts|every|after|within|wait|waits|at most|up to)\s*(?:of|=|:)?\s*$", re.I)

# Modules being rewritten elsewhere, with the figures they still hold: each entry goes once its
# module says why without the figure (a stale entry fails below, so the list only shrinks).
PENDING: dict[str, int] = {}


def figures(text: str) -> list[str]:
    """The timings ``text`` names, settings left out."""
    return [m.group(0) for m in FIGURE.finditer(text) if not SETTING.search(text[: m.start()])]


def _prose(path: Path) -> list[tuple[int, str]]:
    """Every comment and every bare string (docstrings, attribute docs) of a module, with its line."""
    src = path.read_text()
    out = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(src).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.append((node.lineno, node.value.value))
    return out


def _package_figures() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "workbench").rglob("*.py")):
        for line, text in _prose(path):
            for fig in figures(text):
                found.setdefault(str(path.relative_to(ROOT)), []).append(f"line {line}: {fig}")
    return found


@pytest.mark.parametrize(
    "text",
    [
        "the screen over 1.82 GB: 24.1-26.6 ms on the H200 host",
        "the installed registry (255 modules parsed, 1.2 s a command)",
        "without tearing down its modules (the probe 3.7 -> 2.8 -> 2.7 s)",
        "a pass of 16 trivial calls took 0.39 ms",
        "a submit and its result take 73 us on a 2-core machine",
        "rows already in memory: 10 GB/s a core",
        "one core streams a serving log at 4.3M lines/s",
        "vdpbf16ps (0.76 ns against 0.09 ns)",
        "a lab build took 97 s beside one busy core",
        "it took 2 minutes",
        "first touch 15ms -> 2ms",
    ],
)
def test_a_measurement_is_found(text):
    assert figures(text), text


@pytest.mark.parametrize(
    "text",
    [
        "SIGKILL after 5 s if still running",
        "gives up with a timeout of 30 s",
        "polls every 0.5 s",
        "waits at most 10 s for the lock",
        "3 slots x 7168, 16 threads, 2 MB folios, rel_diff 1e-6",
        "bf16-fma screens (S, G, T) and the x2 speed-up",
    ],
)
def test_a_setting_or_a_figure_of_no_time_passes(text):
    assert figures(text) == [], text


def test_no_comment_or_docstring_in_the_package_names_a_timing():
    found = _package_figures()
    for path, count in PENDING.items():
        assert len(found.pop(path, [])) == count, f"{path}: drop or update its PENDING entry"
    assert not found, "timings in comments or docstrings (cite benchmarks/results/ instead):\n" + "\n".join(
        f"{p}: {f}" for p, figs in found.items() for f in figs
    )
