"""The calibration bands and the build's retry: a world outside the bands is rebuilt with the next
seed, at most ``max_retries`` times, every attempt recorded; ``lab build --seed`` validates its input."""

from __future__ import annotations

import json

import pytest

from workbench.lab import calibration as K

GOOD = {"acc_0": 0.80, "accept_length": 2.9, "broken_ratio": 0.62, "shifted_ratio": 0.97,
        "predicted_error": 0.03, "demo_recovery": 1.7}


def test_a_world_inside_the_bands_is_accepted_and_each_edge_is_named():
    assert K.misses(GOOD) == [] and all(K.in_band(GOOD).values())
    cases = {"acc_0": 0.851, "accept_length": 3.19, "broken_ratio": 0.695, "shifted_ratio": 0.905,
             "predicted_error": 0.095, "demo_recovery": 1.51}
    for key, value in cases.items():
        fig = dict(GOOD, **{key: value})
        missed = K.misses(fig)
        assert len(missed) == 1, (key, missed)        # inside the test's band, outside the build's margin
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

    m = build("tiny", root=tmp_path, seed=77, target_steps=10, draft_steps=20, prompts=32, heldout=8,
              eval_prompts=2, eval_new_tokens=8, max_retries=1, check_from=10, threads=1)
    cal = m["calibration"]
    assert cal["ok"] is False and cal["seed"] == 77 and cal["seed_used"] == 78 and cal["retries"] == 1
    assert [a["seed"] for a in cal["attempts"]] == [77, 78] and all(a["misses"] for a in cal["attempts"])
    assert m["settings"]["seed"] == 78                       # the world on disk is the last attempt's
    assert load_manifest(m["dir"])["calibration"] == json.loads(json.dumps(cal))
    mach = m["machine"]
    assert mach["threads"] == 1 and mach["torch"] and mach["cpu"]
