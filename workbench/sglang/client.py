"""SGLang's routes (through a tunnel): health, server info, flush, generate, tokenize and, with
``--enable-metrics``, the Prometheus ``/metrics``; the measurement protocol's primitives for an SGLang
server.

Counters (the tokenizer's collector, ``observability/metrics_collector.py`` in 0.5.23), each summed over
its label sets (``model_name``, ``engine_type``, ``is_streaming`` and any custom labels):

- ``sglang:spec_verify_calls_total``: verify calls of finished requests (their ``spec_verify_ct``);
- ``sglang:generation_tokens_total``: completion tokens of finished requests;
- ``sglang:num_requests_total``: finished requests.

0.5.12 and earlier count no verify calls (only the per-interval gauge ``sglang:spec_accept_length``):
there the counters read zero rounds and acceptance comes from elsewhere, saying so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from workbench.servers.client import HTTPClient, ServerHTTPError
from workbench.servers.engines import Generated, SpecCounters

VERIFY_CALLS = "sglang:spec_verify_calls_total"
GENERATION_TOKENS = "sglang:generation_tokens_total"
REQUESTS = "sglang:num_requests_total"
#: the per-interval gauges (the decode log line's figures), for display only
GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate")


def parse_counters(text: str) -> SpecCounters:
    """SGLang's acceptance counters on a ``/metrics`` page: a counter the page lacks reads zero (its
    samples appear at the first finished request that counts in it; a release without it never has
    them)."""
    from workbench.servers.prometheus import summed

    got = summed(text, (VERIFY_CALLS, GENERATION_TOKENS, REQUESTS))
    return SpecCounters(
        verify_calls=int(got.get(VERIFY_CALLS, 0)),
        generation_tokens=int(got.get(GENERATION_TOKENS, 0)),
        requests=int(got.get(REQUESTS, 0)),
        source="sglang /metrics",
    )


def parse_gauges(text: str) -> dict[str, float]:
    """The last interval's ``sglang:spec_accept_length`` / ``sglang:spec_accept_rate`` (a gauge per
    rank; the first of each)."""
    from workbench.servers.prometheus import samples

    out: dict[str, float] = {}
    for name, _labels, value in samples(text, "sglang:spec_accept_"):
        if name in GAUGES:
            out.setdefault(name.split(":", 1)[1], value)
    return out


class SGLangClient(HTTPClient):
    def health_generate(self, timeout: float = 30.0) -> bool:
        status, _ = self._req("GET", "/health_generate", timeout=timeout)
        return status == 200

    def server_info(self) -> dict[str, Any]:
        """``/server_info`` (0.5.6+), falling back to ``/get_server_info`` (older versions)."""
        for path in ("/server_info", "/get_server_info"):
            status, raw = self._req("GET", path)
            if status == 200:
                info: dict[str, Any] = json.loads(raw)
                info["_route"] = path
                return info
            if status not in (404, 405):
                raise ServerHTTPError(self.base + path, status, raw.decode(errors="replace")[:200])
        raise ServerHTTPError(self.base, 404, "neither /server_info nor /get_server_info answers")

    def flush_cache(self) -> tuple[bool, str]:
        """True when flushed; False when the server is busy (400: requests running)."""
        status, raw = self._req("POST", "/flush_cache")
        text = raw.decode(errors="replace")
        if status == 200:
            return True, text
        if status == 400:
            return False, text
        raise ServerHTTPError(self.base + "/flush_cache", status, text[:200])

    def generate(
        self, text: str, max_new_tokens: int, temperature: float = 0.0, timeout: float | None = None
    ) -> dict[str, Any]:
        body = {"text": text, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": temperature}}
        status, raw = self._req("POST", "/generate", body, timeout=timeout)
        if status != 200:
            raise ServerHTTPError(self.base + "/generate", status, raw.decode(errors="replace")[:200])
        return cast("dict[str, Any]", json.loads(raw))

    # -- the engine client interface (workbench.servers.engines.EngineClient) -----------------------
    def ready(self, timeout: float = 30.0) -> bool:
        return self.health_generate(timeout=timeout)

    def reset_cache(self) -> tuple[bool, str]:
        return self.flush_cache()

    def complete(self, prompt: str | Sequence[int], max_new_tokens: int, *, timeout: float | None = None) -> Generated:
        body: dict[str, Any] = {"sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0}}
        if isinstance(prompt, str):
            body["text"] = prompt
        else:
            body["input_ids"] = [int(t) for t in prompt]
        status, raw = self._req("POST", "/generate", body, timeout=timeout)
        if status != 200:
            raise ServerHTTPError(self.base + "/generate", status, raw.decode(errors="replace")[:200])
        out = json.loads(raw)
        meta = out.get("meta_info", {})
        vc = meta.get("spec_verify_ct")
        correct = meta.get("spec_num_correct_drafts")
        pt = meta.get("prompt_tokens")
        return Generated(
            int(meta.get("completion_tokens", 0)),
            int(vc) if vc else None,
            list(out.get("output_ids") or []),
            prompt_tokens=int(pt) if isinstance(pt, int) else None,
            accepted=int(correct) if isinstance(correct, int) else None,
        )

    def metrics_text(self) -> str | None:
        """``/metrics``; None where the server serves none (launched without ``--enable-metrics``)."""
        status, raw = self._req("GET", "/metrics")
        if status == 404:
            return None
        if status != 200:
            raise ServerHTTPError(self.base + "/metrics", status, raw.decode(errors="replace")[:200])
        return raw.decode("utf-8", errors="replace")

    def counters(self) -> SpecCounters | None:
        text = self.metrics_text()
        return parse_counters(text) if text is not None else None

    def tokenize(self, text: str) -> list[int]:
        status, raw = self._req("POST", "/tokenize", {"prompt": text})
        if status != 200:
            raise ServerHTTPError(self.base + "/tokenize", status, raw.decode(errors="replace")[:200])
        tokens = json.loads(raw).get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ServerHTTPError(self.base + "/tokenize", status, "no token ids in the answer")
        return [int(t) for t in tokens]

    def facts(self) -> dict[str, Any]:
        info = self.server_info()
        summary = spec_summary(info)
        return {
            "version": info.get("version"),
            "algorithm": summary.get("speculative_algorithm"),
            "steps": summary.get("speculative_num_steps"),
            "topk": summary.get("speculative_eagle_topk"),
            "draft_tokens": summary.get("speculative_num_draft_tokens"),
            "model": info.get("model_path"),
            "draft": summary.get("speculative_draft_model_path"),
            "return_hidden_states": bool(info.get("enable_return_hidden_states")),
            "context_length": info.get("context_length"),
            "served_context": served_context(info),
            "avg_spec_accept_length": summary.get("avg_spec_accept_length"),
        }


def served_context(info: dict[str, Any]) -> int | None:
    """The longest prompt plus new tokens the server takes: ``max_req_input_len`` is
    ``min(context_len - 1, KV pool - 1) - 5`` (``TpModelWorker``, 0.4.9 to 0.5.23), so the served length
    is 6 more; ``context_length`` (the flag, None unless given) where the scheduler's figure is absent."""
    limit = info.get("max_req_input_len")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit + 6
    given = info.get("context_length")
    return given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else None


def spec_summary(info: dict[str, Any]) -> dict[str, Any]:
    """The resolved speculative parameters and accept length from a server_info answer."""
    states = info.get("internal_states") or [{}]
    first = states[0] if isinstance(states, list) and states else {}
    keys = (
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_draft_model_path",
    )
    out = {k: info.get(k, first.get(k)) for k in keys}
    out["avg_spec_accept_length"] = first.get("avg_spec_accept_length", info.get("avg_spec_accept_length"))
    out["last_gen_throughput"] = first.get("last_gen_throughput")
    out["version"] = info.get("version")
    out["route"] = info.get("_route")
    return out
