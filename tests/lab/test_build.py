"""lab build: the manifest, SpecForge-format rows, SGLang-format drafts, caching, the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_manifest_and_files(lab_world):
    from workbench.drafter.checkpoint import check_weights, read_config, read_tensors

    w = lab_world
    for key in ("dir", "target", "draft", "draft_broken", "draft_shifted", "training_data", "acc", "layers"):
        assert key in w
    N = w["layers"]["num_layers"]
    assert w["layers"]["trained"] == [1, N // 2 - 1, N - 4]
    assert w["layers"]["draft_broken"] == [-1, 1, N // 2 - 1]
    assert w["layers"]["draft_shifted"] == [2, N // 2, N - 3]
    assert set(w["acc"]) == {"acc_0", "acc_1", "acc_2"} and all(0 < v <= 1 for v in w["acc"].values())
    for name in ("draft", "draft_broken", "draft_shifted"):
        cfg = read_config(w[name])
        assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
        assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == w["layers"][name]
        assert cfg["draft_vocab_size"] < cfg["vocab_size"] and cfg["max_position_embeddings"] == 1024
        rep = check_weights(cfg, read_tensors(w[name]))
        assert rep.ok and rep.optional_missing == ["embed_tokens.weight"]
    # how it was built: the seed asked and the one that landed, the retries, torch, threads, the CPU
    cal = w["calibration"]
    assert cal["seed_used"] == cal["seed"] + cal["retries"] == w["settings"]["seed"]
    assert [a["seed"] for a in cal["attempts"]] == list(range(cal["seed"], cal["seed_used"] + 1))
    assert 0 <= cal["retries"] <= w["settings"]["max_retries"]
    assert w["machine"]["threads"] == w["settings"]["threads"] and w["machine"]["torch"] and w["machine"]["cpu"]
    dt = w["drafter_training"]
    assert (dt["steps"] <= dt["max_steps"] and dt["checks"] and dt["checks"][-1]["step"] == dt["steps"]) or not dt[
        "stopped_by_check"
    ]
    tcfg = json.loads((Path(w["target"]) / "config.json").read_text())
    assert tcfg["architectures"] == ["LlamaForCausalLM"] and tcfg["num_hidden_layers"] == N
    assert (Path(w["target"]) / "model.safetensors").exists() and (Path(w["target"]) / "tokenizer.json").exists()


def test_training_rows_are_specforge_format(lab_world):
    import torch

    files = sorted(Path(lab_world["training_data"]).glob("rows_*/data_*.ckpt"))
    assert files and files[0].parent.name == "rows_0-2000"
    row = torch.load(str(files[0]), weights_only=True)
    L = row["input_ids"].shape[0]
    H = lab_world["settings"]["hidden"]
    assert row["input_ids"].dtype == torch.int64 and row["loss_mask"].dtype == torch.int64
    assert row["hidden_state"].shape == (1, L, H) and row["aux_hidden_state"].shape == (1, L, 3 * H)
    assert int(row["loss_mask"].sum()) == lab_world["settings"]["response_len"]
    # hidden_state is the final post-norm state: the target's lm_head on it gives the greedy next token
    from workbench.lab.target import load_target

    target = load_target(lab_world["target"])
    with torch.no_grad():
        pred = target.lm_head(row["hidden_state"][0]).argmax(-1)
    P = lab_world["settings"]["prompt_len"]
    agree = (pred[P - 1 : -1] == row["input_ids"][P:]).float().mean()
    assert agree > 0.97
    vm = torch.load(str(Path(lab_world["training_data"]) / "vocab_mapping" / "vocab_mapping.pt"), weights_only=True)
    assert bool(vm["t2d"][vm["d2t"] + torch.arange(vm["d2t"].numel())].all())


def test_build_is_cached_and_cli_prints_json(lab_world, cli, workspace):
    t = time.time()
    r = cli("lab", "build", "--size", "tiny", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["dir"] == lab_world["dir"] and out["cached"] is True
    assert set(out) >= {"dir", "target", "draft", "draft_broken", "draft_shifted", "training_data", "acc", "layers"}
    assert time.time() - t < 30
    r = cli("lab", "build", "--size", "huge")
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_facade_build_journals(wb, lab_world):
    world = wb.lab_build("tiny")
    assert world.dir == lab_world["dir"] and world.cached
    assert wb.events(kind="lab.build")


def test_measuring_in_pieces_on_workers_gives_each_job_its_whole_measurement(lab_world, monkeypatch):
    """``measure_many`` spreads the jobs' prompts, a few at a time, over forked workers that keep
    their engines; each job's accept length is still the one an engine decoding all its prompts
    in turn measures (accepted tokens over verify rounds, not a mean of the pieces' means)."""
    from workbench.lab import build as B
    from workbench.lab.capture import make_prompts
    from workbench.lab.engine import LabEngine
    from workbench.lab.settings import SIZES, corpus_style

    def whole(draft, prompts, steps):  # one engine decoding every prompt in turn
        eng = LabEngine(world / "target", world / draft, dtype="bfloat16", engine=B.MEASURE_ENGINE, num_steps=steps)
        try:
            for p in prompts:
                eng.generate(p, 16, ignore_eos=True)
            return float(eng.stats.avg_accept_length or 0.0)
        finally:
            eng.close()

    s = SIZES["tiny"]
    prompts = make_prompts(s.prompt_len, 7, s.seed + 2, s.seed, corpus_style(s)).tolist()  # 7: a short last piece
    jobs = [("draft", prompts, 3), ("draft_broken", prompts[:5], 3), ("demo:draft", prompts[2:], 5)]
    monkeypatch.setattr(B, "PIECE_PROMPTS", 2)
    world = Path(lab_world["dir"])
    want = {name: whole(name.split(":")[-1], ps, steps) for name, ps, steps in jobs}
    assert want["draft"] > want["draft_broken"] >= 1.0
    for threads in (1, 2):
        assert B.measure_many(world, jobs, 16, threads) == want, threads
    assert not B._ENGINES  # the in-process engines are closed and let go


def test_a_build_without_the_measuring_release_code_stops_before_training(tmp_path, monkeypatch):
    """The capture points the build measures with come from the measuring release's code; a machine
    that cannot have it (no SGLang installed, no index reachable) hears so first, not after
    training a target and a drafter, and no half-built world is left."""
    from workbench.engine import code
    from workbench.errors import WorkbenchError
    from workbench.lab import build as B
    from workbench.lab import target as T

    def unreachable(*_a, **_k):
        raise WorkbenchError(f"pip download {B.MEASURE_ENGINE} failed: No matching distribution found")

    monkeypatch.setattr(code, "code_release", unreachable)
    monkeypatch.setattr(T, "build_target", lambda *a, **k: pytest.fail("trained before the release's code was read"))
    with pytest.raises(WorkbenchError, match="pip download sglang=="):
        B.build("tiny", root=tmp_path, force=True)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_the_held_out_check_reads_the_points_the_engine_captures():
    """The variants' points are the release's code's (the engine's reading of it): the broken ids
    read the embedding, the shifted ones the next layers, and an id past the last layer never
    fires, so it is left out, as the engine leaves it out of the features it hands the drafter."""
    from workbench.lab.build import measured_points

    ids = {"draft": [1, 5, 8], "draft_broken": [-1, 1, 5], "draft_shifted": [2, 6, 9], "late": [1, 5, 12]}
    got = measured_points(ids, 12)
    assert got == {
        "draft": ["out(1)", "out(5)", "out(8)"],
        "draft_broken": ["embed", "out(1)", "out(5)"],
        "draft_shifted": ["out(2)", "out(6)", "out(9)"],
        "late": ["out(1)", "out(5)"],
    }
