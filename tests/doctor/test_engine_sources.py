"""The doctor's engine and trainer facts are caches of what the engines' and trainers' own code says:
each cache is checked against the real release (wheels from PyPI, kept in the wheel cache)."""

import json
import shutil

import pytest

from workbench import provenance
from workbench.doctor import run_static
from workbench.engine import read_at, release, releases, table


def _wheel(engine, version):
    from workbench.engine.wheels import unpacked

    try:
        return unpacked(engine, version)
    except Exception as exc:  # no index reachable and not cached
        pytest.skip(f"{engine}=={version} wheel not available: {exc}")


@pytest.mark.parametrize("version", ["0.9.2", "0.33.0"])
def test_vllm_table_is_what_the_release_says(version):
    got = table.pack(read_at(_wheel("vllm", version), version))
    want = table.load("vllm")[version]
    assert {k: v for k, v in got.items() if k != "read_from"} == {k: v for k, v in want.items() if k != "read_from"}


def test_vllm_rules_read_from_the_code():
    def rule(v, arch="LlamaForCausalLM"):
        return release(f"vllm=={v}").serve([arch]).rule

    # 0.9-0.11: the runner asks the model for its defaults; the capture adds a None residual at index 0
    for v in ("0.9.2", "0.10.2", "0.11.0"):
        r = rule(v)
        assert (r.config_ids, r.index0, r.boundary) == ("ignored", "type-error", "none")
    r = rule("0.33.0")
    assert r.id_source == ("eagle_aux_hidden_state_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids")
    assert (r.index0, r.boundary) == ("embed", "final-prenorm")
    # 0.34's only runner (V2) reads eagle_config.layer_ids, not eagle_config.eagle_aux_hidden_state_layer_ids
    assert rule("0.34.0").id_source == ("eagle_aux_hidden_state_layer_ids", "eagle_config.layer_ids")
    for v in releases("vllm"):
        rel = release(f"vllm=={v}")
        assert all(r.default == ("2", "N//2", "N-3") for r in rel.rules if r.default), v
        assert rel.facts["draft_len"] == "min"
        assert all(e.file and e.line >= 0 for r in rel.rules for e in r.evidence)
    old = release("vllm==0.9.2")
    assert old.facts["arch_map"] == {"prefix": "Eagle3", "keeps_prefixed": True, "keeps_suffixed": False}
    assert old.registered("LlamaForCausalLMEagle3") is None and old.facts["speculators"] is None
    assert release("vllm==0.11.0").facts["speculators"]["architectures"] == "Eagle3LlamaForCausalLM"


def test_vllm_reader_says_unknown_for_code_it_does_not_recognise(tmp_path):
    src = _wheel("vllm", "0.9.2")
    for n in (
        "vllm/_version.py",
        "vllm/model_executor/models/llama.py",
        "vllm/model_executor/models/registry.py",
        "vllm/v1/worker/gpu_model_runner.py",
        "vllm/transformers_utils/configs/eagle.py",
    ):
        (tmp_path / n).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / n, tmp_path / n)
    llama = tmp_path / "vllm/model_executor/models/llama.py"
    text = llama.read_text()
    assert "if idx in self.aux_hidden_state_layers:" in text
    llama.write_text(text.replace("if idx in self.aux_hidden_state_layers:", "if self.wants(idx):"))
    r = read_at(tmp_path).serve(["LlamaForCausalLM"]).rule
    assert r.index0 == "unknown" and r.boundary == "unknown" and "index0" in r.unknowns
    assert r.config_ids == "ignored" and r.default == ("2", "N//2", "N-3")


def test_specforge_pin_is_read_from_its_wheel():
    whl, err = provenance.cached_wheel("specforge", "0.2.0")
    assert err is None
    got = provenance.read_specforge_wheel(whl)
    assert got == provenance.load_table()["specforge"]["releases"]["0.2.0"]
    assert got["sglang"] == "0.5.14" and got["capture_call"].startswith("specforge/offline_capture/")
    # its own resolver, run on stubs: the default [1, N//2-1, N-4] and no negative (embedding) ids
    assert got["default_ids_at_61_layers"] == [1, 29, 57] and got["rejects_negative_ids"] is True
    p = provenance.parse_provenance("specforge==0.2.0")
    assert p.engine == "sglang==0.5.14" and "METADATA" in p.how


def test_sglang_registry_table_is_the_installed_release():
    from workbench.engine.lookup import installed

    root, ver = installed("sglang")
    rel = release(f"sglang=={ver}")
    assert read_at(root, ver).registry == rel.registry
    assert rel.registered("LlamaForCausalLMEagle3")
    assert not any(rel.registered(a) for a in ("Eagle3Speculator", "Eagle3DraftModel"))


def test_a_speculators_format_draft_has_no_sglang_loader(tmp_path):
    cfg = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "draft_vocab_size": 32000,
        "transformer_layer_config": {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_hidden_layers": 1,
            "vocab_size": 128256,
            "max_position_embeddings": 2048,
        },
        "speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "meta-llama/Llama-3.1-8B"}},
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    from tests.fixtures.drafts import LLAMA_TARGET

    s = run_static(tmp_path, LLAMA_TARGET, engine="sglang==0.5.23", algorithm="EAGLE3")
    f = next(f for f in s.findings if f.code == "draft-arch-unsupported")
    assert f.severity == "error" and f.evidence_class == "engine-code" and "vLLM" in f.message
    v = run_static(tmp_path, LLAMA_TARGET, engine="vllm==0.11.0", algorithm="EAGLE3")
    assert v.ok, [x.message for x in v.errors]  # vLLM reads speculators configs
    assert not run_static(tmp_path, LLAMA_TARGET, engine="vllm==0.9.2").ok  # ... from 0.10 on


def test_a_vllm_release_that_was_not_read_is_named_never_assumed(tiny, monkeypatch, tmp_path):
    from workbench.engine import ReleaseNotReadError

    monkeypatch.setenv("EAGLE_WB_CACHE", str(tmp_path))
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [0, 3, 4]})
    with pytest.raises(
        ReleaseNotReadError, match=r"vllm==0\.12\.5 was not read.*nearest is vllm==0\.12\.0.*engine read vllm==0\.12\.5"
    ):
        run_static(d, t, engine="vllm==0.12.5")
    exact = next(f for f in run_static(d, t, engine="vllm==0.11.0").findings if f.code == "layer-ids-engine-mismatch")
    assert exact.severity == "error" and exact.evidence_class == "engine-code" and exact.evidence["code"]


def test_a_vllm_release_that_ignores_config_ids_says_no_edit_helps(tmp_path):
    from tests.fixtures.drafts import LLAMA_DRAFT, LLAMA_TARGET

    cfg = json.loads((LLAMA_DRAFT / "config.json").read_text())
    cfg.setdefault("eagle_config", {})["eagle_aux_hidden_state_layer_ids"] = [3, 16, 28]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    old = run_static(tmp_path, LLAMA_TARGET, engine="vllm==0.11.0")
    f = next(f for f in old.findings if f.code == "layer-ids-engine-mismatch")
    assert f.fix is None and "ignores the config's layer ids" in f.message
    new = run_static(tmp_path, LLAMA_TARGET, engine="vllm==0.33.0")
    f = next(f for f in new.findings if f.code == "layer-ids-engine-mismatch")
    # without provenance the file cannot say whether SpecForge (SGLang) or vLLM itself captured the data
    assert f.severity == "warning" and f.fix is None and "vllm==0.33.0 itself captured" in f.message
    new = run_static(tmp_path, LLAMA_TARGET, engine="vllm==0.33.0", trained_engine="specforge==0.2.0")
    f = next(f for f in new.findings if f.code == "layer-ids-engine-mismatch")
    # vLLM reads the top-level key first and SGLang ignores it: the fix writes there
    assert f.fix.edits[0].key == "eagle_aux_hidden_state_layer_ids" and f.fix.edits[0].value == [4, 17, 29]
    assert run_static(tmp_path, LLAMA_TARGET, engine="sglang==0.5.23").ok


def test_vllm_before_0_22_sizes_fc_for_three_states(tiny):
    def fc(v):
        return release(f"vllm=={v}").drafts["Eagle3LlamaForCausalLM"].fc_states

    assert [fc(v) for v in ("0.9.2", "0.11.0", "0.20.0", "0.22.0", "0.33.0")] == ["3", "3", "3", "config", "config"]
    from tests.fixtures.drafts import TINY_DRAFT, tiny_tensors

    cfg = json.loads(json.dumps(TINY_DRAFT))
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [1, 2, 3, 4]
    ts = tiny_tensors(cfg)
    ts["fc.weight"] = __import__("numpy").zeros((16, 64), "float32")  # 4 * 16 inputs
    d, tgt = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [1, 2, 3, 4]}, tensors=ts)
    f = next(f for f in run_static(d, tgt, engine="vllm==0.11.0").findings if f.code == "layer-ids-count-mismatch")
    assert f.severity == "error" and "3 target states" in f.message and f.evidence["code"]
    assert "layer-ids-count-mismatch" not in run_static(d, tgt, engine="vllm==0.33.0").codes()
