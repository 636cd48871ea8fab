"""A standalone EAGLE-3 drafter in torch, with SGLang's weight names.

Parameters are named exactly as in an SGLang-format checkpoint (``fc``, ``midlayer.self_attn.
{q,k,v,o}_proj``, ``midlayer.mlp.{gate,up,down}_proj``, ``midlayer.{input_layernorm,hidden_norm,
post_attention_layernorm}``, ``norm``, ``lm_head``; buffers ``d2t``, ``t2d``), so ``state_dict()``
is the checkpoint. The token embedding is the target's (``set_embed``), kept out of the state dict
unless the checkpoint carries its own ``embed_tokens.weight``.

One draft step (SGLang ``llama_eagle3.py``): ``h = fc(aux)`` when the input is a 3*H_t target
feature (as-is when it is the drafter's own H-wide output); ``x = cat[input_layernorm(E[tok]),
hidden_norm(h)]``; ``h1 = h + o_proj(attn(x))`` with RoPE at the given positions;
``h2 = h1 + mlp(post_attention_layernorm(h1))``. ``h2`` (pre-norm) feeds the next step; logits are
``lm_head(norm(h2))`` over the draft vocab; a draft id ``d`` maps to target id ``d + d2t[d]``.

API:

- ``Eagle3Drafter(config: dict, embed: Tensor | None)``; ``set_embed(weight)``.
- ``step(hidden, tokens, positions, past=None) -> StepOut(hidden, logits, kv)``: one draft forward
  over T new positions, causal among them and attending to every key in ``past`` (a KV pair, e.g.
  the drafter's cache of committed pairs plus earlier chain steps). ``kv`` = past + new keys.
- ``draft_chain(last, past, position, num_steps) -> LongTensor [B, num_steps]`` (target ids):
  greedy chain drafting from the output of the last committed pair (topk = 1).
- ``unroll(aux, step_tokens) -> list[logits]``: the training-time-test forward (TTT): step 0 reads
  target features; step k reads step k-1's output at the same index, token ``step_tokens[k]``,
  RoPE position ``t + k``; attention = causal over step-0 keys plus the diagonal keys of steps
  1..k (exactly what the inference chain sees).
- ``ttt_tokens(next_ids, steps)``: the shifted token rows for ``unroll`` (pad 0 at the end).
- ``to_target(draft_ids)``, ``logits(h2)``.
- ``vocab_mapping(counts, draft_vocab_size) -> (d2t, t2d)``: the SpecForge/EAGLE mapping from
  token frequencies (top ids sorted ascending; ``d2t[i] = ids[i] - i``; ``t2d`` membership mask).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from workbench.drafter.names import draft_dims


def rope_theta(config: dict) -> float:
    rp = config.get("rope_parameters")
    if isinstance(rp, dict) and rp.get("rope_theta"):
        return float(rp["rope_theta"])
    return float(config.get("rope_theta") or 10000.0)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


class _Attention(nn.Module):
    def __init__(self, in_dim: int, hidden: int, heads: int, kv_heads: int, head_dim: int, bias: bool):
        super().__init__()
        self.q_proj = nn.Linear(in_dim, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(in_dim, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(in_dim, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)


class _MLP(nn.Module):
    def __init__(self, hidden: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _MidLayer(nn.Module):
    def __init__(self, d, eps: float):
        super().__init__()
        self.self_attn = _Attention(2 * d.hidden, d.hidden, d.num_heads, d.num_kv_heads, d.head_dim,
                                    d.attention_bias)
        self.mlp = _MLP(d.hidden, d.intermediate)
        self.input_layernorm = RMSNorm(d.hidden, eps)
        self.hidden_norm = RMSNorm(d.hidden, eps)
        self.post_attention_layernorm = RMSNorm(d.hidden, eps)


@dataclass
class StepOut:
    hidden: torch.Tensor           # [B, T, H] pre-norm output, fed to the next step
    logits: torch.Tensor           # [B, T, Vd] draft-vocab logits
    kv: tuple                      # (K, V) [B, kv_heads, S, d]: past + new keys


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Eagle3Drafter(nn.Module):
    def __init__(self, config: dict, embed: Optional[torch.Tensor] = None):
        super().__init__()
        d = draft_dims(config)
        if d.num_layers != 1:
            raise ValueError(f"num_hidden_layers={d.num_layers}: only single-layer drafters are supported")
        self.config = dict(config)
        self.dims = d
        eps = float(config.get("rms_norm_eps") or 1e-6)
        self.fc = nn.Linear(d.num_aux * d.target_hidden, d.hidden, bias=d.bias)
        if d.norm_before_fc:
            self.input_norm = RMSNorm(d.num_aux * d.target_hidden, eps)
        if d.fc_norm:
            self.fc_norm = nn.ModuleList(RMSNorm(d.target_hidden, eps) for _ in range(d.num_aux))
        self.midlayer = _MidLayer(d, eps)
        self.norm = RMSNorm(d.hidden, eps)
        self.lm_head = nn.Linear(d.hidden, d.draft_vocab, bias=False)
        self.register_buffer("d2t", torch.zeros(d.draft_vocab, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(d.vocab, dtype=torch.bool))
        self.embed_tokens: Optional[nn.Embedding] = None
        self._shared_embed: Optional[torch.Tensor] = None
        if embed is not None:
            self.set_embed(embed)
        inv = 1.0 / (rope_theta(config) ** (torch.arange(0, d.head_dim, 2, dtype=torch.float32) / d.head_dim))
        self.register_buffer("_inv_freq", inv, persistent=False)

    # ----- embeddings and vocab -----
    def set_embed(self, weight: torch.Tensor) -> None:
        """Share the target's token embedding (not saved with the drafter)."""
        if tuple(weight.shape) != (self.dims.vocab, self.dims.hidden):
            raise ValueError(f"embedding shape {tuple(weight.shape)} != {(self.dims.vocab, self.dims.hidden)}")
        self._shared_embed = weight.detach()

    def own_embedding(self, weight: torch.Tensor) -> None:
        """Use a checkpoint's own ``embed_tokens.weight`` (saved with the drafter)."""
        self.embed_tokens = nn.Embedding(self.dims.vocab, self.dims.hidden)
        self.embed_tokens.weight.data.copy_(weight)
        self.embed_tokens.weight.requires_grad_(False)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.embed_tokens is not None:
            return self.embed_tokens(tokens)
        if self._shared_embed is None:
            raise RuntimeError("drafter has no token embedding: call set_embed(target embedding)")
        w = self._shared_embed
        # Gather the rows first: a large (memory-mapped) target embedding is never converted whole.
        rows = F.embedding(tokens.to(w.device), w)
        return rows.to(device=tokens.device, dtype=self.fc.weight.dtype)

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def logits(self, h2: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(h2))

    # ----- the layer, split so step() and unroll() share it -----
    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """fc on 3*H_t target features; the drafter's own H-wide output passes unchanged (SGLang's rule)."""
        if hidden.shape[-1] == self.dims.hidden:
            return hidden
        x = hidden
        if self.dims.norm_before_fc:
            x = self.input_norm(x)
        if self.dims.fc_norm:
            chunks = x.split(self.dims.target_hidden, dim=-1)
            x = torch.cat([n(c) for n, c in zip(self.fc_norm, chunks)], dim=-1)
        return self.fc(x)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        freqs = positions.to(torch.float32)[..., None] * self._inv_freq      # [B, T, d/2]
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]                      # [B, 1, T, d]
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        return x * cos + _rotate_half(x) * sin

    def _qkv(self, hidden, tokens, positions):
        d, layer = self.dims, self.midlayer
        h = self.project(hidden)
        e = layer.input_layernorm(self.embed(tokens))
        x = torch.cat([e, layer.hidden_norm(h)], dim=-1)
        B, T, _ = x.shape
        att = layer.self_attn
        q = att.q_proj(x).view(B, T, d.num_heads, d.head_dim).transpose(1, 2)
        k = att.k_proj(x).view(B, T, d.num_kv_heads, d.head_dim).transpose(1, 2)
        v = att.v_proj(x).view(B, T, d.num_kv_heads, d.head_dim).transpose(1, 2)
        return h, self._rope(q, positions), self._rope(k, positions), v

    def _expand_kv(self, t: torch.Tensor) -> torch.Tensor:
        rep = self.dims.num_heads // self.dims.num_kv_heads
        return t if rep == 1 else t.repeat_interleave(rep, dim=1)

    def _finish(self, residual, attn):                                        # attn [B, nh, T, d]
        B, _, T, _ = attn.shape
        layer = self.midlayer
        h1 = residual + layer.self_attn.o_proj(attn.transpose(1, 2).reshape(B, T, -1))
        return h1 + layer.mlp(layer.post_attention_layernorm(h1))

    # ----- inference -----
    def step(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor,
             past: Optional[tuple] = None) -> StepOut:
        """One draft forward over T new positions (see the module docstring)."""
        if positions.dim() == 1:
            positions = positions[None].expand(tokens.shape[0], -1)
        residual, q, k, v = self._qkv(hidden, tokens, positions)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        T, S = q.shape[2], k.shape[2]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
        out = F.scaled_dot_product_attention(q, self._expand_kv(k), self._expand_kv(v), attn_mask=mask)
        h2 = self._finish(residual, out)
        return StepOut(h2, self.logits(h2), (k, v))

    @torch.no_grad()
    def draft_chain(self, last: StepOut, past: tuple, position: int, num_steps: int) -> torch.Tensor:
        """Greedy chain of ``num_steps`` target ids.

        ``last`` is the step output whose final position is the last committed pair (index t, at
        RoPE ``position`` = t); ``past`` the drafter KV cache including that pair. Step k >= 1 runs at
        position t + k on (previous output, previous draft token) attending to ``past`` + chain keys.
        """
        draft = last.logits[:, -1].argmax(-1)                                  # [B] draft ids
        out = [self.to_target(draft)]
        h, kv = last.hidden[:, -1:], past
        B = draft.shape[0]
        for k in range(1, num_steps):
            pos = torch.full((B, 1), position + k, dtype=torch.long, device=draft.device)
            s = self.step(h, out[-1][:, None], pos, past=kv)
            draft = s.logits[:, -1].argmax(-1)
            out.append(self.to_target(draft))
            h, kv = s.hidden, s.kv
        return torch.stack(out, dim=1)

    # ----- training-time test -----
    def unroll(self, aux: torch.Tensor, step_tokens: Sequence[torch.Tensor],
               positions: Optional[torch.Tensor] = None) -> list:
        """TTT forward; returns one ``[B, T, Vd]`` logits tensor per step (see module docstring)."""
        B, T = step_tokens[0].shape
        if positions is None:
            positions = torch.arange(T, device=aux.device)[None].expand(B, T)
        scale = 1.0 / math.sqrt(self.dims.head_dim)
        causal = torch.ones(T, T, dtype=torch.bool, device=aux.device).tril()
        hidden, keys, values, outs = aux, [], [], []
        for k, tok in enumerate(step_tokens):
            residual, q, kk, vv = self._qkv(hidden, tok, positions + k)
            keys.append(self._expand_kv(kk))
            values.append(self._expand_kv(vv))
            s0 = (q @ keys[0].transpose(-1, -2)) * scale
            s0 = s0.masked_fill(~causal, float("-inf"))
            diag = [(q * kj).sum(-1, keepdim=True) * scale for kj in keys[1:]]
            p = torch.softmax(torch.cat([s0] + diag, dim=-1), dim=-1)
            attn = p[..., :T] @ values[0]
            for j, vj in enumerate(values[1:]):
                attn = attn + p[..., T + j:T + j + 1] * vj
            h2 = self._finish(residual, attn)
            outs.append(self.logits(h2))
            hidden = h2
        return outs


def ttt_tokens(next_ids: torch.Tensor, steps: int) -> list:
    """Token rows for ``unroll``: step k reads ``next_ids`` shifted left by k (zero-padded at the end)."""
    rows = [next_ids]
    for _ in range(1, steps):
        prev = rows[-1]
        rows.append(torch.cat([prev[:, 1:], torch.zeros_like(prev[:, :1])], dim=1))
    return rows


def vocab_mapping(counts: Sequence[int] | torch.Tensor, draft_vocab_size: int):
    """``(d2t, t2d)`` from per-token frequencies over the target vocab (ties -> lower id first)."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    V = counts.numel()
    if not 0 < draft_vocab_size <= V:
        raise ValueError(f"draft_vocab_size {draft_vocab_size} not in 1..{V}")
    order = sorted(range(V), key=lambda i: (-float(counts[i]), i))[:draft_vocab_size]
    used = torch.tensor(sorted(order), dtype=torch.long)
    d2t = used - torch.arange(draft_vocab_size)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[used] = True
    return d2t, t2d
