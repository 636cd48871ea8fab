"""RoPE frequencies for a draft config, from transformers' own ``ROPE_INIT_FUNCTIONS``.

speculators builds its rotary embedding with transformers' ``LlamaRotaryEmbedding`` /
``Qwen3RotaryEmbedding`` (these functions); SpecForge 0.2.0 has its own classes for ``linear``,
``llama3`` and ``yarn`` that compute the same frequencies (the parity tests hold both). ``dynamic``
scaling changes the frequencies only past ``max_position_embeddings``, and there the three code
bases disagree (transformers rescales per batch, SpecForge per cache length, SGLang once), so a
position past it is refused (``RopeRefusedError``) rather than given one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch
    from transformers import LlamaConfig


class RopeRefusedError(ValueError):
    pass


@dataclass
class Rope:
    inv_freq: torch.Tensor  # torch [head_dim // 2] float32
    scale: float  # transformers' attention_scaling (yarn, longrope), applied to cos/sin
    rope_type: str
    max_positions: int | None  # dynamic: positions must stay below this
    long_inv_freq: torch.Tensor | None = None  # longrope: frequencies past original_max_position_embeddings
    original_max: int | None = None


def _hf_config(flat: dict[str, Any], rope: dict[str, Any]) -> LlamaConfig:
    from transformers import LlamaConfig

    kw = {
        k: flat[k]
        for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings")
        if flat.get(k) is not None
    }
    cfg = LlamaConfig(**kw)
    cfg.rope_parameters = dict(rope)
    cfg.head_dim = int(flat["head_dim"]) if flat.get("head_dim") else cfg.head_dim
    return cfg


def build(flat: dict[str, Any], rope: dict[str, Any]) -> Rope:
    import torch

    rtype = rope.get("rope_type") or "default"
    theta = float(rope.get("rope_theta") or 10000.0)
    head_dim = int(flat["head_dim"])
    if rtype == "default":
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        return Rope(inv, 1.0, rtype, None)
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if rtype not in ROPE_INIT_FUNCTIONS:
        raise RopeRefusedError(f"rope_scaling: rope_type {rtype!r} is not one transformers computes")
    cfg = _hf_config(flat, rope)
    if rtype == "longrope":
        orig = int(rope.get("original_max_position_embeddings") or cfg.max_position_embeddings)
        short, scale = ROPE_INIT_FUNCTIONS[rtype](cfg, "cpu", seq_len=orig)
        long, _ = ROPE_INIT_FUNCTIONS[rtype](cfg, "cpu", seq_len=orig + 1)
        return Rope(short.float(), float(scale), rtype, None, long.float(), orig)
    inv, scale = ROPE_INIT_FUNCTIONS[rtype](cfg, "cpu")
    limit = int(cfg.max_position_embeddings) if rtype == "dynamic" else None
    return Rope(inv.float(), float(scale), rtype, limit)


def cos_sin(rope: Rope, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin ``[B, 1, T, head_dim]`` for integer ``positions [B, T]``."""
    import torch

    top = int(positions.max()) if positions.numel() else 0
    if rope.max_positions is not None and top >= rope.max_positions:
        raise RopeRefusedError(
            f"rope_scaling dynamic: position {top} is past max_position_embeddings "
            f"{rope.max_positions}, where transformers, SpecForge and SGLang compute different "
            f"frequencies"
        )
    inv = rope.inv_freq
    if rope.long_inv_freq is not None and top + 1 > cast(int, rope.original_max):
        inv = rope.long_inv_freq  # transformers switches the whole batch to long factors
    freqs = positions.to(torch.float32)[..., None] * inv.to(positions.device)
    emb = torch.cat((freqs, freqs), dim=-1)[:, None]
    return (emb.cos() * rope.scale).to(dtype), (emb.sin() * rope.scale).to(dtype)
