"""Standalone drafter evaluation: the metric definitions on a hand-worked example, and the whole
pipeline (sharded target head, TTT unroll, SpecForge acc_k) against an independent slow
reference written out position by position."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from workbench.drafter.evaluate import Counts, evaluate
from workbench.errors import InputError

K = 3


# ------------------------------------------------------------------------------ hand-worked
def test_counts_on_a_hand_worked_example():
    """L = 6, loss_mask [0,1,1,1,1,1] -> offline mask m = [0,1,1,1,1,0]; greedy a = 10..15.
    Step 0 at index t predicts a[t+1], mask m[t]; step 1 predicts a[t+2], mask m[t+1]."""
    greedy = np.array([10, 11, 12, 13, 14, 15])
    mask = np.array([0, 1, 1, 1, 1, 1])
    # top-2 target ids per step and index
    step0 = [[11, 1], [12, 2], [99, 13], [14, 3], [7, 15], [0, 0]]
    #  t=0 masked out; t=1 right; t=2 wrong, top-2 hit; t=3 right; t=4 wrong, top-2 hit
    step1 = [[12, 0], [13, 0], [14, 0], [0, 15], [0, 0], [0, 0]]
    #  masks m[t+1] = [1,1,1,1,0,0]; want a[t+2] = 12,13,14,15: right at t=0,1,2; t=3 top-2 hit
    c = Counts(2, 2)
    c.add(np.array([step0, step1]), greedy, mask, np.ones(100, dtype=bool))
    r = c.rates()
    assert r["acc"] == [2 / 4, 3 / 4]
    # A chain is alive where every earlier step was right, masked or not: step 0 is right at
    # t = 0 (masked out at depth 0, but m[1] = 1 counts it at depth 1), 1 and 3.
    # full at depth 1: both steps right at t = 0, 1 -> 2 of 4
    assert r["full_acc"] == [2 / 4, 2 / 4]
    # cond at depth 1: alive at t = 0, 1, 3 (all with m[t+1] = 1), right at 0 and 1 -> 2 of 3
    assert r["cond_acc"] == [2 / 4, 2 / 3]
    assert r["topk_acc"] == [[2 / 4, 4 / 4], [3 / 4, 4 / 4]]
    assert r["topk_cond"][1] == [2 / 3, 3 / 3]  # t = 3 wants 15: second choice
    assert r["vocab_coverage"] == 1.0
    cov = Counts(1, 1)
    in_vocab = np.zeros(100, dtype=bool)
    in_vocab[[12, 13]] = True
    cov.add(np.array([step0])[:, :, :1], greedy, mask, in_vocab)
    assert cov.rates()["vocab_coverage"] == 2 / 4  # a[2], a[3] in the draft vocabulary


# ------------------------------------------------------------------------------ the pipeline
def test_eval_matches_the_slow_reference(drafter_world):
    w = drafter_world
    res = evaluate(w["draft"], w["data"], w["target"], depth=K, device="cpu")
    L, ref, z, mask = w["L"], w["ref"], w["z"], w["mask"]
    m = mask.clone()
    m[-1] = 0
    exp_acc = []
    for k in range(K):
        mk = torch.zeros(L, dtype=torch.bool)
        mk[: L - k] = m[k:].bool()
        mk[L - 1 - k :] = False
        right = torch.tensor([bool(ref[k, t] == z[t + 1 + k]) if t + 1 + k < L else False for t in range(L)])
        exp_acc.append(float((mk & right).sum()) / float(mk.sum()))
    assert res.acc == pytest.approx(exp_acc, abs=1e-12)
    # by construction: step 0 right on every even index; the mask drops t < 5 and t = L-1
    evens = [t for t in range(5, L - 1) if t % 2 == 0]
    assert res.acc[0] >= len(evens) / (L - 6) - 1e-12
    assert res.positions == L - 6 and res.samples == 1
    assert res.full_acc[0] == res.acc[0] and res.cond_acc[0] == res.acc[0]
    assert all(a >= b for a, b in zip(res.full_acc, res.full_acc[1:]))
    assert res.topk == [1, 2, 3, 4] and res.topk_acc[0][0] == res.acc[0]
    assert all(row == sorted(row) for row in res.topk_acc)
    assert res.weights["missing"] == [] and res.weights["unexpected"] == []
    p = res.predicted
    assert p["steps"] == K and p["convention"] == "marginal"
    assert p["accept_length"] == pytest.approx(1 + sum(res.full_acc))
    assert p["from_acc"] == pytest.approx(1 + sum(math.prod(res.acc[: i + 1]) for i in range(K)))
    assert "depth" in res.text() and json.dumps(res.to_dict())


def test_eval_on_specforge_and_speculators_folders(drafter_world, capture_files):
    w = drafter_world
    res = evaluate(w["draft"], capture_files.specforge_dir, w["target"], depth=2)
    assert res.samples == 3 and res.positions == 3 * (64 - 1)  # padding rows stripped
    assert res.vocab_coverage is not None and 0 < res.vocab_coverage <= 1
    spec = evaluate(w["draft"], capture_files.speculators.parent, w["target"], depth=2)
    assert spec.samples == 1 and any("no loss mask" in n for n in spec.notes)


def test_eval_bad_inputs(drafter_world, tmp_path, capture_files):
    import shutil

    from safetensors.torch import load_file, save_file

    w = drafter_world
    bad = tmp_path / "draft"
    shutil.copytree(w["draft"], bad)
    t = load_file(str(bad / "model.safetensors"))
    t["midlayer.extra.weight"] = torch.zeros(2)
    save_file(t, str(bad / "model.safetensors"))
    with pytest.raises(InputError, match=r"unexpected weight midlayer\.extra\.weight"):
        evaluate(bad, w["data"], w["target"])
    res = evaluate(bad, w["data"], w["target"], depth=1, strict=False)
    assert res.weights["unexpected"] == ["midlayer.extra.weight"] and res.notes
    with pytest.raises(InputError, match="no SpecForge"):
        evaluate(w["draft"], tmp_path, w["target"])
    with pytest.raises(InputError, match=r"config\.json"):
        evaluate(w["draft"], w["data"], tmp_path)
    with pytest.raises(InputError, match="depth"):
        evaluate(w["draft"], w["data"], w["target"], depth=0)
    # a sample whose slots do not fit the draft's fc
    wrong = tmp_path / "wrong" / "data_0.ckpt"
    from tests.fixtures.capture_files import write_specforge

    write_specforge(
        wrong, torch.arange(1, 9), torch.ones(8, dtype=torch.long), torch.zeros(8, 64), [torch.zeros(8, 64)] * 2
    )
    with pytest.raises(InputError, match="width 128 is not 3 slots"):
        evaluate(w["draft"], wrong.parent, w["target"])


def test_cli_eval_json_contract_and_check(cli, drafter_world, workspace):
    w = drafter_world
    r = cli(
        "drafter",
        "eval",
        "--draft",
        str(w["draft"]),
        "--data",
        str(w["data"]),
        "--target",
        str(w["target"]),
        "--depth",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("acc", "cond_acc", "full_acc", "topk_acc", "positions", "predicted"):
        assert key in out
    assert len(out["acc"]) == 2 and out["positions"] == w["L"] - 6
    ok = cli("drafter", "check", "--draft", str(w["draft"]))
    assert ok.returncode == 0 and ok.stdout.startswith("ok:")
