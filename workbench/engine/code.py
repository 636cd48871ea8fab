"""Capture straight from real engine code, never the table: the installed engine when it is the
release asked for, else the release's wheel (downloaded and read once, kept).

The lab uses this, so a wrong table cannot make the lab agree with the doctor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from workbench.engine.release import Release
from workbench.engine.rule import CaptureRule, EngineCapture, apply


@lru_cache(maxsize=16)
def code_release(engine: str) -> Release:
    from workbench.engine.lookup import get_release

    return get_release(engine, source="code")


def code_capture(
    engine: str,
    *,
    archs: Sequence[str],
    num_layers: int,
    config: dict[str, Any] | None = None,
    ids: Sequence[int] | None = None,
    cuda_graph: bool = True,
    index0: str | None = None,
) -> tuple[EngineCapture, CaptureRule | None]:
    """What the release's code captures for a draft config (the ids its runner reads from it) or for
    ``ids`` on a target; ``index0`` overrides that one part (the lab's patched engine). The rule is
    None when the release serves the target without a capture hook (the capture's ``fatal`` says why)."""
    from workbench.engine.draft import draft_ids, read_draft_fields
    from workbench.engine.lookup import capture

    rel = code_release(engine)
    rule = rel.serve(list(archs)).rule
    if config is not None:
        ids, _key = draft_ids(rel, read_draft_fields(config))
    if rule is None:
        return capture(engine, archs=archs, num_layers=num_layers, ids=ids, release=rel), None
    if index0 is not None:
        rule = replace(rule, index0=index0)
    return apply(rule, ids, num_layers, cuda_graph=cuda_graph, source=rel.source), rule
