"""The lab target's forward without the module machinery, bit for bit what transformers computes.

A decode round of the lab's tiny Llama is a few dozen small tensor operations a layer; through
``LlamaForCausalLM`` each also pays for module calls, hooks, mask building and the cache classes,
which is most of a round's time. ``LeanLlama(model)`` runs the same operations, in the same order
and on the same weights (read live from the model), straight through, keeping the key/value rows in
buffers that grow by doubling (no concatenation of the whole cache per token):

- ``forward(ids, kv, names)`` -> ``(logits, {name: state})`` for stream points named as
  ``workbench.lab.streams`` names them (``embed``, ``out(K)``, ``final-prenorm``, ``final-postnorm``);
- ``KV(layers)``: the cache (``length``, ``crop(count)``).

Bit-for-bit agreement is a property of the installed transformers, torch and CPU, so it is checked,
not assumed: ``lean_for(model)`` returns a ``LeanLlama`` only for a config of the kind it implements
whose prefill, verify over a cropped cache, one-token step and streams equal the model's own forward
exactly (checked once per model), and None otherwise: callers then use the model itself. A round
measured either way decodes the same tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM

_CHECKED = "_workbench_lean_ok"  # the model attribute holding the check's outcome


class KV:
    """Per layer key/value rows ``[B, heads, capacity, head_dim]``, the first ``length`` in use."""

    def __init__(self, layers: int) -> None:
        self.k: list[torch.Tensor | None] = [None] * layers
        self.v: list[torch.Tensor | None] = [None] * layers
        self.length = 0

    def put(self, i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write a layer's new rows from ``length`` on (``forward`` advances it after the last
        layer); returns the layer's rows so far."""
        n0, n = self.length, self.length + k.shape[-2]
        kb, vb = self.k[i], self.v[i]
        if kb is None or vb is None or n > kb.shape[-2]:
            cap = max(n, 2 * (kb.shape[-2] if kb is not None else 0), 16)
            nk = k.new_empty((*k.shape[:-2], cap, k.shape[-1]))
            nv = v.new_empty((*v.shape[:-2], cap, v.shape[-1]))
            if kb is not None and vb is not None and n0:
                nk[..., :n0, :] = kb[..., :n0, :]
                nv[..., :n0, :] = vb[..., :n0, :]
            self.k[i], self.v[i] = kb, vb = nk, nv
        kb[..., n0:n, :] = k
        vb[..., n0:n, :] = v
        return kb[..., :n, :], vb[..., :n, :]

    def crop(self, count: int) -> None:
        """Forget the last ``count`` positions (rejected drafts)."""
        self.length = max(0, self.length - int(count))


class LeanLlama:
    def __init__(self, model: LlamaForCausalLM) -> None:
        cfg = model.config
        self.model = model
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        # the layers' parameters, looked up once (the tensors themselves: in-place updates show)
        self.layers = [_Layer(layer) for layer in model.model.layers]

    def kv(self) -> KV:
        return KV(len(self.layers))

    def forward(
        self, ids: torch.Tensor, kv: KV, names: Iterable[str] = ()
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        import torch
        import torch.nn.functional as F

        want = set(names)
        inner = self.model.model
        B, L = ids.shape
        start, hd = kv.length, self.head_dim
        h = F.embedding(ids, inner.embed_tokens.weight, inner.embed_tokens.padding_idx)
        got: dict[str, torch.Tensor] = {}
        if "embed" in want:
            got["embed"] = h
        rot = inner.rotary_emb
        pos = torch.arange(start, start + L)[None]
        freqs = pos[..., None].float() * rot.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = (emb.cos() * rot.attention_scaling).to(h.dtype)[:, None]
        sin = (emb.sin() * rot.attention_scaling).to(h.dtype)[:, None]
        # each query sees the cache and the new tokens up to itself
        mask = (torch.arange(L)[:, None] + start >= torch.arange(start + L)[None, :])[None, None] if L > 1 else None
        for i, w in enumerate(self.layers):
            x = _rms(h, w.norm1, w.eps1)
            q = F.linear(x, w.q).view(B, L, -1, hd).transpose(1, 2)
            k = F.linear(x, w.k).view(B, L, -1, hd).transpose(1, 2)
            v = F.linear(x, w.v).view(B, L, -1, hd).transpose(1, 2)
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            k, v = kv.put(i, k, v)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=w.scaling)
            h = h + F.linear(o.transpose(1, 2).contiguous().reshape(B, L, -1).contiguous(), w.o)
            x = _rms(h, w.norm2, w.eps2)
            h = h + F.linear(F.silu(F.linear(x, w.gate)) * F.linear(x, w.up), w.down)
            if f"out({i})" in want:
                got[f"out({i})"] = h
        kv.length = start + L
        if "final-prenorm" in want:
            got["final-prenorm"] = h
        h = _rms(h, inner.norm.weight, inner.norm.variance_epsilon)
        if "final-postnorm" in want:
            got["final-postnorm"] = h
        return F.linear(h, self.model.lm_head.weight), got


class _Layer:
    """One decoder layer's parameters (``LlamaDecoderLayer``'s, as its forward reads them)."""

    def __init__(self, layer: Any) -> None:  # a transformers LlamaDecoderLayer
        a, m = layer.self_attn, layer.mlp
        n1, n2 = layer.input_layernorm, layer.post_attention_layernorm
        self.norm1: torch.Tensor = n1.weight
        self.norm2: torch.Tensor = n2.weight
        self.eps1, self.eps2 = float(n1.variance_epsilon), float(n2.variance_epsilon)
        self.q: torch.Tensor = a.q_proj.weight
        self.k: torch.Tensor = a.k_proj.weight
        self.v: torch.Tensor = a.v_proj.weight
        self.o: torch.Tensor = a.o_proj.weight
        self.gate: torch.Tensor = m.gate_proj.weight
        self.up: torch.Tensor = m.up_proj.weight
        self.down: torch.Tensor = m.down_proj.weight
        self.scaling = float(a.scaling)


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``LlamaRMSNorm``: in fp32, the weight applied in the input's dtype."""
    import torch

    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    out: torch.Tensor = weight * x.to(dtype)
    return out


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    import torch

    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def implements(model: LlamaForCausalLM) -> bool:
    """A plain Llama: no biases, every head its own keys, default rope, silu, one weight shard."""
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    heads = getattr(cfg, "num_attention_heads", None)
    return (
        type(model).__name__ == "LlamaForCausalLM"
        and isinstance(rope, dict)
        and rope.get("rope_type", rope.get("type", "default")) == "default"
        and not getattr(cfg, "attention_bias", False)
        and not getattr(cfg, "mlp_bias", False)
        and getattr(cfg, "hidden_act", None) == "silu"
        and getattr(cfg, "num_key_value_heads", heads) == heads
        and getattr(cfg, "pretraining_tp", 1) == 1
        and getattr(cfg, "_attn_implementation", None) == "sdpa"
    )


def lean_for(model: LlamaForCausalLM) -> LeanLlama | None:
    """A ``LeanLlama`` of ``model`` when it computes exactly what the model does, else None."""
    ok = getattr(model, _CHECKED, None)
    if ok is None:
        ok = implements(model) and _agrees(model)
        setattr(model, _CHECKED, ok)
    return LeanLlama(model) if ok else None


def _agrees(model: LlamaForCausalLM) -> bool:
    """A prefill of 12 tokens, a verify of 4 after a crop of 2, then one token after a crop of 1,
    through both: the logits and every stream equal."""
    import torch
    from transformers import DynamicCache

    from workbench.lab.streams import StreamTap

    V = model.config.vocab_size
    prompt = (torch.arange(12)[None] * 7 + 3) % V
    verify = (torch.arange(4)[None] * 5 + 1) % V
    one = torch.tensor([[2 % V]])
    tap = StreamTap(model)
    try:
        lean = LeanLlama(model)
        with torch.inference_mode():
            cache, kv = DynamicCache(), lean.kv()
            for ids, crop in ((prompt, 2), (verify, 1), (one, 0)):
                store = tap.grab(tap.all_names())
                ref = model(input_ids=ids, past_key_values=cache, use_cache=True).logits
                tap.release()
                got, streams = lean.forward(ids, kv, store)
                if not torch.equal(ref, got) or any(not torch.equal(store[n], streams[n]) for n in store):
                    return False
                if crop:
                    cache.crop(-crop)
                    kv.crop(crop)
    except Exception:
        return False
    finally:
        tap.close()
    return True
