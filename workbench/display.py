"""Face-neutral presentation of alignment numbers, shared by the TUI and the notebook widgets
(pure Python: no rich, textual or ipywidgets here).

- ``heat_colour(rel_diff)``: a hex colour on a log scale from 1e-6 (identical up to bf16 noise,
  green) to 1 (unrelated, red); ``None`` for a missing or non-finite value.
- ``fmt_rel(v)``: a rel_diff for a table cell (``2.00e-06``, ``0.056``, ``inf``, ``-``).
- ``sparkline(values)``: a one-line text sparkline for a table cell, NaN-tolerant.
- ``server_where(status)``, ``rank_lines(status)``: where a server runs (its hosts, or its SLURM job)
  and one line per rank of a server across nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

#: What a finding rests on (its evidence class), as every face names it.
EVIDENCE_LABEL = {
    "engine-code": "engine code",
    "static-file": "static file",
    "provenance": "provenance",
    "numbers": "numbers",
    "convention": "unsettled",
}


def evidence_label(evidence_class: str | None) -> str:
    return EVIDENCE_LABEL.get(evidence_class or "", evidence_class or "")


HEAT = ["#1b5e20", "#2e7d32", "#558b2f", "#9e9d24", "#f9a825", "#ef6c00", "#c62828"]


def heat_colour(v: float | None) -> str | None:
    if v is None or not math.isfinite(v):
        return None
    x = -6.0 if v <= 1e-6 else min(0.0, math.log10(v))
    return HEAT[min(len(HEAT) - 1, int((x + 6.0) / 6.0 * (len(HEAT) - 1) + 0.5))]


def text_on(background: str) -> str:
    """Black or white, whichever reads better on ``background`` (#rrggbb): WCAG contrast from the
    relative luminance, so a heat cell's number stays legible on yellow as on dark green."""
    r, g, b = (int(background[i : i + 2], 16) / 255 for i in (1, 3, 5))

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    return "#000000" if (lum + 0.05) / 0.05 > 1.05 / (lum + 0.05) else "#ffffff"


def fmt_rel(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    if v == math.inf:
        return "inf"
    return f"{v:.2e}" if abs(v) < 1e-2 else f"{v:.3f}"


BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float | None], width: int = 16, lo: float | None = None, hi: float | None = None) -> str:
    vals = [v for v in list(values)[-width:] if v is not None and not math.isnan(v)]
    if not vals:
        return ""
    lo = min(vals) if lo is None else lo
    hi = max(vals) if hi is None else hi
    span = (hi - lo) or 1.0
    return "".join(BARS[min(len(BARS) - 1, max(0, int((v - lo) / span * (len(BARS) - 1) + 0.5)))] for v in vals)


def round_sig(v: float, digits: int = 4) -> float:
    """A float to ``digits`` significant digits (491.6834 -> 491.7, 2.0e-06 stays 2e-06)."""
    if v == 0 or not math.isfinite(v):
        return v
    return round(v, digits - 1 - math.floor(math.log10(abs(v))))


@dataclass(frozen=True)
class ViewLine:
    """One line of a journal entry's view: a ``field`` (label, value), a ``heading`` of a nested
    part (label, and a count for lists), or an ``item`` of a list (its one-line summary)."""

    kind: str
    label: str
    value: str = ""
    depth: int = 0


#: Key suffixes that are units: the label says the unit once ("cycle (ms)"), the value is a number.
_UNITS = (("_per_s", "/s"), ("_ms", "ms"), ("_mib", "MiB"), ("_bytes", "bytes"), ("_s", "s"))
#: Fields of a list item that say what it is, in the order a summary names them.
_ITEM_KEYS = ("code", "name", "kind", "severity", "stage", "message", "summary", "reason")


def view_label(key: str) -> str:
    """A payload key as a label: words, and its unit named once ("tokens_per_s" -> "tokens/s",
    "cycle_ms" -> "cycle (ms)")."""
    for suffix, unit in _UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            head = key[: -len(suffix)].replace("_", " ")
            return f"{head}{unit}" if unit == "/s" else f"{head} ({unit})"
    return key.replace("_", " ")


def view_value(key: str, value: Any, digits: int = 4) -> str:
    """A scalar or a short list as a person reads it: floats to ``digits`` significant digits,
    yes/no, '-' for nothing, a command's argv as one shell line."""
    import shlex

    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{round_sig(value, digits):g}"
    if isinstance(value, list) and key in ("argv", "command", "launch") and all(isinstance(x, str) for x in value):
        return " ".join(shlex.quote(x) for x in value)
    if isinstance(value, list):
        return "[" + ", ".join(view_value("", x, digits) for x in value) + "]"
    return str(value)


def _scalar_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(x, (dict, list)) for x in value)


def _item_summary(item: Any) -> str:
    if not isinstance(item, dict):
        return view_value("", item)
    named = [str(item[k]) for k in _ITEM_KEYS if item.get(k) not in (None, "")]
    if named:
        head = named[0] + (f" ({item['severity']})" if "severity" in item and named[0] != item["severity"] else "")
        rest = [n for n in named[1:] if n != item.get("severity")]
        return head + (f": {rest[0]}" if rest else "")
    parts = [f"{view_label(k)} {view_value(k, v)}" for k, v in item.items() if not isinstance(v, (dict, list))]
    return ", ".join(parts[:6]) or "…"


def entry_view(payload: Any, depth: int = 0) -> list[ViewLine]:
    """A journal payload as a view: its plain fields first (labelled, units named once, numbers
    rounded), then each nested part under a heading, a list of records one line per record (a
    finding: "code (severity): message"). Never raw JSON."""
    if not isinstance(payload, dict):
        return [ViewLine("field", "value", view_value("", payload), depth)]
    fields: list[ViewLine] = []
    parts: list[ViewLine] = []
    for key, value in payload.items():
        label = view_label(str(key))
        if not isinstance(value, (dict, list)) or (_scalar_list(value) and len(view_value(key, value)) <= 100):
            fields.append(ViewLine("field", label, view_value(key, value), depth))
        elif isinstance(value, dict):
            if value:
                parts.append(ViewLine("heading", label, "", depth))
                parts += entry_view(value, depth + 1)
        elif value:
            parts.append(ViewLine("heading", label, f"{len(value)}", depth))
            parts += [ViewLine("item", "", _item_summary(x), depth + 1) for x in value]
    return fields + parts


def view_summary(payload: Any, limit: int = 100) -> str:
    """A payload in one line from its view ("tokens/s 491.7, accept len mean 2.551"): what an
    entry without a summary of its own says in a list."""
    parts: list[str] = []
    heads: list[str] = []
    for line in entry_view(payload):
        heads = [*heads[: line.depth], line.label] if line.kind == "heading" else heads[: line.depth]
        if line.kind == "field":
            parts.append(" ".join([*heads, line.label, line.value]))
        elif line.kind == "heading" and line.value:
            parts.append(f"{line.label} ({line.value})")
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def collapse_runs(items: list[T], key: Callable[[T], object]) -> list[tuple[T, int]]:
    """Consecutive items with the same ``key(item)`` as one (the last of the run, and the run's
    length): ten identical previews are one row "x10", not ten."""
    out: list[tuple[T, int]] = []
    last = object()
    for item in items:
        k = key(item)
        if out and k == last:
            out[-1] = (item, out[-1][1] + 1)
        else:
            out.append((item, 1))
        last = k
    return out


def server_where(status: Any) -> str:
    """Where a server runs: its host, its hosts (``n1+n2``), or its cluster and job (``gpu#4711``)."""
    ranks = getattr(status, "ranks", None) or []
    job = getattr(status, "job", None)
    if job:
        return f"{status.host}#{job.get('job_id') or '-'}"
    hosts = [r.get("host") for r in ranks if r.get("host")]
    return "+".join(dict.fromkeys(hosts)) if len(set(hosts)) > 1 else str(status.host)


def rank_lines(status: Any) -> list[str]:
    """One line per rank: ``rank 1  n2  pid 4242  running`` (a SLURM rank names its node; a rank's
    failure and SLURM's word on its task follow)."""
    out = []
    for r in getattr(status, "ranks", None) or []:
        where = r.get("node") or r.get("host") or "-"
        line = f"rank {r['rank']}  {where}  pid {r.get('pid') or '-'}  {r.get('state')}"
        if r.get("process") not in (None, "running", r.get("state")):
            line += f" ({r['process']})"
        fail = r.get("failure") or {}
        if fail.get("class"):
            line += f"  {fail['class']}"
        if r.get("detail"):
            line += f"  [{r['detail']}]"
        out.append(line)
    job = getattr(status, "job", None)
    if job:
        out.insert(
            0, f"job {job.get('job_id')} {job.get('state')}" + (f" ({job['reason']})" if job.get("reason") else "")
        )
    return out
