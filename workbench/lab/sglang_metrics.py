"""SGLang's ``/metrics`` on the lab server (with ``--enable-metrics``): the acceptance counters and
gauges SGLang's collectors define (``sglang/srt/observability/metrics_collector.py``), counted as
SGLang counts them, over the lab's real speculative decoding.

- counters of finished requests (the tokenizer's collector, ``observe_one_finished_request``; labels
  ``model_name``, ``engine_type``, and ``is_streaming`` on tokens and requests from 0.5.23):
  ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``, ``sglang:num_requests_total`` and,
  from 0.5.13 (0.5.12 has none), ``sglang:spec_verify_calls_total`` (the request's ``spec_verify_ct``);
  health checks are not counted (``log_metrics=False``), the start-up warm-up request is;
- gauges set at each decode log interval (the scheduler's collector; labels ``model_name``,
  ``engine_type``, ``tp_rank``, ``pp_rank``, ``moe_ep_rank``): ``sglang:spec_accept_length``,
  ``sglang:spec_accept_rate`` (the interval's figures, as the decode log line prints them),
  ``sglang:spec_num_steps``, ``sglang:spec_num_draft_tokens``, ``sglang:gen_throughput``.

SGLang runs its collectors in Prometheus' multiprocess mode: a series appears once it has a value,
so a fresh server's page lacks the request counters until a request finishes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from workbench.engine.version import Version

COUNTERS = {
    "prompt_tokens": "Number of prefill tokens processed.",
    "generation_tokens": "Number of generation tokens processed.",
    "num_requests": "Number of requests processed.",
    "spec_verify_calls": "Number of speculative decoding verification calls.",
}
GAUGES = {
    "spec_accept_length": "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
    "spec_accept_rate": "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
    "spec_num_steps": "Currently active speculative_num_steps.",
    "spec_num_draft_tokens": "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
    "gen_throughput": "The generation throughput (token/s).",
}


@dataclass
class SGLangMetrics:
    """The lab server's counters (from its start) and the last interval's gauges."""

    version: Version
    model: str
    counts: dict[str, int] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def finished(self, prompt_tokens: int, completion_tokens: int, verify_ct: int) -> None:
        """A request finished (SGLang counts it at its end, as ``observe_one_finished_request``)."""
        with self.lock:
            for key, n in (
                ("prompt_tokens", prompt_tokens),
                ("generation_tokens", completion_tokens),
                ("num_requests", 1),
                ("spec_verify_calls", verify_ct),
            ):
                if key == "spec_verify_calls" and (verify_ct <= 0 or self.version < Version.parse("0.5.13")):
                    continue
                self.counts[key] = self.counts.get(key, 0) + n

    def interval(self, values: dict[str, float]) -> None:
        """A decode log interval's figures (the gauges hold the most recent)."""
        with self.lock:
            self.gauges.update(values)

    def text(self) -> str:
        streaming = self.version >= Version.parse("0.5.23")
        base = f'engine_type="unified",model_name="{self.model}"'
        rank = base + ',moe_ep_rank="0",pp_rank="0",tp_rank="0"'
        lines: list[str] = []
        with self.lock:
            counts, gauges = dict(self.counts), dict(self.gauges)
        for key, doc in COUNTERS.items():
            if key not in counts:
                continue
            name = f"sglang:{key}_total"
            labels = base + (',is_streaming="false"' if streaming and key != "spec_verify_calls" else "")
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} counter", f"{name}{{{labels}}} {float(counts[key])}"]
        for key, doc in GAUGES.items():
            if key not in gauges:
                continue
            name = f"sglang:{key}"
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} gauge", f"{name}{{{rank}}} {float(gauges[key])}"]
        return "\n".join(lines) + "\n"
