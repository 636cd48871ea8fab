"""Reading draft configs as their tools read them (pure Python): the speculators layout unnested,
the conventions of norm_output, one-line refusals naming the flag, one sentence per variant."""

from __future__ import annotations

import pytest

from workbench.drafter import names as N
from workbench.drafter import variants as V

SPEC = {
    "speculators_model_type": "eagle3",
    "draft_vocab_size": 64,
    "norm_before_residual": True,
    "eagle_aux_hidden_state_layer_ids": [2, 18, 33, 36],
    "speculators_config": {"verifier": {"name_or_path": "org/verifier", "architectures": ["Qwen3ForCausalLM"]}},
    "transformer_layer_config": {
        "model_type": "qwen3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "intermediate_size": 96,
        "vocab_size": 500,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
    },
}
SGL = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "vocab_size": 500,
    "draft_vocab_size": 64,
    "num_hidden_layers": 1,
    "rope_theta": 5e5,
}


def test_speculators_layout_sizes_and_weights():
    d = N.draft_dims(SPEC)
    assert (d.hidden, d.head_dim, d.num_aux, d.target_hidden, d.draft_vocab, d.qk_norm) == (64, 32, 4, 64, 64, True)
    w = N.expected_weights(SPEC, naming=N.SPECULATORS)
    assert w["fc.weight"].shape == (64, 256)
    assert w["layers.0.self_attn.q_norm.weight"].shape == (32,)
    assert w["layers.0.self_attn.q_proj.weight"].shape == (128, 128)
    v = V.resolve(SPEC)
    assert v.convention == "speculators" and v.norm_before_residual and v.qk_norm and v.position_offset == 1
    text = " | ".join(V.explain(SPEC))
    assert "org/verifier" in text and "norm_before_residual" in text and "4 aux hidden states" in text
    with pytest.raises(ValueError, match=r"transformer_layer_config\.intermediate_size: absent"):
        V.flat_config(
            {
                **SPEC,
                "transformer_layer_config": {
                    "hidden_size": 64,
                    "num_attention_heads": 4,
                    "head_dim": 16,
                    "vocab_size": 9,
                },
            }
        )


def test_norm_output_is_read_per_convention():
    cfg = dict(SGL, norm_output=False)
    sf, sg = V.resolve(cfg), V.resolve(cfg, "sglang")
    assert (sf.logits_norm, sf.feed_normed) == (False, False)  # SpecForge: lm_head without the norm
    assert (sg.logits_norm, sg.feed_normed) == (True, False)  # SGLang: the default
    on = V.resolve(dict(SGL, norm_output=True), "sglang")
    assert (on.logits_norm, on.feed_normed) == (True, True)
    assert V.resolve(dict(SGL, norm_output=True)).feed_normed is False
    assert any("SGLang reads norm_output" in e for e in V.explain(cfg))
    assert V.resolve({**SPEC, "norm_output": True}).feed_normed
    assert V.explain(SGL) == []  # a plain drafter: nothing to explain


@pytest.mark.parametrize(
    "change,flag",
    [
        ({"num_hidden_layers": 2}, "num_hidden_layers=2"),
        ({"rope_scaling": {"rope_type": "mrope", "mrope_section": [2, 2, 4]}}, "rope_scaling"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"use_sliding_window": True, "sliding_window": 8}, "sliding_window"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope_scaling dynamic"),
    ],
)
def test_unsupported_flags_are_refused_by_name(change, flag):
    why = V.unsupported(dict(SGL, **change))
    assert why and why.startswith(flag) and "\n" not in why


def test_refusal_reaches_the_forward_and_the_check(tmp_path):
    torch = pytest.importorskip("torch")
    from workbench.drafter.checkpoint import check_weights
    from workbench.drafter.model import Eagle3Drafter, UnsupportedError

    with pytest.raises(UnsupportedError, match="hidden_act='gelu'"):
        Eagle3Drafter(dict(SGL, hidden_act="gelu"))
    rep = check_weights(dict(SGL, hidden_act="gelu"), {})
    assert not rep.ok and rep.first_problem().startswith("hidden_act")
    m = Eagle3Drafter(
        dict(
            SGL,
            norm_before_fc=True,
            target_hidden_size=48,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            max_position_embeddings=1024,
        ),
        embed=torch.zeros(500, 64),
    )
    assert m.fc.weight.shape == (64, 144) and m.input_norm.weight.shape == (144,)
    assert m._rope_spec.rope_type == "llama3"
