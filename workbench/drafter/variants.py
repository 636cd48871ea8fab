"""Which EAGLE-3 drafter variant a draft ``config.json`` describes, read the way the tool that
trained it reads it (pure Python: no torch, no transformers).

Two config layouts exist:

- SGLang / SpecForge: every size at the top level (``hidden_size``, ``rope_theta``,
  ``rope_scaling``, ...), flags at the top level or under ``eagle_config``.
- speculators: the decoder layer's sizes nested in ``transformer_layer_config`` (a HF config,
  Qwen3 by default, so ``q_norm``/``k_norm``), the flags (``norm_before_residual``,
  ``norm_before_fc``, ``fc_norm``, ``norm_output``) and ``eagle_aux_hidden_state_layer_ids`` at
  the top level, the verifier under ``speculators_config.verifier``.

One flag name means different things in different code bases, so a config is read under a
*convention*: ``specforge`` (SpecForge 0.2.0 training, the default for the SGLang layout),
``speculators`` (speculators 0.9.0 training, the default for its layout) or ``sglang`` (what
SGLang 0.5.23's ``llama_eagle3.py`` serves). The difference that matters: SpecForge's
``norm_output`` (default true) decides whether ``norm`` is applied before ``lm_head``; in
speculators and SGLang ``norm_output`` (default false) decides whether the *normed* state is fed
to the next draft step, the logits being normed either way.

API:

- ``flat_config(config) -> dict``: the SGLang-layout view (sizes at the top level); raises
  ``ValueError`` naming a field the speculators layout lacks.
- ``layout(config) -> "sglang" | "speculators"``.
- ``resolve(config, convention=None) -> Variant``: the forward's switches.
- ``unsupported(config) -> Optional[str]``: a one-line refusal naming the first flag the forward
  does not implement (``None`` when every flag is supported).
- ``explain(config, convention=None) -> list[str]``: one sentence per non-default variant the
  config selects, with where the engines read it differently.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, cast

SGLANG_LAYOUT = "sglang"
SPECULATORS_LAYOUT = "speculators"
CONVENTIONS = ("specforge", "speculators", "sglang")

# The decoder-layer fields speculators keeps nested; everything the drafter's shapes depend on.
_NESTED = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "num_hidden_layers",
    "rms_norm_eps",
    "max_position_embeddings",
    "hidden_act",
    "attention_bias",
    "mlp_bias",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "model_type",
    "sliding_window",
    "use_sliding_window",
    "layer_types",
    "partial_rotary_factor",
    "tie_word_embeddings",
    "pad_token_id",
)
_TOP = (
    "draft_vocab_size",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
    "eagle_aux_hidden_state_layer_ids",
    "speculators_config",
    "speculators_model_type",
)
# speculators' pydantic defaults (Eagle3SpeculatorConfig) for fields a hand-made config may omit.
_SPECULATORS_DEFAULTS = {
    "draft_vocab_size": 32000,
    "norm_before_residual": False,
    "norm_before_fc": False,
    "fc_norm": False,
    "norm_output": False,
}
# The layer families speculators 0.9.0 builds an EAGLE-3 first layer for.
_SPECULATORS_LAYERS = {"llama": False, "qwen3": True}  # model_type -> q_norm/k_norm


def layout(config: dict[str, Any]) -> str:
    if any(k in config for k in ("speculators_model_type", "transformer_layer_config", "speculators_config")):
        return SPECULATORS_LAYOUT
    return SGLANG_LAYOUT


def flat_config(config: dict[str, Any]) -> dict[str, Any]:
    """Sizes at the top level (the SGLang layout); a speculators config is unnested (its
    ``transformer_layer_config`` defaults to Qwen3, as in speculators)."""
    if layout(config) != SPECULATORS_LAYOUT:
        return dict(config)
    inner = config.get("transformer_layer_config")
    if not isinstance(inner, dict):
        raise ValueError("transformer_layer_config: expected an object (speculators layout)")
    flat = {k: inner[k] for k in _NESTED if k in inner}
    flat.setdefault("model_type", "qwen3")
    if (
        "head_dim" not in flat
        and flat.get("model_type") == "llama"
        and "hidden_size" in flat
        and "num_attention_heads" in flat
    ):
        flat["head_dim"] = int(flat["hidden_size"]) // int(flat["num_attention_heads"])
    for k in ("hidden_size", "num_attention_heads", "head_dim", "intermediate_size", "vocab_size"):
        if k not in flat:
            raise ValueError(f"transformer_layer_config.{k}: absent")
    for k, v in _SPECULATORS_DEFAULTS.items():
        flat[k] = config.get(k) if config.get(k) is not None else v
    for k in _TOP:
        if k in config and k not in flat:
            flat[k] = config[k]
    ids = config.get("eagle_aux_hidden_state_layer_ids")
    # speculators builds fc from len(ids) (3 when absent) x hidden_size; target_hidden_size is not read.
    flat["num_aux_hidden_states"] = len(ids) if isinstance(ids, list) and ids else 3
    flat["target_hidden_size"] = flat["hidden_size"]
    if config.get("target_hidden_size") not in (None, flat["hidden_size"]):
        flat["_declared_target_hidden_size"] = config["target_hidden_size"]
    flat["_layout"] = SPECULATORS_LAYOUT
    return flat


def _flag(cfg: dict[str, Any], key: str) -> Any:
    ec = cast("dict[str, Any]", cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {})
    if key in ec and ec[key] is not None:
        return ec[key]
    return cfg.get(key)


def rope_parameters(cfg: dict[str, Any]) -> dict[str, Any]:
    """``{"rope_type", "rope_theta", ...}`` from ``rope_parameters`` (transformers 5) or
    ``rope_theta`` + ``rope_scaling`` (transformers 4 / SGLang)."""
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict) and rp:
        out = dict(rp)
    else:
        out = dict(cfg.get("rope_scaling") or {})
        out["rope_theta"] = cfg.get("rope_theta")
    if out.get("rope_theta") is None:
        out["rope_theta"] = cfg.get("rope_theta") or 10000.0
    out["rope_type"] = out.get("rope_type") or out.get("type") or "default"
    out.pop("type", None)
    return out


@dataclass(frozen=True)
class Variant:
    convention: str
    layout: str
    logits_norm: bool = True  # lm_head(norm(h)) (False: lm_head(h), SpecForge norm_output: false)
    feed_normed: bool = False  # norm(h) feeds the next step (speculators/SGLang norm_output: true)
    norm_before_residual: bool = False  # the residual is hidden_norm(h), not h (speculators)
    norm_before_fc: bool = False  # one RMSNorm over the concatenated aux slots before fc
    fc_norm: bool = False  # one RMSNorm per aux slot before fc
    qk_norm: bool = False  # q_norm/k_norm per head before RoPE (Qwen3 layers)
    attention_bias: bool = False
    position_offset: int = 0  # speculators' position ids start at 1 (shift_batch)
    rope: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_convention(config: dict[str, Any]) -> str:
    return "speculators" if layout(config) == SPECULATORS_LAYOUT else "specforge"


def resolve(config: dict[str, Any], convention: str | None = None) -> Variant:
    conv = convention or default_convention(config)
    if conv not in CONVENTIONS:
        raise ValueError(f"convention {conv!r}: expected one of {', '.join(CONVENTIONS)}")
    cfg = flat_config(config)
    lay = layout(config)
    qk = lay == SPECULATORS_LAYOUT and _SPECULATORS_LAYERS.get(str(cfg.get("model_type")), False)
    nbf = bool(_flag(cfg, "norm_before_fc"))
    fcn = bool(_flag(cfg, "fc_norm") or _flag(cfg, "use_aux_norm"))
    no = _flag(cfg, "norm_output")
    if conv == "specforge":
        logits_norm, feed_normed = (True if no is None else bool(no)), False
    else:
        logits_norm, feed_normed = True, bool(no)
    return Variant(
        convention=conv,
        layout=lay,
        logits_norm=logits_norm,
        feed_normed=feed_normed,
        # SGLang builds its residual from the pre-norm state and its q/k/v without bias.
        norm_before_residual=bool(cfg.get("norm_before_residual")) and conv != "sglang",
        norm_before_fc=nbf,
        fc_norm=fcn,
        qk_norm=qk and conv != "sglang",
        attention_bias=bool(cfg.get("attention_bias")) and conv != "sglang",
        position_offset=1 if conv == "speculators" else 0,
        rope=rope_parameters(cfg),
    )


# rope types transformers' ROPE_INIT_FUNCTIONS computes (plus the plain one).
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")


def unsupported(config: dict[str, Any], convention: str | None = None) -> str | None:
    """The first variant the forward does not implement, as a one-line refusal; else None."""
    try:
        return _unsupported(config, convention)
    except (TypeError, KeyError, AttributeError) as exc:
        return f"config: cannot read the variant flags ({exc!s})"


def _unsupported(config: dict[str, Any], convention: str | None) -> str | None:
    try:
        cfg = flat_config(config)
    except ValueError as exc:
        return str(exc)
    pre = "transformer_layer_config." if layout(config) == SPECULATORS_LAYOUT else ""
    conv = convention or default_convention(config)
    n = int(cfg.get("num_hidden_layers") or 1)
    if n != 1 and conv != "speculators":
        return (
            f"{pre}num_hidden_layers={n}: multi-layer drafters are evaluated under the speculators reading "
            f"only (SpecForge 0.2.0 trains one layer; SGLang feeds the later layers through hidden_norm "
            f"instead of input_layernorm)"
        )
    rope = rope_parameters(cfg)
    return _unsupported_layer(cfg, pre, rope) or _unsupported_reading(config, cfg, pre, rope, convention)


def _unsupported_layer(cfg: dict[str, Any], pre: str, rope: dict[str, Any]) -> str | None:
    """The first part of the layer itself the forward does not implement (rope, activation, bias,
    attention)."""
    if rope["rope_type"] not in ROPE_TYPES or "mrope_section" in rope:
        return f"{pre}rope_scaling: rope_type {rope['rope_type']!r} (multimodal or unknown) is not evaluated"
    prf = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor"))
    if prf not in (None, 1, 1.0):
        return f"{pre}partial_rotary_factor={prf}: partial rotary embeddings are not evaluated"
    act = cfg.get("hidden_act") or "silu"
    if act != "silu":
        return f"{pre}hidden_act={act!r}: only silu MLPs are evaluated"
    if cfg.get("mlp_bias"):
        return f"{pre}mlp_bias: biased MLPs are not evaluated"
    if cfg.get("use_sliding_window") or "sliding_attention" in (cfg.get("layer_types") or []):
        return f"{pre}sliding_window: sliding-window draft attention is not evaluated"
    return None


def _unsupported_reading(
    config: dict[str, Any], cfg: dict[str, Any], pre: str, rope: dict[str, Any], convention: str | None
) -> str | None:
    """What the training tool's reading (the layout's, or ``convention``) cannot evaluate."""
    mt = cfg.get("model_type")
    if layout(config) == SPECULATORS_LAYOUT and mt not in _SPECULATORS_LAYERS:
        return (
            f"transformer_layer_config.model_type={mt!r}: speculators 0.9.0 builds EAGLE-3 layers for "
            f"{', '.join(sorted(_SPECULATORS_LAYERS))} only"
        )
    if (convention or default_convention(config)) == "specforge" and rope["rope_type"] == "dynamic":
        return (
            f"{pre}rope_scaling dynamic: SpecForge 0.2.0 builds its dynamic-NTK table for "
            f"max_position_embeddings+20 positions, which already rescales the base; transformers and "
            f"SGLang do not: not evaluated under the SpecForge reading"
        )
    if convention is not None and convention not in CONVENTIONS:
        return f"convention {convention!r}: expected one of {', '.join(CONVENTIONS)}"
    return None


def explain(config: dict[str, Any], convention: str | None = None, rope: bool = True) -> list[str]:
    """One sentence per variant the config selects (plain drafters get none); ``rope=False``
    leaves out the RoPE line (a scaling copied from the target is no drafter variant)."""
    try:
        return _explain(config, convention, rope)
    except (ValueError, TypeError, KeyError, AttributeError):
        return []  # a config too malformed to read: the config checks say why


def _explain(config: dict[str, Any], convention: str | None, with_rope: bool = True) -> list[str]:
    cfg = flat_config(config)
    v = resolve(config, convention)
    out: list[str] = []
    lay = layout(config)
    if lay == SPECULATORS_LAYOUT:
        ver = (config.get("speculators_config") or {}).get("verifier") or {}
        out.append(
            f"speculators layout: sizes from transformer_layer_config ({cfg.get('model_type')} layers), "
            f"weights layers.0.*; verifier {ver.get('name_or_path') or '(not named)'}"
        )
        if "_declared_target_hidden_size" in cfg:
            out.append(
                f"target_hidden_size={cfg['_declared_target_hidden_size']} is recorded but speculators "
                f"builds fc from hidden_size ({cfg['hidden_size']})"
            )
    if v.qk_norm:
        out.append(
            "qk_norm: Qwen3-style layer, q_norm/k_norm RMS-normalise each head's query and key before "
            "RoPE (SGLang's llama_eagle3.py has no q_norm/k_norm)"
        )
    no = _flag(cfg, "norm_output")
    if no is not None and lay == SGLANG_LAYOUT:
        if v.convention == "specforge":
            out.append(
                f"norm_output={str(bool(no)).lower()}: read as SpecForge does (lm_head "
                f"{'after' if v.logits_norm else 'without'} the final norm, the pre-norm state feeds the "
                f"next step); SGLang reads norm_output as 'feed the normed state to the next step' and "
                f"always norms before lm_head"
            )
        else:
            out.append(
                f"norm_output={str(bool(no)).lower()}: read as SGLang does (the "
                f"{'normed' if v.feed_normed else 'pre-norm'} state feeds the next step; logits normed); "
                f"SpecForge reads it as whether norm precedes lm_head"
            )
    elif v.feed_normed:
        out.append(
            "norm_output: the normed state (norm(h)) feeds the next draft step; logits are "
            "lm_head(norm(h)) as usual (Eagle 3.1; SGLang serves it the same way)"
        )
    if v.norm_before_residual:
        out.append(
            "norm_before_residual: the first layer's residual is hidden_norm(h), not h (speculators; "
            "SGLang's llama_eagle3.py keeps the pre-norm residual)"
        )
    elif cfg.get("norm_before_residual") and v.convention == "sglang":
        out.append("norm_before_residual: ignored, as SGLang ignores it")
    if v.norm_before_fc:
        out.append(
            "norm_before_fc: the fc input (all aux slots concatenated) is RMS-normalised once with "
            "input_norm.weight before fc (SpecForge 0.2.0 has no such option)"
        )
    if v.fc_norm:
        out.append(
            "fc_norm: each aux slot is RMS-normalised on its own (fc_norm.{i}.weight) before the "
            "slots are concatenated into fc"
        )
    if cfg.get("attention_bias"):
        out.append(
            "attention_bias: q/k/v projections carry a bias"
            + (
                " (SGLang's llama_eagle3.py builds qkv without bias and drops it)"
                if v.convention != "sglang"
                else "; ignored, as SGLang builds qkv without bias"
            )
        )
    th, h = cfg.get("target_hidden_size"), cfg.get("hidden_size")
    if lay == SGLANG_LAYOUT and th not in (None, h):
        out.append(f"target_hidden_size={th}: fc maps the target's {th}-wide slots to the draft's hidden {h}")
    layers = int(cfg.get("num_hidden_layers") or 1)
    if layers > 1:
        out.append(
            f"num_hidden_layers={layers}: after the EAGLE-3 first layer, {layers - 1} plain decoder "
            f"layer(s) (input_layernorm, attention, MLP) with their own KV per draft step (speculators; "
            f"SGLang normalises their input with hidden_norm instead)"
        )
    n_aux = cfg.get("num_aux_hidden_states")
    ids = (
        (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        if isinstance(cfg.get("eagle_config"), dict)
        else None
    ) or cfg.get("eagle_aux_hidden_state_layer_ids")
    k = int(n_aux) if n_aux else (len(ids) if isinstance(ids, list) and ids else 3)
    if k != 3:
        out.append(f"{k} aux hidden states: fc reads {k} slots (SpecForge 0.2.0 trains exactly 3)")
    rope = v.rope
    if with_rope and rope.get("rope_type") not in (None, "default"):
        keys = ", ".join(f"{a}={b}" for a, b in sorted(rope.items()) if a not in ("rope_type",))
        out.append(
            f"rope_scaling {rope['rope_type']}: RoPE frequencies from transformers' ROPE_INIT_FUNCTIONS ({keys})"
        )
    return out
