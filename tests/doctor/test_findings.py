"""Every finding code fires on the fixture built for it and stays silent on healthy drafts."""

import json
import struct

import pytest

from tests.fixtures.drafts import KIMI_BROKEN, KIMI_DRAFT, KIMI_TARGET, LLAMA_DRAFT, LLAMA_TARGET, tiny_tensors
from workbench.doctor import run_static
from workbench.errors import InputError


def codes(report, severity=None):
    return sorted(set(report.codes(severity)))


def find(report, code):
    hits = [f for f in report.findings if f.code == code]
    assert hits, f"{code} not in {report.codes()}"
    return hits[0]


# -- healthy drafts: no false alarms ---------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sglang==0.5.12.post1", "sglang==0.5.13", "sglang", "vllm"])
def test_tiny_healthy_draft_is_silent(tiny, engine):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": None})
    cfg = json.loads((d / "config.json").read_text())
    del cfg["eagle_config"]  # defaults: every engine and trainer agree
    (d / "config.json").write_text(json.dumps(cfg))
    r = run_static(d, t, engine=engine, algorithm="EAGLE3")
    assert r.findings == [], [f.to_dict() for f in r.findings]
    assert r.capture.match is True
    assert r.capture.engine_points == ["out(1)", "out(3)", "out(4)"]


def test_tiny_healthy_draft_with_explicit_ids_only_notes_nondefault(tiny):
    d, t = tiny()  # ids [1, 3, 4]: default is [1, 3, 4] for 8 layers
    r = run_static(d, t, engine="sglang==0.5.13", algorithm="EAGLE3")
    assert r.findings == []


def test_llama_sample_is_clean(tmp_path):
    r = run_static(LLAMA_DRAFT, LLAMA_TARGET, engine="sglang==0.5.23", algorithm="EAGLE3")
    assert codes(r, "error") == [] and codes(r, "warning") == []
    assert codes(r) == ["weights-not-checked"]


def test_kimi_sample_clean_on_old_sglang():
    r = run_static(
        KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.12.post1", algorithm="EAGLE3", trained_layers=[2, 30, 58]
    )
    assert codes(r, "error") == [] and codes(r, "warning") == []


# -- one fixture per code ---------------------------------------------------------------------------


def test_algorithm_mismatch_eagle3_draft_as_eagle(tiny):
    d, t = tiny()
    f = find(run_static(d, t, algorithm="EAGLE"), "algorithm-mismatch")
    assert f.severity == "error" and "1.00" in f.message
    assert f.fix.launch == ["--speculative-algorithm EAGLE3"]
    assert "algorithm-mismatch" not in codes(run_static(d, t, algorithm="eagle3"))


def test_algorithm_mismatch_eagle3_with_non_eagle3_draft(tiny):
    d, t = tiny(config_changes={"architectures": ["LlamaForCausalLMEagle"]})
    f = find(run_static(d, t, algorithm="EAGLE3"), "algorithm-mismatch")
    assert f.fix.launch == ["--speculative-algorithm EAGLE"]


def test_layer_ids_engine_mismatch_on_new_sglang():
    r = run_static(KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.13", trained_layers=[2, 30, 58])
    f = find(r, "layer-ids-engine-mismatch")
    assert f.evidence["shift"] == -1 and "1-layer shift" in f.message
    assert f.fix.edits[0].key == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert f.fix.edits[0].value == [3, 31, 59]


def test_layer_ids_embedding():
    r = run_static(KIMI_BROKEN, KIMI_TARGET, engine="sglang==0.5.12.post1", trained_layers=[2, 30, 58])
    f = find(r, "layer-ids-embedding")
    assert f.severity == "error" and f.evidence["id"] == -1
    assert f.fix.edits[0].value == [2, 30, 58]


def test_layer_ids_embedding_captured_on_new_llama_is_only_a_warning_when_trained_on_it(tiny):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [-1, 3, 4]})
    r = run_static(d, t, engine="sglang==0.5.23", trained_layers=[-1, 3, 4])
    assert find(r, "layer-ids-embedding").severity == "warning"
    assert "layer-ids-engine-mismatch" not in codes(r)


def test_layer_ids_out_of_range():
    r = run_static(KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.12.post1", trained_layers=[2, 30, 58], num_layers=None)
    assert "layer-ids-out-of-range" not in codes(r)


def test_layer_ids_out_of_range_fires(tiny):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [1, 3, 12]})
    f = find(run_static(d, t, engine="sglang==0.5.12.post1"), "layer-ids-out-of-range")
    assert f.evidence["id"] == 12 and f.evidence["engine_index"] == 13


def test_layer_ids_final_uncaptured(tiny):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [1, 3, 7]})
    f = find(run_static(d, t, engine="sglang==0.5.23"), "layer-ids-final-uncaptured")
    assert f.evidence["engine_index"] == 8
    # vLLM reads 7 verbatim: a capturable boundary, no finding
    assert "layer-ids-final-uncaptured" not in codes(run_static(d, t, engine="vllm"))


def test_layer_ids_unsorted(tiny):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [3, 1, 4]})
    r = run_static(d, t, engine="sglang==0.5.12.post1")
    f = find(r, "layer-ids-unsorted")
    assert f.fix.edits[0].value == [1, 3, 4]
    # SpecForge captures through SGLang, which concatenates in layer order too: no mismatch from the file
    assert "layer-ids-engine-mismatch" not in codes(r)
    # a trainer that kept list order (given) against the engine's layer order: a permutation
    r = run_static(d, t, engine="sglang==0.5.12.post1", trained_layers=[3, 1, 4])
    f = find(r, "layer-ids-engine-mismatch")
    assert f.severity == "error" and f.evidence_class == "provenance"


def test_layer_ids_count_mismatch_against_fc(tiny):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]})
    f = find(run_static(d, t), "layer-ids-count-mismatch")
    assert f.evidence["k_fc"] == 4 and f.evidence["fc_in"] == 48  # sized from the 4 eagle_config ids
    assert "3 states" in f.message and f.evidence["code"]


def test_layer_ids_count_mismatch_without_weights(tiny):
    d, t = tiny(config_changes={"num_aux_hidden_states": 4}, tensors=None)
    assert "layer-ids-count-mismatch" in codes(run_static(d, t))


def test_layer_ids_nondefault():
    f = find(run_static(KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.12.post1"), "layer-ids-nondefault")
    assert f.severity == "info" and f.evidence["default_output_of_layer"] == [1, 29, 57]


def test_eagle_config_misplaced(tiny, drop_key):
    d, t = tiny(config_changes={"eagle_config": drop_key, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]})
    r = run_static(d, t, engine="sglang==0.5.23", trained_layers=[2, 4, 5], trained_convention="capture-before")
    f = find(r, "eagle-config-misplaced")
    assert f.severity == "warning" and f.fix.edits[0].value == [1, 3, 4]
    assert find(run_static(d, t, engine="vllm"), "eagle-config-misplaced").severity == "info"


def test_no_ids_at_all_is_not_misplaced(tiny, drop_key):
    d, t = tiny(config_changes={"eagle_config": drop_key})
    assert "eagle-config-misplaced" not in codes(run_static(d, t))


def test_draft_context_too_short(copy_sample):
    d = copy_sample(LLAMA_DRAFT)
    cfg = json.loads((d / "config.json").read_text())
    cfg["max_position_embeddings"] = 2048  # SpecForge's early llama3 config
    cfg.pop("rope_scaling")
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    f = find(run_static(d, LLAMA_TARGET), "draft-context-too-short")
    assert f.evidence["target_context_length"] == 131072 and f.fix.edits[0].value == 131072
    assert "draft-context-too-short" not in codes(run_static(d, LLAMA_TARGET, context_length=2048))


def test_tied_embeddings(tiny):
    d, t = tiny(config_changes={"tie_word_embeddings": True})
    f = find(run_static(d, t), "tied-embeddings")
    assert f.fix.edits[0].key == "tie_word_embeddings" and f.fix.edits[0].value is False


@pytest.mark.parametrize("how", ["not-increasing", "outside-vocab", "t2d-disagrees", "wrong-length"])
def test_d2t_invalid(tiny, how):
    ts = tiny_tensors()
    if how == "not-increasing":
        ts["d2t"][5] = ts["d2t"][4] - 1
    elif how == "outside-vocab":
        ts["d2t"][-1] = 100
    elif how == "t2d-disagrees":
        ts["t2d"][0] = False
        ts["t2d"][1] = True
    else:
        ts["d2t"] = ts["d2t"][:10]
    d, t = tiny(tensors=ts)
    f = find(run_static(d, t), "d2t-invalid")
    assert f.evidence["problems"]


def test_hidden_size_mismatch(tiny):
    d, t = tiny(config_changes={"target_hidden_size": 32})
    f = find(run_static(d, t), "hidden-size-mismatch")
    assert f.fix.edits[0].value == 16
    d2, t2 = tiny(target_changes={"hidden_size": 24}, name="other")
    assert find(run_static(d2, t2), "hidden-size-mismatch").evidence["target_config_hidden_size"] == 24


def test_config_invalid_wrong_type(tiny):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": "2,30,58"})
    r = run_static(d, t)
    f = find(r, "config-invalid")
    assert f.evidence["field"] == "eagle_config.eagle_aux_hidden_state_layer_ids" and "str" in f.message
    assert not any(c.startswith("layer-ids-") for c in codes(r))


def test_weights_unreadable_corrupt_header(tiny):
    d, t = tiny()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 10**9) + b"{}")
    f = find(run_static(d, t), "weights-unreadable")
    assert "corrupt safetensors header" in f.message and "\n" not in f.message


def test_weights_unreadable_missing_shard(tiny):
    d, t = tiny(tensors=None)
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"fc.weight": "model-00001.safetensors"}})
    )
    assert "shard model-00001.safetensors is missing" in find(run_static(d, t), "weights-unreadable").message


def test_weights_not_checked():
    assert find(run_static(KIMI_DRAFT, KIMI_TARGET), "weights-not-checked").severity == "info"


# -- bad input -----------------------------------------------------------------------------------------


def test_malformed_config_is_one_line(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "config.json").write_text('{"hidden_size": 16,,}')
    with pytest.raises(InputError) as err:
        run_static(d)
    msg = str(err.value)
    assert "config.json" in msg and "line 1" in msg and "\n" not in msg


@pytest.mark.parametrize("path", ["nowhere", "empty"])
def test_missing_files_are_one_line(tmp_path, path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as err:
        run_static(tmp_path / path)
    assert "\n" not in str(err.value)


def test_bad_arguments(tiny):
    d, t = tiny()
    for kwargs in (
        {"engine": "tgi"},
        {"algorithm": "EAGLE4"},
        {"trained_convention": "sideways"},
        {"trained_layers": [2, 300, 5]},
        {"context_length": -1},
    ):
        with pytest.raises(InputError):
            run_static(d, t, **kwargs)


def test_top_level_array_config(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "config.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="JSON object"):
        run_static(d)


def test_without_a_layer_count_the_embedding_and_order_are_still_checked(tmp_path):
    import shutil

    d = tmp_path / "d"
    shutil.copytree(KIMI_BROKEN, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [30, -1, 2]
    (d / "config.json").write_text(json.dumps(cfg))
    r = run_static(d)
    # no target: which class serves it is unknown, so the embedding id is named, never judged
    assert codes(r, "error") == [] and sorted(codes(r, "warning")) == ["layer-ids-embedding", "layer-ids-unsorted"]
    assert r.capture is None and any("architecture" in s.why for s in r.skipped)


@pytest.mark.parametrize(
    "engine,arch", [("sglang==0.5.23", "MixtralForCausalLM"), ("vllm==0.11.0", "Qwen3MoeForCausalLM")]
)
def test_target_eagle3_unsupported(tiny, engine, arch):
    d, t = tiny(target_changes={"architectures": [arch]})
    f = find(run_static(d, t, engine=engine, algorithm="EAGLE3"), "target-eagle3-unsupported")
    assert f.severity == "error" and f.evidence_class == "engine-code" and arch in f.message
    d2, t2 = tiny(name="llama")
    assert "target-eagle3-unsupported" not in codes(run_static(d2, t2, engine=engine))


def test_every_finding_has_a_class_and_convention_is_never_an_error():
    from workbench.doctor import Finding

    with pytest.raises(ValueError):
        Finding("layer-ids-engine-mismatch", "error", "m", {}, None, "convention")
    with pytest.raises(ValueError):
        Finding("layer-ids-engine-mismatch", "warning", "m", {}, None, "guesswork")
    assert Finding("hidden-size-mismatch", "error", "m").evidence_class == "static-file"
