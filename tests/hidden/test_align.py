"""The alignment engine on a real (tiny) Llama: fp32 training captures against bf16 inference
captures made another way. It must find the true layers without bit-identical tensors, flag a
planted one-layer shift, and turn the result into the engine's layer ids."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from tests.fixtures.tiny_llama import N_LAYERS, TRAIN_IDS
from workbench.errors import InputError
from workbench.hidden import open_capture
from workbench.hidden.align import align
from workbench.hidden.recommend import recommend
from workbench.hidden.results import SlotBest, Thresholds
from workbench.hidden.view import LAYER, Capture, HiddenTensor

TRUE = [f"out({k})" for k in TRAIN_IDS]
LATE = [f"out({k + 1})" for k in TRAIN_IDS]


@pytest.fixture(scope="module")
def train(capture_files):
    return open_capture(capture_files.specforge)


@pytest.mark.parametrize("which", ["hf_stack", "npz_stack", "dump", "dumper"])
def test_finds_the_true_layers_in_every_full_capture(capture_files, train, which):
    res = align(train, open_capture(getattr(capture_files, which)))
    assert [b.physical for b in res.best] == TRUE
    assert res.verdicts() == ["match"] * 3
    for b in res.best:
        # bf16 against fp32 through another code path: close, never identical
        assert 1e-7 < b.value < 1e-3 and not b.value <= res.thresholds.exact
        assert b.margin > 50 and b.exact and b.max_abs > 0 and 0.999 < b.cosine < 1
        assert b.runner_up_physical in (f"out({int(b.physical[4:-1]) - 1})", f"out({int(b.physical[4:-1]) + 1})")
    assert res.tokens_compared == 64 and res.tokens["dropped_ref"] == 0


def test_tensor_dump_token_alignment_keeps_first_rows(capture_files, train):
    res = align(train, open_capture(capture_files.dump))
    assert res.tokens["method"] == "positions+ids"
    assert res.tokens["duplicates"] == 1 and res.tokens["dropped_infer"] == 1
    assert res.verdicts() == ["match"] * 3


def test_packed_payload_three_candidates(capture_files, train):
    res = align(train, open_capture(capture_files.payload))
    assert res.cols == ["hidden_states[0]", "hidden_states[1]", "hidden_states[2]"]
    assert [b.candidate for b in res.best] == res.cols
    assert res.verdicts() == ["match"] * 3
    assert res.tokens_compared == 63 and res.tokens["dropped_ref"] == 1  # last token has no row
    assert res.per_token(0, 0)["exact"] and len(res.per_token("aux[0]", "hidden_states[0]")["rel_diff"]) == 63


def test_planted_shift_in_the_served_capture_is_flagged(capture_files, train):
    """The server captures one layer late (out(2,5,7)): no slot may be called a match."""
    res = align(train, open_capture(capture_files.payload_late))
    assert all(v in ("ambiguous", "no-match") for v in res.verdicts())
    assert all(b.value > res.thresholds.match_max for b in res.best)


def test_planted_shift_in_the_config_gives_mismatch_finding(capture_files, train):
    """Training holds out(1,4,6); the draft's ids [2,5,7] make always-+1 SGLang capture
    out(2,5,7): a one-layer shift, and the fix writes the ids that capture out(1,4,6)."""
    res = align(train, open_capture(capture_files.hf_stack))
    cfg = json.loads(capture_files.draft_config.read_text())
    rec, findings = recommend(
        res,
        "sglang==0.5.12.post1",
        arch="LlamaForCausalLM",
        num_layers=N_LAYERS,
        draft_config=cfg,
        draft_config_path=str(capture_files.draft_config),
    )
    assert rec.confident and rec.layer_ids == [1, 4, 6]
    assert rec.current_ids == [2, 5, 7] and rec.current_points == LATE and rec.differs
    (f,) = findings
    assert f.code == "layer-ids-engine-mismatch" and f.severity == "error"
    assert f.evidence["shift"] == 1 and "1-layer shift" in f.message
    assert f.evidence["trained_points"] == TRUE and f.evidence["engine_points"] == LATE
    assert f.fix.edits[0].key == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert f.fix.edits[0].value == [1, 4, 6] and f.fix.file == str(capture_files.draft_config)


def test_late_training_data_is_found_and_judged_per_engine(capture_files):
    """Training captured out(2,5,7). The draft's [2,5,7] is right for always-+1 SGLang and one
    layer early for vLLM, which reads the ids verbatim as capture-before indices."""
    late = open_capture(capture_files.specforge_late)
    res = align(late, open_capture(capture_files.hf_stack))
    assert [b.physical for b in res.best] == LATE and res.verdicts() == ["match"] * 3
    cfg = json.loads(capture_files.draft_config.read_text())
    rec, findings = recommend(
        res, "sglang==0.5.12.post1", arch="LlamaForCausalLM", num_layers=N_LAYERS, draft_config=cfg
    )
    assert rec.differs is False and findings == [] and rec.layer_ids == [2, 5, 7]
    rec, findings = recommend(res, "vllm", arch="LlamaForCausalLM", num_layers=N_LAYERS, draft_config=cfg)
    assert rec.current_points == TRUE and rec.layer_ids == [3, 6, 8]
    (f,) = findings
    assert f.evidence["shift"] == -1 and f.fix.edits[0].key == "eagle_aux_hidden_state_layer_ids"


@pytest.mark.parametrize(
    "engine,arch,ids",
    [
        ("sglang==0.5.23", "LlamaForCausalLM", [1, 4, 6]),  # always +1
        ("vllm", "LlamaForCausalLM", [2, 5, 7]),  # verbatim capture-before
        ("sglang==0.5.23", "DeepseekV3ForCausalLM", [1, 4, 6]),  # +1 because the first id is 1
        ("sglang==0.5.12.post1", "DeepseekV3ForCausalLM", [1, 4, 6]),
    ],
)
def test_recommendation_in_each_engine_convention(capture_files, train, engine, arch, ids):
    res = align(train, open_capture(capture_files.hf_stack))
    rec, findings = recommend(
        res,
        engine,
        arch=arch,
        num_layers=N_LAYERS,
        draft_config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}},
    )
    assert rec.layer_ids == ids and rec.points == TRUE
    assert rec.differs is False and findings == []
    if engine == "vllm":
        assert rec.key == "eagle_aux_hidden_state_layer_ids"


def test_recommendation_needs_layer_count_and_points(capture_files, train):
    res = align(train, open_capture(capture_files.payload))
    rec, findings = recommend(res, "sglang", num_layers=N_LAYERS)
    assert rec.layer_ids is None and "no physical point" in rec.reason and findings == []
    res2 = align(train, open_capture(capture_files.hf_stack))
    rec2, _ = recommend(res2, "sglang")
    assert rec2.layer_ids is None and "layer count" in rec2.reason


def test_final_row_is_post_norm(capture_files):
    train = open_capture(capture_files.specforge)
    res = align(train, open_capture(capture_files.hf_stack), include_final=True)
    assert res.rows[-1] == "hidden_state" and res.row_roles[-1] == "final"
    assert res.best[-1].physical == "final-postnorm" and res.best[-1].verdict == "match"


def test_bf16_screen_gives_the_same_answer(capture_files):
    """All-bf16 inputs through the CPU screening path: the refined values decide."""
    ref = open_capture(capture_files.speculators, num_layers=N_LAYERS)
    infer = open_capture(capture_files.hf_stack)
    fine = align(ref, infer, screen="fp32", device="cpu")
    fast = align(ref, infer, screen="bf16", device="cpu")
    assert fast.precision == "bf16-screen" and fine.precision == "fp32"
    assert [b.physical for b in fast.best] == [b.physical for b in fine.best] == TRUE
    for a, b in zip(fast.best, fine.best):
        assert a.exact and b.value == pytest.approx(a.value, rel=1e-3, abs=1e-9)
    # identical bf16 tensors on both sides: exactly zero, a match by the exact rule
    assert all(b.value == 0.0 and b.verdict == "match" for b in fine.best)


def test_abs_stats_all_fills_every_pair(capture_files, train):
    res = align(train, open_capture(capture_files.payload), abs_stats="all")
    assert all(all(row) for row in res.exact)
    assert all(v is not None for row in res.max_abs for v in row)
    top = align(train, open_capture(capture_files.hf_stack))
    assert sum(sum(r) for r in top.exact) <= 3 * 2 and any(v is None for r in top.max_abs for v in r)


def test_nonfinite_values_are_counted_and_left_out(capture_files, train, tmp_path):
    from safetensors.torch import load_file, save_file

    d = load_file(str(capture_files.hf_stack))
    hs = d["hidden_states"].clone()
    hs[5, 7, 3] = float("nan")
    hs[5, 9, 0] = float("inf")
    p = tmp_path / "nan.safetensors"
    save_file({"hidden_states": hs, "token_ids": d["token_ids"]}, str(p))
    res = align(train, open_capture(p))
    (nf,) = res.nonfinite
    assert (nf.side, nf.tensor, nf.nan, nf.inf, nf.tokens) == ("infer", "hidden_states[5]", 1, 1, 2)
    assert nf.first == [[7, 3], [9, 0]]
    assert [b.physical for b in res.best] == TRUE and res.verdicts() == ["match"] * 3
    assert np.isfinite(np.asarray(res.matrix, dtype=float)).all()
    assert all(b.exact for b in res.best)  # the NaN row does not take its layer out of the ranking


@pytest.mark.parametrize("screen", ["auto", "fp32"])
def test_nonfinite_training_value_leaves_the_ranking_whole(train, tiny_world, screen):
    """A NaN in one training slot: its token is left out of every pair, and that slot's best
    candidate is still found, refined and exact (float64 reference over the other tokens)."""
    hs = tiny_world.infer_hs[:, 0]
    T, H = hs.shape[1], hs.shape[-1]
    slots = [t.load().clone() for t in train.slots()]
    slots[1][9, 5] = float("nan")
    ref = Capture(
        "mem",
        "mem",
        [HiddenTensor(f"aux[{i}]", T, H, "float32", "slot", None, "mem", (lambda t=t: t)) for i, t in enumerate(slots)],
        token_ids=train.token_ids,
        positions=train.positions,
    )
    cap = Capture(
        "mem",
        "mem",
        [
            HiddenTensor(f"c{k}", T, H, "bfloat16", LAYER, f"out({k - 1})", "mem", (lambda k=k: hs[k].bfloat16()))
            for k in range(1, N_LAYERS + 1)
        ],
        token_ids=tiny_world.input_ids[0].numpy(),
        positions=np.arange(T),
    )
    res = align(ref, cap, screen=screen, device="cpu")
    (nf,) = res.nonfinite
    assert (nf.side, nf.tensor, nf.nan, nf.first) == ("train", "aux[1]", 1, [[9, 5]])
    assert [b.physical for b in res.best] == TRUE and res.verdicts() == ["match"] * 3
    keep = np.arange(T) != 9
    for s, b in enumerate(res.best):
        assert b.exact
        x = slots[s].double()[keep]
        y = hs[int(b.physical[4:-1]) + 1].bfloat16().double()[keep]  # c{k} holds out(k-1)
        want = float(((x - y) ** 2).sum() / ((x**2).sum() + (y**2).sum()))
        assert b.value == pytest.approx(want, rel=1e-5)


def test_size_and_slot_mismatches_are_one_line(capture_files, train, tmp_path):
    from safetensors.torch import save_file

    p = tmp_path / "wide.safetensors"
    save_file({"layers.0": torch.zeros(64, 96), "layers.1": torch.zeros(64, 80)}, str(p))
    with pytest.raises(InputError) as e:
        align(train, open_capture(p))
    msg = str(e.value)
    assert "no tensor 64 wide" in msg and "[80, 96]" in msg and "\n" not in msg
    # two packed slots where training has three: compared, with a note
    doc = json.loads(capture_files.payload.read_text())
    mi = doc["response"]["meta_info"]
    mi["hidden_states"] = [[r[:128] for r in block] for block in mi["hidden_states"]]
    q = tmp_path / "two.json"
    q.write_text(json.dumps(doc))
    res = align(train, open_capture(q))
    assert any("packs 2 slots" in n for n in res.notes) and len(res.cols) == 2


def test_token_alignment_by_ids_and_by_index(capture_files, train, tmp_path, tiny_world):
    from safetensors.torch import save_file

    hs = tiny_world.infer_hs[:, 0]
    # a shorter capture that starts at token 10 and has ids but no positions
    p = tmp_path / "mid.safetensors"
    save_file(
        {
            "layers.1": hs[2, 10:50].contiguous(),
            "layers.4": hs[5, 10:50].contiguous(),
            "layers.6": hs[7, 10:50].contiguous(),
            "layers.2": hs[3, 10:50].contiguous(),
            "token_ids": tiny_world.input_ids[0, 10:50].clone(),
        },
        str(p),
    )
    cap = open_capture(p)
    cap.positions = None
    res = align(train, cap)
    assert res.tokens["method"] == "ids" and res.tokens_compared == 40
    assert res.tokens["dropped_ref"] == 24 and res.verdicts() == ["match"] * 3
    assert any("inference row 0 is reference token 10" in n for n in res.notes)
    # no ids at all: rows by index, the shorter length, said so
    q = tmp_path / "noids.safetensors"
    save_file(
        {
            "layers.1": hs[2, :50].contiguous(),
            "layers.4": hs[5, :50].contiguous(),
            "layers.6": hs[7, :50].contiguous(),
            "layers.3": hs[4, :50].contiguous(),
        },
        str(q),
    )
    res2 = align(train, open_capture(q))
    assert res2.tokens["method"] == "index" and res2.tokens_compared == 50
    assert any("paired by index" in n for n in res2.notes)
    # ids that never agree: one line
    bad = Capture(str(q), "x", open_capture(q).tensors, token_ids=np.arange(50) + 1000)
    with pytest.raises(InputError, match="no token in common"):
        align(train, bad)


def test_few_tokens_are_never_a_firm_match(capture_files, train, tiny_world):
    hs = tiny_world.infer_hs[:, 0]
    tensors = [
        HiddenTensor(f"c{k}", 8, 64, "bfloat16", LAYER, f"out({k - 1})", "mem", (lambda k=k: hs[k, :8]))
        for k in range(1, N_LAYERS)
    ]
    cap = Capture("mem", "mem", tensors, token_ids=tiny_world.input_ids[0, :8].numpy(), positions=np.arange(8))
    res = align(train, cap)
    assert [b.physical for b in res.best] == TRUE
    assert res.verdicts() == ["ambiguous"] * 3 and "only 8 tokens" in res.best[0].reason


# ------------------------------------------------------------------------------ verdict rules
def _slot(value, runner=None, win=1.0, token_margin=None):
    margin = None if runner is None else (float("inf") if value == 0 else runner / value)
    return SlotBest(
        "s",
        None,
        "a",
        "out(1)",
        value,
        "b" if runner is not None else None,
        "out(2)",
        runner,
        margin,
        token_margin if token_margin is not None else margin,
        win,
        "",
        "",
    )


@pytest.mark.parametrize(
    "value,runner,win,tm,verdict",
    [
        (2e-5, 1.5e-2, 1.0, None, "match"),  # the lab: x750
        (1e-3, 3e-3, 0.9, None, "match"),  # real cross-engine noise: only x3, still clear
        (1e-3, 1.6e-3, 0.7, None, "ambiguous"),  # x1.6: too close
        (3e-6, 5e-6, 0.9, None, "ambiguous"),  # two near-identical points: gap < 1e-4
        (8e-3, 5e-2, 1.0, None, "ambiguous"),  # above match_max: an adjacent layer at best
        (0.2, 0.5, 1.0, None, "no-match"),
        (1e-3, 2.5e-3, 0.3, None, "ambiguous"),  # the aggregate is carried by a few tokens
        (1e-3, 1.8e-3, 0.95, 40.0, "match"),  # per-token medians separate what a sink token blurs
        (0.0, None, None, None, "match"),  # identical, single candidate
        (0.0, 0.0, 0.5, None, "ambiguous"),  # identical to two points
        (2e-3, None, None, None, "match"),  # a single candidate: absolute rule only
    ],
)
def test_verdict_rules(value, runner, win, tm, verdict):
    from workbench.hidden.align import _verdict

    b = _slot(value, runner, win, tm)
    got, reason = _verdict(b, 2048, Thresholds())
    assert got == verdict, reason
    assert reason and "\n" not in reason


def test_compiled_cpu_pass_agrees_with_the_matmul_pass(capture_files, train):
    """The numba kernels and the torch matmul path give the same table, verdicts and drill-down."""
    pytest.importorskip("workbench.hidden.pairstats")
    infer = open_capture(capture_files.hf_stack)
    fast = align(train, infer, screen="kernel", device="cpu")
    ref = align(train, infer, screen="fp32", device="cpu")
    assert fast.timing["kernel"] in ("bf16-fma", "fma") and "kernel" not in ref.timing
    assert [b.physical for b in fast.best] == [b.physical for b in ref.best] == TRUE
    assert fast.verdicts() == ref.verdicts() == ["match"] * 3
    np.testing.assert_allclose(np.asarray(fast.matrix), np.asarray(ref.matrix), rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fast.cosine), np.asarray(ref.cosine), atol=1e-6)
    for a, b in zip(fast.best, ref.best):
        assert a.exact and b.exact and a.value == pytest.approx(b.value, rel=1e-4)
        assert a.max_abs == pytest.approx(b.max_abs, rel=1e-6) and a.mean_abs == pytest.approx(b.mean_abs, rel=1e-5)
        assert a.win_rate == b.win_rate and a.token_margin == pytest.approx(b.token_margin, rel=1e-3)
    for s in range(3):
        c = fast.cols.index(fast.best[s].candidate)
        np.testing.assert_allclose(fast.per_token(s, c)["rel_diff"], ref.per_token(s, c)["rel_diff"], rtol=1e-3)


@pytest.mark.parametrize("screen", ["auto", "fp32"])
def test_runner_up_at_another_point_is_refined(train, tiny_world, screen):
    """Each true layer captured twice (same physical point): the two copies fill refine_top=2,
    and the runner-up the verdict reads per token (the adjacent layer) is still refined."""
    hs = tiny_world.infer_hs[:, 0]
    T = hs.shape[1]
    tensors = [
        HiddenTensor(
            f"c{k}", T, hs.shape[-1], "bfloat16", LAYER, f"out({k - 1})", "mem", (lambda k=k: hs[k].bfloat16())
        )
        for k in range(1, N_LAYERS)
    ]
    tensors += [
        HiddenTensor(
            f"dup{k}", T, hs.shape[-1], "bfloat16", LAYER, f"out({k})", "mem", (lambda k=k: hs[k + 1].bfloat16())
        )
        for k in (1, 4, 6)
    ]
    cap = Capture("mem", "mem", tensors, token_ids=tiny_world.input_ids[0].numpy(), positions=np.arange(T))
    res = align(train, cap, screen=screen, device="cpu")
    assert [b.physical for b in res.best] == TRUE and res.verdicts() == ["match"] * 3
    for s, b in enumerate(res.best):
        assert b.runner_up_physical != b.physical
        assert res.exact[s][res.cols.index(b.runner_up)] and res.per_token(s, b.runner_up)["exact"]


def _mem_captures(train, tiny_world, slot_edit=None, cand_edit=None):
    hs = tiny_world.infer_hs[:, 0]
    T, H = hs.shape[1], hs.shape[-1]
    slots = [t.load().clone() for t in train.slots()]
    if slot_edit:
        slot_edit(slots)
    cands = [hs[k].bfloat16().clone() for k in range(1, N_LAYERS + 1)]
    if cand_edit:
        cand_edit(cands)
    ref = Capture(
        "mem",
        "mem",
        [HiddenTensor(f"aux[{i}]", T, H, "float32", "slot", None, "mem", (lambda t=t: t)) for i, t in enumerate(slots)],
        token_ids=train.token_ids,
        positions=train.positions,
    )
    cap = Capture(
        "mem",
        "mem",
        [
            HiddenTensor(f"c{k}", T, H, "bfloat16", LAYER, f"out({k - 1})", "mem", (lambda k=k: cands[k - 1]))
            for k in range(1, N_LAYERS + 1)
        ],
        token_ids=tiny_world.input_ids[0].numpy(),
        positions=np.arange(T),
    )
    return ref, cap


@pytest.mark.parametrize("screen", ["auto", "fp32"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_wholly_nonfinite_candidate_is_never_a_match(train, tiny_world, screen, value):
    """Every row of the true candidate of slot 0 is NaN/Inf: nothing of it can be compared, so it
    has no value (not 0 = identical), slot 0 is not called a match with it, and a note says why."""
    k0 = int(TRUE[0][4:-1]) + 1  # c{k} holds out(k-1)

    def poison(cands):
        cands[k0 - 1][:] = value

    ref, cap = _mem_captures(train, tiny_world, cand_edit=poison)
    res = align(ref, cap, screen=screen, device="cpu")
    col = res.cols.index(f"c{k0}")
    assert all(row[col] is None for row in res.matrix)
    assert res.best[0].candidate != f"c{k0}" and res.best[0].verdict != "match"
    assert [b.physical for b in res.best[1:]] == TRUE[1:] and res.verdicts()[1:] == ["match"] * 2
    assert any("no token where both sides are finite" in n for n in res.notes)
    assert any(nf.tensor == f"c{k0}" and nf.tokens == res.tokens_compared for nf in res.nonfinite)


@pytest.mark.parametrize("screen", ["auto", "fp32"])
def test_a_wholly_nonfinite_slot_is_undecided_not_matched(train, tiny_world, screen):
    """A training slot of NaN only leaves no token to compare for any pair: every verdict says so."""

    def poison(slots):
        slots[1][:] = float("nan")

    ref, cap = _mem_captures(train, tiny_world, slot_edit=poison)
    res = align(ref, cap, screen=screen, device="cpu")
    assert all(v is None for row in res.matrix for v in row)
    assert res.verdicts() == ["ambiguous"] * 3 and all(b.candidate is None for b in res.best)
    assert all("nothing was compared" in b.reason for b in res.best)
    assert any("non-finite in a reference slot" in n for n in res.notes)


def test_mostly_nonfinite_candidate_rests_on_its_finite_tokens(train, tiny_world):
    """NaN on all but 20 tokens of the true candidate: its per-token values hold no zeros for the
    left-out tokens, the verdict counts only the 20 compared (below min_tokens: undecided) and the
    reason says how many were left out."""
    k0 = int(TRUE[0][4:-1]) + 1
    T = tiny_world.infer_hs.shape[2]

    def poison(cands):
        cands[k0 - 1][20:] = float("nan")

    ref, cap = _mem_captures(train, tiny_world, cand_edit=poison)
    res = align(ref, cap, device="cpu", thresholds=Thresholds(min_tokens=32))
    b = res.best[0]
    assert b.candidate == f"c{k0}" and b.verdict == "ambiguous"
    assert f"{T - 20} of {T} tokens left out" in b.reason
    pt = res.per_token(0, res.cols.index(f"c{k0}"))
    assert len(pt["rel_diff"]) == 20 and len(pt["left_out"]) == T - 20
    assert all(np.isfinite(pt["rel_diff"])) and max(pt["rel_diff"]) > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("which", ["hf_stack", "payload", "dump"])
def test_cuda_streaming_path_agrees_with_the_cpu(capture_files, train, which):
    """The pinned, streamed GPU path and the compiled CPU path give the same pairs and verdicts."""
    infer = open_capture(getattr(capture_files, which))
    gpu = align(train, infer, device="cuda")
    cpu = align(train, infer, device="cpu")
    assert gpu.timing.get("path") == "cuda-resident"
    assert [b.candidate for b in gpu.best] == [b.candidate for b in cpu.best]
    assert gpu.verdicts() == cpu.verdicts()
    np.testing.assert_allclose(np.asarray(gpu.matrix, float), np.asarray(cpu.matrix, float), rtol=1e-3, atol=1e-6)


def test_auto_device_names_its_reason(capture_files, train):
    res = align(train, open_capture(capture_files.hf_stack))
    choice = res.timing["device_choice"]
    assert choice["device"] == res.device.split(":")[0] and choice["reason"]
    if not torch.cuda.is_available():
        assert res.device == "cpu" and choice["reason"] == "no CUDA device"


def test_where_the_data_lives_is_asked_without_loading_a_file(capture_files):
    """A tensor read from a file is in host memory: the device choice does not load it to ask
    (that maps the file on every alignment); a tensor in memory says where it lives."""
    from workbench.hidden.placement import on_cuda
    from workbench.hidden.view import FileSpan

    def never():
        raise AssertionError("loaded to ask where it lives")

    on_disk = HiddenTensor("layers.0", 4, 8, "bfloat16", LAYER, None, "f", never, span=FileSpan("f", 64, 16))
    assert on_cuda([on_disk]) is None
    in_memory = HiddenTensor("m", 4, 8, "float32", LAYER, None, "mem", lambda: torch.zeros(4, 8))
    assert on_cuda([in_memory]) is None and on_cuda([]) is None
    if torch.cuda.is_available():
        on_gpu = HiddenTensor("g", 4, 8, "float32", LAYER, None, "mem", lambda: torch.zeros(4, 8, device="cuda"))
        assert on_cuda([on_gpu]) == "cuda:0"
    stack = [t for t in open_capture(capture_files.hf_stack).tensors if t.span is not None]
    assert stack and on_cuda(stack) is None


@pytest.mark.parametrize(
    "threads, copy_gbps, kernel, want",
    [
        (16, 58.3, "bf16-fma", "cpu"),  # H200 host, all cores: the CPU path ran faster there
        (16, 34.5, "bf16-fma", "cpu"),  # the same host's copy probe on another run
        (2, 10.6, "bf16-fma", "cpu"),  # two threads: the CPU path still ran faster
        (2, 10.6, "torch", "gpu"),  # no numba: torch's CPU matmuls are far slower than the bus
    ],
)
def test_the_device_rule_on_the_h200_hosts_measured_bandwidths(threads, copy_gbps, kernel, want):
    """The choice from the figures measured on the H200 host (1.82 GB of bf16 candidates, an
    all-core copy past the cache at ``copy_gbps``, pinned H2D at the bus rate below) matches which
    path ran faster there."""
    from workbench.hidden.placement import estimate, kernel_bps

    nbytes = 1_820_327_936
    cpu_s, gpu_s = estimate(nbytes, kernel_bps(kernel, threads), copy_gbps * 1e9, 55e9)
    assert ("cpu" if cpu_s <= gpu_s else "gpu") == want
    cpu_l, gpu_l = estimate(
        nbytes,
        kernel_bps(kernel, threads),
        copy_gbps * 1e9,
        55e9,
        learned={"cpu": nbytes / 0.30, "cuda": nbytes / 0.07},
    )
    assert gpu_l < cpu_l  # measured rates, where a path ran, decide over the model


def _bf16_world(T=320, H=128, layers=10, trained=(1, 4, 7), seed=5):
    """A residual stream in bf16 (adjacent layers close), slots = three layers with a small
    perturbation, long enough (T) for the compiled pass to foretell and difference in-stream."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g) * 0.05
    outs = [x]
    for _ in range(layers):
        x = x + torch.randn(T, H, generator=g) * 0.2
        outs.append(x)
    slots = [(outs[k + 1] * (1 + 1e-3 * torch.randn(T, H, generator=g))).bfloat16() for k in trained]
    cands = [o.bfloat16() for o in outs]
    ids, pos = np.arange(T) % 997 + 3, np.arange(T)
    ref = Capture(
        "mem",
        "mem",
        [
            HiddenTensor(f"aux[{i}]", T, H, "bfloat16", "slot", None, "mem", (lambda t=t: t))
            for i, t in enumerate(slots)
        ],
        token_ids=ids,
        positions=pos,
    )
    names = ["embed"] + [f"out({k})" for k in range(layers)]
    cap = Capture(
        "mem",
        "mem",
        [
            HiddenTensor(n, T, H, "bfloat16", LAYER, n if n != "embed" else "embed", "mem", (lambda t=t: t))
            for n, t in zip(names, cands)
        ],
        token_ids=ids,
        positions=pos,
    )
    return ref, cap, [f"out({k})" for k in trained]


def _same_result(a, b):
    for field in ("matrix", "cosine", "max_abs", "mean_abs", "exact"):
        assert getattr(a, field) == getattr(b, field), field
    np.testing.assert_array_equal(a.per_token_values, b.per_token_values)
    assert [x.to_dict() for x in a.best] == [x.to_dict() for x in b.best]


def test_pairs_differenced_in_the_stream_give_what_the_exact_pass_gives(monkeypatch):
    """The pairs a token sample foretells are differenced while the screen has their rows in cache;
    the result is the same, bit for bit, as differencing them in a pass of their own, and a pair the
    sample missed is read again."""
    from workbench.hidden import align as A

    pytest.importorskip("workbench.hidden.pairstats")
    ref, cap, trained = _bf16_world()
    fused = align(ref, cap, device="cpu", screen="kernel")
    assert fused.timing["kernel"] == "bf16-fma"
    assert [b.physical for b in fused.best] == trained and fused.verdicts() == ["match"] * 3
    assert fused.timing["fused_pairs"] >= 6 and fused.timing["read_again"] == 0
    with monkeypatch.context() as m:
        m.setattr(A, "_foretell", lambda sample, group, k: [])  # nothing foretold: the exact pass reads all
        plain = align(ref, cap, device="cpu", screen="kernel")
    assert plain.timing["fused_pairs"] == 0 and plain.timing["read_again"] >= 4
    _same_result(fused, plain)
    with monkeypatch.context() as m:  # groups of 3 candidates: the same, bit for bit
        m.setattr(A, "CPU_GROUP", 3)
        grouped = align(ref, cap, device="cpu", screen="kernel")
    assert grouped.timing["groups"] > 1
    _same_result(grouped, fused)
    with monkeypatch.context() as m:  # a sample that foretells the wrong pairs
        m.setattr(A, "_foretell", lambda sample, group, k: [(s, len(group) - 1) for s in range(len(sample.num))])
        wrong = align(ref, cap, device="cpu", screen="kernel")
    assert wrong.timing["fused_pairs"] == 0 and wrong.timing["read_again"] >= 4
    _same_result(wrong, plain)


def test_a_stack_candidate_kept_for_the_exact_pass_is_not_mapped_again(tmp_path, monkeypatch):
    """Candidates of a safetensors stack are read by address from one mapping of the file; one
    kept for a pair the sample did not foretell stays a view of that mapping (the file is mapped
    once a group, not again for the exact pass), and the result is the fused one, bit for bit."""
    from workbench.hidden import align as A
    from workbench.hidden import mapping, open_capture
    from workbench.hidden.st_io import write_safetensors

    pytest.importorskip("workbench.hidden.pairstats")
    ref, cap, trained = _bf16_world()
    path = tmp_path / "infer.safetensors"
    write_safetensors(
        path, {("embed" if t.name == "embed" else f"layers.{int(t.name[4:-1])}"): t.load() for t in cap.tensors}
    )
    stack = open_capture(path)
    stack = dataclasses.replace(stack, token_ids=cap.token_ids, positions=cap.positions)
    assert all(c.span is not None for c in stack.candidates(128))
    maps = []
    real = mapping._map  # (every reader's new mapping)
    monkeypatch.setattr(mapping, "_map", lambda *a: maps.append(a) or real(*a))
    fused = align(ref, stack, device="cpu", screen="kernel")
    assert fused.timing["read_again"] == 0 and len(maps) == 1
    assert [b.physical for b in fused.best] == trained
    maps.clear()
    with monkeypatch.context() as m:
        m.setattr(A, "SAMPLE_TOKENS", 10**6)  # nothing foretold: every best pair kept
        plain = align(ref, stack, device="cpu", screen="kernel")
    assert plain.timing["read_again"] >= 4 and len(maps) == 1
    _same_result(fused, plain)


def test_the_screen_keeps_the_best_few_and_a_runner_up_at_another_point_whatever_the_groups():
    """Per slot the screen keeps the k lowest values and always the best one at another physical
    point than the leader's; a NaN or infinite value ranks last; ties go to the lower candidate;
    ranking the candidates in groups keeps the same k and the same runner-up as ranking them at once."""
    from types import SimpleNamespace

    from workbench.hidden.align import _Top

    phys = ["out(1)", "out(1)", "out(1)", "out(2)", "out(3)", "out(4)", None, "out(5)"]
    cands = [SimpleNamespace(physical=p) for p in phys]
    rel = np.array(
        [
            [0.010, 0.011, 0.012, 0.50, np.nan, 0.40, np.inf, 0.012],
            [0.30, np.nan, 0.20, 0.10, 0.10, -np.inf, 0.05, 0.60],
        ]
    )
    once = _Top(2, 2, cands)
    kept = once.add(rel, list(range(8)))
    assert once.lists[0] == [(0.010, 0), (0.011, 1), (0.012, 2), (0.012, 7)]  # k = 2, then out(5)'s
    assert once.lists[1] == [(0.05, 6), (0.10, 3)]  # -inf ranks last
    assert kept == {0, 1, 2, 7, 6, 3}

    def other(lst):
        return next(e for e in lst[1:] if phys[e[1]] is None or phys[e[1]] != phys[lst[0][1]])

    for cut in (1, 3, 5):
        split = _Top(2, 2, cands)
        split.add(rel[:, :cut], list(range(cut)))
        split.add(rel[:, cut:], list(range(cut, 8)))
        for a, b in zip(split.lists, once.lists):
            assert a[:2] == b[:2] and other(a) == other(b), cut


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 2047, 2048])
def test_token_quantiles_match_numpy(n):
    """The verdict's per-token median and 95th percentile: one sort, numpy's interpolation."""
    from workbench.hidden.align import _quantile

    rng = np.random.default_rng(n)
    for scale in (1e-7, 1.0, 1e3):
        a = (rng.random(n) * scale).astype(np.float32)
        a[: n // 3] = a[0]  # ties too
        s = np.sort(a)
        assert _quantile(s, 0.5) == pytest.approx(float(np.median(a)), rel=1e-6)
        assert _quantile(s, 0.95) == pytest.approx(float(np.percentile(a, 95)), rel=1e-6)
        assert _quantile(s, 0.0) == float(s[0]) and _quantile(s, 1.0) == float(s[-1])
