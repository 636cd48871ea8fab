"""vLLM's hidden-state connector on a CPU build: loaded inside a vLLM server by
``--kv-transfer-config '{"kv_connector": "CPUHiddenStatesConnector", "kv_connector_module_path":
"workbench.vllm.cpu_connector", ...}'`` (this module imports only vLLM and torch).

vLLM's route to hidden states is the speculative method ``extract_hidden_states``: its proposer caches
the target's auxiliary states (vLLM's own capture, for ``eagle_aux_hidden_state_layer_ids``) in a KV
cache, and ``ExampleHiddenStatesConnector`` reads them back (``extract_from_kv_cache``) and writes them
to safetensors when a request ends. On a CPU build that write fails at its first request: the
connector copies device to host through a CUDA stream and event into pinned memory (0.32.0:
``RuntimeError: pin_memory=True requires a CUDA or other accelerator backend``).

``CPUHiddenStatesConnector`` is vLLM's connector with those device-copy primitives made the CPU's
plain operations for the span of its write (a stream whose waits are no-ops, an event already
complete, no pinned memory). Every other step, the capture included, is vLLM's own code.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector,
)

_PATCH = threading.Lock()


class _HostEvent:
    """A CUDA event on a machine without one: every copy is complete when it returns."""

    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait(self, stream: Any = None) -> None:
        return None


class _HostStream:
    def wait_event(self, event: Any) -> None:
        return None

    def wait_stream(self, stream: Any) -> None:
        return None


@contextlib.contextmanager
def _host_copies() -> Iterator[None]:
    """torch's CUDA stream, event and pinned allocation as the CPU's plain operations, for one write."""
    cuda = torch.cuda
    saved = (cuda.Event, cuda.stream, torch.empty_like)
    real_empty_like = torch.empty_like

    def empty_like(t: torch.Tensor, *args: Any, **kw: Any) -> torch.Tensor:
        kw.pop("pin_memory", None)
        return real_empty_like(t, *args, **kw)

    def stream(s: Any = None) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    with _PATCH:
        cuda.Event = _HostEvent  # type: ignore[assignment,misc]
        cuda.stream = stream  # type: ignore[assignment]
        torch.empty_like = empty_like  # type: ignore[assignment]
        try:
            yield
        finally:
            cuda.Event, cuda.stream, torch.empty_like = saved  # type: ignore[misc]


class CPUHiddenStatesConnector(ExampleHiddenStatesConnector):  # type: ignore[misc]
    """``ExampleHiddenStatesConnector`` whose device-to-host copy runs on a CPU build."""

    def _get_copy_stream(self) -> Any:
        return _HostStream()

    def _submit_async_write(self, pending: Any) -> None:
        with _host_copies():
            super()._submit_async_write(pending)
