"""The engines a face offers, and the SGLang releases a SpecForge drafter may have been captured with:
both are the releases whose code was read (``workbench.engine``), nothing else."""

from __future__ import annotations


def sglang_releases() -> list[str]:
    """Every SGLang release whose capture code was read, oldest first."""
    from workbench.engine import releases

    return releases("sglang")


def engine_choices() -> list[tuple[str, str]]:
    """(label, engine) for the faces' pickers: the releases read, newest first per engine. Read from
    the tables' release lines alone (a picker is built when a screen is imported)."""
    from workbench.engine.table import listed_versions
    from workbench.engine.version import Version

    out: list[tuple[str, str]] = []
    for name in ("sglang", "vllm"):
        vs = sorted(listed_versions(name), key=Version.parse, reverse=True)
        out += [(f"{name} {v}" + (" (newest read)" if i == 0 else ""), f"{name}=={v}") for i, v in enumerate(vs)]
    return out
