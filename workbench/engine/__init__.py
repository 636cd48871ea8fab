"""What an engine release (SGLang or vLLM) feeds an EAGLE-3 drafter, read from that release's code.

Interface (the doctor, the lab, the live loop and the host jobs use only these):

    from workbench import engine
    spec = engine.parse_engine("vllm==0.32.0")                      # EngineSpec (the one parser)
    res = engine.capture("sglang==0.5.14", target_config="dir", ids=[2, 30, 58], cuda_graph=True)
    res.points, res.fatal, res.cuda_graph_points, res.by_id, res.evidence, res.source   # EngineCapture
    rel = engine.release("vllm==0.11.0")                            # Release: rules, registry, drafts
    rel.serve(["Qwen3MoeForCausalLM"]).rule                          # the class it serves, its CaptureRule
    engine.draft_ids(rel, engine.read_draft_fields(config))         # the ids it reads from a draft config

- ``capture(engine, *, target_config=None, arch=None, archs=None, num_layers=None, ids=None,
  cuda_graph=True, source="auto", read=False, release=None) -> EngineCapture``: ``ids=None`` means the
  draft config has none. ``source``: ``"table"`` (package data), ``"installed"`` (the engine this
  python imports), ``"wheel"`` (the release's wheel, downloaded and read, kept), or ``"auto"``: the
  table, a kept read, the installed package of that release, then the wheel only when ``read=True``.
  A release that was not read raises ``ReleaseNotReadError`` (an ``InputError``) naming the releases read,
  the nearest, and the command that reads it. ``release``: a ``Release`` already in hand (a host's).
- ``release(engine, *, source="auto", read=False) -> Release``; ``releases(engine_name)`` lists those read.
- ``read_at(path)`` reads an installation, an unpacked release or a wheel file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.engine.draft import DraftFields, draft_ids, read_draft_fields
from workbench.engine.release import DraftClass, Release, Served
from workbench.engine.rule import CaptureRule, EngineCapture, Evidence, IdCapture, apply, ids_for
from workbench.engine.spec import ENGINES, EngineSpec, parse_engine
from workbench.engine.version import Version

if TYPE_CHECKING:
    import os
    from collections.abc import Sequence

__all__ = [
    "ENGINES",
    "CaptureRule",
    "DraftClass",
    "DraftFields",
    "EngineCapture",
    "EngineSpec",
    "Evidence",
    "IdCapture",
    "Release",
    "ReleaseNotReadError",
    "Served",
    "Version",
    "apply",
    "capture",
    "draft_ids",
    "ids_for",
    "parse_engine",
    "read_at",
    "read_draft_fields",
    "release",
    "releases",
    "rule",
]


def __getattr__(name: str) -> object:
    if name == "ReleaseNotReadError":
        from workbench.engine.lookup import ReleaseNotReadError

        return ReleaseNotReadError
    raise AttributeError(name)


def release(engine: str | EngineSpec, *, source: str = "auto", read: bool = False) -> Release:
    from workbench.engine.lookup import get_release

    return get_release(engine, source=source, read=read)


def rule(
    engine: str | EngineSpec, arch: str | Sequence[str], *, source: str = "auto", read: bool = False
) -> CaptureRule:
    """The capture rule of the class the release serves for ``arch`` (a config's ``architectures``);
    a rule with ``id_map="unsupported"`` whose evidence says why when it serves none with a hook."""
    from workbench.engine.lookup import get_release, unsupported_rule

    rel = get_release(engine, source=source, read=read)
    archs = [arch] if isinstance(arch, str) else list(arch)
    served = rel.serve(archs)
    if served.rule is not None:
        return served.rule
    return unsupported_rule(rel, served.arch or (archs[0] if archs else ""), served.problem)


def releases(engine: str) -> list[str]:
    """Every release of ``engine`` ("sglang" | "vllm") whose code was read here, oldest first."""
    from workbench.engine.lookup import read_versions

    return read_versions(parse_engine(engine).name)


def read_at(path: str | os.PathLike[str], version: str | None = None) -> Release:
    from workbench.engine.lookup import read_at as read

    return read(path, version)


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
    from workbench.engine.lookup import capture as run

    return run(
        engine,
        target_config=target_config,
        arch=arch,
        archs=archs,
        num_layers=num_layers,
        ids=ids,
        cuda_graph=cuda_graph,
        source=source,
        read=read,
        release=release,
    )
