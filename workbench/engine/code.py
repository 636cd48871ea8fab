"""Capture rules straight from real SGLang code, never the table: the installed SGLang when it is
the release asked for (source ``host``: this machine's own), else the release's wheel (``wheel``).

The lab uses this, so a wrong table cannot make the lab agree with the doctor.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from workbench.engine.rule import CaptureRule, EngineCapture, apply


@lru_cache(maxsize=64)
def code_rule(version: str, arch: str, text_arch: str | None = None) -> tuple[CaptureRule, str]:
    """(rule, source) for one architecture of one release, read from its code in this process."""
    from workbench.engine.extract import unsupported
    from workbench.engine.lookup import _norm
    from workbench.engine.wheels import unpacked

    root: str | Path | None = None
    source = "wheel"
    try:
        from workbench.engine.host import local_installation

        lroot, lversion = local_installation()
        if version in ("latest", lversion):
            root, version, source = lroot, lversion, "host"
    except Exception:
        pass
    if root is None:
        if version == "latest":
            from workbench.engine.wheels import releases

            version = releases()[-1]
        root = unpacked(version)
    names = [a for a in (arch, text_arch) if a]
    rules = _rules(Path(root), version, names)
    by = {_norm(r.arch): r for r in rules}
    for a in names:
        if _norm(a) in by:
            return by[_norm(a)], source
    return unsupported(arch, version), source


def _rules(root: Path, version: str, names: Sequence[str]) -> list[CaptureRule]:
    """``extract`` of ``names`` at ``root``, kept on disk until the release's files or the extractor
    change (``workbench.engine.source_cache``): every lab engine starts with these rules, and
    parsing the release's code costs each new process about 3 s."""
    import re

    from workbench.engine import source_cache
    from workbench.engine.extract import extract
    from workbench.engine.wheels import READS

    def read() -> dict[str, Any]:
        return {"rules": [r.to_dict() for r in extract(root, version=version, archs=set(names))]}

    question = re.sub(r"[^A-Za-z0-9_.+-]", "_", f"capture-rules-{version}-{'+'.join(sorted(names))}")
    got = source_cache.read(
        question,
        root,
        read,
        parts=READS,
        modules=("workbench.engine.extract", "workbench.engine.source", "workbench.engine.rule"),
    )
    return [CaptureRule.from_dict(d) for d in got["rules"]]


def code_capture(
    engine: str,
    *,
    arch: str,
    num_layers: int,
    ids: Sequence[int] | None,
    cuda_graph: bool = True,
    index0: str | None = None,
) -> tuple[EngineCapture, CaptureRule]:
    """What the release's code captures; ``index0`` overrides that one part (the lab's patched engine)."""
    from dataclasses import replace

    from workbench.engine.table import parse_engine

    rule, source = code_rule(parse_engine(engine), arch)
    if index0 is not None and rule.supported:
        rule = replace(rule, index0=index0)
    return apply(rule, list(ids) if ids is not None else None, num_layers, cuda_graph=cuda_graph, source=source), rule


def ids_from_config(rule: CaptureRule, config: dict[str, Any]) -> tuple[list[Any] | None, str]:
    """The ids the release reads from a draft config.json, by the keys its runner reads (``id_source``)."""
    for key in rule.id_source or ("eagle_config.eagle_aux_hidden_state_layer_ids",):
        parts = key.split(".")
        cur: Any = config
        for p in parts:
            cur = cur.get(p) if isinstance(cur, dict) else None
        if cur is not None:
            return list(cur), key
    return None, "default"
