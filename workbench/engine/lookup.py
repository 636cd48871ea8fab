"""Which release answers, from where, and what it captures.

A release answers only if its code was read: from the table (package data), from a read kept in the
cache (``engine read`` or ``read=True`` downloaded and read its wheel), from the installed package of
that release, or shipped to a host job. Anything else is a ``ReleaseNotReadError`` naming what was read,
the nearest release, and the command that reads it; never another release's rule.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.engine.release import Release, Served
from workbench.engine.rule import CaptureRule, EngineCapture, apply
from workbench.engine.spec import EngineSpec, parse_engine
from workbench.engine.version import Version
from workbench.errors import InputError, WorkbenchError

SOURCES = ("auto", "table", "wheel", "installed", "code")
READS_DIR = "engine-reads"


class ReleaseNotReadError(InputError):
    """The release's code was not read here (exit 2): the message names what was and how to read it."""


def read_versions(engine: str) -> list[str]:
    """Every release of ``engine`` read here: the table, shipped entries, reads kept in the cache."""
    from workbench.engine import table

    vs = set(table.versions(engine)) | set(_cached_reads(engine))
    return sorted(vs, key=Version.parse)


def nearest(engine: str, version: Version) -> str | None:
    vs = read_versions(engine)
    if not vs:
        return None
    older = [v for v in vs if Version.parse(v) <= version]
    return older[-1] if older else vs[0]


def _span(engine: str) -> str:
    vs = read_versions(engine)
    if not vs:
        return f"no {engine} release was read (the table is missing: `make engine-rules`)"
    return f"{len(vs)} {engine} releases were read, {vs[0]} .. {vs[-1]}"


def not_read(spec: EngineSpec, why: str = "") -> ReleaseNotReadError:
    near = nearest(spec.name, spec.version) if spec.version else None
    return ReleaseNotReadError(
        f"{spec} was not read{(' (' + why + ')') if why else ''}: {_span(spec.name)}"
        + (f"; the nearest is {spec.name}=={near}" if near else "")
        + f"; read it with `eagle-workbench engine read {spec}` (downloads its wheel)"
    )


# -- the cache of reads ------------------------------------------------------------------------------------
def _reads_dir() -> Path:
    from workbench.engine.wheels import cache_dir

    return cache_dir() / READS_DIR


def _cached_reads(engine: str) -> list[str]:
    d = _reads_dir()
    if not d.is_dir():
        return []
    return [p.stem.split("-", 1)[1] for p in d.glob(f"{engine}-*.json")]


def _cached(engine: str, version: str) -> Release | None:
    from workbench.engine import table

    p = _reads_dir() / f"{engine}-{version}.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("generator") != table.GENERATOR:
        return None  # read by another extractor: read again
    return table.unpack(engine, version, data["entry"], "wheel")


def _keep(rel: Release) -> None:
    import tempfile

    from workbench.engine import table

    d = _reads_dir()
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".read-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"generator": table.GENERATOR, "entry": table.pack(rel)}, fh)
    os.replace(tmp, d / f"{rel.engine}-{rel.version}.json")


# -- reading code -----------------------------------------------------------------------------------------
def read_at(path: str | os.PathLike[str], version: str | None = None) -> Release:
    """Read the release installed (or unpacked) at ``path``, or a wheel file, whatever the engine."""
    from workbench.collector import paused
    from workbench.engine.source import Source

    p = Path(path).expanduser()
    if p.is_file():
        from workbench.engine.wheels import READS, cache_dir, unpack

        name = p.name.split("-", 1)[0]
        if not p.name.endswith(".whl") or name not in READS:
            raise InputError(f"{p}: not an sglang or vllm wheel (expected sglang-X-....whl or vllm-X-....whl)")
        p = unpack(p, cache_dir() / f"{name}-src" / p.name.split("-")[1], READS[name])
    with paused():
        src = Source(p)
        ver = version or src.version() or "unknown"
        ver = str(Version.parse(ver)) if ver != "unknown" else ver
        if src.package == "vllm":
            from workbench.engine.vllm_extract import read_release as read_vllm

            return read_vllm(src, ver)
        from workbench.engine.extract import read_release as read_sglang

        return read_sglang(src, ver)


def read_wheel(spec: EngineSpec) -> Release:
    """Download (pip, cached) and read the release's wheel; the read is kept for the next command."""
    from workbench.engine.wheels import unpacked

    if spec.version is None:
        raise InputError(f"engine {spec}: name the release to read, e.g. {spec.name}==0.5.23")
    rel = read_at(unpacked(spec.name, str(spec.version)), str(spec.version))
    _keep(rel)
    return rel


def installed(engine: str) -> tuple[Path, str] | None:
    """(folder holding the package, its release) of the engine this python imports, or None."""
    import importlib.util

    from workbench.engine.source import Source

    try:
        found = importlib.util.find_spec(engine)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    root = Path(next(iter(found.submodule_search_locations))).parent
    try:
        ver = Source(root).version()
    except InputError:
        return None
    return (root, str(Version.parse(ver))) if ver else None


def read_installed(engine: str) -> Release:
    """The installed engine, read once and kept until its files change (``read_kept``)."""
    got = installed(engine)
    if got is None:
        raise WorkbenchError(f"no {engine} installed for this python")
    return read_kept(got[0], engine, got[1], "installed")


def read_kept(root: Path, engine: str, version: str, source: str) -> Release:
    """The release at ``root`` (an installation), from the cache of reads keyed by every file the
    extractor reads and by the extractor's own modules (``source_cache``): read again when either changes."""
    from workbench.engine import source_cache, table
    from workbench.engine.wheels import READS

    packed = source_cache.read(
        f"release-{engine}-{version}",
        root,
        lambda: table.pack(read_at(root, version)),
        parts=READS[engine],
        modules=tuple(f"workbench.engine.{m}" for m in _EXTRACTOR),
    )
    return table.unpack(engine, version, packed, source)


# the modules whose code decides a read (a changed one reads every release again)
_EXTRACTOR = ("extract", "vllm_extract", "drafts", "registry", "stub", "source", "rule", "release", "table")


# -- the one door ---------------------------------------------------------------------------------------------
def get_release(engine: str | EngineSpec, *, source: str = "auto", read: bool = False) -> Release:
    """The release ``engine`` names, read from its code: the table, the installed package of that
    release, a kept read, or (``read=True`` or ``source="wheel"``) its wheel; ``ReleaseNotReadError``
    otherwise. ``source="code"``: never the table (the installed package of that release, else its
    wheel: what the lab uses, so a wrong table cannot make the lab agree with the doctor)."""
    from workbench.engine import table

    if source not in SOURCES:
        raise InputError(f"source: {source!r} is not one of {', '.join(SOURCES)}")
    spec = parse_engine(engine)
    if source == "installed":
        got = installed(spec.name)
        if got is None:
            raise InputError(f"source installed: no {spec.name} installed for this python")
        if spec.version is not None and str(spec.version) != got[1]:
            raise InputError(f"source installed: this python has {spec.name}=={got[1]}, not {spec.version}")
        return read_installed(spec.name)
    if spec.version is None:
        vs = read_versions(spec.name)
        if not vs:
            raise not_read(spec)
        spec = EngineSpec(spec.name, Version.parse(vs[-1]))
    version = str(spec.version)
    if source in ("auto", "table"):
        rel = table.release(spec.name, version)
        if rel is not None:
            return rel
        if source == "table":
            raise not_read(spec, "not in the table")
    if source in ("auto", "code"):
        got = installed(spec.name)
        if got is not None and got[1] == version:
            return read_installed(spec.name)
    rel = _cached(spec.name, version)
    if rel is not None:
        return rel
    if source == "auto" and not read:
        raise not_read(spec)
    try:
        return read_wheel(spec)
    except InputError as exc:
        raise InputError(f"{exc}; {_span(spec.name)}") from None


def serve(rel: Release, archs: Sequence[str]) -> Served:
    return rel.serve(archs)


def unsupported_rule(rel: Release, arch: str, why: str | None = None) -> CaptureRule:
    from workbench.engine.rule import Evidence

    return CaptureRule(
        rel.engine,
        rel.version,
        arch,
        "",
        id_map="unsupported",
        membership="none",
        index0="none",
        boundary="none",
        missing="none",
        evidence=(Evidence("id_map", "", 0, why or f"no capture hook on {arch} in {rel.name}"),),
    )


def capture(
    engine: str | EngineSpec,
    *,
    target_config: str | os.PathLike[str] | None = None,
    arch: str | None = None,
    archs: Sequence[str] | None = None,
    num_layers: int | None = None,
    ids: Sequence[int] | None = None,
    cuda_graph: bool = True,
    source: str = "auto",
    read: bool = False,
    release: Release | None = None,
) -> EngineCapture:
    """What ``engine`` captures for ``ids`` (None: the draft config has none) on a target: from its
    config folder (``target_config``) or ``arch``/``archs`` and ``num_layers``. A target class the
    release cannot load, or loads without a capture hook, is a ``fatal`` naming why."""
    if target_config is not None:
        from workbench.engine.target import read_target_archs

        t_archs, n = read_target_archs(target_config)
        archs = list(archs or []) or t_archs
        num_layers = num_layers or n
    names = list(archs or ([arch] if arch else []))
    if not names:
        raise InputError("target architecture: unknown (give --target-config DIR or arch=...)")
    if num_layers is None:
        raise InputError("num_layers: unknown (give --target-config DIR or num_layers=...)")
    rel = release or get_release(engine, source=source, read=read)
    served = rel.serve(names)
    if served.rule is None:
        res = apply(
            unsupported_rule(rel, served.arch or names[0]), None, num_layers, cuda_graph=cuda_graph, source=rel.source
        )
        res.fatal = served.problem
        res.evidence = [str(e) for e in served.evidence]
        res.ids = list(ids) if ids is not None else None
        return res
    return apply(
        served.rule, list(ids) if ids is not None else None, num_layers, cuda_graph=cuda_graph, source=rel.source
    )


def describe(rel: Release) -> dict[str, Any]:
    """What the answer rests on, for a face: the release, where its code was read."""
    return {"engine": rel.name, "source": rel.source, "read_from": rel.read_from}
