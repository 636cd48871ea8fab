"""The story, reproduced from the sample Kimi-K2.5 configs on both SGLang generations."""

import json

import pytest

from tests.fixtures.drafts import KIMI_BROKEN, KIMI_DRAFT, KIMI_TARGET
from workbench.doctor import run_static

TRAINED = [2, 30, 58]  # the training dump held out(2), out(30), out(58)


def layer_codes(report):
    return sorted({f.code for f in report.findings if f.code.startswith("layer-ids-") and f.severity != "info"})


@pytest.mark.parametrize("engine", ["sglang==0.5.12.post1", "sglang==0.5.12", "sglang==0.5.11", "sglang-0.5.12"])
def test_old_sglang_broken_flagged_original_clean(engine):
    broken = run_static(KIMI_BROKEN, KIMI_TARGET, engine=engine, algorithm="EAGLE3", trained_layers=TRAINED)
    assert layer_codes(broken) == ["layer-ids-embedding", "layer-ids-engine-mismatch"]
    assert not broken.ok
    good = run_static(KIMI_DRAFT, KIMI_TARGET, engine=engine, algorithm="EAGLE3", trained_layers=TRAINED)
    assert good.ok and layer_codes(good) == []
    assert good.capture.engine_points == ["out(2)", "out(30)", "out(58)"] and good.capture.match


def test_kimi_k25_target_has_no_class_in_0_5_4_post2():
    """sglang 0.5.4.post2 has no kimi_k25.py (read in its wheel; the class and its hook arrive in 0.5.9
    and 0.5.10): a Kimi-K2.5 target has no EAGLE-3 capture there at all."""
    r = run_static(KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.4.post2", algorithm="EAGLE3", trained_layers=TRAINED)
    assert not r.ok and r.capture.fatal and "cannot load this target" in r.capture.fatal
    assert "target-eagle3-unsupported" in r.codes("error")


@pytest.mark.parametrize("engine", ["sglang==0.5.13", "sglang==0.5.23", "sglang", "sglang-0.5.13"])
def test_new_sglang_flags_the_original_as_a_one_layer_shift(engine):
    r = run_static(KIMI_DRAFT, KIMI_TARGET, engine=engine, algorithm="EAGLE3", trained_layers=TRAINED)
    f = next(f for f in r.findings if f.code == "layer-ids-engine-mismatch")
    assert f.evidence["engine_points"] == ["out(1)", "out(29)", "out(57)"]
    assert f.evidence["trained_points"] == ["out(2)", "out(30)", "out(58)"]
    assert f.evidence["shift"] == -1
    # the fix names the ids that restore training's points on this engine
    assert f.fix.edits[0].value == [3, 31, 59]
    broken = run_static(KIMI_BROKEN, KIMI_TARGET, engine=engine, trained_layers=TRAINED)
    assert "layer-ids-embedding" in layer_codes(broken)


def test_without_provenance_the_convention_is_a_warning_naming_both_readings():
    r = run_static(KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.13")
    f = next(f for f in r.findings if f.code == "layer-ids-engine-mismatch")
    assert f.severity == "warning" and f.evidence_class == "convention" and r.ok
    by_engines = {tuple(rd["points"]): rd["engines"] for rd in f.evidence["readings"]}
    assert "sglang==0.5.12.post1" in by_engines[("out(2)", "out(30)", "out(58)")]  # always +1
    assert {"sglang==0.5.14", "sglang==0.5.23"} <= set(by_engines[("out(1)", "out(29)", "out(57)")])
    assert "--trained-engine" in f.message and "--training-data" in f.message
    assert f.fix is None  # no edit is right under both readings
    assert run_static(KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.12.post1").ok


@pytest.mark.parametrize("engine", ["sglang==0.5.23", "sglang==0.5.13"])
def test_provenance_settles_it(engine):
    # SpecForge 0.2.0 pins sglang==0.5.14: its capture of [2, 30, 58] is what 0.5.13+ serves
    r = run_static(KIMI_DRAFT, KIMI_TARGET, engine=engine, trained_engine="specforge==0.2.0")
    assert "layer-ids-engine-mismatch" not in r.codes() and r.capture.match is True
    assert r.inputs["provenance"]["engine"] == "sglang==0.5.14"
    # captured by an always-+1 release: trained on out(2), out(30), out(58), a one-layer shift here
    old = run_static(KIMI_DRAFT, KIMI_TARGET, engine=engine, trained_engine="sglang==0.5.12.post1")
    f = next(f for f in old.findings if f.code == "layer-ids-engine-mismatch")
    assert f.severity == "error" and f.evidence_class == "provenance" and f.evidence["shift"] == -1
    assert f.fix.edits[0].value == [3, 31, 59]


def test_capture_report_side_by_side():
    r = run_static(KIMI_BROKEN, KIMI_TARGET, engine="sglang==0.5.12.post1", trained_layers=TRAINED)
    cap = r.capture.to_dict()
    assert cap["config_ids"] == [-1, 2, 30] and cap["engine_indices"] == [0, 3, 31]
    assert [(row["config_id"], row["engine_point"], row["trained_point"]) for row in cap["rows"]] == [
        (2, "out(2)", "out(2)"),
        (30, "out(30)", "out(30)"),
        (-1, None, "out(58)"),
    ]
    assert cap["fatal"] and "TypeError" in cap["fatal"]
    by = r.capture.captured_by
    assert by("vllm==0.33.0") == ["out(1)", "out(29)", None]  # eagle_config ids read verbatim: -1 is dropped
    assert by("vllm==0.20.0") == by("vllm==0.34.0") == ["out(1)", "out(29)", "out(57)"]  # ids not read: defaults
    assert by("vllm==0.11.0") == by("sglang==0.5.4.post1") == ["cannot serve"]  # no Kimi-K2.5 class yet
    json.dumps(r.to_dict())  # JSON-serialisable all the way down


def test_vllm_reads_top_level_first(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    cfg = json.loads((KIMI_DRAFT / "config.json").read_text())
    cfg["eagle_aux_hidden_state_layer_ids"] = [3, 31, 59]  # capture-before, for vLLM
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    r = run_static(d, KIMI_TARGET, engine="vllm", trained_layers=TRAINED)
    assert r.capture.ids_source == "eagle_aux_hidden_state_layer_ids" and r.ok
    assert run_static(d, KIMI_TARGET, engine="sglang==0.5.12.post1", trained_layers=TRAINED).ok


def test_a_release_without_the_targets_class_cannot_serve_it():
    # sglang 0.5.4.post2's code has no KimiK25ForConditionalGeneration with set_eagle3_layers_to_capture
    r = run_static(KIMI_DRAFT, KIMI_TARGET, engine="sglang==0.5.4.post2", algorithm="EAGLE3", trained_layers=TRAINED)
    assert not r.ok and r.capture.fatal and "cannot load this target" in r.capture.fatal
    assert "target-eagle3-unsupported" in r.codes("error")
