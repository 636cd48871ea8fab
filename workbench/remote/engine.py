"""The capture question asked on a host: the host's own installed engine read there, or the rules a
job needs shipped with it, so the laptop and the host answer alike (``workbench.engine.host`` is the
host side)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError, WorkbenchError

if TYPE_CHECKING:
    from workbench.engine import Release
    from workbench.hosts.base import Host


def host_release(host: Host, engine: str) -> Release:
    """The host's installed engine, read there by the extractor (``source="host"``); an InputError
    when the host runs another release than ``engine`` names."""
    from workbench.engine import parse_engine, table
    from workbench.remote.near import NearCompute

    spec = parse_engine(engine)
    result, _tr = NearCompute(host).run("engine_release", {"engine": spec.name}, timeout=900)
    if not isinstance(result, dict) or "entry" not in result:
        raise WorkbenchError(f"host {getattr(host, 'name', host)}: engine_release gave no release")
    version = str(result["version"])
    if spec.version is not None and str(spec.version) != version:
        raise InputError(f"engine {spec}: the host {getattr(host, 'name', host)} runs {spec.name}=={version}")
    return table.unpack(spec.name, version, result["entry"], "host")


def shipment(archs: Iterable[str], draft_archs: Iterable[str] = ()) -> dict[str, Any]:
    """Every release read here, narrowed to the classes a job asks about: what a host job needs to
    answer as the laptop does (its tables are not shipped)."""
    from workbench.engine import release, releases, table

    out: dict[str, dict[str, Any]] = {}
    a, d = list(archs), list(draft_archs)
    for name in ("sglang", "vllm"):
        for v in releases(name):
            for eng, entries in table.slice_of(release(f"{name}=={v}"), a, d).items():
                out.setdefault(eng, {}).update(entries)
    return out
