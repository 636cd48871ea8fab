"""A real vLLM on this machine (the CPU build ``make vllm`` installs): where its python is, and the
environment that keeps it on loopback and inside one folder.

- ``python()``: ``$EAGLE_WORKBENCH_VLLM_PYTHON``, else ``.venv-vllm/bin/python`` of the checkout; None
  where neither has vLLM (``missing()`` says why, and how to get one);
- ``environment(folder)``: ``VLLM_HOST_IP`` / ``VLLM_LOOPBACK_IP`` (vLLM otherwise picks the address of
  the default route for its internal sockets), ``TMPDIR`` and ``VLLM_CACHE_ROOT`` in ``folder``, no hub
  access, no usage reports, a 1 GiB KV cache, and vLLM's development routes (``/reset_prefix_cache``).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_PYTHON = "EAGLE_WORKBENCH_VLLM_PYTHON"
MODULE = "vllm.entrypoints.openai.api_server"
HOW = "run `make vllm` in the eagle-workbench checkout (a CPU build of vLLM in .venv-vllm)"


def checkout_venv() -> Path:
    return Path(__file__).resolve().parents[2] / ".venv-vllm"


def python() -> str | None:
    """A python that has vLLM installed, or None."""
    env = os.environ.get(ENV_PYTHON)
    if env:
        return env if Path(env).exists() else None
    py = checkout_venv() / "bin" / "python"
    if not py.exists() or not list((checkout_venv() / "lib").glob("python*/site-packages/vllm/__init__.py")):
        return None
    return str(py)


def missing() -> str | None:
    """Why no real vLLM can run here (None: one can), in one line that says how to get one."""
    marker = checkout_venv() / "UNAVAILABLE"
    if marker.exists():
        return marker.read_text().strip()
    if os.environ.get(ENV_PYTHON) and python() is None:
        return f"${ENV_PYTHON} names {os.environ[ENV_PYTHON]}, which does not exist"
    if python() is None:
        return f"no vLLM here: {HOW}"
    return None


def environment(folder: str | os.PathLike[str]) -> dict[str, str]:
    """What keeps a vLLM server on loopback, off the network and inside ``folder``."""
    base = Path(folder)
    (base / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_LOOPBACK_IP": "127.0.0.1",
        "TMPDIR": str(base / "tmp"),
        "VLLM_CACHE_ROOT": str(base / "vllm-cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        # the development routes: /reset_prefix_cache (the measurement protocol's cache reset) and
        # /server_info; a server for tests and the demo, on loopback
        "VLLM_SERVER_DEV_MODE": "1",
    }
