"""Reading draft directories without loading weights: headers by hand, shards, speculators layout."""

import json
import struct

import numpy as np
import pytest

from tests.fixtures.drafts import KIMI_TARGET, LLAMA_TARGET, tiny_tensors, write_draft
from workbench.draftconfig import read_draft, read_header, read_target, write_safetensors
from workbench.errors import InputError


def test_header_parsed_by_hand_matches_the_safetensors_library(tmp_path):
    from safetensors.numpy import load_file

    ts = tiny_tensors()
    write_safetensors(tmp_path / "m.safetensors", ts)
    infos, _ = read_header(tmp_path / "m.safetensors")
    loaded = load_file(str(tmp_path / "m.safetensors"))
    assert set(infos) == set(loaded)
    for name, arr in loaded.items():
        assert infos[name].shape == list(arr.shape)


def test_reads_files_written_by_the_safetensors_library(tmp_path):
    from safetensors.numpy import save_file

    save_file(
        {"d2t": np.arange(4, dtype=np.int64), "w": np.ones((2, 3), np.float16)}, str(tmp_path / "model.safetensors")
    )
    (tmp_path / "config.json").write_text("{}")
    d = read_draft(tmp_path)
    assert d.tensors["w"].dtype == "F16" and d.tensors["w"].shape == [2, 3]
    assert d.tensor("d2t").tolist() == [0, 1, 2, 3]


def test_bf16_small_tensor_read_on_demand(tmp_path):
    vals = np.array([1.0, -2.5, 0.15625], dtype=np.float32)
    write_safetensors(tmp_path / "model.safetensors", {"norm.weight": ("BF16", vals)})
    (tmp_path / "config.json").write_text("{}")
    d = read_draft(tmp_path)
    assert d.tensors["norm.weight"].dtype == "BF16"
    assert d.tensor("norm.weight").tolist() == vals.tolist()


def test_sharded_index(tmp_path):
    ts = tiny_tensors()
    names = sorted(ts)
    a, b = names[: len(names) // 2], names[len(names) // 2 :]
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {n: ts[n] for n in a})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {n: ts[n] for n in b})
    wmap = {**{n: "model-00001-of-00002.safetensors" for n in a}, **{n: "model-00002-of-00002.safetensors" for n in b}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wmap}))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    d = read_draft(tmp_path)
    assert d.weights_error is None and set(d.tensors) == set(ts)
    assert d.tensor("d2t").tolist() == ts["d2t"].tolist()


def test_index_naming_a_tensor_its_shard_lacks(tmp_path):
    write_safetensors(tmp_path / "s1.safetensors", {"fc.weight": np.zeros((2, 2), np.float32)})
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"lm_head.weight": "s1.safetensors"}})
    )
    (tmp_path / "config.json").write_text("{}")
    assert "not found in the shard" in read_draft(tmp_path).weights_error


def test_speculators_layout(tmp_path):
    cfg = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "draft_vocab_size": 32000,
        "target_hidden_size": 4096,
        "norm_before_residual": False,
        "eagle_aux_hidden_state_layer_ids": [2, 16, 29],
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_hidden_layers": 1,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
        },
        "speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}},
    }
    ts = {k.replace("midlayer.", "layers.0."): v for k, v in tiny_tensors().items()}
    write_draft(tmp_path / "spec", cfg, ts)
    d = read_draft(tmp_path / "spec")
    assert d.layout == "speculators" and d.is_eagle3
    assert (
        d.hidden_size == 4096
        and d.key_for["max_position_embeddings"] == "transformer_layer_config.max_position_embeddings"
    )
    assert d.top_level_layer_ids == [2, 16, 29] and d.layer_ids is None
    assert "layers.0.self_attn.q_proj.weight" in d.tensors

    from workbench.doctor import run_static

    r = run_static(tmp_path / "spec", LLAMA_TARGET, engine="vllm")
    assert r.capture.trained_points == ["out(1)", "out(15)", "out(28)"] and r.capture.match
    assert "assumed: speculators" in r.capture.trained_source


def test_target_with_text_config():
    t = read_target(KIMI_TARGET)
    assert (t.num_layers, t.hidden_size, t.vocab_size) == (61, 7168, 163840)
    assert t.arch == "KimiK25ForConditionalGeneration" and t.context_length == 262144


def test_wrong_types_become_field_problems(tmp_path):
    cfg = {
        "hidden_size": "4096",
        "tie_word_embeddings": "false",
        "architectures": "LlamaForCausalLMEagle3",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": "2,30,58"},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    d = read_draft(tmp_path)
    fields = {p.field for p in d.problems}
    assert fields == {
        "hidden_size",
        "tie_word_embeddings",
        "architectures",
        "eagle_config.eagle_aux_hidden_state_layer_ids",
    }
    assert all("\n" not in str(p) and "config.json" in str(p) for p in d.problems)


@pytest.mark.parametrize(
    "payload,needle",
    [
        (b"", "expected an 8-byte length"),
        (struct.pack("<Q", 4) + b"nope", "not JSON"),
        (struct.pack("<Q", 2) + b"[]", "expected a JSON object"),
        (struct.pack("<Q", 50) + b"{}", "declared header length"),
    ],
)
def test_corrupt_headers_one_line(tmp_path, payload, needle):
    p = tmp_path / "x.safetensors"
    p.write_bytes(payload)
    with pytest.raises(InputError) as err:
        read_header(p)
    assert needle in str(err.value) and "x.safetensors" in str(err.value) and "\n" not in str(err.value)


def test_header_offsets_checked(tmp_path):
    head = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}).encode()
    p = tmp_path / "x.safetensors"
    p.write_bytes(struct.pack("<Q", len(head)) + head + b"\0" * 8)
    with pytest.raises(InputError, match="expected 16"):
        read_header(p)


def test_big_tensors_are_not_read(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", {"fc.weight": np.zeros((64, 64), np.float32)})
    (tmp_path / "config.json").write_text("{}")
    from workbench.draftconfig.safetensors_header import read_tensor

    d = read_draft(tmp_path)
    with pytest.raises(InputError, match="only tensors up to"):
        read_tensor(d.path, d.tensors["fc.weight"], limit=1024)
