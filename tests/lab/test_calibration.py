"""The calibration bands and the build's retry: a world outside the bands is rebuilt with the next
seed, at most ``max_retries`` times, every attempt recorded; ``lab build --seed`` validates its input."""

from __future__ import annotations

import json

import pytest

from workbench.lab import calibration as K

GOOD = {
    "acc_0": 0.80,
    "accept_length": 2.9,
    "broken_ratio": 0.62,
    "shifted_ratio": 0.97,
    "predicted_error": 0.03,
    "demo_recovery": 1.7,
}


def test_a_world_inside_the_bands_is_accepted_and_each_edge_is_named():
    assert K.misses(GOOD) == [] and all(K.in_band(GOOD).values())
    cases = {
        "acc_0": 0.851,
        "accept_length": 3.19,
        "broken_ratio": 0.695,
        "shifted_ratio": 0.905,
        "predicted_error": 0.095,
        "demo_recovery": 1.51,
    }
    for key, value in cases.items():
        fig = dict(GOOD, **{key: value})
        missed = K.misses(fig)
        assert len(missed) == 1, (key, missed)  # inside the test's band, outside the build's margin
        assert missed[0].split()[0] in key.replace("_", " ") or key.split("_")[0] in missed[0]
    assert not K.in_band(dict(GOOD, acc_0=0.86))["acc_0"]
    assert K.in_band(dict(GOOD, acc_0=0.85))["acc_0"]


def test_the_build_margins_sit_inside_the_tests_bands():
    for margins in (K.MARGINS, K.FINAL_MARGINS):
        assert all(v >= 0 for v in margins.values())
    assert K.ACC_BAND == (0.70, 0.85) and K.ACCEPT_BAND == (2.3, 3.2)
    assert K.BROKEN_RATIO_MAX == 0.70 and K.SHIFTED_RATIO_MIN == 0.90
    assert K.PREDICTED_ERROR_MAX == 0.10 and K.DEMO_RECOVERY_MIN == 1.5


def test_bad_seed_is_a_one_line_error(cli, workspace, tmp_path):
    tmp_path = tmp_path / "lab"
    tmp_path.mkdir()
    for bad in ("x", "-1", "1.5"):
        r = cli("lab", "build", "--seed", bad, "--dir", str(tmp_path))
        assert r.returncode == 2 and "--seed" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = cli("lab", "build", "--threads", "0", "--dir", str(tmp_path))
    assert r.returncode == 2 and "--threads" in r.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_an_untrainable_world_retries_next_seeds_then_is_kept_and_marked(tmp_path):
    """A world whose budgets cannot reach the bands (10 target steps) misses on every seed: the build
    tries seed, seed + 1, ... max_retries + 1 times, records each attempt, and keeps the last one
    marked ``calibration.ok = false`` (real builds, tiny budgets)."""
    from workbench.lab.build import build, load_manifest

    m = build(
        "tiny",
        root=tmp_path,
        seed=77,
        target_steps=10,
        draft_steps=20,
        prompts=32,
        eval_prompts=2,
        eval_new_tokens=8,
        max_retries=1,
        check_from=10,
        threads=1,
    )
    cal = m["calibration"]
    assert cal["ok"] is False and cal["seed"] == 77 and cal["seed_used"] == 78 and cal["retries"] == 1
    assert [a["seed"] for a in cal["attempts"]] == [77, 78] and all(a["misses"] for a in cal["attempts"])
    assert m["settings"]["seed"] == 78  # the world on disk is the last attempt's
    assert load_manifest(m["dir"])["calibration"] == json.loads(json.dumps(cal))
    mach = m["machine"]
    assert mach["threads"] == 1 and mach["torch"] and mach["cpu"]


def test_which_misses_more_training_can_fix():
    """Training raises accuracy and the drafter's reliance on its features: a confirmed check that is
    too weak (low accuracy, a broken config that costs too little) trains on; one past the top of a
    band, with a shift that costs too much or a prediction off, ends the attempt."""
    fixable = {"acc_0": 0.69, "accept_length": 2.2, "broken_ratio": 0.72, "demo_recovery": 1.45}
    for key, value in fixable.items():
        assert K.training_may_fix(dict(GOOD, **{key: value})), key
        assert not K.past_the_top(dict(GOOD, **{key: value})), key
    for key, value in {"acc_0": 0.86, "accept_length": 3.3}.items():
        assert not K.training_may_fix(dict(GOOD, **{key: value})) and K.past_the_top(dict(GOOD, **{key: value}))
    for key, value in {"shifted_ratio": 0.85, "predicted_error": 0.2}.items():
        assert not K.training_may_fix(dict(GOOD, **{key: value})) and not K.past_the_top(dict(GOOD, **{key: value}))
    assert K.training_may_fix(GOOD) and not K.past_the_top(GOOD)


class _Confirm:
    """Stands in for the build's real decoding: hands out the given figures in turn, counting calls."""

    def __init__(self, *figs):
        self.figs, self.calls = list(figs), 0

    def __call__(self, drafter):
        self.calls += 1
        return {"figures": self.figs.pop(0)}


class _check:
    """The build's stop decision over fixed predicted figures (``offline``)."""

    def __init__(self, confirms: int, offline: dict, confirm):
        from workbench.lab.build import ConfirmedStop
        from workbench.lab.settings import settings_for

        self.stop = ConfirmedStop(settings_for("tiny", confirms=confirms), confirm)
        self.offline = {k: v for k, v in offline.items() if k != "predicted_error"}

    def __call__(self, drafter):
        return self.stop(dict(self.offline), drafter)

    @property
    def last(self):
        return self.stop.last


def test_a_check_in_the_bands_is_confirmed_by_measurement_and_trains_on_past_a_fixable_miss():
    confirm = _Confirm(dict(GOOD, broken_ratio=0.72), dict(GOOD, predicted_error=0.2))
    check = _check(4, GOOD, confirm)
    fig, stop = check(None)
    assert not stop and confirm.calls == 1 and fig["misses"] and fig["measured"]["broken_ratio"] == 0.72
    fig, stop = check(None)  # a miss training cannot fix: the attempt ends, measured
    assert stop and confirm.calls == 2 and check.last["figures"]["predicted_error"] == 0.2
    confirm = _Confirm(dict(GOOD))
    check = _check(4, GOOD, confirm)
    fig, stop = check(None)
    assert stop and fig["misses"] == [] and check.last["figures"] == GOOD


def test_checks_outside_the_bands_measure_nothing_and_stop_only_past_the_top():
    confirm = _Confirm()
    check = _check(4, dict(GOOD, broken_ratio=0.69), confirm)  # inside the test band, not the margin
    assert check(None)[1] is False and confirm.calls == 0 and check.last is None
    check = _check(4, dict(GOOD, acc_0=0.9), confirm)
    assert check(None)[1] is True and confirm.calls == 0 and check.last is None


def test_confirmations_are_bounded_per_attempt():
    confirm = _Confirm(*[dict(GOOD, broken_ratio=0.72)] * 3)
    check = _check(2, GOOD, confirm)
    assert [check(None)[1] for _ in range(2)] == [False, True] and confirm.calls == 2
