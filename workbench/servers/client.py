"""A small JSON-over-HTTP client, the base of each engine's client (``workbench.sglang.client``,
``workbench.vllm.client``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from workbench.errors import WorkbenchError


class ServerHTTPError(WorkbenchError):
    def __init__(self, url: str, status: int | None, message: str):
        self.url, self.status = url, status
        super().__init__(f"{url}: {message}")


class NoCacheResetError(WorkbenchError):
    """The server has no route that empties its prefix cache (the measurement goes on, and says so)."""


class HTTPClient:
    """JSON over HTTP to a server (through a tunnel); the engines' clients add their routes."""

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
