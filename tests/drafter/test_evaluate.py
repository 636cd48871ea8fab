"""Standalone drafter evaluation: the metric definitions on a hand-worked example, and the whole
pipeline (sharded target head, TTT unroll, SpecForge acc_k) against an independent slow
reference written out position by position."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from tests.fixtures.tiny_llama import TRAIN_IDS
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
    assert r["topk_cond"][1] == [2 / 3, 3 / 3]          # t = 3 wants 15: second choice
    assert r["vocab_coverage"] == 1.0
    cov = Counts(1, 1)
    in_vocab = np.zeros(100, dtype=bool)
    in_vocab[[12, 13]] = True
    cov.add(np.array([step0])[:, :, :1], greedy, mask, in_vocab)
    assert cov.rates()["vocab_coverage"] == 2 / 4              # a[2], a[3] in the draft vocabulary


# ------------------------------------------------------------------------------ the pipeline
@pytest.fixture(scope="module")
def drafter_world(tmp_path_factory, tiny_world):
    """A sharded target folder, a random drafter checkpoint with a 96-token draft vocabulary, and
    a training sample whose teacher agrees with the slow reference on every other position."""
    from workbench.drafter.checkpoint import make_config, save_drafter
    from workbench.drafter.model import Eagle3Drafter, vocab_mapping
    from tests.fixtures.capture_files import write_specforge

    root = tmp_path_factory.mktemp("drafter")
    target = root / "target"
    tiny_world.model.save_pretrained(str(target), max_shard_size="200KB")
    assert (target / "model.safetensors.index.json").exists()

    tcfg = tiny_world.config.to_dict()
    cfg = make_config(tcfg, TRAIN_IDS, draft_vocab_size=96)
    torch.manual_seed(7)
    model = Eagle3Drafter(cfg)
    counts = torch.bincount(tiny_world.input_ids.flatten(), minlength=cfg["vocab_size"])
    d2t, t2d = vocab_mapping(counts, 96)
    model.d2t.copy_(d2t)
    model.t2d.copy_(t2d)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)                    # livelier than the default init
    draft = save_drafter(model, root / "draft")

    ids = tiny_world.input_ids[0]
    L = ids.shape[0]
    aux_slots = [tiny_world.train[f"out({k})"][0] for k in TRAIN_IDS]
    weights = {n: t for n, t in model.state_dict().items()}
    E = tiny_world.model.model.embed_tokens.weight.detach()
    ref = slow_unroll(weights, cfg, E, torch.cat(aux_slots, -1), ids, K)      # [K, L] target ids
    lm = tiny_world.model.lm_head.weight.detach()
    g = torch.Generator().manual_seed(11)
    z = torch.randint(0, cfg["vocab_size"], (L,), generator=g)
    for t in range(0, L - 1, 2):
        z[t + 1] = ref[0, t]                  # the teacher agrees with step 0 at even t
    teacher = lm[z] * 3.0                     # argmax(lm_head(row z)) is z
    assert torch.equal((teacher @ lm.T).argmax(-1), z)
    mask = torch.ones(L, dtype=torch.long)
    mask[:5] = 0
    data = root / "data" / "rows_0-2000" / "data_0.ckpt"
    write_specforge(data, ids, mask, teacher, aux_slots)
    return {"root": root, "target": target, "draft": draft, "data": data.parent.parent, "ref": ref,
            "z": z, "mask": mask, "cfg": cfg, "L": L}


def rms(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def slow_unroll(W, cfg, E, aux, ids, steps):
    """The drafter written out directly from the EAGLE-3 description, one query at a time."""
    H, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, theta = cfg["head_dim"], cfg["rms_norm_eps"], cfg["rope_theta"]
    L = ids.shape[0]
    p = "midlayer."

    def rope(v, pos):
        inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = pos * inv
        cos, sin = torch.cos(torch.cat([ang, ang])), torch.sin(torch.cat([ang, ang]))
        half = torch.cat([-v[..., hd // 2:], v[..., :hd // 2]], -1)
        return v * cos + half * sin

    Wd = {k: v.double() for k, v in W.items() if v.is_floating_point()}
    hidden = aux.double() @ Wd["fc.weight"].T
    keys, vals = [], []                                      # per step: [L, nkv, hd]
    preds = torch.zeros(steps, L, dtype=torch.long)
    for k in range(steps):
        tok = torch.cat([ids[1 + k:], torch.zeros(1 + k, dtype=torch.long)])[:L]
        x = torch.cat([rms(E[tok].double(), Wd[p + "input_layernorm.weight"], eps),
                       rms(hidden, Wd[p + "hidden_norm.weight"], eps)], -1)
        q = (x @ Wd[p + "self_attn.q_proj.weight"].T).view(L, nh, hd)
        kk = (x @ Wd[p + "self_attn.k_proj.weight"].T).view(L, nkv, hd)
        vv = (x @ Wd[p + "self_attn.v_proj.weight"].T).view(L, nkv, hd)
        q = torch.stack([rope(q[t], t + k) for t in range(L)])
        kk = torch.stack([rope(kk[t], t + k) for t in range(L)])
        keys.append(kk)
        vals.append(vv)
        out = torch.zeros(L, nh, hd, dtype=torch.float64)
        for t in range(L):
            for h in range(nh):
                j = h // (nh // nkv)
                ks = [keys[0][s, j] for s in range(t + 1)] + [keys[i][t, j] for i in range(1, k + 1)]
                vs = [vals[0][s, j] for s in range(t + 1)] + [vals[i][t, j] for i in range(1, k + 1)]
                sc = torch.stack([q[t, h] @ key for key in ks]) / math.sqrt(hd)
                pr = torch.softmax(sc, 0)
                out[t, h] = sum(pr[i] * vs[i] for i in range(len(vs)))
        h1 = hidden + out.reshape(L, nh * hd) @ Wd[p + "self_attn.o_proj.weight"].T
        m = rms(h1, Wd[p + "post_attention_layernorm.weight"], eps)
        act = torch.nn.functional.silu(m @ Wd[p + "mlp.gate_proj.weight"].T) * (m @ Wd[p + "mlp.up_proj.weight"].T)
        h2 = h1 + act @ Wd[p + "mlp.down_proj.weight"].T
        logits = rms(h2, Wd["norm.weight"], eps) @ Wd["lm_head.weight"].T
        d = logits.argmax(-1)
        preds[k] = d + W["d2t"][d]
        hidden = h2
    return preds


def test_eval_matches_the_slow_reference(drafter_world):
    w = drafter_world
    res = evaluate(w["draft"], w["data"], w["target"], depth=K, device="cpu")
    L, ref, z, mask = w["L"], w["ref"], w["z"], w["mask"]
    m = mask.clone()
    m[-1] = 0
    exp_acc = []
    for k in range(K):
        mk = torch.zeros(L, dtype=torch.bool)
        mk[:L - k] = m[k:].bool()
        mk[L - 1 - k:] = False
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
    assert p["from_acc"] == pytest.approx(1 + sum(math.prod(res.acc[:i + 1]) for i in range(K)))
    assert "depth" in res.text() and json.dumps(res.to_dict())


def test_eval_on_specforge_and_speculators_folders(drafter_world, capture_files):
    w = drafter_world
    res = evaluate(w["draft"], capture_files.specforge_dir, w["target"], depth=2)
    assert res.samples == 3 and res.positions == 3 * (64 - 1)        # padding rows stripped
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
    with pytest.raises(InputError, match="unexpected weight midlayer.extra.weight"):
        evaluate(bad, w["data"], w["target"])
    res = evaluate(bad, w["data"], w["target"], depth=1, strict=False)
    assert res.weights["unexpected"] == ["midlayer.extra.weight"] and res.notes
    with pytest.raises(InputError, match="no SpecForge"):
        evaluate(w["draft"], tmp_path, w["target"])
    with pytest.raises(InputError, match="config.json"):
        evaluate(w["draft"], w["data"], tmp_path)
    with pytest.raises(InputError, match="depth"):
        evaluate(w["draft"], w["data"], w["target"], depth=0)
    # a sample whose slots do not fit the draft's fc
    wrong = tmp_path / "wrong" / "data_0.ckpt"
    from tests.fixtures.capture_files import write_specforge

    write_specforge(wrong, torch.arange(1, 9), torch.ones(8, dtype=torch.long), torch.zeros(8, 64),
                    [torch.zeros(8, 64)] * 2)
    with pytest.raises(InputError, match="width 128 is not 3 slots"):
        evaluate(w["draft"], wrong.parent, w["target"])


def test_cli_eval_json_contract_and_check(cli, drafter_world, workspace):
    w = drafter_world
    r = cli("drafter", "eval", "--draft", str(w["draft"]), "--data", str(w["data"]), "--target", str(w["target"]),
            "--depth", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("acc", "cond_acc", "full_acc", "topk_acc", "positions", "predicted"):
        assert key in out
    assert len(out["acc"]) == 2 and out["positions"] == w["L"] - 6
    ok = cli("drafter", "check", "--draft", str(w["draft"]))
    assert ok.returncode == 0 and ok.stdout.startswith("ok:")
