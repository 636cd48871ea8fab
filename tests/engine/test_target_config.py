"""One reading of a target's config: a multimodal wrapper's language model under any of the keys
transformers and the wrappers use, the same through every reader (engine rules, doctor, drafter,
alignment's recommendation, the live doctor)."""

from __future__ import annotations

import json

import pytest

from workbench.engine.target import TEXT_KEYS, read_target, text_config, text_config_key


def wrapper(key: str) -> dict:
    return {
        "architectures": ["KimiVLForConditionalGeneration"],
        "model_type": "kimi_vl",
        key: {
            "architectures": ["DeepseekV3ForCausalLM"],
            "num_hidden_layers": 61,
            "hidden_size": 7168,
            "vocab_size": 163840,
            "max_position_embeddings": 131072,
        },
    }


@pytest.mark.parametrize("key", TEXT_KEYS)
def test_every_reader_finds_the_language_model(tmp_path, key):
    from workbench.draftconfig.reader import read_target as doctor_read
    from workbench.hidden.recommend import target_info

    cfg = wrapper(key)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert text_config_key(cfg) == key and text_config(cfg)["num_hidden_layers"] == 61
    assert read_target(tmp_path) == ("KimiVLForConditionalGeneration", 61, "DeepseekV3ForCausalLM")
    info = doctor_read(tmp_path)
    assert (info.num_layers, info.hidden_size, info.vocab_size) == (61, 7168, 163840) and not info.problems
    assert target_info(tmp_path)[1] == 61


def test_a_text_model_is_its_own_text_config_and_a_bad_sub_config_is_named(tmp_path):
    from workbench.draftconfig.reader import read_target as doctor_read

    cfg = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 12, "hidden_size": 64}
    assert text_config_key(cfg) is None and text_config(cfg) is cfg
    (tmp_path / "config.json").write_text(json.dumps(dict(cfg, language_config="oops")))
    info = doctor_read(tmp_path)
    assert info.num_layers == 12 and [p.field for p in info.problems] == ["language_config"]
