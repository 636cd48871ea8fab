"""Which source answers (host, table, wheel) and the capture it gives."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from workbench.engine.rule import CaptureRule, EngineCapture, apply
from workbench.errors import InputError, WorkbenchError

if TYPE_CHECKING:
    from workbench.hosts.base import Host

SOURCES = ("auto", "host", "table", "wheel")


def release_rules(
    engine: str, *, source: str = "auto", host: Host | None = None, archs: Iterable[str] | None = None
) -> tuple[list[CaptureRule], str, str]:
    """(rules, version, source used); ``archs`` narrows what a host reads (the table has them all)."""
    from workbench.engine import table
    from workbench.engine.table import parse_engine

    if source not in SOURCES:
        raise InputError(f"source: {source!r} is not one of {', '.join(SOURCES)}")
    version = parse_engine(engine)
    if source in ("auto", "host") and host is not None:
        try:
            from workbench.engine.host import host_rules

            got = host_rules(host, archs)
            if version in ("latest", got[1]):
                return got[0], got[1], "host"
            if source == "host":
                raise InputError(f"engine {engine}: the host runs sglang {got[1]}, not {version}")
        except WorkbenchError:
            if source == "host":
                raise
    elif source == "host":
        raise InputError("source host: no host given")
    if version == "latest":
        version = table.latest() or "0.5.23"
    if source in ("auto", "table"):
        rows = table.release(version)
        if rows is not None:
            return rows, version, "table"
        if source == "table":
            raise InputError(
                f"engine sglang=={version}: not in the rule table (releases {table.versions()[0]}"
                f"..{table.versions()[-1]}); `make engine-rules` or source='wheel' settles it"
                if table.versions()
                else "the rule table is empty: run `make engine-rules`"
            )
    from workbench.engine.extract import extract
    from workbench.engine.wheels import unpacked

    return extract(unpacked(version), version=version), version, "wheel"


def _norm(a: str) -> str:
    return "".join(ch for ch in a.lower() if ch.isalnum())


def find_rule(
    engine: str,
    arch: str | None,
    *,
    source: str = "auto",
    host: Host | None = None,
    text_arch: str | None = None,
) -> tuple[CaptureRule, str]:
    from workbench.engine.extract import unsupported

    if not arch:
        raise InputError("target architecture: unknown (give --target-config DIR or arch=...)")
    rules, version, used = release_rules(engine, source=source, host=host, archs=[a for a in (arch, text_arch) if a])
    if not arch:
        raise InputError("target architecture: unknown (give --target-config DIR or arch=...)")
    by = {_norm(r.arch): r for r in rules}
    for a in (arch, text_arch):
        if a and _norm(a) in by:
            return by[_norm(a)], used
    return unsupported(arch, version), used


def engine_capture(
    engine: str,
    *,
    target_config: str | os.PathLike[str] | None = None,
    arch: str | None = None,
    num_layers: int | None = None,
    ids: Sequence[int] | None = None,
    cuda_graph: bool = True,
    host: Host | None = None,
    source: str = "auto",
) -> EngineCapture:
    text_arch = None
    if target_config is not None:
        from workbench.engine.target import read_target

        a, n, text_arch = read_target(target_config)
        arch = arch or a
        num_layers = num_layers or n
    if num_layers is None:
        raise InputError("num_layers: unknown (give --target-config DIR or num_layers=...)")
    rule, used = find_rule(engine, arch, source=source, host=host, text_arch=text_arch)
    return apply(rule, list(ids) if ids is not None else None, num_layers, cuda_graph=cuda_graph, source=used)
