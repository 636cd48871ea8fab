"""Per-forward-pass tensor dumps in the layout of SGLang's ``--debug-tensor-dump-output-folder``.

``{folder}/{target|draft}/TP0_PP0_Rank0_pid{pid}/Pass{NNNNN}.pt``: one ``torch.save`` dict per forward
pass, names as SGLang's leaf modules, tensors flattened to ``[tokens, ...]``:

- ``model.embed_tokens``: embedding output;
- ``model.layers.{i}.input_layernorm``: layer 0 the normed embedding; i >= 1 ``[normed, residual]``
  where ``residual`` is the residual stream entering layer i (= out(i-1));
- ``model.layers.{i}.self_attn.qkv_proj``, ``.self_attn.o_proj``, ``.post_attention_layernorm``
  (``[normed, residual]``), ``.mlp.gate_up_proj``, ``.mlp.down_proj``;
- ``model.norm``: ``[normed, residual]`` (final post-norm, final pre-norm = out(N-1));
- ``model.forward_batch_info.{input_ids,seq_lens,positions}``.

As in SGLang the top-level ``model`` output and ``logits_processor`` (last-token logits) are added
after the pass is written, so they land in the next pass's file. ``layers`` limits the per-layer
entries (``--debug-tensor-dump-layers``). The draft writes ``model.fc``, ``model.layers.0.*`` and
``model.norm`` for each draft forward.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    from workbench.drafter.model import Eagle3Drafter

    Hook = Callable[[torch.nn.Module, Any, Any], None]


def _flat(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return t.reshape(-1, t.shape[-1]).cpu() if t.dim() >= 2 else t.cpu()


class Dumper:
    def __init__(
        self,
        folder: str | os.PathLike[str],
        layers: list[int] | None = None,
        spec: bool = True,
        dtype: torch.dtype | None = None,
    ) -> None:
        self.root = Path(folder)
        self.layers = set(layers) if layers else None
        self.spec = spec
        self.dtype = dtype
        self.pass_id = {"target": 0, "draft": 0}
        self.current: dict[str, dict[Any, Any]] = {"target": {}, "draft": {}}
        self.carry: dict[str, dict[Any, Any]] = {"target": {}, "draft": {}}
        self.dirs: dict[str, Path] = {}
        self._handles: list[Any] = []

    def dir_for(self, role: str) -> Path:
        if role not in self.dirs:
            base = self.root / role if self.spec else self.root
            d = base / f"TP0_PP0_Rank0_pid{os.getpid()}"
            d.mkdir(parents=True, exist_ok=True)
            self.dirs[role] = d
        return self.dirs[role]

    def _cast(self, t: torch.Tensor) -> torch.Tensor:
        t = _flat(t)
        return t.to(self.dtype) if self.dtype is not None and t.is_floating_point() else t

    def _put(self, role: str, name: str, value: torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor, ...]) -> None:
        if isinstance(value, (list, tuple)):
            self.current[role][name] = [self._cast(v) for v in value]
        else:
            self.current[role][name] = self._cast(value)

    def _want_layer(self, i: int) -> bool:
        return self.layers is None or i in self.layers

    # -- target hooks ---------------------------------------------------------------------------
    def attach(self, model: LlamaForCausalLM, role: str = "target") -> None:
        inner = model.model
        H = self._handles
        H.append(inner.embed_tokens.register_forward_hook(lambda m, i, o: self._put(role, "model.embed_tokens", o)))
        for idx, module in enumerate(inner.layers):
            if not self._want_layer(idx):
                continue
            layer = cast("LlamaDecoderLayer", module)  # the lab target is a Llama
            p = f"model.layers.{idx}"
            state: dict[str, Any] = {}

            def pre(
                m: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], state: dict[str, Any] = state
            ) -> None:
                x = args[0] if args else kwargs.get("hidden_states")
                state["in"] = x

            H.append(layer.register_forward_pre_hook(pre, with_kwargs=True))

            def ln_in(
                m: torch.nn.Module, i: Any, o: Any, p: str = p, idx: int = idx, state: dict[str, Any] = state
            ) -> None:
                self._put(role, f"{p}.input_layernorm", o if idx == 0 else [o, state["in"]])

            def ln_post(m: torch.nn.Module, i: Any, o: Any, p: str = p) -> None:
                self._put(role, f"{p}.post_attention_layernorm", [o, i[0]])

            H.append(layer.input_layernorm.register_forward_hook(ln_in))
            H.append(layer.post_attention_layernorm.register_forward_hook(ln_post))
            att, mlp = layer.self_attn, layer.mlp
            qkv: dict[str, torch.Tensor] = {}

            def proj(name: str, p: str = p, qkv: dict[str, torch.Tensor] = qkv) -> Hook:
                def fn(m: torch.nn.Module, i: Any, o: Any) -> None:
                    qkv[name] = o
                    if len(qkv) == 3:
                        import torch

                        self._put(role, f"{p}.self_attn.qkv_proj", torch.cat([qkv["q"], qkv["k"], qkv["v"]], -1))
                        qkv.clear()

                return fn

            for name in ("q", "k", "v"):
                H.append(getattr(att, f"{name}_proj").register_forward_hook(proj(name)))
            H.append(att.o_proj.register_forward_hook(lambda m, i, o, p=p: self._put(role, f"{p}.self_attn.o_proj", o)))
            gu: dict[str, torch.Tensor] = {}

            def gate_up(name: str, p: str = p, gu: dict[str, torch.Tensor] = gu) -> Hook:
                def fn(m: torch.nn.Module, i: Any, o: Any) -> None:
                    gu[name] = o
                    if len(gu) == 2:
                        import torch

                        self._put(role, f"{p}.mlp.gate_up_proj", torch.cat([gu["gate"], gu["up"]], -1))
                        gu.clear()

                return fn

            H.append(mlp.gate_proj.register_forward_hook(gate_up("gate")))
            H.append(mlp.up_proj.register_forward_hook(gate_up("up")))
            H.append(mlp.down_proj.register_forward_hook(lambda m, i, o, p=p: self._put(role, f"{p}.mlp.down_proj", o)))

        def final(m: torch.nn.Module, i: Any, o: Any) -> None:
            self._put(role, "model.norm", [o, i[0]])
            self.carry[role]["model"] = self._cast(o)

        H.append(inner.norm.register_forward_hook(final))
        H.append(
            model.lm_head.register_forward_hook(
                lambda m, i, o: self.carry[role].__setitem__("logits_processor", self._cast(o[:, -1]))
            )
        )

    def attach_drafter(self, drafter: Eagle3Drafter) -> None:
        role = "draft"
        H = self._handles
        names = {
            drafter.fc: "model.fc",
            drafter.midlayer.input_layernorm: "model.layers.0.input_layernorm",
            drafter.midlayer.hidden_norm: "model.layers.0.hidden_norm",
            drafter.midlayer.self_attn.o_proj: "model.layers.0.self_attn.o_proj",
            drafter.midlayer.post_attention_layernorm: "model.layers.0.post_attention_layernorm",
            drafter.midlayer.mlp.down_proj: "model.layers.0.mlp.down_proj",
            drafter.norm: "model.norm",
        }
        for mod, name in names.items():
            H.append(mod.register_forward_hook(lambda m, i, o, name=name: self._put(role, name, o)))
        H.append(
            drafter.lm_head.register_forward_hook(
                lambda m, i, o: self.carry[role].__setitem__(
                    "logits_processor", self._cast(o.reshape(-1, o.shape[-1])[-1:])
                )
            )
        )

    # -- passes ---------------------------------------------------------------------------------
    def end_pass(self, role: str, input_ids: torch.Tensor, start: int) -> Path:
        import torch

        cur = self.current[role]
        ids = input_ids.reshape(-1).cpu()
        cur["model.forward_batch_info.input_ids"] = ids
        cur["model.forward_batch_info.seq_lens"] = torch.tensor([start + ids.numel()])
        cur["model.forward_batch_info.positions"] = torch.arange(start, start + ids.numel())
        path = self.dir_for(role) / f"Pass{self.pass_id[role]:05d}.pt"
        torch.save(cur, str(path))
        self.pass_id[role] += 1
        self.current[role] = dict(self.carry[role])  # written with the next pass, as SGLang does
        self.carry[role] = {}
        return path

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
