"""Residual streams of an HF Llama forward, by physical point, through forward hooks.

``StreamTap(model)`` registers hooks on the embedding, every decoder layer and the final norm;
``tap.grab(names)`` arms it for the next forward and returns a dict filled during that forward:
``"embed"`` (embedding output), ``"out(K)"`` (residual after decoder layer K, un-normed),
``"final-prenorm"`` (input of the final norm = out(N-1)) and ``"final-postnorm"`` (its output).
Names follow ``workbench.layers.Point`` spelling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM


def _first(x: Any) -> Any:
    return x[0] if isinstance(x, (tuple, list)) else x


class StreamTap:
    def __init__(self, model: LlamaForCausalLM) -> None:
        self.model = model
        inner = model.model
        self.num_layers = len(inner.layers)
        self._want: set[str] | None = None
        self.store: dict[str, torch.Tensor] = {}
        self._handles = [inner.embed_tokens.register_forward_hook(self._hook("embed"))]
        for k, layer in enumerate(inner.layers):
            self._handles.append(layer.register_forward_hook(self._hook(f"out({k})")))
        self._handles.append(inner.norm.register_forward_hook(self._norm_hook))

    def _hook(self, name: str) -> Callable[[torch.nn.Module, Any, Any], None]:
        def fn(_mod: torch.nn.Module, _inp: Any, out: Any) -> None:
            if self._want is not None and (name in self._want or "*" in self._want):
                self.store[name] = _first(out).detach()

        return fn

    def _norm_hook(self, _mod: torch.nn.Module, inp: Any, out: Any) -> None:
        if self._want is None:
            return
        if "final-prenorm" in self._want or "*" in self._want:
            self.store["final-prenorm"] = _first(inp).detach()
        if "final-postnorm" in self._want or "*" in self._want:
            self.store["final-postnorm"] = _first(out).detach()

    def grab(self, names: Iterable[str]) -> dict[str, torch.Tensor]:
        """Arm for the next forward(s); ``"*"`` grabs every stream. Returns the (live) store."""
        self._want = set(names)
        self.store = {}
        return self.store

    def release(self) -> None:
        self._want = None

    def all_names(self) -> list[str]:
        return ["embed"] + [f"out({k})" for k in range(self.num_layers)] + ["final-postnorm"]

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
