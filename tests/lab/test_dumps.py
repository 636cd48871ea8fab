"""--debug-tensor-dump-output-folder: per-pass dumps in SGLang's layout, with the right layers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.lab import http

pytestmark = pytest.mark.slow


def rel_diff(x, y) -> float:
    x, y = x.double(), y.double()
    return float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())


def test_dump_folder_layout_and_layers(lab_servers, lab_world, tmp_path):
    import torch

    from workbench.lab.capture import read_rows

    folder = tmp_path / "dump"
    p = lab_servers.start("draft", extra=["--debug-tensor-dump-output-folder", str(folder)])
    assert "Cuda graph and server warmup are disabled because of using tensor dump mode" in Path(p.log_path).read_text()
    rows = read_rows(Path(lab_world["heldout_data"]))
    ids = rows["input_ids"][0].tolist()
    code, _ = http(p, "/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}})
    assert code == 200
    lab_servers.stop(p)
    tdirs = list((folder / "target").glob("TP0_PP0_Rank0_pid*"))
    ddirs = list((folder / "draft").glob("TP0_PP0_Rank0_pid*"))
    assert len(tdirs) == 1 and len(ddirs) == 1
    passes = sorted(tdirs[0].glob("Pass*.pt"))
    assert passes[0].name == "Pass00000.pt" and len(passes) >= 2
    first = torch.load(str(passes[0]), weights_only=True)
    N = lab_world["layers"]["num_layers"]
    assert first["model.forward_batch_info.input_ids"].tolist() == ids
    assert first["model.forward_batch_info.positions"].tolist() == list(range(len(ids)))
    for i in range(N):
        assert f"model.layers.{i}.input_layernorm" in first and f"model.layers.{i}.mlp.down_proj" in first
    assert "model.embed_tokens" in first and len(first["model.norm"]) == 2
    # the residual entering layer k+1 is out(k): it matches the fp32 training capture of that slot only
    aux = rows["aux_hidden_state"][0, : len(ids)]
    H = aux.shape[-1] // 3
    for slot, k in enumerate(lab_world["layers"]["trained"]):
        ref = aux[:, slot * H : (slot + 1) * H]
        right = rel_diff(first[f"model.layers.{k + 1}.input_layernorm"][1].float(), ref)
        wrong = rel_diff(first[f"model.layers.{k + 2}.input_layernorm"][1].float(), ref)
        assert right < 1e-3 and wrong > 10 * right, (k, right, wrong)
    second = torch.load(str(passes[1]), weights_only=True)
    assert "logits_processor" in second and "model" in second  # SGLang writes these with the next pass
    assert "model.fc" in torch.load(str(sorted(ddirs[0].glob("Pass*.pt"))[0]), weights_only=True)
