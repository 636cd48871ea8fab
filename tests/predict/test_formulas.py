"""The predictor's formulas against hand-computed values and SGLang's rules."""

import numpy as np
import pytest

from workbench import predict as P
from workbench.errors import InputError


def test_story_alpha_075_five_steps_with_and_without_bonus():
    r = P.predict("acc", [0.75], 5, 1, 6)
    # 1 + .75 + .5625 + .421875 + .31640625 + .2373046875
    assert r.accept_length == pytest.approx(3.2880859375)
    assert round(r.accept_length, 3) == 3.288
    assert round(r.accepted_drafts, 3) == 2.288
    assert r.model == "chain" and r.draft_tokens == 6
    assert [round(d.marginal, 4) for d in r.per_depth] == [0.75, 0.5625, 0.4219, 0.3164, 0.2373]
    assert "1 value for 5 steps" in r.warnings[0]


def test_alpha_closed_form_matches_leviathan():
    for a, g in [(0.75, 3), (0.75, 7), (0.5, 4)]:
        r = P.predict("alpha", [a], g, 1, g + 1)
        assert r.accept_length == pytest.approx((1 - a ** (g + 1)) / (1 - a))
    assert P.predict("alpha", 0.75, 3, 1, 4).accept_length == pytest.approx(2.734375)
    assert P.predict("alpha", [1.0], 4, 1, 5).accept_length == 5.0


def test_vllm_marginal_card_values():
    r = P.predict("marginal", [0.633, 0.404, 0.264], 3, 1, 4)
    assert r.accept_length == pytest.approx(2.301)
    assert [round(d.conditional, 4) for d in r.per_depth] == [0.633, round(0.404 / 0.633, 4), round(0.264 / 0.404, 4)]


def test_acc_index_shift_and_conditional_are_the_same_numbers():
    acc = P.predict("acc", [0.8, 0.7, 0.6], 3, 1, 4)
    cond = P.predict("conditional", [0.8, 0.7, 0.6], 3, 1, 4)
    assert acc.accept_length == cond.accept_length == pytest.approx(1 + 0.8 + 0.56 + 0.336)
    assert "acc_{k-1}" in acc.formula and acc.convention == "acc"


def test_sglang_accept_rate_by_version():
    r = P.predict("acc", [0.75], 5, 1, 6)
    assert r.sglang_accept_rate[">=0.5.12"] == pytest.approx(2.2880859375 / 5)
    assert r.sglang_accept_rate["0.5.5"] == pytest.approx(3.2880859375 / 6)
    t = P.predict("acc", [0.75], 3, 2, 7, topk_hits=[0.75, 0.9])
    assert t.sglang_accept_rate[">=0.5.12"] == pytest.approx((t.accept_length - 1) / 6)
    assert t.sglang_accept_rate["0.5.5"] == pytest.approx(t.accept_length / 4)


def test_short_list_extended_long_list_truncated():
    r = P.predict("conditional", [0.9, 0.8], 4, 1, 5)
    assert [d.conditional for d in r.per_depth] == pytest.approx([0.9, 0.8, 0.8, 0.8])
    assert any("depths 3..4 reuse the last value 0.800" in w for w in r.warnings)
    r = P.predict("conditional", [0.9, 0.8, 0.7], 2, 1, 3)
    assert r.accept_length == pytest.approx(1 + 0.9 + 0.72)
    assert any("first 2 are used" in w for w in r.warnings)
    m = P.predict("marginal", [0.8, 0.6], 3, 1, 4)
    assert m.per_depth[2].conditional == pytest.approx(0.75)
    assert any("P_2/P_1" in w for w in m.warnings)


def test_topk1_draft_tokens_adjusted_like_sglang():
    r = P.predict("acc", [0.75], 5, 1, 4)
    assert r.draft_tokens == 6
    assert any("adjusted to steps+1 = 6" in w for w in r.warnings)


@pytest.mark.parametrize(
    "triple, match",
    [
        ((5, None, None), "all three or none"),
        ((None, 1, 6), "missing steps"),
        ((3, 2, 8), r"exceeds steps\*topk\+1 = 7"),
        ((0, 1, 2), "steps: 0"),
        ((2.5, 1, 3), "steps: expected an integer"),
        ((3, 0, 4), "topk: 0"),
    ],
)
def test_invalid_triples(triple, match):
    with pytest.raises(InputError, match=match):
        P.predict("acc", [0.7], *triple)


def test_no_triple_uses_sglang_default():
    r = P.predict("acc", [0.7])
    assert (r.steps, r.topk, r.draft_tokens) == (3, 1, 4)
    assert any("(3, 1, 4)" in w for w in r.warnings)


@pytest.mark.parametrize(
    "conv, values, match",
    [
        ("acc", [1.2], r"acc: value 1 \(1.2\) is outside \[0, 1\]"),
        ("acc", [], "acc: empty list"),
        ("acc", [float("nan")], "outside"),
        ("alpha", [0.5, 0.6], "alpha: expected one value"),
        ("marginal", [0.5, 0.6], "cannot grow"),
        ("bogus", [0.5], "convention: 'bogus' is not one of acc, conditional, marginal, alpha"),
        ("acc", ["x"], "expected a list of numbers"),
    ],
)
def test_bad_rates_one_line(conv, values, match):
    with pytest.raises(InputError, match=match) as err:
        P.predict(conv, values, 3, 1, 4)
    assert "\n" not in str(err.value)


def test_tree_model_hand_value():
    # depth rates: rank1 0.6, rank2 0.3 at every depth; 2 steps, top-2, 4 nodes verified (3 drafts).
    # candidates: depth1 .6 .3; depth2 from the two: .36 .18 .18 .09 -> keep .6 .36 .3 -> AL 2.26
    r = P.predict("conditional", [0.6], 2, 2, 4, topk_hits=[0.6, 0.9])
    assert r.model == "tree"
    assert r.accept_length == pytest.approx(1 + 0.6 + 0.36 + 0.3)
    assert [d.marginal for d in r.per_depth] == pytest.approx([0.9, 0.36])
    assert r.chain_accept_length == pytest.approx(1 + 0.6 + 0.36)
    full = P.predict("conditional", [0.6], 2, 2, 5, topk_hits=[0.6, 0.9])
    assert full.accept_length == pytest.approx(1 + 0.9 + 0.36 + 0.18)


def test_tree_without_hits_is_the_chain_with_a_warning():
    r = P.predict("acc", [0.75], 3, 4, 8)
    assert r.accept_length == pytest.approx(P.chain_accept_length([0.75] * 3))
    assert any("without top-k hit rates" in w for w in r.warnings)


def test_throughput_interpolates_verify_points():
    r = P.predict("acc", [0.75], 2, 1, 3, verify_ms={2: 20.0, 4: 24.0}, draft_ms=1.5, baseline_ms=20)
    t = r.throughput
    assert t.verify_ms == pytest.approx(22.0) and not t.verify_extrapolated
    assert t.cycle_ms == pytest.approx(25.0)
    assert t.tokens_per_s == pytest.approx(2.3125 * 1000 / 25)
    assert t.speedup == pytest.approx(t.tokens_per_s / 50)
    out = P.predict("acc", [0.75], 5, 1, 6, verify_ms={2: 20.0, 4: 24.0}, draft_ms=1.5)
    assert out.throughput.verify_extrapolated and out.throughput.verify_ms == pytest.approx(28.0)
    assert any("extrapolated" in w for w in out.warnings)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(verify_ms={2: 20}), "draft_ms: needed"),
        (dict(draft_ms=1.0), "verify_ms: needed"),
        (dict(verify_ms={2: -1}, draft_ms=1), "positive"),
        (dict(verify_ms={}, draft_ms=1), "no points"),
        (dict(verify_ms={2: 20}, draft_ms=1, baseline_ms=0), "baseline_ms"),
        (dict(baseline_ms=10), "needs verify_ms"),
    ],
)
def test_bad_timings(kw, match):
    with pytest.raises(InputError, match=match):
        P.predict("acc", [0.7], 1, 1, 2, **kw)


def test_verdict_story_numbers():
    gap = P.predict("acc", [0.75], 5, 1, 6, observed_accept_length=1.12).verdict
    assert gap.code == "accept-length-gap"
    assert gap.ratio == pytest.approx(1.12 / 3.2880859375)
    assert gap.drafts_ratio == pytest.approx(0.12 / 2.2880859375)
    assert "deployment fault" in gap.explanation and gap.explanation.count(". ") == 0
    fixed = P.predict("acc", [0.75], 5, 1, 6, observed_accept_length=2.4).verdict
    assert fixed.code == "ok" and "deployment looks sound" in fixed.explanation
    above = P.predict("acc", [0.75], 5, 1, 6, observed_accept_length=3.5).verdict
    assert above.code == "ok" and above.ratio > 1


@pytest.mark.parametrize("obs, match", [(0.9, "below 1"), (6.5, "exceeds steps\\+1 = 6"), ("x", "not a number")])
def test_verdict_rejects_impossible_observations(obs, match):
    with pytest.raises(InputError, match=match):
        P.predict("acc", [0.75], 5, 1, 6, observed_accept_length=obs)


def test_verdict_absent_from_json_without_observation():
    assert "verdict" not in P.predict("acc", [0.75], 5, 1, 6).to_dict()
    assert set(P.predict("acc", [0.75], 5, 1, 6, observed_accept_length=2).to_dict()["verdict"]) >= {
        "code",
        "ratio",
        "explanation",
    }


def test_fit_recovers_consecutive_depths_exactly():
    c = [0.83, 0.75, 0.79, 0.65, 0.66]
    measured = {s: P.chain_accept_length(c[:s]) for s in range(1, 6)}
    f = P.fit(measured, max_steps=8)
    assert f.conditional[:5] == pytest.approx(c, abs=1e-9)
    assert f.conditional[5:] == pytest.approx([0.66] * 3)
    assert f.max_residual < 1e-9
    assert [p.measured for p in f.curve[:5]] == pytest.approx(list(measured.values()))
    assert f.curve[7].accept_length == pytest.approx(P.chain_accept_length(c + [0.66] * 3))


def test_fit_with_gaps_matches_alpha():
    f = P.fit({3: 2.734375, 5: 3.2880859375})
    assert f.conditional == pytest.approx([0.75] * 8, abs=1e-6)
    assert any("gaps" in w for w in f.warnings)


@pytest.mark.parametrize(
    "measured, match",
    [
        ({}, "no points"),
        ({2: 0.5}, "outside 1..3"),
        ({1: 2.5}, "outside 1..2"),
        ([(1, "a")], "not a number"),
    ],
)
def test_fit_bad_input(measured, match):
    with pytest.raises(InputError, match=match):
        P.fit(measured)


def test_fit_noisy_drop_is_clipped_with_warning():
    f = P.fit({1: 1.8, 2: 1.7})
    assert f.conditional[1] == 0.0 and f.warnings


def test_sweep_ranks_and_names_best():
    vt = {2: 20.0, 3: 21.0, 4: 22.5, 5: 24.0, 6: 25.5, 7: 27.0, 8: 28.5, 9: 30.0}
    s = P.sweep("acc", [0.75], verify_ms=vt, draft_ms=2.0, baseline_ms=19.0)
    tps = s.tokens_per_s
    assert np.all(np.diff(tps) <= 1e-12)
    expect = {n: P.chain_accept_length([0.75] * n) * 1000 / (vt[n + 1] + 2.0 * n) for n in range(1, 9)}
    best_steps = max(expect, key=expect.get)
    assert (s.best.steps, s.best.topk, s.best.draft_tokens) == (best_steps, 1, best_steps + 1)
    assert s.best.tokens_per_s == pytest.approx(expect[best_steps])
    assert s.best.speedup == pytest.approx(expect[best_steps] / (1000 / 19.0))
    d = s.to_dict()
    assert d["best"] == d["table"][0] and len(d["table"]) == 8


def test_sweep_trees_only_with_hits_and_inside_measured_span():
    vt = {2: 20.0, 6: 24.0}
    chains = P.sweep("acc", [0.75], verify_ms=vt, draft_ms=1.0, topks=[1, 2])
    assert set(chains.topk.tolist()) == {1}
    assert any("need top-k hit rates" in w for w in chains.warnings)
    trees = P.sweep("acc", [0.75], verify_ms=vt, draft_ms=1.0, topk_hits=[0.75, 0.85])
    assert set(trees.topk.tolist()) == {1, 2}
    assert trees.draft_tokens.max() <= 6 and trees.draft_tokens.min() >= 2
    assert any("left out" in w for w in trees.warnings)
    for i in range(len(trees)):
        r = trees.row(i)
        one = P.predict("acc", [0.75], r.steps, r.topk, r.draft_tokens, topk_hits=[0.75, 0.85])
        assert r.accept_length == pytest.approx(one.accept_length)


def test_sweep_nothing_measured_in_range():
    with pytest.raises(InputError, match="cover no configuration"):
        P.sweep("acc", [0.75], verify_ms={40: 30.0}, draft_ms=1.0)
