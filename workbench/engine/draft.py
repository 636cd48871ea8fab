"""The one reader of a draft config's capture-relevant fields: read once, asked by every check.

``read_draft_fields(config)`` takes the parsed ``config.json``; ``draft_ids(release, fields)`` gives
the ids a release's runner reads from it, by the keys its code reads, in that order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.engine.release import Release
from workbench.engine.rule import CaptureRule

TOP = "eagle_aux_hidden_state_layer_ids"
NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"
# variant switches of the drafter's forward, with the value that means "off" (what a release that
# never reads the key does): a switch set otherwise and not read by the serving release is ignored
VARIANT_FLAGS: dict[str, Any] = {
    "norm_before_fc": False,
    "fc_norm": False,
    "use_aux_norm": False,
    "norm_output": False,
    "norm_before_residual": False,
    "attention_bias": False,
    "mlp_bias": False,
}
# the same switches under eagle_config (SGLang and vLLM read norm_before_fc there too)
SCOPES = ("", "eagle_config.")


@dataclass(frozen=True)
class DraftFields:
    """What a draft config says about capture: its ids where each reader looks, and its switches."""

    top_ids: Any = None  # the top-level eagle_aux_hidden_state_layer_ids (raw: may be malformed)
    nested_ids: Any = None  # eagle_config.eagle_aux_hidden_state_layer_ids
    architectures: tuple[str, ...] = ()
    model_type: str | None = None
    speculators_type: str | None = None  # speculators_model_type (the speculators layout)
    num_aux_hidden_states: Any = None
    flags: dict[str, Any] = field(default_factory=dict)  # dotted key -> value, for the variant switches set
    other_ids: dict[str, Any] = field(
        default_factory=dict
    )  # ids under keys some release reads (eagle_config.layer_ids)

    @property
    def speculators(self) -> bool:
        return self.speculators_type is not None

    def ids_at(self, key: str) -> Any:
        if key == TOP:
            return self.top_ids
        if key == NESTED:
            return self.nested_ids
        return self.other_ids.get(key)

    @property
    def any_ids(self) -> Any:
        return self.nested_ids if self.nested_ids is not None else self.top_ids


def read_draft_fields(config: Mapping[str, Any]) -> DraftFields:
    cfg = config if isinstance(config, Mapping) else {}
    ec = cfg.get("eagle_config")
    ec = ec if isinstance(ec, Mapping) else {}
    archs = cfg.get("architectures")
    archs = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
    flags = {}
    for scope, node in (("", cfg), ("eagle_config.", ec)):
        for k in VARIANT_FLAGS:
            if k in node:
                flags[scope + k] = node[k]
    mt = cfg.get("model_type")
    st = cfg.get("speculators_model_type")
    other = {f"eagle_config.{k}": ec[k] for k in ("layer_ids",) if k in ec}
    return DraftFields(
        cfg.get(TOP),
        ec.get("eagle_aux_hidden_state_layer_ids"),
        archs,
        mt if isinstance(mt, str) else None,
        st if isinstance(st, str) else None,
        cfg.get("num_aux_hidden_states"),
        flags,
        other,
    )


def _order(where: Release | CaptureRule) -> tuple[str, tuple[str, ...]]:
    """(config_ids, id_source) of a release (any of its rules: the runner decides them for all)."""
    if isinstance(where, CaptureRule):
        return where.config_ids, where.id_source
    if where.rules:
        return where.rules[0].config_ids, where.rules[0].id_source
    kind = str(where.facts.get("config_ids") or "unknown")
    from workbench.engine.vllm_extract import id_keys

    return ("ignored" if kind == "ignored" else "unknown" if kind == "unknown" else "read"), id_keys(kind)


def draft_ids(where: Release | CaptureRule, fields: DraftFields) -> tuple[Any, str]:
    """(the ids the release reads from the draft config, the key they came from); (None, "default")
    when it reads none and its defaults apply."""
    kind, keys = _order(where)
    engine = where.engine
    if kind == "ignored":
        return None, f"default (the {engine} runner reads no ids from the draft config)"
    for key in keys or (NESTED,):
        v = fields.ids_at(key)
        # vLLM's runner takes an empty list as none (``if not layer_ids``); SGLang hands it over as it is
        if v is not None and not (engine == "vllm" and v == []):
            return v, key
    return None, "default"
