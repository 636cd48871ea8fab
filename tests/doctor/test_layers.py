"""Points, conventions and engine rules against the reference's worked examples."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.errors import InputError
from workbench.layers import (
    EMBED,
    FINAL_POSTNORM,
    FINAL_PRENORM,
    Point,
    convert,
    default_ids,
    from_points,
    parse_points,
    rule_for,
    to_points,
)

KIMI = "DeepseekV3ForCausalLM"


def pts(result):
    return [None if p is None else str(p) for p in result.points]


def test_point_spelling_parse_and_order():
    assert [str(p) for p in (EMBED, Point.out(7), FINAL_PRENORM, FINAL_POSTNORM)] == [
        "embed",
        "out(7)",
        "final-prenorm",
        "final-postnorm",
    ]
    for text in ("embed", "out(0)", "out(58)", "final-prenorm", "final-postnorm"):
        assert str(Point.parse(text)) == text
    assert Point.parse(" OUT( 3 ) ") == Point.out(3)
    assert sorted([FINAL_POSTNORM, Point.out(30), EMBED, Point.out(2)]) == [
        EMBED,
        Point.out(2),
        Point.out(30),
        FINAL_POSTNORM,
    ]
    assert len({Point.out(2), Point("out", 2)}) == 1
    assert parse_points("out(2), out(30),out(58)") == [Point.out(2), Point.out(30), Point.out(58)]
    for bad in ("out(-1)", "layer 3", "", "out(x)"):
        with pytest.raises(InputError):
            Point.parse(bad)


def test_conventions_examples():
    # Llama-3.1-8B: A [1,15,28] = B [2,16,29] = HF hs[2,16,29]
    assert convert([1, 15, 28], "output-of-layer", "capture-before", 32) == [2, 16, 29]
    assert convert([1, 15, 28], "output-of-layer", "hf-index", 32) == [2, 16, 29]
    assert default_ids(61) == [1, 29, 57] and default_ids(61, "capture-before") == [2, 30, 58]
    assert to_points([-1], "output-of-layer", 61) == [EMBED]
    assert to_points([0, 61], "capture-before", 61) == [EMBED, Point.out(60)]
    assert to_points([0, 61, -1], "hf-index", 61) == [EMBED, FINAL_POSTNORM, FINAL_POSTNORM]
    assert from_points([FINAL_PRENORM], "capture-before", 61) == [61]
    with pytest.raises(InputError, match="out of range"):
        to_points([61], "output-of-layer", 61)
    with pytest.raises(InputError, match="no hf-index id"):
        from_points([FINAL_PRENORM], "hf-index", 61)  # hs[N] is post-norm
    with pytest.raises(InputError, match="convention"):
        to_points([1], "sideways", 61)
    with pytest.raises(InputError, match="integer"):
        to_points(["2"], "output-of-layer", 61)


@given(n=st.integers(2, 128), data=st.data())
def test_conventions_round_trip(n, data):
    k = data.draw(st.integers(-1, n - 2))
    for conv in ("output-of-layer", "capture-before", "hf-index"):
        ids = from_points(to_points([k], "output-of-layer", n), conv, n)
        assert to_points(ids, conv, n) == to_points([k], "output-of-layer", n)


# The reference's cheat sheet for N = 61 (Kimi-K2 / DeepSeek-V3).
@pytest.mark.parametrize(
    "engine,ids,expected",
    [
        ("sglang==0.5.12.post1", [1, 29, 57], ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.12.post1", [2, 30, 58], ["out(2)", "out(30)", "out(58)"]),
        ("sglang==0.5.13", [1, 29, 57], ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.13", [2, 30, 58], ["out(1)", "out(29)", "out(57)"]),
        ("vllm", [1, 29, 57], ["out(0)", "out(28)", "out(56)"]),
        ("vllm", [2, 30, 58], ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.12.post1", None, ["out(1)", "out(29)", "out(57)"]),
        ("sglang==0.5.13", None, ["out(1)", "out(29)", "out(57)"]),
        ("vllm", None, ["out(1)", "out(29)", "out(57)"]),
    ],
)
def test_worked_examples_61_layers(engine, ids, expected):
    res = rule_for(engine, KIMI).capture(ids, 61)
    assert pts(res) == expected and res.fatal is None


def test_capture_indices_match_reference():
    assert rule_for("sglang==0.5.12.post1", KIMI).capture([2, 30, 58], 61).indices == [3, 31, 59]
    assert rule_for("sglang==0.5.13", KIMI).capture([2, 30, 58], 61).indices == [2, 30, 58]
    assert rule_for("sglang==0.5.13", KIMI).capture([1, 29, 57], 61).indices == [2, 30, 58]


def test_llama_qwen_always_plus_one_on_every_version():
    for engine in ("sglang==0.5.5", "sglang==0.5.12.post1", "sglang==0.5.13", "sglang==0.5.23", "sglang"):
        for arch in ("LlamaForCausalLM", "Qwen3ForCausalLM", "qwen2"):
            assert rule_for(engine, arch).capture([2, 16, 29], 32).indices == [3, 17, 30]


def test_deepseek_support_starts_at_0_5_4_post2():
    assert rule_for("sglang==0.5.4.post1", KIMI).capture([1, 29, 57], 61).fatal
    assert rule_for("sglang==0.5.4.post2", KIMI).capture([1, 29, 57], 61).fatal is None
    assert rule_for("sglang==0.5.4.post2", KIMI).capture([2, 30, 58], 61).indices == [3, 31, 59]
    assert rule_for("sglang==0.5.13", "Glm4MoeLiteForCausalLM").capture([2, 30, 58], 61).indices == [2, 30, 58]


def test_aliases_and_latest():
    assert rule_for("sglang-0.5.12", KIMI).plus_one == "always"
    assert rule_for("sglang-0.5.13", KIMI).plus_one == "first-is-1"
    assert rule_for("sglang", KIMI).name == "sglang==0.5.23"
    assert rule_for("vllm").reads_top_level_first
    for bad in ("tgi", "sglang==banana", ""):
        with pytest.raises(InputError):
            rule_for(bad)


def test_minus_one_per_engine():
    old = rule_for("sglang==0.5.12.post1", KIMI).capture([-1, 2, 30], 61)
    assert old.fatal and "TypeError" in old.fatal and old.by_id[0].point is None
    new = rule_for("sglang==0.5.23", KIMI).capture([-1, 2, 30], 61)
    assert new.fatal and "captured 2 of 3" in new.fatal
    assert pts(new) == ["out(1)", "out(29)", None]
    # 0.5.23 llama: -1 + 1 = 0 captures the embedding output
    llama = rule_for("sglang==0.5.23", "LlamaForCausalLM").capture([-1, 2, 30], 32)
    assert pts(llama) == ["embed", "out(2)", "out(30)"] and llama.fatal is None
    assert pts(rule_for("vllm", KIMI).capture([-1, 2, 30], 61)) == ["out(1)", "out(29)", None]


def test_last_layer_never_captured_except_boundaries():
    res = rule_for("sglang==0.5.23", "LlamaForCausalLM").capture([1, 15, 31], 32)
    assert pts(res) == ["out(1)", "out(15)", None] and any("never fires" in n for n in res.notes)
    gpt = rule_for("sglang==0.5.23", "GptOssForCausalLM").capture([24, 30, 36], 36)
    assert pts(gpt) == ["out(23)", "out(29)", "out(35)"]
    assert pts(rule_for("vllm").capture([2, 16, 32], 32)) == ["out(1)", "out(15)", "out(31)"]


def test_unsorted_lists_concatenate_in_layer_order():
    res = rule_for("sglang==0.5.12.post1", KIMI).capture([30, 2, 58], 61)
    assert pts(res) == ["out(2)", "out(30)", "out(58)"]
    assert [c.id for c in res.by_id] == [30, 2, 58]
    assert any("not ascending" in n for n in res.notes)


def test_ids_for_finds_the_config_that_restores_training_points():
    want = ["out(2)", "out(30)", "out(58)"]
    assert rule_for("sglang==0.5.12.post1", KIMI).ids_for(want, 61) == [2, 30, 58]
    assert rule_for("sglang==0.5.13", KIMI).ids_for(want, 61) == [3, 31, 59]
    assert rule_for("vllm").ids_for(want, 61) == [3, 31, 59]
    assert rule_for("sglang==0.5.23", "LlamaForCausalLM").ids_for(["out(31)"], 32) is None
