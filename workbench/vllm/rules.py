"""vLLM's capture rule for a release: the capture package's table of vLLM releases where it read that
release (``workbench.doctor.engines.engine_rule``), else the release's own code where it is installed
here (``workbench.engine.vllm_rules.extract`` on the ``vllm`` package of ``make vllm``'s venv, or of
the python given). A release read neither way keeps the table's nearest older release, which says
that it was assumed (``assumed_from``)."""

from __future__ import annotations

import functools
import subprocess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.doctor.engines import VllmRule
    from workbench.layers import EngineRule


def rule(engine: str, arch: str | None, python: str | None = None) -> EngineRule:
    from workbench.doctor.engines import VllmRule, engine_rule, vllm_rule_from_facts

    got = engine_rule(engine, arch)
    if isinstance(got, VllmRule) and got.assumed_from:
        facts = installed_facts(got.assumed_from, python)
        if facts is not None:
            return vllm_rule_from_facts(facts, arch)
    return got


def vllm_rule(engine: str, arch: str | None, python: str | None = None) -> VllmRule:
    from workbench.doctor.engines import VllmRule

    got = rule(engine, arch, python)
    if not isinstance(got, VllmRule):
        raise TypeError(f"{engine}: not a vLLM engine")
    return got


@functools.cache
def installed_facts(version: str, python: str | None = None) -> dict[str, Any] | None:
    """The rule facts of the vLLM installed for ``python`` (default: ``make vllm``'s), if it is ``version``."""
    from workbench.engine.vllm_rules import extract
    from workbench.vllm import local

    py = python or local.python()
    if py is None:
        return None
    try:
        r = subprocess.run(
            [
                py,
                "-c",
                "import importlib.util, json; print(importlib.util.find_spec('vllm').submodule_search_locations[0])",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else None
    if not path:
        return None
    facts = extract(path)
    return facts if str(facts.get("version")) == version else None
