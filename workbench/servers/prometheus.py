"""Prometheus' text exposition format, as the engines' ``/metrics`` pages write it: samples
``name{label="value",...} number``, comment lines (``# HELP``, ``# TYPE``) skipped.

    for name, labels, value in samples(text, prefix="sglang:"): ...
    summed(text, {"sglang:spec_verify_calls_total", ...})   # {name: value summed over label sets}
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str, prefix: str = "") -> Iterator[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every finite sample whose name starts with ``prefix``."""
    for line in text.splitlines():
        if not line.startswith(prefix) or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            yield m.group(1), dict(_LABEL.findall(m.group(2) or "")), value


def summed(text: str, names: Iterable[str]) -> dict[str, float]:
    """The named samples, each summed over its label sets (engines, ranks, streaming or not);
    a name the page does not have is absent."""
    wanted = set(names)
    prefix = _common_prefix(wanted)
    out: dict[str, float] = {}
    for name, _labels, value in samples(text, prefix):
        if name in wanted:
            out[name] = out.get(name, 0.0) + value
    return out


def _common_prefix(names: set[str]) -> str:
    if not names:
        return ""
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]
