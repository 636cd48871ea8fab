"""Which classes an engine release's model registry can load, read from its source.

- SGLang (``sglang/srt/models/registry.py: import_model_classes``) imports every module of
  ``sglang.srt.models`` and registers each class its ``EntryClass`` names (``X`` or ``[X, Y]``,
  through a module-level alias ``X = Y``) under the class's own name.
- vLLM (``vllm/model_executor/models/registry.py``) lists ``architecture: (module, class)`` in
  module-level dicts: ``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS`` (targets) and
  ``_SPECULATIVE_DECODING_MODELS`` (drafts), among others.
"""

from __future__ import annotations

import ast

from workbench.engine.rule import Evidence
from workbench.engine.source import Source

SGLANG_MODELS = "sglang/srt/models"
VLLM_MODELS = "vllm/model_executor/models"
VLLM_REGISTRY = f"{VLLM_MODELS}/registry.py"
VLLM_TARGET_TABLES = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")
VLLM_DRAFT_TABLE = "_SPECULATIVE_DECODING_MODELS"


def sglang_registry(src: Source) -> tuple[dict[str, tuple[str, int]], list[Evidence]]:
    """class name -> (module file, line of its EntryClass)."""
    out: dict[str, tuple[str, int]] = {}
    files = [f for f in src.files(SGLANG_MODELS) if f.count("/") == 3]  # the package's own modules
    for rel in files:
        t = src.tree(rel)
        aliases: dict[str, str] = {}
        for node in t.body if t else []:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if name == "EntryClass":
                    vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                    for v in vals:
                        if isinstance(v, ast.Name):
                            out.setdefault(aliases.get(v.id, v.id), (rel, node.lineno))
                elif isinstance(node.value, ast.Name):
                    aliases[name] = node.value.id
    ev = [
        Evidence(
            "registry",
            f"{SGLANG_MODELS}/registry.py",
            0,
            f"{len(out)} classes named by EntryClass in {len(files)} modules of {SGLANG_MODELS} (import_model_classes)",
        )
    ]
    return out, ev


def _dict_entries(
    node: ast.Dict, tables: dict[str, dict[str, tuple[str, str, int]]]
) -> dict[str, tuple[str, str, int]]:
    out: dict[str, tuple[str, str, int]] = {}
    for k, v in zip(node.keys, node.values):
        if k is None:  # ``**_OTHER_MODELS``
            if isinstance(v, ast.Name):
                out.update(tables.get(v.id, {}))
            continue
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            continue
        if isinstance(v, ast.Tuple) and len(v.elts) >= 2 and all(isinstance(e, ast.Constant) for e in v.elts[:2]):
            mod, cls = v.elts[0], v.elts[1]
            if isinstance(mod, ast.Constant) and isinstance(cls, ast.Constant):
                out[k.value] = (str(mod.value), str(cls.value), k.lineno)
    return out


def vllm_tables(src: Source) -> dict[str, dict[str, tuple[str, str, int]]]:
    """Every module-level ``_..._MODELS`` dict of vLLM's registry: name -> {arch: (module, class, line)}."""
    t = src.tree(VLLM_REGISTRY)
    tables: dict[str, dict[str, tuple[str, str, int]]] = {}
    for node in t.body if t else []:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(target, ast.Name) and target.id.endswith("_MODELS") and isinstance(value, ast.Dict):
            tables[target.id] = _dict_entries(value, tables)
    return tables


def vllm_registry(
    src: Source,
) -> tuple[dict[str, tuple[str, str, int]], dict[str, tuple[str, str, int]], list[Evidence]]:
    """(targets, drafts, evidence): arch -> (module file, class, registry line)."""
    tables = vllm_tables(src)
    targets: dict[str, tuple[str, str, int]] = {}
    for name in VLLM_TARGET_TABLES:
        for arch, (mod, cls, line) in tables.get(name, {}).items():
            targets.setdefault(arch, (f"{VLLM_MODELS}/{mod}.py", cls, line))
    drafts = {
        arch: (f"{VLLM_MODELS}/{mod}.py", cls, line)
        for arch, (mod, cls, line) in tables.get(VLLM_DRAFT_TABLE, {}).items()
    }
    ev = [
        Evidence(
            "registry",
            VLLM_REGISTRY,
            0,
            f"{len(targets)} target architectures in {' + '.join(VLLM_TARGET_TABLES)}; "
            f"{len(drafts)} draft architectures in {VLLM_DRAFT_TABLE}",
        )
    ]
    return targets, drafts, ev
