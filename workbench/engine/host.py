"""The host's own SGLang asked: the extractor runs there as a remote job (``engine_rules``) over the
installation its python finds, without importing SGLang."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from workbench.engine.rule import CaptureRule
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.hosts.base import Host


def local_installation() -> tuple[str, str]:
    """(directory holding sglang/, version) of the SGLang this python would import."""
    import importlib.metadata as md
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise WorkbenchError("no sglang installed for this python")
    root = Path(list(spec.submodule_search_locations)[0]).parent
    try:
        version = md.version("sglang")
    except md.PackageNotFoundError:
        version = None
    if not version:
        from workbench.engine.source import Source

        version = Source(root).version() or "unknown"
    return str(root), version


def job(archs: Iterable[str] | None = None) -> dict[str, Any]:
    """The remote job: every EAGLE-3 rule of the host's installation (or those of ``archs``)."""
    from workbench.engine.extract import extract

    root, version = local_installation()
    rules = extract(root, version=version, archs=set(archs) if archs else None)
    return {"version": version, "root": root, "rules": [r.to_dict() for r in rules]}


def host_rules(host: Host, archs: Iterable[str] | None = None) -> tuple[list[CaptureRule], str]:
    from workbench.remote.near import NearCompute

    result, _tr = NearCompute(host).run("engine_rules", {"archs": list(archs) if archs else None}, timeout=600)
    if not isinstance(result, dict) or "rules" not in result:
        raise WorkbenchError(f"host {getattr(host, 'name', host)}: engine_rules gave no rules")
    return [CaptureRule.from_dict(r) for r in result["rules"]], str(result["version"])


def capture_job(
    engine: str, arch: str | None, num_layers: int, ids: Sequence[int] | None = None, cuda_graph: bool = True
) -> dict[str, Any]:
    """The remote job: what ``engine`` captures, from this host's own SGLang when it is that release
    (source ``host``), else from the table (``table``)."""
    from workbench.engine.code import code_rule
    from workbench.engine.lookup import engine_capture
    from workbench.engine.rule import apply
    from workbench.engine.table import parse_engine

    version = parse_engine(engine)
    try:
        _root, local = local_installation()
    except WorkbenchError:
        local = None
    if local is not None and version in ("latest", local):
        rule, _src = code_rule(local, arch)
        return apply(rule, ids, num_layers, cuda_graph=cuda_graph, source="host").to_dict()
    return engine_capture(
        engine, arch=arch, num_layers=num_layers, ids=ids, cuda_graph=cuda_graph, source="table"
    ).to_dict()
