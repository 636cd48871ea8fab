"""The generated tables (package data: ``sglang_rules.json``, ``vllm_rules.json``), read offline.

One file per engine, one line per release (a regenerated release shows as one changed line). A
release's entry: the capture rules of its target classes with what the runner decides for all of them
stored once (``common``), its model registry (``registry``: module file -> {class: line}), its EAGLE-3
draft classes (``drafts``), release-wide facts and evidence. ``make engine-rules`` writes them
(``workbench.engine.build_table``).

A host job gets the entries it needs in its arguments (``install``): on a host the tables are not
shipped, and what was shipped answers as ``source="shipped"``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from workbench.engine.release import DraftClass, Release
from workbench.engine.rule import CaptureRule, Evidence
from workbench.engine.version import Version

HERE = Path(__file__).parent
TABLES = {"sglang": HERE / "sglang_rules.json", "vllm": HERE / "vllm_rules.json"}
GENERATOR = "workbench.engine extractor v2"
# what the runner files decide, the same for every class of a release: stored once a release
RELEASE_WIDE = ("graph_reset", "config_before_graphs", "id_source", "config_ids")
RELEASE_EVIDENCE = ("graph_reset", "config_ids", "config_before_graphs", "id_source")

# entries a host job was given (engine -> version -> entry)
_SHIPPED: dict[str, dict[str, Any]] = {}


@lru_cache(maxsize=2)
def load(engine: str) -> dict[str, Any]:
    """version -> that release's packed entry; {} when the table is absent (a host) or stale."""
    path = TABLES.get(engine)
    if path is None or not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("generator") != GENERATOR:
        return {}
    return cast("dict[str, Any]", data.get("releases") or {})


def listed_versions(engine: str) -> list[str]:
    """The releases in the table, from its release lines alone (no entry parsed: a face's picker)."""
    path = TABLES.get(engine)
    if path is None or not path.is_file():
        return []
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.startswith('"') and '": {' in line[:40]:
                out.append(line[1 : line.index('"', 1)])
    return out


def versions(engine: str) -> list[str]:
    """The releases of ``engine`` in the table (and shipped), oldest first."""
    vs = set(load(engine)) | set(_SHIPPED.get(engine, {}))
    return sorted(vs, key=Version.parse)


# (engine, version) -> (the entry it was unpacked from, the release): the doctor asks for every
# release on each run; a release's ~70 rules are unpacked once per loaded entry
_UNPACKED: dict[tuple[str, str], tuple[object, Release]] = {}


def release(engine: str, version: str) -> Release | None:
    shipped = _SHIPPED.get(engine, {}).get(version)
    entry = shipped if shipped is not None else load(engine).get(version)
    if entry is None:
        return None
    kept = _UNPACKED.get((engine, version))
    if kept is None or kept[0] is not entry:
        kept = (entry, unpack(engine, version, entry, "shipped" if shipped is not None else "table"))
        _UNPACKED[(engine, version)] = kept
    return kept[1]


def install(shipped: dict[str, dict[str, Any]]) -> None:
    """Entries a host job was given: ``{engine: {version: entry}}`` (``slice_of``'s output), until
    the process ends; a job in a process that runs more than one uses ``installed``."""
    for engine, rel in (shipped or {}).items():
        _SHIPPED.setdefault(engine, {}).update(rel)


@contextmanager
def installed(shipped: dict[str, dict[str, Any]] | None) -> Iterator[None]:
    """The entries a job was given, for the job alone: a job's narrowed slice (its classes only) never
    answers for a later job or for the process's own table (a host process runs many jobs)."""
    before = {engine: dict(rel) for engine, rel in _SHIPPED.items()}
    install(shipped or {})
    try:
        yield
    finally:
        _SHIPPED.clear()
        _SHIPPED.update(before)


def slice_of(rel: Release, archs: list[str], draft_archs: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The packed entry of one release narrowed to the target classes ``archs`` and the draft classes
    ``draft_archs`` (its registry, rules and drafts of those alone), as a host job's argument."""
    from dataclasses import replace

    from workbench.engine.release import norm_arch

    keep = {norm_arch(a) for a in [*archs, *(draft_archs or [])]}
    for a in draft_archs or []:  # vLLM looks a draft up under its eagle3 name
        keep.add(norm_arch("Eagle3" + a))
    narrowed = replace(
        rel,
        rules=tuple(r for r in rel.rules if norm_arch(r.arch) in keep),
        registry={a: w for a, w in rel.registry.items() if norm_arch(a) in keep},
        drafts={a: d for a, d in rel.drafts.items() if norm_arch(a) in keep},
    )
    return {rel.engine: {rel.version: pack(narrowed)}}


# -- packing ------------------------------------------------------------------------------------------
def pack(rel: Release) -> dict[str, Any]:
    rows = [r.to_dict() for r in rel.rules]
    common: dict[str, Any] = {}
    if rows:
        common = {k: rows[0][k] for k in RELEASE_WIDE}
        common["evidence"] = [e for e in rows[0]["evidence"] if e["what"] in RELEASE_EVIDENCE]
    out = []
    for r in rows:
        same = {k: r[k] for k in RELEASE_WIDE} == {k: common[k] for k in RELEASE_WIDE}
        if not same or [e for e in r["evidence"] if e["what"] in RELEASE_EVIDENCE] != common["evidence"]:
            raise ValueError(f"{r['arch']}: runner facts differ from the release's")
        out.append(
            {
                **{k: v for k, v in r.items() if k not in RELEASE_WIDE and k not in ("engine", "version")},
                "evidence": [e for e in r["evidence"] if e["what"] not in RELEASE_EVIDENCE],
            }
        )
    registry: dict[str, dict[str, int]] = {}
    for arch, where in sorted(rel.registry.items()):
        f, _, line = where.rpartition(":")
        registry.setdefault(f, {})[arch] = int(line) if line.isdigit() else 0
    return {
        "common": common,
        "rules": out,
        "registry": registry,
        "drafts": [d.to_dict() for _a, d in sorted(rel.drafts.items())],
        "facts": rel.facts,
        "evidence": [e.to_dict() for e in rel.evidence],
        "read_from": rel.read_from,
    }


def unpack(engine: str, version: str, entry: dict[str, Any], source: str) -> Release:
    common = entry.get("common") or {}
    rules = tuple(
        CaptureRule.from_dict(
            {
                **r,
                "engine": engine,
                "version": version,
                **{k: common.get(k) for k in RELEASE_WIDE},
                "evidence": list(r.get("evidence") or []) + list(common.get("evidence") or []),
            }
        )
        for r in entry.get("rules") or []
    )
    registry = {a: f"{f}:{line}" for f, names in (entry.get("registry") or {}).items() for a, line in names.items()}
    drafts = {d["arch"]: DraftClass.from_dict(d) for d in entry.get("drafts") or []}
    return Release(
        engine,
        version,
        source,
        rules,
        registry,
        drafts,
        dict(entry.get("facts") or {}),
        tuple(Evidence.from_dict(e) for e in entry.get("evidence") or []),
        str(entry.get("read_from") or ""),
    )
