"""Published drafter configs with their targets' HF configs: each raises exactly the errors its
engines' code implies (none where an engine really serves it), and a fault planted in a healthy one
is still named, under the engine whose rule it breaks."""

import json
import shutil
from pathlib import Path

import pytest

from workbench.doctor import run_static

ROOT = Path(__file__).parent / "corpus"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())
CASES = [(e["name"], eng, codes) for e in MANIFEST["drafts"] for eng, codes in e["serves"].items()]


def paths(name):
    e = next(e for e in MANIFEST["drafts"] if e["name"] == name)
    return ROOT / "drafts" / name, ROOT / MANIFEST["targets"][e["target"]]["file"]


def test_manifest_names_where_every_file_comes_from():
    assert len(MANIFEST["drafts"]) >= 13
    for e in MANIFEST["drafts"]:
        assert (ROOT / "drafts" / e["name"] / "config.json").is_file()
        assert e["repo"] and e["path"] and e["target"] in MANIFEST["targets"]
        if e["repo"] != "eagle-workbench":
            assert len(e["commit"]) == 40
    healthy = [(n, eng) for n, eng, codes in CASES if not codes]
    assert len(healthy) >= 20


@pytest.mark.parametrize("name,engine,expected", CASES, ids=[f"{n}@{e}" for n, e, _ in CASES])
def test_published_drafter(name, engine, expected):
    d, t = paths(name)
    r = run_static(d, str(t), engine=engine, algorithm="EAGLE3")
    assert sorted(set(r.codes("error"))) == sorted(expected), [f.message for f in r.errors]
    for f in r.findings:  # every finding says what it rests on, and severity follows from it
        assert f.evidence_class
        if f.evidence_class == "convention":
            assert f.severity != "error"


def test_the_kimi_drafters_are_a_warning_that_names_what_settles_it():
    for name in ("sample-kimi-k2.5", "specforge-kimi-k2.5"):
        d, t = paths(name)
        r = run_static(d, str(t), engine="sglang==0.5.23", algorithm="EAGLE3")
        f = next(f for f in r.findings if f.code == "layer-ids-engine-mismatch")
        assert f.severity == "warning" and f.evidence_class == "convention"
        assert "--trained-engine" in f.message and "--training-data" in f.message
        settled = run_static(d, str(t), engine="sglang==0.5.23", trained_engine="specforge==0.2.0")
        assert "layer-ids-engine-mismatch" not in settled.codes()


def test_vllm_serves_a_short_context_draft_that_sglang_refuses():
    d, t = paths("specforge-qwen3-30b-a3b")
    s = run_static(d, str(t), engine="sglang==0.5.23")
    assert next(f for f in s.findings if f.code == "draft-context-too-short").severity == "error"
    v = run_static(d, str(t), engine="vllm==0.20.0")
    f = next(f for f in v.findings if f.code == "draft-context-too-short")
    assert f.severity == "info" and f.evidence_class == "engine-code"
    assert any("_maybe_override_draft_max_model_len" in c for c in f.evidence["code"])


def test_a_llama_architecture_draft_is_vllms_eagle3_class():
    d, t = paths("speculators-eagle3-llama3.1-8b")
    r = run_static(d, str(t), engine="vllm==0.11.0", algorithm="EAGLE3")
    assert "algorithm-mismatch" not in r.codes() and "draft-arch-unsupported" not in r.codes()
    assert run_static(d, str(t), engine="vllm==0.9.2", algorithm="EAGLE3").ok  # 0.9.2 renames it too


def _plant(tmp_path, name, edit):
    d, t = paths(name)
    dst = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(d, dst)
    cfg = json.loads((dst / "config.json").read_text())
    edit(cfg)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst, t


def test_planted_faults_are_named(tmp_path):
    def ids(v):
        return lambda c: c.setdefault("eagle_config", {}).__setitem__("eagle_aux_hidden_state_layer_ids", v)

    d, t = _plant(tmp_path, "specforge-qwen3-32b", ids([-1, 31, 60]))
    # SGLang's qwen3 capture (+1) takes index 0 as the embedding output: only data captured that way fits
    assert "layer-ids-embedding" in run_static(d, str(t), engine="sglang==0.5.23").codes("warning")
    d, t = _plant(tmp_path, "specforge-qwen3-32b", ids([1, 31, 64]))  # the final boundary of 64 layers
    r = run_static(d, str(t), engine="sglang==0.5.12.post1")
    f = next(f for f in r.findings if f.code == "layer-ids-final-uncaptured")  # never "out of range"
    assert f.severity == "error" and "final boundary" in f.message and "out-of-range" not in r.codes()
    d, t = _plant(tmp_path, "specforge-qwen3-32b", ids([1, 31, 70]))  # past it
    assert "layer-ids-out-of-range" in run_static(d, str(t), engine="sglang==0.5.12.post1").codes("error")
    d, t = _plant(tmp_path, "sample-kimi-k2.5", ids([-1, 2, 30]))  # the story's wrong "fix"
    r = run_static(d, str(t), engine="sglang==0.5.23")
    assert {"layer-ids-embedding"} <= set(r.codes("error"))

    d, t = _plant(tmp_path, "specforge-qwen2.5-7b", lambda c: c.__setitem__("hidden_size", 4096))
    assert "hidden-size-mismatch" in run_static(d, str(t), engine="vllm==0.33.0").codes("error")

    d, t = _plant(tmp_path, "sample-llama-3.1-8b", lambda c: c.__setitem__("architectures", ["Eagle3Speculator"]))
    r = run_static(d, str(t), engine="sglang==0.5.23")
    assert "draft-arch-unsupported" in r.codes("error")
    assert "draft-arch-unsupported" in run_static(d, str(t), engine="vllm==0.33.0").codes("error")

    def typo(c):
        c["eagle_config"]["eagle_aux_hidden_state_layers_ids"] = c["eagle_config"].pop(
            "eagle_aux_hidden_state_layer_ids"
        )

    d, t = _plant(tmp_path, "sample-kimi-k2.5", typo)
    r = run_static(d, str(t), engine="sglang==0.5.23")
    f = next(f for f in r.findings if f.code == "unknown-config-key")
    assert f.severity == "warning" and f.evidence["did_you_mean"] == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert [e.key for e in f.fix.edits] == [
        "eagle_config.eagle_aux_hidden_state_layers_ids",
        "eagle_config.eagle_aux_hidden_state_layer_ids",
    ]
    assert f.fix.edits[1].value == [2, 30, 58]
