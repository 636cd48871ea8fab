"""vLLM's routes (through a tunnel): ``/health``, ``/version``, ``/v1/models``, ``/v1/completions`` with
prompts as token ids, ``/reset_prefix_cache`` and the Prometheus ``/metrics``, whose speculative-decoding
counters (``vllm/v1/spec_decode/metrics.py``) give acceptance from vLLM itself:

``/reset_prefix_cache`` is a development route (``vllm/entrypoints/serve/dev/cache``), registered only with
``VLLM_SERVER_DEV_MODE=1``; without it the measurement says the cache was not emptied.

- ``vllm:spec_decode_num_drafts_total``: verify rounds that drafted;
- ``vllm:spec_decode_num_draft_tokens_total``: draft tokens proposed;
- ``vllm:spec_decode_num_accepted_tokens_total``: draft tokens accepted;
- ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="k"}``: rounds whose drafts up to
  position k were accepted.

Per request, a server launched with ``--per-request-spec-decode-metrics summary|detailed`` answers
``metrics.speculative_decoding`` (``num_spec_steps``, ``num_accepted_draft_tokens``,
``num_draft_tokens``, ...: ``RequestSpecDecodeMetrics.to_dict`` in ``vllm/v1/metrics/stats.py``), observed
by the scheduler beside the counters, so a request's figures sum to the counters' difference.

Each counter carries ``model_name`` and ``engine`` labels; a reading sums them over every engine of the
server.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from workbench.servers.client import HTTPClient, NoCacheResetError, ServerHTTPError
from workbench.servers.engines import Generated, SpecCounters

PREFIX = "vllm:spec_decode_num_"


def parse_counters(text: str) -> SpecCounters | None:
    """The speculative-decoding counters of a ``/metrics`` page (Prometheus text format), summed
    over their label sets; None when the page has none (a server without speculation)."""
    from workbench.servers.prometheus import samples

    total = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0}
    per_pos: dict[int, float] = {}
    seen = False
    for full, labels, v in samples(text, PREFIX):
        name = full[len(PREFIX) :]
        if not name.endswith("_total"):
            continue  # the _created samples of a counter
        key = name[: -len("_total")]
        if key == "accepted_tokens_per_pos":
            pos = labels.get("position")
            if pos is not None and pos.isdigit():
                per_pos[int(pos)] = per_pos.get(int(pos), 0.0) + v
                seen = True
        elif key in total:
            total[key] += v
            seen = True
    if not seen:
        return None
    n = max(per_pos) + 1 if per_pos else 0
    return SpecCounters(
        int(total["drafts"]),
        int(total["draft_tokens"]),
        int(total["accepted_tokens"]),
        [int(per_pos.get(k, 0)) for k in range(n)],
        source="vllm /metrics",
    )


class VLLMClient(HTTPClient):
    def __init__(self, base_url: str, timeout: float = 30.0, api_key: str | None = None):
        super().__init__(base_url, timeout, api_key)
        self._model: str | None = None

    def _json(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        status, raw = self._req(method, path, body, timeout=timeout)
        if status != 200:
            raise ServerHTTPError(self.base + path, status, raw.decode(errors="replace")[:300])
        return json.loads(raw)

    def health(self, timeout: float = 30.0) -> bool:
        status, _ = self._req("GET", "/health", timeout=timeout)
        return status == 200

    def version(self) -> str | None:
        got = self._json("GET", "/version")
        return str(got.get("version")) if isinstance(got, dict) and got.get("version") else None

    def models(self) -> list[dict[str, Any]]:
        got = self._json("GET", "/v1/models")
        data = got.get("data") if isinstance(got, dict) else None
        return [m for m in data or [] if isinstance(m, dict)]

    def model(self) -> str:
        """The served model name requests must name (the first of ``/v1/models``)."""
        if self._model is None:
            ms = self.models()
            if not ms or not ms[0].get("id"):
                raise ServerHTTPError(self.base + "/v1/models", 200, "no served model")
            self._model = str(ms[0]["id"])
        return self._model

    def completion(
        self, prompt: str | Sequence[int], max_tokens: int, *, timeout: float | None = None, **extra: Any
    ) -> dict[str, Any]:
        """One greedy ``/v1/completions`` request; a prompt of token ids goes as they are."""
        body: dict[str, Any] = {
            "model": self.model(),
            "prompt": prompt if isinstance(prompt, str) else [int(t) for t in prompt],
            "max_tokens": int(max_tokens),
            "temperature": 0.0,
            "return_token_ids": True,
            **extra,
        }
        got: dict[str, Any] = self._json("POST", "/v1/completions", body, timeout=timeout)
        return got

    def metrics_text(self) -> str:
        status, raw = self._req("GET", "/metrics")
        if status != 200:
            raise ServerHTTPError(self.base + "/metrics", status, raw.decode(errors="replace")[:200])
        return raw.decode("utf-8", errors="replace")

    # -- the engine client interface (workbench.servers.engines.EngineClient) -----------------------
    def ready(self, timeout: float = 30.0) -> bool:
        return self.health(timeout=timeout)

    def reset_cache(self) -> tuple[bool, str]:
        status, raw = self._req("POST", "/reset_prefix_cache")
        text = raw.decode(errors="replace")
        if status == 200:
            return True, text
        if status == 404:
            # a development route: vLLM registers it only with VLLM_SERVER_DEV_MODE=1
            raise NoCacheResetError(
                f"{self.base}: no /reset_prefix_cache (vLLM serves it only with VLLM_SERVER_DEV_MODE=1): "
                "the prefix cache was not emptied"
            )
        if status in (400, 409, 503):
            return False, text
        raise ServerHTTPError(self.base + "/reset_prefix_cache", status, text[:200])

    def complete(self, prompt: str | Sequence[int], max_new_tokens: int, *, timeout: float | None = None) -> Generated:
        got = self.completion(prompt, max_new_tokens, timeout=timeout)
        usage = got.get("usage") or {}
        choice = (got.get("choices") or [{}])[0]
        ids = choice.get("token_ids") or []
        out = Generated(int(usage.get("completion_tokens", len(ids))), None, [int(t) for t in ids])
        if isinstance(usage.get("prompt_tokens"), int):
            out.prompt_tokens = int(usage["prompt_tokens"])
        # with --per-request-spec-decode-metrics (vllm/v1/metrics/stats.py: RequestSpecDecodeMetrics)
        spec = (got.get("metrics") or {}).get("speculative_decoding") if isinstance(got.get("metrics"), dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("num_spec_steps"), int):
            out.drafts = int(spec["num_spec_steps"])
            out.accepted = int(spec.get("num_accepted_draft_tokens") or 0)
            out.draft_tokens = int(spec.get("num_draft_tokens") or 0)
        return out

    def counters(self) -> SpecCounters | None:
        return parse_counters(self.metrics_text())

    def tokenize(self, text: str) -> list[int]:
        got = self._json("POST", "/tokenize", {"model": self.model(), "prompt": text})
        tokens = got.get("tokens") if isinstance(got, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ServerHTTPError(self.base + "/tokenize", 200, "no token ids in the answer")
        return [int(t) for t in tokens]

    def facts(self) -> dict[str, Any]:
        """What the server says of itself (``/version``, ``/v1/models``); the speculative settings are
        not served by vLLM's API: the lifecycle fills them from the launch command it recorded."""
        ms = self.models()
        first = ms[0] if ms else {}
        return {
            "version": self.version(),
            "model": first.get("root") or first.get("id"),
            "context_length": first.get("max_model_len"),
            "served_context": first.get("max_model_len"),
            "return_hidden_states": False,
            "avg_spec_accept_length": None,
        }
