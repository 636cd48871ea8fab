"""Expected EAGLE-3 drafter weight names and shapes for a draft ``config.json`` (pure Python).

Two namings exist for the same tensors:

- SGLang / SpecForge: ``fc.weight``, ``midlayer.self_attn.q_proj.weight``, ... (one decoder layer);
  with ``num_hidden_layers > 1`` the layers are ``midlayers.{i}.*``.
- speculators / vLLM: the decoder layer is ``layers.{i}.*``; everything else is the same.

API:

- ``expected_weights(config, naming="sglang") -> dict[name, WeightSpec]``: every tensor SGLang's
  ``LlamaForCausalLMEagle3`` would load for this config, with its shape and whether it is required.
  Optional tensors (``embed_tokens.weight``) are listed with ``required=False``; tensors that exist
  only because of a flag (``fc.bias`` for ``bias``, ``input_norm.weight`` for ``norm_before_fc``,
  ``fc_norm.{i}.weight`` for ``fc_norm``/``use_aux_norm``) are required when the flag is on.
- ``draft_dims(config) -> DraftDims``: the numbers the shapes come from (hidden, heads, vocab, ...).
- ``to_sglang(name)``, ``to_speculators(name)``, ``detect_naming(names)``: rename between namings.
- ``aux_layer_ids(config)``: ``eagle_config.eagle_aux_hidden_state_layer_ids`` (or ``None``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

SGLANG = "sglang"
SPECULATORS = "speculators"

# Legacy aux-norm names SGLang remaps to fc_norm.{0,1,2}.
LEGACY_AUX_NORM = {"aux_norm_low": 0, "aux_norm_mid": 1, "aux_norm_high": 2}


@dataclass(frozen=True)
class WeightSpec:
    name: str
    shape: tuple[int, ...]
    kind: str = "float"  # "float" | "int64" | "bool"
    required: bool = True
    note: str = ""


@dataclass(frozen=True)
class DraftDims:
    hidden: int
    target_hidden: int
    num_aux: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    draft_vocab: int
    num_layers: int
    bias: bool
    attention_bias: bool
    norm_before_fc: bool
    fc_norm: bool
    tie_word_embeddings: bool
    qk_norm: bool = False  # Qwen3-style q_norm/k_norm (speculators' default layer)


def _get(config: dict[str, Any], key: str, default: Any = None) -> Any:
    value = config.get(key, default)
    return default if value is None else value


_REQUIRED = object()


def _field(config: dict[str, Any], key: str, default: Any = _REQUIRED) -> Any:
    """A config value checked against the draft-config schema (type and plausible range): a string
    "16", 16.5 or 30000000 layers is refused here, before any shape or loop is sized by it."""
    from workbench.draftconfig.schema import validate

    value = config.get(key)
    if value is None:
        if default is _REQUIRED:
            raise KeyError(key)
        return default
    return validate(key, value)


def aux_layer_ids(config: dict[str, Any]) -> list[Any] | None:
    """The draft's ``eagle_config.eagle_aux_hidden_state_layer_ids`` (the key SGLang reads), else None."""
    ec = config.get("eagle_config")
    if isinstance(ec, dict) and isinstance(ec.get("eagle_aux_hidden_state_layer_ids"), list):
        return list(ec["eagle_aux_hidden_state_layer_ids"])
    return None


def _flag(config: dict[str, Any], key: str) -> bool:
    from workbench.draftconfig.schema import validate

    ec = cast("dict[str, Any]", config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {})
    return bool(validate(key, config.get(key) or False) or validate(key, ec.get(key) or False))


def draft_dims(config: dict[str, Any]) -> DraftDims:
    """Derive tensor dimensions the way SGLang's ``llama_eagle3.py`` does (a speculators config is
    unnested first, as speculators reads it). Raises KeyError for a missing field and ValueError
    (``schema.FieldError``, an InputError too) for a wrong one."""
    from workbench.draftconfig.schema import validate
    from workbench.drafter.variants import SPECULATORS_LAYOUT, flat_config, layout

    speculators = layout(config) == SPECULATORS_LAYOUT
    config = flat_config(config)
    hidden = _field(config, "hidden_size")
    heads = _field(config, "num_attention_heads")
    kv = _field(config, "num_key_value_heads", heads)
    head_dim = _field(config, "head_dim", hidden // heads)
    vocab = _field(config, "vocab_size")
    draft_vocab = _field(config, "draft_vocab_size", vocab)
    ec = config.get("eagle_config")
    if ec is not None:
        validate("eagle_config", ec)
        if ec.get("eagle_aux_hidden_state_layer_ids") is not None:
            validate("eagle_config.eagle_aux_hidden_state_layer_ids", ec["eagle_aux_hidden_state_layer_ids"])
    ids = aux_layer_ids(config)
    num_aux = _field(config, "num_aux_hidden_states", len(ids) if ids else 3)
    return DraftDims(
        hidden=hidden,
        target_hidden=_field(config, "target_hidden_size", hidden),
        num_aux=num_aux,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        intermediate=_field(config, "intermediate_size"),
        vocab=vocab,
        draft_vocab=draft_vocab,
        num_layers=_field(config, "num_hidden_layers", 1),
        bias=_field(config, "bias", False),
        attention_bias=_field(config, "attention_bias", False),
        norm_before_fc=_flag(config, "norm_before_fc"),
        fc_norm=_flag(config, "fc_norm") or _flag(config, "use_aux_norm"),
        tie_word_embeddings=_field(config, "tie_word_embeddings", False),
        qk_norm=speculators and config.get("model_type") == "qwen3",
    )


def layer_prefix(i: int, num_layers: int, naming: str = SGLANG) -> str:
    if naming == SPECULATORS:
        return f"layers.{i}."
    return "midlayer." if num_layers == 1 else f"midlayers.{i}."


def expected_weights(config: dict[str, Any], naming: str = SGLANG) -> dict[str, WeightSpec]:
    """``{name: WeightSpec}`` for a draft config; see the module docstring."""
    d = draft_dims(config)
    H, H_t = d.hidden, d.target_hidden
    q_out, kv_out = d.num_heads * d.head_dim, d.num_kv_heads * d.head_dim
    specs: list[WeightSpec] = [WeightSpec("fc.weight", (H, d.num_aux * H_t), note="3*H_target -> H")]
    if d.bias:
        specs.append(WeightSpec("fc.bias", (H,), note="config bias: true"))
    if d.norm_before_fc:
        specs.append(WeightSpec("input_norm.weight", (d.num_aux * H_t,), note="norm_before_fc"))
    if d.fc_norm:
        specs += [WeightSpec(f"fc_norm.{i}.weight", (H_t,), note="fc_norm per aux chunk") for i in range(d.num_aux)]
    for i in range(d.num_layers):
        p = layer_prefix(i, d.num_layers, naming)
        in_dim = 2 * H if i == 0 else H  # layer 0 reads cat[norm(embed), norm(hidden)]
        specs += [
            WeightSpec(p + "self_attn.q_proj.weight", (q_out, in_dim)),
            WeightSpec(p + "self_attn.k_proj.weight", (kv_out, in_dim)),
            WeightSpec(p + "self_attn.v_proj.weight", (kv_out, in_dim)),
            WeightSpec(p + "self_attn.o_proj.weight", (H, q_out)),
            WeightSpec(p + "mlp.gate_proj.weight", (d.intermediate, H)),
            WeightSpec(p + "mlp.up_proj.weight", (d.intermediate, H)),
            WeightSpec(p + "mlp.down_proj.weight", (H, d.intermediate)),
            WeightSpec(p + "input_layernorm.weight", (H,), note="applied to the token embedding" if i == 0 else ""),
            WeightSpec(p + "post_attention_layernorm.weight", (H,)),
        ]
        if i == 0:
            specs.append(WeightSpec(p + "hidden_norm.weight", (H,), note="applied to the fc output"))
        if d.qk_norm:
            specs += [
                WeightSpec(p + f"self_attn.{x}_norm.weight", (d.head_dim,), note="Qwen3 layer") for x in ("q", "k")
            ]
        if d.attention_bias:
            specs += [
                WeightSpec(p + f"self_attn.{x}_proj.bias", (n,), note="attention_bias")
                for x, n in (("q", q_out), ("k", kv_out), ("v", kv_out), ("o", H))
            ]
    specs += [
        WeightSpec("norm.weight", (H,)),
        WeightSpec("lm_head.weight", (d.draft_vocab, H), required=not d.tie_word_embeddings, note="draft vocab head"),
        WeightSpec("d2t", (d.draft_vocab,), kind="int64", note="draft id -> target id offsets"),
        WeightSpec("t2d", (d.vocab,), kind="bool", required=False, note="ignored by SGLang"),
        WeightSpec(
            "embed_tokens.weight", (d.vocab, H), required=False, note="usually absent: the target's embedding is shared"
        ),
    ]
    return {s.name: s for s in specs}


_SPEC_LAYER = re.compile(r"^layers\.(\d+)\.")
_SGL_LAYER = re.compile(r"^midlayers\.(\d+)\.")


def _strip_model_prefix(name: str) -> str:
    return name[len("model.") :] if name.startswith("model.") else name


def to_sglang(name: str, num_layers: int = 1) -> str:
    """``layers.0.x`` -> ``midlayer.x`` (or ``midlayers.i.x`` for multi-layer drafts)."""
    name = _strip_model_prefix(name)
    for legacy, i in LEGACY_AUX_NORM.items():
        if name.startswith(legacy + "."):
            return f"fc_norm.{i}." + name[len(legacy) + 1 :]
    m = _SPEC_LAYER.match(name)
    if m:
        return layer_prefix(int(m.group(1)), num_layers, SGLANG) + name[m.end() :]
    m = _SGL_LAYER.match(name)
    if m and num_layers == 1 and m.group(1) == "0":
        return "midlayer." + name[m.end() :]
    return name


def to_speculators(name: str) -> str:
    """``midlayer.x`` -> ``layers.0.x``; ``midlayers.i.x`` -> ``layers.i.x``."""
    name = _strip_model_prefix(name)
    if name.startswith("midlayer."):
        return "layers.0." + name[len("midlayer.") :]
    m = _SGL_LAYER.match(name)
    if m:
        return f"layers.{m.group(1)}." + name[m.end() :]
    return name


def detect_naming(names: Iterable[str]) -> str:
    """``"speculators"`` when any decoder weight is under ``layers.N.``, else ``"sglang"``."""
    for n in names:
        if _SPEC_LAYER.match(_strip_model_prefix(n)):
            return SPECULATORS
    return SGLANG
