"""vLLM's surface of the lab server (``--lab-engine vllm==X``): the routes, counters and log lines a vLLM
server has, over the same real speculative decoding, for fast tests of the workbench's vLLM support.

- ``/v1/completions``: OpenAI completions, prompts as text or token ids, ``return_token_ids``;
- ``/v1/models``, ``/version``, ``/reset_prefix_cache`` (POST), ``/health`` (200 once up, no generation);
- ``/metrics``: the speculative-decoding counters in Prometheus' text format, named and counted as
  ``vllm/v1/spec_decode/metrics.py`` counts them (``SpecDecodingStats.observe_draft``: a round that drafted
  adds one draft, its draft tokens, its accepted tokens and one to each position up to the accepted ones);
- the ``SpecDecoding metrics:`` log line (``SpecDecodingLogging.log``), with vLLM's log prefix
  (``vllm/logger.py``: ``(APIServer pid=N) INFO MM-DD HH:MM:SS [file:line] message``).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SpecTotals:
    """Cumulative counters (never reset, as Prometheus counters) and the window of the log line."""

    steps: int
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)
    window: list[tuple[int, int, list[int]]] = field(default_factory=list)
    window_start: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, accepted: int) -> None:
        k = self.steps
        with self.lock:
            if len(self.per_pos) < k:
                self.per_pos += [0] * (k - len(self.per_pos))
            self.drafts += 1
            self.draft_tokens += k
            self.accepted += accepted
            for i in range(min(accepted, k)):
                self.per_pos[i] += 1
            self.window.append((k, accepted, [1 if i < accepted else 0 for i in range(k)]))

    def take_window(self) -> tuple[list[tuple[int, int, list[int]]], float]:
        with self.lock:
            w, t0 = self.window, self.window_start
            self.window, self.window_start = [], time.monotonic()
        return w, time.monotonic() - t0


def prefix(process: str = "APIServer", level: str = "INFO", where: str = "metrics.py:120") -> str:
    return f"({process} pid={os.getpid()}) {level} {time.strftime('%m-%d %H:%M:%S')} [{where}] "


def spec_line(window: list[tuple[int, int, list[int]]], elapsed: float) -> str | None:
    """``SpecDecoding metrics: ...`` for the rounds of a window, as vLLM formats it (None: no draft)."""
    if not window:
        return None
    drafts = len(window)
    drafted = sum(k for k, _, _ in window)
    accepted = sum(a for _, a, _ in window)
    width = max(len(p) for _, _, p in window)
    rates = [sum(p[i] for _, _, p in window if i < len(p)) / drafts for i in range(width)]
    rate = accepted / drafted * 100 if drafted else float("nan")
    return (
        f"SpecDecoding metrics: Mean acceptance length: {1 + accepted / drafts:.2f}, "
        f"Accepted throughput: {accepted / max(elapsed, 1e-9):.2f} tokens/s, "
        f"Drafted throughput: {drafted / max(elapsed, 1e-9):.2f} tokens/s, "
        f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, "
        f"Per-position acceptance rate: {', '.join(f'{r:.3f}' for r in rates)}, "
        f"Avg Draft acceptance rate: {rate:.1f}%"
    )


def metrics_text(totals: SpecTotals | None, model: str) -> str:
    """The ``/metrics`` page: the speculative-decoding counters (none without speculation)."""
    lines: list[str] = []
    if totals is None:
        return "\n"
    labels = f'engine="0",model_name="{model}"'
    with totals.lock:
        rows = [
            ("drafts", "Number of spec decoding drafts.", totals.drafts),
            ("draft_tokens", "Number of draft tokens.", totals.draft_tokens),
            ("accepted_tokens", "Number of accepted tokens.", totals.accepted),
        ]
        per_pos = list(totals.per_pos)
    for name, doc, v in rows:
        full = f"vllm:spec_decode_num_{name}"
        lines += [f"# HELP {full}_total {doc}", f"# TYPE {full}_total counter", f"{full}_total{{{labels}}} {v:.1f}"]
    full = "vllm:spec_decode_num_accepted_tokens_per_pos"
    lines += [f"# HELP {full}_total Accepted tokens per draft position.", f"# TYPE {full}_total counter"]
    lines += [f'{full}_total{{{labels},position="{i}"}} {v:.1f}' for i, v in enumerate(per_pos)]
    return "\n".join(lines) + "\n"


def completion_body(body: object) -> tuple[list[Any], int, bool, bool]:
    """(prompts, max_tokens, ignore_eos, return_token_ids) of a ``/v1/completions`` request."""
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    prompt = body.get("prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
        prompts: list[Any] = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt):
        prompts = list(prompt)
    else:
        raise ValueError("prompt: expected a string, a list of token ids, or a list of either")
    max_tokens = int(body.get("max_tokens") or 16)
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    return prompts, max_tokens, bool(body.get("ignore_eos", False)), bool(body.get("return_token_ids", False))


def spec_metrics(histogram: list[int], steps: int) -> dict[str, Any]:
    """A request's ``metrics.speculative_decoding`` as vLLM reports it with
    ``--per-request-spec-decode-metrics`` (``vllm/v1/metrics/stats.py``: rounds by accepted drafts)."""
    rounds = sum(histogram)
    accepted = sum(j * n for j, n in enumerate(histogram))
    drafted = rounds * steps
    return {
        "mean_acceptance_length": 1.0 + accepted / rounds if rounds else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": list(histogram),
        "num_spec_steps": rounds,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": steps,
    }


def completion_response(
    model: str, outs: list[tuple[str, list[int], str, int]], return_ids: bool, metrics: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The answer to a completions request: ``outs`` = (text, output ids, finish reason, prompt tokens);
    ``metrics``: the per-request speculative-decoding figures (one prompt)."""
    choices = []
    for i, (text, ids, reason, _) in enumerate(outs):
        c: dict[str, Any] = {"index": i, "text": text, "logprobs": None, "finish_reason": reason}
        if return_ids:
            c["token_ids"] = ids
        choices.append(c)
    prompt_tokens = sum(p for *_, p in outs)
    completion = sum(len(ids) for _, ids, _, _ in outs)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        },
        "metrics": {"speculative_decoding": metrics} if metrics is not None else None,
    }
