"""A small HTTP client for SGLang's routes (through a tunnel): health, server info, flush, generate."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, cast

from workbench.errors import WorkbenchError


class ServerHTTPError(WorkbenchError):
    def __init__(self, url: str, status: int | None, message: str):
        self.url, self.status = url, status
        super().__init__(f"{url}: {message}")


class SGLangClient:
    def __init__(self, base_url: str, timeout: float = 30.0, api_key: str | None = None):
        self.base = base_url.rstrip("/")
        self.timeout = timeout
        self.api_key = api_key

    def _req(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                return resp.status, raw
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerHTTPError(self.base + path, None, f"no answer ({reason})") from None

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
