"""The few target tensors a standalone drafter needs: token embedding, lm_head, final norm.

Read from a HF model folder (``config.json`` + ``model.safetensors`` or sharded
``model.safetensors.index.json``), memory-mapped: only the shards that hold these tensors are
opened, only these tensors are mapped, and the embedding rows used are the only ones touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.engine.target import text_config
from workbench.errors import InputError

if TYPE_CHECKING:
    import torch

    from workbench.hidden.st_io import SafetensorsFile

INDEX = "model.safetensors.index.json"


@dataclass
class TargetHead:
    path: str
    config: dict[str, Any]
    embed: torch.Tensor  # torch [V, H] (mapped)
    lm_head: torch.Tensor  # torch [V, H] (mapped; the embedding when tied)
    norm: torch.Tensor | None  # torch [H] or None
    eps: float
    names: dict[str, str | None]  # which checkpoint tensors were used

    @property
    def vocab(self) -> int:
        return int(self.embed.shape[0])

    @property
    def hidden(self) -> int:
        return int(self.embed.shape[1])


def _pick(
    names: Iterable[str], suffix: str, exclude: tuple[str, ...] = ("mtp", "vision", "visual", "draft")
) -> str | None:
    found = [n for n in names if n.endswith(suffix) and not any(x in n for x in exclude)]
    return min(found, key=len) if found else None


def tensor_files(root: Path) -> dict[str, Path]:
    """name -> file, from the shard index or by reading the headers of the safetensors files."""
    from workbench import strictjson
    from workbench.draftconfig.reader import shard_name_problem
    from workbench.hidden.st_io import SafetensorsFile

    idx = root / INDEX
    if idx.exists():
        doc = strictjson.load_file(idx, "shard index")
        wm = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
            raise InputError(f"{idx}: weight_map: expected an object of tensor name -> shard file")
        for v in set(wm.values()):
            bad = shard_name_problem(v)
            if bad:
                raise InputError(f"{idx}: weight_map: shard {v[:80]!r} {bad}")
        return {k: root / v for k, v in wm.items()}
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise InputError(f"{root}: no model.safetensors or {INDEX}")
    out: dict[str, Path] = {}
    for f in files:
        for n in SafetensorsFile(f).names():
            out[n] = f
    return out


def read_target_head(path: str | os.PathLike[str]) -> TargetHead:
    from workbench.hidden.st_io import SafetensorsFile

    root = Path(path)
    if not root.is_dir():
        raise InputError(f"{root}: expected the target model folder (config.json + safetensors)")
    from workbench import strictjson

    raw = strictjson.load_file(root / "config.json", "target config")
    if not isinstance(raw, dict):
        raise InputError(f"{root}/config.json: expected a JSON object at the top level")
    cfg = text_config(raw)
    where = tensor_files(root)
    embed_n = _pick(where, "embed_tokens.weight") or _pick(where, "wte.weight")
    head_n = _pick(where, "lm_head.weight")
    norm_n = _pick([n for n in where if ".layers." not in n and "layers." not in n.split(".")[0]], "norm.weight")
    if embed_n is None:
        raise InputError(f"{root}: no embed_tokens.weight among the checkpoint tensors")
    tied = head_n is None and bool(cfg.get("tie_word_embeddings", False))
    if head_n is None and not tied:
        raise InputError(f"{root}: no lm_head.weight (and tie_word_embeddings is not set)")
    files: dict[Path, SafetensorsFile] = {}

    def load(name: str) -> torch.Tensor:
        f = where[name]
        if not f.exists():
            raise InputError(f"{f}: shard named in {INDEX} is missing")
        if f not in files:
            files[f] = SafetensorsFile(f)
        return files[f].load(name)

    embed = load(embed_n)
    head = load(head_n) if head_n is not None else embed  # None: tied (checked above)
    if head.shape[1] != embed.shape[1]:
        raise InputError(f"{root}: lm_head {list(head.shape)} and embedding {list(embed.shape)} disagree")
    norm = load(norm_n) if norm_n else None
    from workbench.draftconfig.schema import validate

    eps = float(validate("rms_norm_eps", cfg.get("rms_norm_eps") or 1e-6))
    return TargetHead(
        str(root),
        cfg,
        embed,
        head,
        norm,
        eps,
        {"embed": embed_n, "lm_head": head_n or embed_n + " (tied)", "norm": norm_n},
    )
