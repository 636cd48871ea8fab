"""Failure classes: what each names, what to do about it, and which explains a dead server.

A failure record's class names the cause the engine (or PyTorch, NCCL, the OS under it) states, and
its ``text`` / ``exception`` keep the engine's own words. ``classify`` picks, among the failures of a
log, the one that explains the death: the most specific cause, not its consequences (a hung scheduler,
not the SIGQUIT its watchdog sends; an out-of-memory in the scheduler, not "Scheduler hit an exception").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Most specific first: when several show in one log, the first explains the death.
PRIORITY = (
    "draft-context",
    "context-length",
    "aux-hidden-states",
    "unsupported-attention",
    "port-in-use",
    "cuda-graph",
    "oom",
    "nccl",
    "scheduler-hung",
    "warmup-failed",
    "exception",
    "scheduler-exception",
    "engine-dead",
    "process-died",
)
FAILURE_CLASSES = PRIORITY

HINTS = {
    "oom": "out of GPU memory: lower --mem-fraction-static (SGLang) or --gpu-memory-utilization (vLLM), the "
    "CUDA-graph batch sizes or the context length, or free the GPUs",
    "port-in-use": "the port is taken: stop whatever holds it or pick another --port",
    "draft-context": "the draft's context is shorter than the target's: raise the draft's max_position_embeddings "
    "or set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    "context-length": "the requested context length is longer than the model's own: lower it, or allow the "
    "override (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) if the model "
    "really supports it",
    "aux-hidden-states": "the draft's fc layer takes more target hidden states than the target captured: check "
    "eagle_aux_hidden_state_layer_ids against the draft's fc width (a negative or out-of-range id is dropped)",
    "unsupported-attention": "the attention backend does not support this model's head size on this device: "
    "pick another backend or device",
    "cuda-graph": "CUDA-graph capture failed: lower the CUDA-graph batch sizes or the memory fraction, try "
    "--disable-custom-all-reduce, or disable graphs to isolate it",
    "nccl": "NCCL / all-reduce error: try --disable-custom-all-reduce, check the NCCL settings (NCCL_P2P_LEVEL, "
    "NCCL_PROTO, NCCL_ALGO) and that every rank is alive",
    "scheduler-hung": "a scheduler stopped making progress and its watchdog ended the server: a forward pass "
    "hung (a collective waiting on a dead or slow rank, a kernel that never returns); the SIGQUIT after it "
    "is the consequence",
    "warmup-failed": "the warm-up request failed: read the exception",
    "exception": "the process raised: read the exception",
    "scheduler-exception": "a server process raised: read the traceback that follows the line",
    "engine-dead": "vLLM's engine core died: the root cause is the exception logged before or after this line",
    "process-died": "a server process died: read the lines before it for the cause",
}
# Hints that depend on what exactly failed (the record's "what"), over the class's own.
HINTS_WHAT: dict[tuple[str, str | None], str] = {
    ("oom", "kv-pool"): "no room left for the KV cache after the weights: raise --mem-fraction-static (SGLang) or "
    "--gpu-memory-utilization (vLLM), or lower the running requests / context length, or use more GPUs",
    ("oom", "host-oom"): "the process was killed (SIGKILL): often the OS out-of-memory killer; check dmesg",
    ("port-in-use", "server"): "the server's --port is taken: stop whatever holds it or pick another --port",
    ("port-in-use", "internal"): "a port the engine opens for its own processes (ZMQ, NCCL, the distributed-init "
    "TCPStore) is taken, not --port: another server or a leftover of one holds it; stop it, or give this "
    "server its own --nccl-port / --dist-init-addr (SGLang) or --master-port (vLLM)",
    ("draft-context", "index-assert"): "an index past the end of a table on the GPU: with a draft, often positions "
    "beyond the draft's max_position_embeddings (its rotary table); raise it to the target's context length",
    ("nccl", "timeout"): "a collective timed out (torch's NCCL watchdog): a rank is dead, hung or much slower than "
    "the others; read that rank's log",
    ("process-died", "sigquit"): "a child process failed and the server shut down: the cause is logged above this line",
}


def hint(cls: str, what: str | None = None) -> str:
    return HINTS_WHAT.get((cls, what), HINTS.get(cls, ""))


def classify(
    records: Iterable[dict[str, Any]], exit_code: int | None = None, process_alive: bool = True
) -> dict[str, Any] | None:
    """The failure that explains a failed start or a death: the most specific class among the log's
    failure records, or ``process-died`` when the process is gone (or exited non-zero) without one."""
    found: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.get("kind") == "failure":
            found.setdefault(r["class"], r)
    for cls in PRIORITY:
        if cls in found:
            return dict(found[cls])
    if not process_alive or exit_code not in (None, 0):
        text = "the server process is gone" + (f" (exit code {exit_code})" if exit_code is not None else "")
        out: dict[str, Any] = {
            "kind": "failure",
            "class": "process-died",
            "hint": HINTS["process-died"],
            "text": text,
            "time": None,
            "line": None,
        }
        if exit_code is not None:
            out["exit_code"] = exit_code
            if exit_code == -9:
                out["hint"] += " (exit -9 is SIGKILL: often the OS out-of-memory killer; check dmesg)"
        return out
    return None
