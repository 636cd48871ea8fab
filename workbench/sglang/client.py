"""SGLang's routes (through a tunnel): health, server info, flush, generate; the measurement
protocol's primitives for an SGLang server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from workbench.servers.client import HTTPClient, ServerHTTPError
from workbench.servers.engines import Generated, SpecCounters


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
        return Generated(
            int(meta.get("completion_tokens", 0)), int(vc) if vc else None, list(out.get("output_ids") or [])
        )

    def counters(self) -> SpecCounters | None:
        return None  # SGLang keeps an average since the last flush (server_info), not counters

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
            "avg_spec_accept_length": summary.get("avg_spec_accept_length"),
        }


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
