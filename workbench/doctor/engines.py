"""The doctor's one door to engine rules: every capture rule it uses comes through ``engine_rule``.

SGLang rules come from ``sglang_rule`` (today ``workbench.layers.rule_for``; the single place to
switch to the extracted ``workbench.engine`` table); vLLM rules from the table that
``workbench.engine.vllm_rules`` generated from vLLM's own source. A vLLM release missing from the
table takes the nearest older cached release, and says so (``assumed_from``): findings that rest on
such a rule are never stated with the confidence of one read from that release's code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from workbench.errors import InputError
from workbench.layers import CaptureResult, EngineRule, parse_engine, parse_version, rule_for, version_text

# SGLang releases whose rule the doctor compares when the capturing release is unknown, when the
# generated table (workbench.engine) is missing.
_FALLBACK_RELEASES = ("0.4.9", "0.5.4.post2", "0.5.12.post1", "0.5.13", "0.5.14", "0.5.23")


def sglang_releases() -> list[str]:
    """Every SGLang release whose capture code was read (the generated table), oldest first."""
    try:
        from workbench.engine import table

        vs = table.versions()
    except ImportError:
        vs = []
    return sorted(vs, key=parse_version) if vs else list(_FALLBACK_RELEASES)


def sglang_rule(version: tuple[int, int, int, int] | None, arch: str | None) -> EngineRule:
    """SGLang's capture rule for a release and target architecture: the one SGLang lookup of the
    doctor. ``workbench.layers.rule_for`` answers from the table ``workbench.engine`` generated from
    each release's own code (and its hand-read rules where the table has no row)."""
    return rule_for("sglang" if version is None else f"sglang=={version_text(version)}", arch)


@lru_cache(maxsize=1)
def _vllm_table() -> dict[str, dict[str, Any]]:
    from workbench.engine.vllm_rules import load_table

    return cast("dict[str, dict[str, Any]]", load_table()["releases"])


def vllm_releases() -> list[str]:
    return list(_vllm_table())


def _vkey(v: str) -> tuple[int, int, int, int]:
    return parse_version(v)


@dataclass(frozen=True)
class VllmRule(EngineRule):
    """A vLLM release's rule, with the facts read from its source."""

    config_ids: str = "unknown"  # "ignored", "top-level", "top-level-then-eagle_config", ...
    default_exprs: tuple[str, ...] = ("2", "N//2", "N-3")
    facts: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    assumed_from: str | None = None  # the cached release used for an uncached one

    @property
    def name(self) -> str:
        return f"vllm=={self.facts.get('version')}" if self.facts.get("version") else "vllm"

    def default_indices(self, num_layers: int) -> list[int]:
        from workbench.engine.vllm_rules import _eval

        return [_eval(e, num_layers) for e in self.default_exprs]

    def ids_from_config(self, config: dict[str, Any]) -> tuple[list[Any] | None, str]:
        top = config.get("eagle_aux_hidden_state_layer_ids") if isinstance(config, dict) else None
        ec = config.get("eagle_config") if isinstance(config, dict) else None
        nested = ec.get("eagle_aux_hidden_state_layer_ids") if isinstance(ec, dict) else None
        order = {
            "top-level": ("top",),
            "eagle_config": ("nested",),
            "top-level-then-eagle_config": ("top", "nested"),
            "eagle_config-then-top-level": ("nested", "top"),
        }.get(self.config_ids, ())
        for which in order:
            if which == "top" and top:
                return top, "eagle_aux_hidden_state_layer_ids"
            if which == "nested" and nested:
                return nested, "eagle_config.eagle_aux_hidden_state_layer_ids"
        return None, "default" if self.config_ids != "ignored" else f"default (config ids ignored by {self.name})"

    def capture(self, ids: Sequence[int] | None, num_layers: int) -> CaptureResult:
        res = super().capture(None if self.config_ids == "ignored" else ids, num_layers)
        # index 0 and N were read from this release's code: no "unverified" hedge
        res.notes = [n for n in res.notes if "unverified for vLLM" not in n]
        if self.config_ids == "ignored" and ids is not None:
            res.notes.append(f"{self.name} ignores config ids (the runner asks the model for its defaults)")
        return res

    def evidence(self, what: str) -> list[str]:
        return [f"{e['file']}:{e['line']}: {e['text']}" for e in self.facts.get("evidence", []) if e["what"] == what]

    # what vLLM's registry and config code say about a draft --------------------------------------------
    def draft_architecture(
        self, archs: Sequence[str], speculators_type: str | None, model_type: str | None
    ) -> tuple[str | None, str]:
        """The architecture vLLM looks up for this draft under method eagle3, and how it got it."""
        if speculators_type is not None:
            sp = self.facts.get("speculators")
            if sp is None:
                return None, f"{self.name} has no reader for speculators-format configs"
            if isinstance(sp, dict):
                got = sp.get(model_type or "llama")
                return got, f"speculators eagle3 config, model_type {model_type!r} -> {got}"
            if sp == "unknown":
                return None, f"{self.name}: the speculators config reader was not recognised"
            return sp, f"speculators eagle3 config -> {sp}"
        m = self.facts.get("arch_map")
        if not isinstance(m, dict) or not archs:
            return (archs[0] if archs else None), "architecture mapping not recognised"
        a = archs[0]
        if (m["keeps_prefixed"] and a.startswith(m["prefix"])) or (m["keeps_suffixed"] and a.endswith(m["prefix"])):
            return a, f"EAGLEConfig keeps {a}"
        return m["prefix"] + a, f"EAGLEConfig renames {a} -> {m['prefix'] + a}"


def vllm_rule(version: tuple[int, int, int, int] | None, arch: str | None) -> VllmRule:

    table = _vllm_table()
    assumed = None
    if version is None:
        key = sorted(table, key=_vkey)[-1]
    else:
        want = version_text(version)
        if want in table:
            key = want
        else:
            older = [v for v in table if _vkey(v) <= version]
            if not older:
                raise InputError(
                    f"engine: vllm=={want} is older than every release read "
                    f"({', '.join(table)}); regenerate: python -m workbench.engine.vllm_rules "
                    f"regenerate {want}"
                )
            key = sorted(older, key=_vkey)[-1]
            assumed = want
    return vllm_rule_from_facts(table[key], arch, assumed)


def vllm_rule_from_facts(f: dict[str, Any], arch: str | None, assumed: str | None = None) -> VllmRule:
    """A vLLM rule from the facts ``workbench.engine.vllm_rules.extract`` read from a release's code."""
    from workbench.layers import arch_family

    key = str(f["version"])
    default = tuple(f["default"]) if isinstance(f.get("default"), list) else ("2", "N//2", "N-3")
    src = f"vllm {key}: " + "; ".join(
        f"{e['file']}:{e['line']}" for e in f.get("evidence", []) if e["what"] in ("config_ids", "capture")
    )
    return VllmRule(
        "vllm",
        parse_version(key),
        arch_family(arch),
        "never",
        f.get("index0") == "embed",
        f.get("boundary") == "final-prenorm",
        src,
        reads_top_level_first=f.get("config_ids", "").startswith("top"),
        config_ids=f.get("config_ids", "unknown"),
        default_exprs=default,
        facts=f,
        assumed_from=assumed,
    )


def engine_rule(engine: str | None, arch: str | None) -> EngineRule:
    """The capture rule of ``engine`` ('sglang==0.5.23', 'sglang', 'vllm==0.11.0', 'vllm')."""
    name, version = parse_engine(engine or "sglang")
    if name == "vllm":
        return vllm_rule(version, arch)
    return sglang_rule(version, arch)


def known_engines() -> list[str]:
    """Engines the capture report compares across."""
    return [f"sglang=={v}" for v in ("0.5.12.post1", "0.5.14", "0.5.23")] + [f"vllm=={v}" for v in vllm_releases()]


def engine_choices() -> list[tuple[str, str]]:
    """(label, engine) for the faces' pickers, newest first per engine."""
    out = [
        ("sglang 0.5.23 (latest)", "sglang==0.5.23"),
        ("sglang 0.5.14 (SpecForge 0.2.0's)", "sglang==0.5.14"),
        ("sglang 0.5.13", "sglang==0.5.13"),
        ("sglang 0.5.12.post1", "sglang==0.5.12.post1"),
    ]
    rel = sorted(vllm_releases(), key=_vkey, reverse=True)
    out += [(f"vllm {v}" + (" (latest read)" if i == 0 else ""), f"vllm=={v}") for i, v in enumerate(rel)]
    return out


def is_version_text(text: str) -> bool:
    return bool(re.fullmatch(r"\d+\.\d+(\.\d+)?(\.post\d+)?", text))
