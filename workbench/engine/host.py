"""What runs on a host (inside a remote job) to answer the capture question there: the host's own
installed engine when it is the release asked for (``source="installed"``, the answer says so),
else the table entries the job was given (``source="shipped"``): the same rules as on the laptop.
The laptop side (``workbench.remote.engine``) sends these jobs; nothing here imports the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.errors import WorkbenchError


def local_installation(engine: str = "sglang") -> tuple[str, str]:
    """(directory holding the package, release) of the engine this python would import."""
    from workbench.engine.lookup import installed

    got = installed(engine)
    if got is None:
        raise WorkbenchError(f"no {engine} installed for this python")
    return str(got[0]), got[1]


def release_job(engine: str) -> dict[str, Any]:
    """The remote job: every part of the host's installed engine, as a table entry."""
    from workbench.engine import table
    from workbench.engine.lookup import read_installed
    from workbench.engine.spec import parse_engine

    spec = parse_engine(engine)
    rel = read_installed(spec.name)
    return {"engine": rel.engine, "version": rel.version, "root": rel.read_from, "entry": table.pack(rel)}


def capture_job(
    engine: str,
    archs: Sequence[str],
    num_layers: int,
    ids: Sequence[int] | None = None,
    cuda_graph: bool = True,
    rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The remote job: what ``engine`` captures, from this host's own engine when it is that release,
    else from the rules shipped with the job; ``source`` in the answer says which."""
    from workbench.engine import capture, release, table
    from workbench.engine.lookup import installed, read_installed
    from workbench.engine.spec import parse_engine

    spec = parse_engine(engine)
    with table.installed(rules):
        here = installed(spec.name)
        if here is not None and (spec.version is None or str(spec.version) == here[1]):
            rel = read_installed(spec.name).with_source("host")
        else:
            rel = release(spec, source="table")
        return capture(
            spec, archs=list(archs), num_layers=int(num_layers), ids=ids, cuda_graph=cuda_graph, release=rel
        ).to_dict()
