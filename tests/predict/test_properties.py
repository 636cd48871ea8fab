"""Properties the predictor must keep for every input, not just the hand-picked ones."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import predict as P

rate = st.floats(0.0, 1.0, allow_nan=False)
rates = st.lists(rate, min_size=1, max_size=10)
steps_st = st.integers(1, 10)
EPS = 1e-9


@given(rates, steps_st)
def test_bounds_one_to_steps_plus_one(c, steps):
    r = P.predict("conditional", c, steps, 1, steps + 1)
    assert 1.0 - EPS <= r.accept_length <= steps + 1 + EPS
    assert 0.0 <= r.sglang_accept_rate[">=0.5.12"] <= 1 + EPS
    assert r.accepted_drafts == r.accept_length - 1


@given(rates, st.lists(st.floats(0.0, 1.0), min_size=10, max_size=10), steps_st)
def test_monotone_in_accuracy(c, bumps, steps):
    higher = [min(1.0, x + b * (1 - x)) for x, b in zip(c, bumps)]
    lo = P.predict("conditional", c, steps, 1, steps + 1).accept_length
    hi = P.predict("conditional", higher, steps, 1, steps + 1).accept_length
    assert hi >= lo - EPS


@given(rates, steps_st)
def test_monotone_in_steps(c, steps):
    a = P.predict("conditional", c, steps, 1, steps + 1).accept_length
    b = P.predict("conditional", c, steps + 1, 1, steps + 2).accept_length
    assert b >= a - EPS


@given(st.floats(0.0, 0.999), st.integers(1, 12))
def test_alpha_matches_closed_form(a, steps):
    r = P.predict("alpha", a, steps, 1, steps + 1)
    assert np.isclose(r.accept_length, (1 - a ** (steps + 1)) / (1 - a))


@given(rates, steps_st)
def test_marginal_and_conditional_agree(c, steps):
    cond = P.predict("conditional", c, steps, 1, steps + 1)
    marg = P.predict("marginal", [d.marginal for d in cond.per_depth], steps, 1, steps + 1)
    assert np.isclose(cond.accept_length, marg.accept_length)


@st.composite
def tree_case(draw):
    steps = draw(st.integers(1, 6))
    topk = draw(st.integers(2, 5))
    c = draw(st.lists(rate, min_size=1, max_size=6))
    hits = []
    for _ in range(draw(st.integers(1, 4))):
        incs = draw(st.lists(st.floats(0.0, 0.5), min_size=1, max_size=5))
        h = np.minimum(1.0, np.cumsum(incs))
        hits.append(h.tolist())
    ndt = draw(st.integers(2, steps * topk + 1))
    return steps, topk, c, hits, ndt


@settings(max_examples=150)
@given(tree_case())
def test_tree_never_below_the_chain(case):
    steps, topk, c, hits, ndt = case
    tree = P.predict("conditional", c, steps, topk, ndt, topk_hits=hits)
    depth = min(steps, ndt - 1)  # the deepest chain this node budget can hold
    chain = P.predict("conditional", c, depth, 1, depth + 1).accept_length
    assert tree.accept_length >= chain - EPS
    if ndt >= steps + 1:
        assert tree.accept_length >= tree.chain_accept_length - EPS
    assert tree.accept_length <= steps + 1 + EPS


@settings(max_examples=100)
@given(tree_case())
def test_tree_grows_with_the_node_budget(case):
    steps, topk, c, hits, _ = case
    als = [
        P.predict("conditional", c, steps, topk, n, topk_hits=hits).accept_length for n in range(2, steps * topk + 2)
    ]
    assert all(b >= a - EPS for a, b in itertools.pairwise(als))


@given(st.lists(st.floats(0.05, 1.0), min_size=1, max_size=8))
def test_fit_recovers_what_it_was_given(c):
    measured = {s: P.chain_accept_length(c[:s]) for s in range(1, len(c) + 1)}
    f = P.fit(measured, max_steps=len(c))
    assert np.allclose(f.conditional, c, atol=1e-6)
    assert f.max_residual < 1e-9
