"""Parity with the reference trainers' own code: SpecForge 0.2.0 and speculators 0.9.0 build tiny
random drafters for every variant flag and save them with their own save_pretrained; their own
forward passes (SpecForge ``OnlineEagle3Model``, speculators ``Eagle3DraftModel``) produce the
per-step logits and metric counts (``tests/drafter/refs.py`` runs them in a subprocess and says
what it has to do for SpecForge on a CPU). The workbench reads each checkpoint through its own
reader and must give the same counts and the same logits: bitwise for SpecForge (fp32), within
fp32 rounding for speculators (its eager attention sums the draft-step keys in another order)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workbench.drafter.checkpoint import load_drafter
from workbench.drafter.evaluate import Counts, SpeculatorsCounts
from workbench.drafter.model import ttt_tokens

ROOT = Path(__file__).resolve().parents[2]
TOL = 2e-6  # fp32: relative to the largest logit of the step

SPECFORGE_CASES = {
    "plain": {},
    "norm_output_false": {"config": {"norm_output": False}},
    "fc_norm": {"config": {"fc_norm": True}},
    "target_hidden_24": {"target_hidden": 24},
    "e2e_fc_norm": {"config": {"fc_norm": True}, "e2e": True, "L": 32, "K": 4},
    "rope_linear": {"config": {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}},
    "rope_llama3": {
        "config": {
            "max_position_embeddings": 64,
            "rope_parameters": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8,
                "rope_theta": 10000.0,
            },
        },
        "L": 40,
    },
    "rope_yarn": {
        "config": {
            "max_position_embeddings": 64,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 16,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 0.0,
                "rope_theta": 10000.0,
            },
        },
        "L": 40,
    },
}
# SpecForge's own dynamic-NTK table already rescales its base (built for max_position_embeddings+20
# positions): the workbench refuses it by name rather than give transformers' number.
SPECFORGE_REFUSED = {
    "rope_dynamic": (
        {"config": {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}}},
        "rope_scaling dynamic: SpecForge 0.2.0",
    ),
}

SPECULATORS_CASES = {
    "qwen3": {},
    "llama": {"config": {"model_type": "llama"}},
    "norm_before_residual": {"config": {"norm_before_residual": True}},
    "norm_output": {"config": {"norm_output": True}},
    "norm_before_fc": {"config": {"norm_before_fc": True}},
    "fc_norm": {"config": {"fc_norm": True}},
    "two_aux": {"config": {"layer_ids": [2, 5]}},
    "four_aux": {"config": {"layer_ids": [1, 2, 3, 4]}},
    "attention_bias": {"config": {"model_type": "llama", "attention_bias": True}},
    "no_loss_mask": {"loss_mask": False},
    "rope_llama3": {
        "config": {
            "model_type": "llama",
            "max_position_embeddings": 64,
            "rope": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8,
                "rope_theta": 10000.0,
            },
        },
        "L": 40,
    },
    "rope_yarn": {
        "config": {
            "max_position_embeddings": 64,
            "rope": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 10000.0},
        },
        "L": 40,
    },
    "rope_linear": {"config": {"rope": {"rope_type": "linear", "factor": 3.0, "rope_theta": 10000.0}}},
    "rope_longrope": {
        "config": {
            "model_type": "llama",
            "max_position_embeddings": 256,
            "rope": {
                "rope_type": "longrope",
                "short_factor": [1.0, 1.5, 2.0, 3.0],
                "long_factor": [2.0, 3.0, 4.0, 6.0],
                "original_max_position_embeddings": 64,
                "rope_theta": 10000.0,
            },
        }
    },
    "fp8_file": {"loss_mask": False, "fp8": True},
    # a drafter fed the verifier's final state as its last aux slot (layer id N, e.g. [..., 36] of 36)
    "two_layers": {"config": {"num_layers": 2}},
    # three layers of std-0.3 random weights are chaotic enough to lift fp32 rounding past 2e-6 by step 2
    # (in fp64 too: speculators' eager softmax stays fp32); std 0.15 keeps it at the rounding level
    "three_layers_llama_norm_output": {
        "config": {"num_layers": 3, "model_type": "llama", "norm_output": True, "std": 0.15}
    },
    "aux_includes_final": {"config": {"layer_ids": [2, 3, 4]}, "aux_final": True},
}


def _start(which: str, cases: dict, out: Path):
    spec = out / "cases.json"
    out.mkdir(parents=True, exist_ok=True)
    spec.write_text(json.dumps(cases))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.drafter.refs", which, str(out / "runs"), str(spec)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory):
    """Both references at once (each is mostly import time on one core)."""
    root = tmp_path_factory.mktemp("refs")
    specforge_cases = dict(SPECFORGE_CASES, **{k: v[0] for k, v in SPECFORGE_REFUSED.items()})
    procs = {
        "specforge": _start("specforge", specforge_cases, root / "specforge"),
        "speculators": _start("speculators", SPECULATORS_CASES, root / "speculators"),
    }
    out = {}
    for name, p in procs.items():
        try:
            _, err = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        assert p.returncode == 0, f"{name}: {err[-3000:]}"
        out[name] = root / name / "runs"
    return out


@pytest.fixture(scope="module")
def specforge_runs(reference_runs):
    return reference_runs["specforge"]


@pytest.fixture(scope="module")
def speculators_runs(reference_runs):
    return reference_runs["speculators"]


def _ref(d: Path) -> dict:
    return torch.load(str(d / "ref.pt"), weights_only=True)


@pytest.mark.parametrize("case", sorted(SPECFORGE_CASES))
def test_specforge_logits_and_acc_k(specforge_runs, case):
    d = specforge_runs / case / "draft"
    ref = _ref(d)
    model, rep = load_drafter(d)
    assert rep.ok, rep.first_problem()
    aux, ids, K = ref["aux"], ref["ids"], ref["K"]
    nxt = torch.cat([ids[1:], ids.new_zeros(1)])[None]
    with torch.no_grad():
        ours = model.unroll(aux[None], ttt_tokens(nxt, K))
    for k in range(K):  # bitwise: the SpecForge reading computes in SpecForge's order
        err = float((ours[k][0] - ref["logits"][k]).abs().max())
        assert torch.equal(ours[k][0], ref["logits"][k]), (case, k, err)
    # acc_k counts exactly as SpecForge counts them
    c = Counts(K, 1)
    tk = torch.stack([model.to_target(lg[0].argmax(-1, keepdim=True)) for lg in ours])
    greedy = ref["target_logits"].argmax(-1).numpy()
    c.add(tk.numpy(), greedy, ref["mask"].numpy(), model.t2d.numpy())
    assert c.acc.tolist() == ref["corrects"], case
    assert c.den.tolist() == ref["denoms"], case
    assert sum(ref["corrects"]) > 0  # the teacher agrees somewhere: counts can differ


@pytest.mark.parametrize("case", sorted(SPECFORGE_REFUSED))
def test_specforge_variant_not_evaluated_is_refused_by_name(specforge_runs, case, cli):
    from workbench.errors import InputError

    d = specforge_runs / case / "draft"
    want = SPECFORGE_REFUSED[case][1]
    with pytest.raises(InputError, match=want):
        load_drafter(d)
    r = cli("drafter", "check", "--draft", str(d))
    assert r.returncode == 1 and want in r.stdout


@pytest.mark.parametrize("case", sorted(SPECULATORS_CASES))
def test_speculators_logits_and_metrics(speculators_runs, case):
    d = speculators_runs / case / "draft"
    ref = _ref(d)
    model, rep = load_drafter(d)
    assert rep.ok, rep.first_problem()
    assert rep.naming == "speculators" and rep.layout == "speculators"
    aux, ids, K = ref["aux"], ref["ids"], ref["K"]
    L = ids.shape[0]
    nxt = torch.cat([ids[1:], ids.new_zeros(1)])[None]
    with torch.no_grad():
        ours = model.unroll(aux[None], ttt_tokens(nxt, K))
    for k in range(K):
        err = float((ours[k][0, : L - 1] - ref["logits"][k]).abs().max())
        assert err <= TOL * max(1.0, float(ref["logits"][k].abs().max())), (case, k, err)
    # speculators' full_acc / cond_acc counts, its teacher (lm_head[t2d]) and its mask alignment
    last, lm, norm = ref["last"], ref["lm"], ref["norm"]
    h = last * torch.rsqrt(last.pow(2).mean(-1, keepdim=True) + 1e-6) * norm
    hot = torch.arange(model.dims.draft_vocab) + model.d2t
    teacher = (h @ lm[hot].T).argmax(-1).numpy()
    sc = SpeculatorsCounts(K)
    mask = ref["mask"]
    sc.add(torch.stack([lg[0].argmax(-1) for lg in ours]).numpy(), teacher, None if mask is None else mask.numpy())
    m = ref["metrics"]
    for k in range(K):
        assert sc.full[k] == m[f"full_acc_{k}_sum"], (case, k)
        assert sc.total[k] == m[f"full_acc_{k}_total"], (case, k)
        assert sc.cond_total[k] == m[f"cond_acc_{k}_total"], (case, k)
    assert m["full_acc_0_sum"] > 0  # the teacher agrees somewhere: counts can differ


def test_specforge_checkpoint_and_data_through_cli(specforge_runs, cli):
    """SpecForge's own checkpoint and an offline sample in its format: drafter check explains the
    variant, drafter eval's SpecForge acc_k equals SpecForge's own counts."""
    run = specforge_runs / "e2e_fc_norm"
    ref = _ref(run / "draft")
    ok = cli("drafter", "check", "--draft", str(run / "draft"))
    assert ok.returncode == 0 and "fc_norm: each aux slot is RMS-normalised" in ok.stdout, ok.stdout
    r = cli(
        "drafter",
        "eval",
        "--draft",
        str(run / "draft"),
        "--data",
        str(run / "data"),
        "--target",
        str(run / "target"),
        "--depth",
        str(ref["K"]),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["acc"] == [c / d for c, d in zip(ref["corrects"], ref["denoms"])]
    assert out["positions_per_depth"] == [int(x) for x in ref["denoms"]]
    assert out["variant"]["convention"] == "specforge" and out["variant"]["fc_norm"]
    assert out["labels"]["acc"].startswith("SpecForge acc_k")
    text = cli(
        "drafter",
        "eval",
        "--draft",
        str(run / "draft"),
        "--data",
        str(run / "data"),
        "--target",
        str(run / "target"),
        "--depth",
        "2",
    )
    assert "SpecForge" in text.stdout and "speculators" in text.stdout and "variant: fc_norm" in text.stdout


def test_speculators_fp8_checkpoint_through_cli(speculators_runs, cli):
    """A speculators checkpoint and an hs_connectors FP8 hidden-state file: drafter check, drafter
    eval (speculators' metrics equal speculators' own on the dequantized file) and align."""
    run = speculators_runs / "fp8_file"
    ref = _ref(run / "draft")
    ok = cli("drafter", "check", "--draft", str(run / "draft"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "speculators layout" in ok.stdout and "qk_norm" in ok.stdout
    r = cli(
        "drafter",
        "eval",
        "--draft",
        str(run / "draft"),
        "--data",
        str(run / "data"),
        "--target",
        str(run / "target"),
        "--depth",
        str(ref["K"]),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    m = ref["metrics"]
    want = [m[f"full_acc_{k}_sum"] / m[f"full_acc_{k}_total"] for k in range(ref["K"])]
    assert out["speculators_full_acc"] == pytest.approx(want, abs=1e-12)
    cond = [m[f"cond_acc_{k}_sum"] / m[f"cond_acc_{k}_total"] for k in range(ref["K"])]
    assert out["speculators_cond_acc"] == pytest.approx(cond, abs=1e-12)
    assert out["variant"]["convention"] == "speculators" and out["variant"]["qk_norm"]
    a = cli(
        "align",
        "--train",
        str(run / "data" / "hs_0.safetensors"),
        "--infer",
        str(run / "data" / "hs_0.safetensors"),
        "--draft",
        str(run / "draft"),
        "--json",
    )
    assert a.returncode == 0, a.stderr


def test_fp8_reader_applies_the_scales_as_hs_connectors_does(speculators_runs):
    from hs_connectors.fp8_utils import SCALES_KEY, dequantize_fp8_tensor
    from safetensors.torch import load_file

    from workbench.hidden.speculators import read_speculators

    f = speculators_runs / "fp8_file" / "data" / "hs_0.safetensors"
    raw = load_file(str(f))
    assert raw["hidden_states"].dtype == torch.float8_e4m3fn and raw[SCALES_KEY].shape[1:] == (1, 1)
    back = dequantize_fp8_tensor(raw["hidden_states"], raw[SCALES_KEY], dtype=torch.float32)
    cap = read_speculators(f)
    assert [t.dtype for t in cap.tensors] == ["float32"] * len(cap.tensors)
    for j, t in enumerate(cap.tensors):
        assert torch.equal(t.load(), back[:, j, :])


def test_sglang_reading_has_no_runnable_reference_on_a_cpu():
    """SGLang's own llama_eagle3.py is the reference for the ``sglang`` reading; say why it is not
    run here (the switches it sets are read from that file: see workbench.drafter.variants)."""
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "from tests.drafter.refs import _triton_stub\n"
                "import torch.utils.flop_counter\n_triton_stub()\n"
                "import sglang.srt.models.llama_eagle3"
            ),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0, "SGLang's llama_eagle3.py imports on this machine now: run it as a parity reference"
    why = r.stderr.strip().splitlines()[-1]
    pytest.skip(
        f"SGLang 0.5.23 llama_eagle3.py is not run on a CPU: importing it gives {why!r} with the "
        f"--no-deps install, and its forward needs SGLang's runtime (ForwardBatch, RadixAttention, "
        f"model-parallel groups)"
    )
