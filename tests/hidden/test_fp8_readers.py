"""speculators' FP8 hidden-state files (hs_connectors' FP8 connector: ``hidden_states`` in
float8_e4m3fn plus per-token ``hidden_states_scales [L, 1, 1]``), written by hs_connectors' own
quantizer and read back with the scales applied exactly as its dequantizer does."""

from __future__ import annotations

import pytest
import torch
from hs_connectors.fp8_utils import SCALES_KEY, dequantize_fp8_tensor, quantize_tensor_to_fp8
from safetensors.torch import save_file

from workbench.errors import InputError
from workbench.hidden import FINAL, open_capture

L, N, H = 11, 4, 16


def _write(path, hs=None, **extra):
    g = torch.Generator().manual_seed(5)
    stacked = torch.randn(L, N, H, generator=g) * torch.linspace(0.1, 30.0, L)[:, None, None]
    q, sc = quantize_tensor_to_fp8(stacked)
    tensors = {"token_ids": torch.arange(L), "hidden_states": q if hs is None else hs, SCALES_KEY: sc}
    tensors.update(extra)
    tensors = {k: v for k, v in tensors.items() if v is not None}
    save_file(tensors, str(path))
    return q, sc


def test_fp8_file_dequantizes_like_hs_connectors(tmp_path):
    f = tmp_path / "hs_0.safetensors"
    q, sc = _write(f)
    want = dequantize_fp8_tensor(q, sc, dtype=torch.float32)
    cap = open_capture(f)
    assert cap.format == "speculators" and "fp8" in cap.meta
    assert [t.dtype for t in cap.tensors] == ["float32"] * N
    for j, t in enumerate(cap.tensors):
        assert torch.equal(t.load(), want[:, j, :])
    assert cap.tensors[-1].role == FINAL
    # the raw FP8 codes alone would be off by the per-token scales (up to 30x here)
    assert not torch.allclose(q.float()[:, 0], want[:, 0], rtol=0.5)


@pytest.mark.parametrize(
    "case,match",
    [
        ("no_scales", "hidden_states_scales is missing"),
        ("bad_shape", r"hidden_states_scales is F32\[11, 2, 1\]"),
        ("zero_scale", "non-finite or non-positive scale"),
        ("scales_on_bf16", "not FP8"),
    ],
)
def test_malformed_fp8_files_are_one_line_errors(tmp_path, case, match):
    f = tmp_path / "hs_0.safetensors"
    q, sc = quantize_tensor_to_fp8(torch.randn(L, N, H))
    t = {"token_ids": torch.arange(L), "hidden_states": q, SCALES_KEY: sc}
    if case == "no_scales":
        del t[SCALES_KEY]
    elif case == "bad_shape":
        t[SCALES_KEY] = torch.ones(L, 2, 1)
    elif case == "zero_scale":
        sc = sc.clone()
        sc[3] = 0.0
        t[SCALES_KEY] = sc
    else:
        t["hidden_states"] = torch.randn(L, N, H).bfloat16()
    save_file(t, str(f))
    with pytest.raises(InputError, match=match):
        open_capture(f)


def test_cli_align_on_an_fp8_file_and_a_malformed_one(tmp_path, cli, workspace):
    good = tmp_path / "good" / "hs_0.safetensors"
    good.parent.mkdir()
    _write(good)
    r = cli("align", "--train", str(good), "--infer", str(good), "--json")
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad" / "hs_0.safetensors"
    bad.parent.mkdir()
    q, _ = quantize_tensor_to_fp8(torch.randn(L, N, H))
    save_file({"token_ids": torch.arange(L), "hidden_states": q}, str(bad))
    r = cli("align", "--train", str(bad), "--infer", str(good))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "hidden_states_scales is missing" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_fp8_tensors_are_refused_where_no_reader_knows_their_scales(tmp_path):
    from workbench.hidden.st_io import SafetensorsFile

    f = tmp_path / "w.safetensors"
    q, _ = quantize_tensor_to_fp8(torch.randn(4, 8))
    save_file({"embed_tokens.weight": q}, str(f))
    with pytest.raises(InputError, match="scaled FP8"):
        SafetensorsFile(f).load("embed_tokens.weight")
