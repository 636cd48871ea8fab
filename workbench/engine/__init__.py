"""What an SGLang release captures for EAGLE-3, read from that release's own code.

Interface (stable; the doctor, the lab and the faces use only these):

    from workbench.engine import capture, rule, rules
    res = capture("sglang==0.5.14", target_config="path/to/hf-config-dir", ids=[2, 30, 58], cuda_graph=True)
    res.points, res.fatal, res.cuda_graph_points, res.evidence, res.source      # EngineCapture
    r = rule("sglang==0.5.14", "DeepseekV3ForCausalLM")                        # CaptureRule (typed)
    rules("sglang==0.5.14")                                                    # every EAGLE-3 class

- ``capture(engine, *, target_config=None, arch=None, num_layers=None, ids=None, cuda_graph=True,
  host=None, source="auto") -> EngineCapture``: ``ids=None`` means the draft config has none (the
  engine's defaults apply). ``source``: ``"host"`` (the host's own SGLang, read by a host job),
  ``"table"`` (the generated table shipped as package data), ``"wheel"`` (the extractor run on the
  release's wheel from PyPI, cached), or ``"auto"``: the host when one is given and answers, else
  the table, else the wheel. Every result says which one it used.
- ``rule(engine, arch, *, source="auto") -> CaptureRule`` and ``rules(engine) -> list[CaptureRule]``.
- ``workbench.engine.extract.extract(package_dir)`` runs the extractor on an installation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from workbench.engine.rule import CaptureRule, EngineCapture, Evidence, apply

if TYPE_CHECKING:
    from workbench.hosts.base import Host

__all__ = ["CaptureRule", "EngineCapture", "Evidence", "apply", "capture", "parse_engine", "rule", "rules"]


def parse_engine(engine: str) -> str:
    """'sglang==0.5.4.post2' / 'sglang-0.5.13' / 'sglang' -> the normalized version text."""
    from workbench.engine.table import parse_engine as pe

    return pe(engine)


def rules(engine: str, *, source: str = "auto", host: Host | None = None) -> list[CaptureRule]:
    from workbench.engine.lookup import release_rules

    return release_rules(engine, source=source, host=host)[0]


def rule(engine: str, arch: str | None, *, source: str = "auto", host: Host | None = None) -> CaptureRule:
    from workbench.engine.lookup import find_rule

    return find_rule(engine, arch, source=source, host=host)[0]


def capture(
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
    from workbench.engine.lookup import engine_capture

    return engine_capture(
        engine,
        target_config=target_config,
        arch=arch,
        num_layers=num_layers,
        ids=ids,
        cuda_graph=cuda_graph,
        host=host,
        source=source,
    )
