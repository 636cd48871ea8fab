"""The generated rule table (package data ``rules.json``), read offline."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from workbench.engine.rule import CaptureRule
from workbench.errors import InputError

TABLE = Path(__file__).with_name("rules.json")
# what the runner files decide, the same for every class of a release: stored once a release
# (``build_table.pack``), given back to every rule by ``unpack``
RELEASE_WIDE = ("graph_reset", "config_before_graphs", "id_source")
_ALIASES = {"sglang-new": "sglang==0.5.23", "sglang-old": "sglang==0.5.12.post1"}


def parse_engine(engine: str) -> str:
    """'sglang==0.5.4.post2' / 'sglang-0.5.13' / 'sglang 0.5.13' / 'sglang' -> '0.5.4.post2' (or 'latest')."""
    from workbench.engine.version import Version

    if not isinstance(engine, str) or not engine.strip():
        raise InputError(f"engine: expected 'sglang==X.Y.Z', got {engine!r}")
    text = _ALIASES.get(engine.strip().lower(), engine.strip().lower())
    m = re.fullmatch(r"sglang(?:\s*(?:==|=|-|@|\s)\s*(.+))?", text)
    if not m:
        raise InputError(f"engine: {engine!r} is not 'sglang' or 'sglang==X.Y.Z'")
    if not m.group(1):
        return "latest"
    return str(Version.parse(m.group(1)))


@lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    """version -> that release's packed rules (``build_table.pack``)."""
    if not TABLE.is_file():
        return {}
    return cast("dict[str, Any]", json.loads(TABLE.read_text()).get("releases") or {})


def versions() -> list[str]:
    return list(load())


def latest() -> str | None:
    from workbench.engine.version import Version

    vs = versions()
    return max(vs, key=Version.parse) if vs else None


def release(version: str) -> list[CaptureRule] | None:
    rules = release_rules(version)
    return None if rules is None else list(rules)


# version -> (the table's entry it was read from, its rules): the doctor asks for every release's
# rules on each run (a release's ~70 rules unpacked 1 ms, ~40 releases); the rules are frozen.
_UNPACKED: dict[str, tuple[object, tuple[CaptureRule, ...]]] = {}


def release_rules(version: str) -> tuple[CaptureRule, ...] | None:
    """``release`` as the one shared tuple, unpacked once per entry of the loaded table."""
    entry = load().get(version)
    if entry is None:
        return None
    kept = _UNPACKED.get(version)
    if kept is None or kept[0] is not entry:  # a table loaded again (or replaced) is read again
        kept = (entry, tuple(CaptureRule.from_dict(r) for r in unpack(entry)))
        _UNPACKED[version] = kept
    return kept[1]


def unpack(entry: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A release's rules as the extractor wrote them, from the table's packed entry."""
    if isinstance(entry, list):
        return entry
    common = entry.get("common") or {}
    return [
        {
            **r,
            **{k: common.get(k) for k in RELEASE_WIDE},
            "evidence": list(r.get("evidence") or []) + list(common.get("evidence") or []),
        }
        for r in entry.get("rules") or []
    ]
