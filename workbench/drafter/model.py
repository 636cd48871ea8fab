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
- ``Eagle3Drafter(config, embed, convention=None)``: the variant switches come from
  ``variants.resolve`` (``norm_output`` as the training tool reads it, ``norm_before_residual``,
  ``norm_before_fc``, ``fc_norm``, Qwen3 ``q_norm``/``k_norm``, ``attention_bias``, any number of aux
  slots of ``target_hidden_size``, every transformers ``rope_scaling`` type); an unsupported one
  raises ``UnsupportedError`` (a one-line ``ValueError`` naming the flag).
- ``vocab_mapping(counts, draft_vocab_size) -> (d2t, t2d)``: the SpecForge/EAGLE mapping from
  token frequencies (top ids sorted ascending; ``d2t[i] = ids[i] - i``; ``t2d`` membership mask).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from workbench.drafter import rope as R
from workbench.drafter import variants as V
from workbench.drafter.names import DraftDims, draft_dims

KV = tuple[torch.Tensor, torch.Tensor]  # (K, V) [B, kv_heads, S, d] of one layer
Past = KV | list[KV]  # one layer's pair, or one per layer for a multi-layer drafter


class UnsupportedError(ValueError):
    """A variant the forward does not implement (one line, naming the flag)."""


def rope_theta(config: dict[str, Any]) -> float:
    return float(V.rope_parameters(V.flat_config(config))["rope_theta"])


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
    def __init__(
        self,
        in_dim: int,
        hidden: int,
        heads: int,
        kv_heads: int,
        head_dim: int,
        bias: bool,
        qk_norm: bool = False,
        eps: float = 1e-6,
    ):
        super().__init__()
        self.q_proj = nn.Linear(in_dim, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(in_dim, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(in_dim, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=bias)  # HF: o_proj follows attention_bias
        if qk_norm:  # Qwen3: per-head RMSNorm on q and k before RoPE
            self.q_norm = RMSNorm(head_dim, eps)
            self.k_norm = RMSNorm(head_dim, eps)


class _MLP(nn.Module):
    def __init__(self, hidden: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return out


class _MidLayer(nn.Module):
    """The first decoder layer (``first``: reads cat[norm(embed), norm(h)], 2H wide) or one of the
    plain decoder layers speculators stacks after it (reads ``input_layernorm(h)``)."""

    def __init__(self, d: DraftDims, eps: float, v: V.Variant, first: bool = True) -> None:
        super().__init__()
        self.first = first
        self.self_attn = _Attention(
            (2 if first else 1) * d.hidden,
            d.hidden,
            d.num_heads,
            d.num_kv_heads,
            d.head_dim,
            v.attention_bias,
            v.qk_norm,
            eps,
        )
        self.mlp = _MLP(d.hidden, d.intermediate)
        self.input_layernorm = RMSNorm(d.hidden, eps)
        if first:
            self.hidden_norm = RMSNorm(d.hidden, eps)
        self.post_attention_layernorm = RMSNorm(d.hidden, eps)


@dataclass
class StepOut:
    hidden: torch.Tensor  # [B, T, H] the state fed to the next step (pre-norm unless norm_output)
    logits: torch.Tensor  # [B, T, Vd] draft-vocab logits
    kv: Past  # (K, V) [B, kv_heads, S, d]: past + new keys (a list of them, one
    # per layer, for a multi-layer drafter)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Eagle3Drafter(nn.Module):
    d2t: torch.Tensor  # buffers (register_buffer)
    t2d: torch.Tensor

    def __init__(
        self, config: dict[str, Any], embed: torch.Tensor | None = None, convention: str | None = None
    ) -> None:
        super().__init__()
        why = V.unsupported(config, convention)
        if why:
            raise UnsupportedError(why)
        d = draft_dims(config)
        flat = V.flat_config(config)
        self.config = dict(config)
        self.dims = d
        self.variant = v = V.resolve(config, convention)
        eps = float(flat.get("rms_norm_eps") or 1e-6)
        self.fc = nn.Linear(d.num_aux * d.target_hidden, d.hidden, bias=d.bias)
        if v.norm_before_fc:
            self.input_norm = RMSNorm(d.num_aux * d.target_hidden, eps)
        if v.fc_norm:
            self.fc_norm = nn.ModuleList(RMSNorm(d.target_hidden, eps) for _ in range(d.num_aux))
        if d.num_layers == 1:
            self.midlayer = _MidLayer(d, eps, v)
        else:  # names follow names.layer_prefix: midlayers.{i}.*
            self.midlayers = nn.ModuleList(_MidLayer(d, eps, v, first=i == 0) for i in range(d.num_layers))
        self.norm = RMSNorm(d.hidden, eps)
        self.lm_head = nn.Linear(d.hidden, d.draft_vocab, bias=False)
        self.register_buffer("d2t", torch.zeros(d.draft_vocab, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(d.vocab, dtype=torch.bool))
        self.embed_tokens: nn.Embedding | None = None
        self._shared_embed: torch.Tensor | None = None
        if embed is not None:
            self.set_embed(embed)
        try:
            self._rope_spec = R.build({**flat, "head_dim": d.head_dim}, v.rope)
        except (KeyError, TypeError, ValueError) as exc:
            raise UnsupportedError(f"rope_scaling: {exc}") from None

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
            own: torch.Tensor = self.embed_tokens(tokens)
            return own
        if self._shared_embed is None:
            raise RuntimeError("drafter has no token embedding: call set_embed(target embedding)")
        w = self._shared_embed
        # Gather the rows first: a large (memory-mapped) target embedding is never converted whole.
        rows = F.embedding(tokens.to(w.device), w)
        return rows.to(device=tokens.device, dtype=self.fc.weight.dtype)

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def logits(self, h2: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.lm_head(self.norm(h2) if self.variant.logits_norm else h2)
        return out

    def _outputs(self, h2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(state fed to the next step, logits) from the layer output."""
        if self.variant.feed_normed:
            n = self.norm(h2)
            return n, self.lm_head(n)
        return h2, self.logits(h2)

    # ----- the layer, split so step() and unroll() share it -----
    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """fc on 3*H_t target features; the drafter's own H-wide output passes unchanged (SGLang's rule)."""
        if hidden.shape[-1] == self.dims.hidden:
            return hidden
        x = hidden
        if self.variant.norm_before_fc:
            x = self.input_norm(x)
        if self.variant.fc_norm:
            chunks = torch.split(x, self.dims.target_hidden, dim=-1)
            x = torch.cat([n(c) for n, c in zip(self.fc_norm, chunks)], dim=-1)
        out: torch.Tensor = self.fc(x)
        return out

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        try:
            cos, sin = R.cos_sin(self._rope_spec, positions, x.dtype)  # [B, 1, T, d]
        except R.RopeRefusedError as exc:
            raise UnsupportedError(str(exc)) from None
        return x * cos + _rotate_half(x) * sin

    def _layers(self) -> list[_MidLayer]:
        return [self.midlayer] if self.dims.num_layers == 1 else cast("list[_MidLayer]", list(self.midlayers))

    def _qkv(
        self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, layer: _MidLayer | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(residual, q, k, v) of one layer; ``hidden`` is the previous layer's output for the
        plain layers, the target features or the previous step's state for the first."""
        d = self.dims
        layer = layer if layer is not None else self._layers()[0]
        if layer.first:
            h = self.project(hidden)
            e = layer.input_layernorm(self.embed(tokens))
            hn = layer.hidden_norm(h)
            x = torch.cat([e, hn], dim=-1)
            residual = hn if self.variant.norm_before_residual else h
        else:
            x = layer.input_layernorm(hidden)
            residual = hidden
        B, T, _ = x.shape
        att = layer.self_attn
        q = att.q_proj(x).view(B, T, d.num_heads, d.head_dim)
        k = att.k_proj(x).view(B, T, d.num_kv_heads, d.head_dim)
        if self.variant.qk_norm:
            q, k = att.q_norm(q), att.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = att.v_proj(x).view(B, T, d.num_kv_heads, d.head_dim).transpose(1, 2)
        positions = positions + self.variant.position_offset
        return residual, self._rope(q, positions), self._rope(k, positions), v

    def _expand_kv(self, t: torch.Tensor) -> torch.Tensor:
        rep = self.dims.num_heads // self.dims.num_kv_heads
        return t if rep == 1 else t.repeat_interleave(rep, dim=1)

    def _finish(
        self, residual: torch.Tensor, attn: torch.Tensor, layer: _MidLayer | None = None
    ) -> torch.Tensor:  # attn [B, nh, T, d]
        B, _, T, _ = attn.shape
        layer = layer if layer is not None else self._layers()[0]
        h1 = residual + layer.self_attn.o_proj(attn.transpose(1, 2).reshape(B, T, -1))
        h2: torch.Tensor = h1 + layer.mlp(layer.post_attention_layernorm(h1))
        return h2

    # ----- inference -----
    def step(
        self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, past: Past | None = None
    ) -> StepOut:
        """One draft forward over T new positions (see the module docstring)."""
        if positions.dim() == 1:
            positions = positions[None].expand(tokens.shape[0], -1)
        layers = self._layers()
        # one layer: ``past`` is its (K, V); several: a list of them, one per layer
        pasts: list[KV | None] = (
            [None] * len(layers)
            if past is None
            else ([cast(KV, past)] if len(layers) == 1 else list(cast("list[KV]", past)))
        )
        kvs: list[KV]
        x, kvs = hidden, []
        for layer, pk in zip(layers, pasts):
            residual, q, k, v = self._qkv(x, tokens, positions, layer)
            if pk is not None:
                k = torch.cat([pk[0], k], dim=2)
                v = torch.cat([pk[1], v], dim=2)
            T, S = q.shape[2], k.shape[2]
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
            out = F.scaled_dot_product_attention(q, self._expand_kv(k), self._expand_kv(v), attn_mask=mask)
            x = self._finish(residual, out, layer)
            kvs.append((k, v))
        nxt, logits = self._outputs(x)
        return StepOut(nxt, logits, kvs[0] if len(layers) == 1 else kvs)

    @torch.no_grad()
    def draft_chain(self, last: StepOut, past: Past, position: int, num_steps: int) -> torch.Tensor:
        """Greedy chain of ``num_steps`` target ids.

        ``last`` is the step output whose final position is the last committed pair (index t, at
        RoPE ``position`` = t); ``past`` the drafter KV cache including that pair. Step k >= 1 runs at
        position t + k on (previous output, previous draft token) attending to ``past`` + chain keys.
        """
        draft = last.logits[:, -1].argmax(-1)  # [B] draft ids
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
    def unroll(
        self, aux: torch.Tensor, step_tokens: Sequence[torch.Tensor], positions: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """TTT forward; returns one ``[B, T, Vd]`` logits tensor per step (see module docstring)."""
        B, T = step_tokens[0].shape
        if positions is None:
            positions = torch.arange(T, device=aux.device)[None].expand(B, T)
        # SpecForge divides the scores by sqrt(head_dim); transformers (speculators) multiplies by
        # head_dim ** -0.5: the two round differently, and each reading keeps its tool's bits.
        if self.variant.convention == "specforge":
            root = math.sqrt(self.dims.head_dim)

            def scaled(x: torch.Tensor) -> torch.Tensor:
                return x / root
        else:
            inv: float = self.dims.head_dim**-0.5

            def scaled(x: torch.Tensor) -> torch.Tensor:
                return x * inv

        causal = torch.ones(T, T, dtype=torch.bool, device=aux.device).tril()
        layers = self._layers()
        hidden, outs = aux, []
        keys: list[list[torch.Tensor]]
        values: list[list[torch.Tensor]]
        keys, values = [[] for _ in layers], [[] for _ in layers]
        for k, tok in enumerate(step_tokens):
            x = hidden
            for li, layer in enumerate(layers):
                residual, q, kk, vv = self._qkv(x, tok, positions + k, layer)
                keys[li].append(self._expand_kv(kk))
                values[li].append(self._expand_kv(vv))
                ks, vs = keys[li], values[li]
                s0 = scaled(q @ ks[0].transpose(-1, -2))
                s0 = s0.masked_fill(~causal, float("-inf"))
                diag = [scaled((q * kj).sum(-1, keepdim=True)) for kj in ks[1:]]
                p = torch.softmax(torch.cat([s0, *diag], dim=-1), dim=-1)
                attn = p[..., :T] @ vs[0]
                for j, vj in enumerate(vs[1:]):
                    attn = attn + p[..., T + j : T + j + 1] * vj
                x = self._finish(residual, attn, layer)
            hidden, logits = self._outputs(x)
            outs.append(logits)
        return outs


def ttt_tokens(next_ids: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Token rows for ``unroll``: step k reads ``next_ids`` shifted left by k (zero-padded at the end)."""
    rows = [next_ids]
    for _ in range(1, steps):
        prev = rows[-1]
        rows.append(torch.cat([prev[:, 1:], torch.zeros_like(prev[:, :1])], dim=1))
    return rows


def vocab_mapping(counts: Sequence[int] | torch.Tensor, draft_vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
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
