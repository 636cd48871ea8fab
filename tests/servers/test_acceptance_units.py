"""Acceptance's arithmetic without a server: counters parsed from both engines' pages, the statistics
the decisions rest on, the windows and the alarm's rule, the context workload and its finding, and
the per-request distribution."""

from __future__ import annotations

import math
import random

import pytest

from workbench.servers import acceptance as A
from workbench.servers.engines import Generated, SpecCounters

SGLANG_PAGE = """# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="m"} 300.0
sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="m"} 20.0
sglang:spec_verify_calls_total{engine_type="unified",model_name="m"} 100.0
sglang:num_requests_total{engine_type="unified",is_streaming="false",model_name="m"} 4.0
sglang:spec_accept_length{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 2.5
"""


def test_sglang_counters_from_its_page():
    from workbench.sglang.client import parse_counters, parse_gauges

    c = parse_counters(SGLANG_PAGE)
    assert (c.verify_calls, c.generation_tokens, c.requests) == (100, 320, 4)
    assert c.rounds == 100 and c.round_tokens == 320 and c.accept_length == pytest.approx(3.2)
    assert parse_gauges(SGLANG_PAGE) == {"spec_accept_length": 2.5}
    # a page of a release without the verify counter (0.5.12): tokens, no rounds, no accept length
    old = parse_counters(SGLANG_PAGE.replace("sglang:spec_verify_calls_total", "sglang:other"))
    assert old.rounds == 0 and old.accept_length is None


def test_counter_arithmetic():
    a = SpecCounters(10, 30, 12, [8, 3, 1], source="vllm /metrics")
    b = SpecCounters(4, 12, 5, [3, 1, 1])
    d = a - b
    assert (d.drafts, d.accepted, d.accepted_per_pos) == (6, 7, [5, 2, 0]) and d.source == "vllm /metrics"
    assert d + b == a and d.accept_length == pytest.approx(1 + 7 / 6)
    assert b.restarted_since(a) and not a.restarted_since(b)
    # per request, as each engine counts it
    assert Generated(40, 16).accept_length == pytest.approx(2.5)
    assert Generated(40, None, drafts=10, accepted=12).accept_length == pytest.approx(2.2)
    assert Generated(40).accept_length is None


def test_t_distribution_and_welch():
    from workbench.stattests import quantile, t_sf, tukey_low, welch_less

    assert t_sf(2.228, 10) == pytest.approx(0.025, abs=2e-5)
    assert t_sf(3.0, 5) == pytest.approx(0.01505, abs=1e-5)
    assert t_sf(0.0, 3) == pytest.approx(0.5) and t_sf(-1.0, 3) == pytest.approx(1 - t_sf(1.0, 3))
    assert t_sf(1.96, 1e7) == pytest.approx(0.025, abs=1e-4)
    t, dof, p = welch_less([3.0, 3.1, 2.9, 3.05], [2.0, 2.1, 1.9, 2.05])
    assert t > 10 and p < 1e-5 and dof > 5
    assert welch_less([2.0, 2.1, 1.9], [2.0, 2.1, 1.9])[2] == pytest.approx(0.5)
    assert quantile([1, 2, 3, 4], 0.5) == 2.5 and quantile([5], 0.9) == 5
    assert tukey_low([1, 2, 3, 4, 5]) == pytest.approx(2 - 1.5 * 2)


def _rows(series, start=1000.0, window=60.0, per_round_sd=1.0, rounds=200, seed=0):
    """Journal rows of windows with these accept lengths (rounds' tokens drawn around them)."""
    rng = random.Random(seed)
    total = SpecCounters(source="vllm /metrics")
    rows = [{"base": True, "t1": start, "total": total.to_dict()}]
    t = start
    for al in series:
        acc = max(0, round(rounds * (al - 1) + rng.gauss(0, per_round_sd * math.sqrt(rounds))))
        now = SpecCounters(total.drafts + rounds, total.draft_tokens + 3 * rounds, total.accepted + acc, [])
        now.source = total.source
        row = A.next_row(rows[-1], now, t + window, window)
        assert row is not None
        rows.append(row)
        total, t = now, t + window
    return rows


def test_windows_are_differences_and_bases():
    total = SpecCounters(5, 15, 7, [], source="vllm /metrics")
    base = A.next_row(None, total, 10.0, 60.0)
    assert base["base"] and "t0" not in base
    assert A.next_row(base, total, 30.0, 60.0) is None  # too soon: no window yet
    later = SpecCounters(105, 315, 207, [], source="vllm /metrics")
    w = A.next_row(base, later, 75.0, 60.0)
    assert (w["t0"], w["t1"], w["rounds"], w["tokens"]) == (10.0, 75.0, 100, 300) and w["accept_length"] == 3.0
    # two followers at once: a reading asked for before the kept one, or one answered out of order
    # (counters below the kept ones) within a window of it, is an older view: nothing added
    assert A.next_row(w, SpecCounters(100, 300, 200, [], source="vllm /metrics"), 74.9, 60.0) is None
    assert A.next_row(w, SpecCounters(104, 312, 206, [], source="vllm /metrics"), 75.1, 60.0) is None
    # the engine started again: its counters went down; a new base, no window across the restart
    again = A.next_row(w, SpecCounters(3, 9, 2, [], source="vllm /metrics"), 140.0, 60.0)
    assert again["base"] and again["reset"]
    # no counters: the running average, marked as such
    fb = A.next_row(None, None, 10.0, 60.0, running_average=2.7)
    assert fb["fallback"] and fb["source"] == A.FALLBACK


def test_steady_series_never_alarms_and_a_fall_does_at_its_window():
    hour = 3600.0
    steady = _rows([3.0] * 120, per_round_sd=1.0)  # two hours of one-minute windows
    s = A.analyse(1, steady, baseline_s=hour, window_s=60.0)
    assert s.baseline["windows"] == 60 and not s.alarm.raised, s.alarm
    assert s.baseline["accept_length"] == pytest.approx(3.0, abs=0.05)
    # the same with the window-to-window spread of prompts (overdispersion) far above the rounds'
    rng = random.Random(1)
    noisy = _rows([3.0 + rng.gauss(0, 0.15) for _ in range(120)], per_round_sd=1.0, seed=2)
    assert not A.analyse(1, noisy, baseline_s=hour, window_s=60.0).alarm.raised
    # a fall to 2.4 from the 90th window: the alarm at that window, and still low at the end
    falling = _rows([3.0] * 89 + [2.4] * 31, per_round_sd=1.0)
    s = A.analyse(1, falling, baseline_s=hour, window_s=60.0)
    assert s.alarm.raised and s.alarm.window == 90 and s.alarm.current, s.alarm
    assert s.alarm.drop == pytest.approx(0.2, abs=0.03) and s.alarm.p < A.ALPHA
    assert s.windows[89].low and not any(w.low for w in s.windows[:89])
    # a small dip (5 %) is significant with these many rounds, but not large: no alarm
    dip = _rows([3.0] * 89 + [2.85] * 31, per_round_sd=0.5)
    assert not A.analyse(1, dip, baseline_s=hour, window_s=60.0).alarm.raised


def test_baseline_forming_and_fallback_never_alarm():
    s = A.analyse(1, _rows([3.0] * 3 + [1.5] * 3), baseline_s=180.0, window_s=60.0)
    assert not s.alarm.raised and any("baseline forming" in n for n in s.notes)
    rows = [
        {"t0": 0.0, "t1": 60.0 * (i + 1), "accept_length": 1.2, "source": A.FALLBACK, "fallback": True}
        for i in range(20)
    ]
    s = A.analyse(1, rows, baseline_s=300.0, window_s=60.0)
    assert not s.alarm.raised and s.source == A.FALLBACK and "running average" in s.notes[0]


def test_context_workload_is_exact_and_ends_with_each_prompt():
    from workbench.servers.context import parse_contexts, workload

    ids = [[1, 10, 11, 12], [1, 20, 21], [1, 30]]
    work = workload(ids, [2, 9])
    assert [(n, i) for n, i, _ in work] == [(2, 0), (2, 1), (2, 2), (9, 0), (9, 1), (9, 2)]
    assert all(len(t) == n for n, _, t in work)
    assert work[0][2] == [11, 12] and work[3][2] == [1, 20, 21, 1, 30, 1, 10, 11, 12]
    assert parse_contexts("1024, 256") == [256, 1024]
    from workbench.errors import InputError

    for bad in ("", "12,x", "1", "nan"):
        with pytest.raises(InputError):
            parse_contexts(bad)


def _ctx_requests(means, n=8, seed=0):
    rng = random.Random(seed)
    out = []
    for ctx, mu in means.items():
        for i in range(n):
            rounds = 20
            al = mu + rng.gauss(0, 0.1)
            out.append(
                {
                    "context_tokens": ctx,
                    "prompt": i,
                    "rounds": rounds,
                    "tokens": round(al * rounds),
                    "accept_len": round(al * rounds) / rounds,
                }
            )
    return out


def test_context_finding_names_the_trained_length():
    from workbench.drafter.context import DraftContext
    from workbench.servers import context as C

    facts = DraftContext(max_position_embeddings=1024, trained_length=80, trained_from="training data x")
    reqs = _ctx_requests({48: 2.9, 256: 2.6, 960: 1.8})
    rows = C.rows(reqs, {}, facts)
    assert [r["past_trained_length"] for r in rows] == [False, True, True]
    f = C.findings(rows, reqs, facts)
    assert f[0]["code"] == "accept-falls-past-trained-length" and f[0]["lowest_context"] == 960
    assert (
        "80 tokens the drafter was trained on" in f[0]["message"]
        and "max_position_embeddings (1024)" in f[0]["message"]
    )
    flat = _ctx_requests({48: 2.9, 256: 2.88, 960: 2.86})
    f = C.findings(C.rows(flat, {}, facts), flat, facts)
    assert f[0]["code"] == "accept-holds-past-trained-length"
    # without a trained length the fall is named, and what would settle it
    f = C.findings(C.rows(reqs, {}, DraftContext()), reqs, DraftContext(notes=["trained length unknown"]))
    assert f[0]["code"] == "accept-falls-with-context" and "trained length unknown" in f[0]["message"]
    # past the draft config's max_position_embeddings
    short = DraftContext(max_position_embeddings=512, trained_length=80)
    assert C.findings(C.rows(reqs, {}, short), reqs, short)[0]["code"] == "context-past-max-position-embeddings"


def test_distribution_names_the_requests_far_below():
    from workbench.servers.measure import counters_check, distribution

    reqs = [{"prompt": i, "accept_len": 3.0 + 0.05 * (i % 3), "rounds": 10, "tokens": 30} for i in range(12)]
    reqs[5]["accept_len"] = 1.4
    dist, low = distribution(reqs, [f"prompt number {i}" for i in range(12)])
    assert dist["n"] == 12 and dist["p50"] == pytest.approx(3.05) and [x["prompt"] for x in low] == [5]
    assert low[0]["prompt_start"] == "prompt number 5"
    check = counters_check(reqs, SpecCounters(verify_calls=120, generation_tokens=360, source="sglang /metrics"))
    assert check["agree"] and check["rounds"] == {"requests": 120, "counters": 120}
    assert not counters_check(reqs, SpecCounters(verify_calls=121, generation_tokens=360))["agree"]
