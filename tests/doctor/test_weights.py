"""Weight names and shapes against what the engine's drafter expects (workbench.drafter.names)."""

import numpy as np
import pytest

from tests.fixtures.drafts import TINY_DRAFT, tiny_tensors, write_draft
from workbench.doctor import run_static


def codes(report):
    return sorted(set(report.codes()))


def find(report, code):
    return next(f for f in report.findings if f.code == code)


def test_missing_weight_lm_head(tiny):
    ts = tiny_tensors()
    del ts["lm_head.weight"]
    d, t = tiny(tensors=ts)
    f = find(run_static(d, t), "missing-weight")
    assert f.severity == "error" and f.evidence["missing"] == ["lm_head.weight"]
    assert "random init" in f.message


def test_missing_weight_d2t(tiny):
    ts = tiny_tensors()
    del ts["d2t"]
    d, t = tiny(tensors=ts)
    assert find(run_static(d, t), "missing-weight").evidence["missing"] == ["d2t"]


def test_unexpected_weight_is_named(tiny):
    ts = tiny_tensors()
    ts["midlayer.self_attn.rotary_emb.inv_freq"] = np.zeros(4, np.float32)
    ts["mtp_head.weight"] = np.zeros((2, 2), np.float32)
    d, t = tiny(tensors=ts)
    r = run_static(d, t)
    f = find(r, "unexpected-weight")
    assert f.severity == "warning"
    assert f.evidence["unexpected"] == ["midlayer.self_attn.rotary_emb.inv_freq", "mtp_head.weight"]
    # vLLM's loader is not read: no claim about what it drops, the check is listed as skipped
    v = run_static(d, t, engine="vllm==0.33.0")
    assert "unexpected-weight" not in v.codes()
    assert any(s.check == "weight names the loader drops" for s in v.skipped)


def test_optional_weights_are_not_unexpected(tiny):
    ts = tiny_tensors()
    ts["embed_tokens.weight"] = np.zeros((64, 16), np.float32)
    ts["model.norm.weight"] = ts.pop("norm.weight")  # SGLang also tries the model. prefix
    d, t = tiny(tensors=ts)
    assert run_static(d, t).findings == []


def test_weight_shape_mismatch(tiny):
    ts = tiny_tensors()
    ts["lm_head.weight"] = np.zeros((32, 16), np.float32)  # trained for a 32-token draft vocab
    d, t = tiny(tensors=ts)
    f = find(run_static(d, t), "weight-shape-mismatch")
    assert f.evidence["mismatches"][0] == {
        "name": "lm_head.weight",
        "shape": [32, 16],
        "expected": [16, 16],
        "dtype": "F32",
    }


def test_weight_dtype_mismatch_for_d2t(tiny):
    ts = tiny_tensors()
    ts["d2t"] = ts["d2t"].astype(np.float32)
    d, t = tiny(tensors=ts)
    f = find(run_static(d, t), "weight-shape-mismatch")
    assert f.evidence["mismatches"][0]["expected_dtype"] == "int64"


def test_speculators_naming_checked_the_same_way(tmp_path):
    ts = tiny_tensors(naming="speculators")
    assert "layers.0.self_attn.q_proj.weight" in ts
    d = write_draft(tmp_path / "d", TINY_DRAFT, ts)
    r = run_static(d, num_layers=8)
    assert not [f for f in r.findings if f.code in ("missing-weight", "unexpected-weight", "weight-shape-mismatch")]


def test_weight_checks_skip_when_config_cannot_size_them(tiny):
    d, t = tiny(drop=["intermediate_size"])
    f = find(run_static(d, t), "weights-not-checked")
    assert "intermediate_size" in f.message


@pytest.mark.parametrize("flag,name", [("bias", "fc.bias"), ("norm_before_fc", "input_norm.weight")])
def test_flag_weights_required(tiny, flag, name):
    d, t = tiny(config_changes={flag: True})
    assert name in find(run_static(d, t), "missing-weight").evidence["missing"]
