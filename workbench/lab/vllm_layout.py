"""The lab's world laid out at a head size vLLM's CPU attention serves: the same function, wider heads.

vLLM's CPU attention backend takes head sizes 32 and up (``CPUAttentionBackend.get_supported_head_sizes``);
the lab's heads are 16 wide. Each attention projection is laid out at head size ``2 * d`` with the
original dimensions at the even places of each half of a head and zeros between:

- query and key rows: original dimension ``j < d/2`` goes to ``2j``, ``j >= d/2`` to ``d + 2(j - d/2)``.
  Rotary embeddings pair dimension ``i`` with ``i + D/2`` at frequency ``theta^(-2i/D)``; at ``D = 2d`` the
  place ``2j`` has frequency ``theta^(-2j/d)``, the original dimension's own, and its partner ``d + 2j`` is
  the original partner's place: every rotated pair is the original pair, the zero places rotate to zero;
- query rows are scaled by ``sqrt(D/d)``: the attention scale ``D^-0.5`` then equals the original ``d^-0.5``;
- value rows and output-projection columns take the same places (zeros contribute nothing).

Scores, probabilities and outputs are the original ones up to floating-point rounding (the query scale);
everything else (embeddings, norms, MLPs, ``fc``, ``d2t``) is copied as it is. ``head_dim`` in each
``config.json`` says the new size.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: the smallest head size vLLM's CPU attention serves (0.32's ``get_supported_head_sizes``)
VLLM_CPU_HEAD_DIM = 32


def places(d: int, new: int) -> list[int]:
    """Where each of a head's ``d`` dimensions goes in a head of size ``new`` (``new`` a multiple of d)."""
    if new % d or new < d or d % 2:
        raise ValueError(f"head size {d} cannot be laid out at {new}")
    step, half = new // d, d // 2
    return [step * j if j < half else new // 2 + step * (j - half) for j in range(d)]


def _rows(w: torch.Tensor, heads: int, d: int, new: int, scale: float = 1.0) -> torch.Tensor:
    """A [heads*d, in] projection as [heads*new, in], each head's rows at their places."""
    import torch

    out = torch.zeros(heads * new, w.shape[1], dtype=w.dtype)
    idx = torch.tensor(places(d, new))
    for h in range(heads):
        out[h * new + idx] = w[h * d : (h + 1) * d] * scale
    return out


def _cols(w: torch.Tensor, heads: int, d: int, new: int) -> torch.Tensor:
    """An [out, heads*d] projection as [out, heads*new], each head's columns at their places."""
    import torch

    out = torch.zeros(w.shape[0], heads * new, dtype=w.dtype)
    idx = torch.tensor(places(d, new))
    for h in range(heads):
        out[:, h * new + idx] = w[:, h * d : (h + 1) * d]
    return out


def widen(tensors: dict[str, torch.Tensor], config: dict[str, Any], new: int) -> dict[str, torch.Tensor]:
    """Every attention projection of a Llama checkpoint (target ``model.layers.*`` or EAGLE-3 ``midlayer``)
    laid out at head size ``new``; other tensors as they are."""
    heads = int(config["num_attention_heads"])
    kv = int(config.get("num_key_value_heads") or heads)
    d = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    scale = math.sqrt(new / d)
    out: dict[str, torch.Tensor] = {}
    for name, w in tensors.items():
        if name.endswith("self_attn.q_proj.weight"):
            out[name] = _rows(w, heads, d, new, scale)
        elif name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
            out[name] = _rows(w, kv, d, new)
        elif name.endswith("self_attn.o_proj.weight"):
            out[name] = _cols(w, heads, d, new)
        elif name.endswith(("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias")):
            raise ValueError(f"{name}: projections with a bias are not laid out")
        else:
            out[name] = w
    return out


def lay_out(src: str | Path, dst: str | Path, new: int = VLLM_CPU_HEAD_DIM, ids: list[int] | None = None) -> Path:
    """A checkpoint folder (target or draft) copied to ``dst`` at head size ``new``; ``ids`` replace a
    draft's ``eagle_config.eagle_aux_hidden_state_layer_ids``."""
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    cfg = json.loads((src / "config.json").read_text())
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name != "config.json":
            shutil.copy2(f, dst / f.name)
    for f in sorted(src.glob("*.safetensors")):
        save_file(widen(load_file(str(f)), cfg, new), str(dst / f.name), metadata={"format": "pt"})
    cfg["head_dim"] = new
    if ids is not None:
        cfg["eagle_config"] = {**(cfg.get("eagle_config") or {}), "eagle_aux_hidden_state_layer_ids": list(ids)}
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return dst
