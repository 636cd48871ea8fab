"""The EAGLE-3 drafter: expected names, the forward (chain vs training-time test), checkpoints."""

from __future__ import annotations

import json

import pytest

from workbench.drafter import names as N

LLAMA8B_DRAFT = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "draft_vocab_size": 32000,
    "num_hidden_layers": 1,
}


def tiny_config(**kw):
    cfg = {
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 48,
        "vocab_size": 50,
        "draft_vocab_size": 20,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]},
    }
    cfg.update(kw)
    return cfg


def test_expected_shapes_match_the_llama8b_table():
    w = N.expected_weights(LLAMA8B_DRAFT)
    assert w["fc.weight"].shape == (4096, 12288)
    assert w["midlayer.self_attn.q_proj.weight"].shape == (4096, 8192)
    assert w["midlayer.self_attn.k_proj.weight"].shape == (1024, 8192)
    assert w["midlayer.self_attn.o_proj.weight"].shape == (4096, 4096)
    assert w["midlayer.mlp.down_proj.weight"].shape == (4096, 14336)
    assert w["lm_head.weight"].shape == (32000, 4096)
    assert w["d2t"].shape == (32000,) and w["d2t"].kind == "int64"
    assert w["t2d"].shape == (128256,) and not w["t2d"].required
    assert not w["embed_tokens.weight"].required
    assert "fc.bias" not in w and "input_norm.weight" not in w


def test_optional_tensors_follow_flags_and_speculators_naming():
    cfg = dict(LLAMA8B_DRAFT, bias=True, norm_before_fc=True, fc_norm=True, target_hidden_size=2048)
    w = N.expected_weights(cfg, naming=N.SPECULATORS)
    assert w["fc.weight"].shape == (4096, 6144) and w["fc.bias"].required
    assert w["input_norm.weight"].shape == (6144,)
    assert [w[f"fc_norm.{i}.weight"].shape for i in range(3)] == [(2048,)] * 3
    assert "layers.0.hidden_norm.weight" in w and "midlayer.hidden_norm.weight" not in w
    assert N.to_sglang("layers.0.mlp.up_proj.weight") == "midlayer.mlp.up_proj.weight"
    assert N.to_speculators("midlayer.mlp.up_proj.weight") == "layers.0.mlp.up_proj.weight"
    assert N.to_sglang("aux_norm_mid.weight") == "fc_norm.1.weight"
    assert N.detect_naming(["fc.weight", "layers.0.self_attn.q_proj.weight"]) == N.SPECULATORS
    assert N.detect_naming(["fc.weight", "midlayer.self_attn.q_proj.weight"]) == N.SGLANG
    # num_aux follows the layer-id list
    assert N.expected_weights(dict(LLAMA8B_DRAFT, eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2]}))[
        "fc.weight"
    ].shape == (4096, 8192)


def test_names_module_is_pure_python():
    import subprocess
    import sys

    code = "import sys, workbench.drafter.names; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _drafter(seed=0, **kw):
    torch = pytest.importorskip("torch")
    from workbench.drafter.model import Eagle3Drafter

    torch.manual_seed(seed)
    cfg = tiny_config(**kw)
    m = Eagle3Drafter(cfg, embed=torch.randn(cfg["vocab_size"], cfg["hidden_size"]))
    for p in m.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return m.eval()


def test_chain_with_cache_equals_training_time_test_unroll():
    import torch

    from workbench.drafter.model import ttt_tokens

    m = _drafter()
    T, K = 9, 3
    aux = torch.randn(1, T, 3 * 32)
    nxt = torch.randint(0, 50, (1, T))
    steps = ttt_tokens(nxt, K)
    with torch.no_grad():
        ttt = m.unroll(aux, steps)
        for t in (0, 4, T - 1):
            # committed pairs 0..t form the cache; steps 1..K-1 at index t run as an inference chain
            s = m.step(aux[:, : t + 1], nxt[:, : t + 1], torch.arange(t + 1))
            assert torch.allclose(s.logits[0, -1], ttt[0][0, t], atol=1e-4)
            h, kv = s.hidden[:, -1:], s.kv
            for k in range(1, K):
                s = m.step(h, steps[k][:, t : t + 1], torch.tensor([t + k]), past=kv)
                assert torch.allclose(s.logits[0, -1], ttt[k][0, t], atol=1e-4), (t, k)
                h, kv = s.hidden, s.kv


def test_step_is_causal_and_incremental_extend_matches_full():
    import torch

    m = _drafter(1)
    aux = torch.randn(1, 8, 96)
    tok = torch.randint(0, 50, (1, 8))
    with torch.no_grad():
        full = m.step(aux, tok, torch.arange(8))
        a = m.step(aux[:, :5], tok[:, :5], torch.arange(5))
        b = m.step(aux[:, 5:], tok[:, 5:], torch.arange(5, 8), past=a.kv)
    assert torch.allclose(full.logits[:, 5:], b.logits, atol=1e-5)
    assert torch.allclose(full.logits[:, :5], a.logits, atol=1e-5)


def test_draft_chain_maps_through_d2t():
    import torch

    from workbench.drafter.model import vocab_mapping

    m = _drafter(2)
    counts = torch.arange(50)  # most frequent = highest ids
    d2t, t2d = vocab_mapping(counts, 20)
    assert (d2t + torch.arange(20)).tolist() == list(range(30, 50))
    assert int(t2d.sum()) == 20 and bool(t2d[d2t + torch.arange(20)].all())
    m.d2t.copy_(d2t)
    m.t2d.copy_(t2d)
    aux, tok = torch.randn(1, 6, 96), torch.randint(0, 50, (1, 6))
    last = m.step(aux, tok, torch.arange(6))
    ids = m.draft_chain(last, last.kv, 5, 4)
    assert ids.shape == (1, 4) and bool((ids >= 30).all())
    assert int(ids[0, 0]) == int(last.logits[0, -1].argmax()) + 30


def test_save_load_roundtrip_and_strict_report(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from workbench.drafter.checkpoint import check_weights, load_drafter, save_drafter
    from workbench.errors import InputError

    m = _drafter(3)
    save_drafter(m, tmp_path / "d")
    names = set(load_file(str(tmp_path / "d" / "model.safetensors")))
    assert "midlayer.self_attn.q_proj.weight" in names and "d2t" in names
    assert "embed_tokens.weight" not in names
    cfg = json.loads((tmp_path / "d" / "config.json").read_text())
    embed = m._shared_embed
    m2, rep = load_drafter(tmp_path / "d", embed=embed)
    assert rep.ok and rep.optional_missing == ["embed_tokens.weight"]
    aux, tok = torch.randn(1, 5, 96), torch.randint(0, 50, (1, 5))
    with torch.no_grad():
        assert torch.equal(m.step(aux, tok, torch.arange(5)).logits, m2.step(aux, tok, torch.arange(5)).logits)

    # speculators naming loads the same weights
    state = load_file(str(tmp_path / "d" / "model.safetensors"))
    spec = {N.to_speculators(k): v for k, v in state.items()}
    (tmp_path / "s").mkdir()
    save_file(spec, str(tmp_path / "s" / "model.safetensors"))
    (tmp_path / "s" / "config.json").write_text(json.dumps(cfg))
    m3, rep3 = load_drafter(tmp_path / "s", embed=embed)
    assert rep3.naming == N.SPECULATORS and rep3.ok
    with torch.no_grad():
        assert torch.equal(m.step(aux, tok, torch.arange(5)).logits, m3.step(aux, tok, torch.arange(5)).logits)

    # missing, unexpected and mis-shaped weights are all reported; strict load refuses
    bad = dict(state)
    del bad["lm_head.weight"]
    bad["midlayer.extra.weight"] = torch.zeros(3)
    bad["fc.weight"] = torch.zeros(32, 64)
    r = check_weights(cfg, bad)
    assert r.missing == ["lm_head.weight"] and r.unexpected == ["midlayer.extra.weight"]
    assert r.mismatched == [{"name": "fc.weight", "expected": [32, 96], "actual": [32, 64]}]
    bad2 = dict(state, d2t=state["d2t"].float())
    assert check_weights(cfg, bad2).mismatched[0]["name"] == "d2t"
    save_file(bad, str(tmp_path / "s" / "model.safetensors"))
    with pytest.raises(InputError, match=r"missing weight lm_head\.weight"):
        load_drafter(tmp_path / "s", embed=embed)


def _st(path, header, data: bytes) -> None:
    import struct

    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_the_check_reads_shapes_from_the_headers_as_loading_would(tmp_path):
    """``drafter check`` takes shapes and dtypes from the safetensors headers; every check report
    (and every error) is the one the loaded tensors give: a file the loader might read otherwise
    (a gap, an overlap, bytes past the last tensor, an unusual dtype, a bad header) is loaded."""
    import numpy as np

    from tests.fixtures.drafts import TINY_DRAFT, tiny_tensors, write_draft
    from workbench.draftconfig import write_safetensors
    from workbench.drafter.checkpoint import TensorShape, check_weights, read_tensor_shapes, read_tensors
    from workbench.errors import InputError

    f4 = {"dtype": "F32", "shape": [1]}
    drafts = {"healthy": write_draft(tmp_path / "healthy", TINY_DRAFT, tiny_tensors())}
    broken = dict(
        tiny_tensors(),
        **{
            "fc.weight": np.zeros((16, 8), np.float32),
            "d2t": np.zeros(16, np.float32),
            "t2d": np.zeros(64, np.uint8),
            "midlayer.extra.weight": np.zeros(3, np.int16),
        },
    )
    del broken["lm_head.weight"]
    drafts["mis-shaped"] = write_draft(tmp_path / "mis-shaped", TINY_DRAFT, broken)
    shards = write_draft(tmp_path / "shards", TINY_DRAFT, None)
    half = sorted(tiny_tensors())
    write_safetensors(shards / "model-00001-of-00002.safetensors", {k: tiny_tensors()[k] for k in half[:5]})
    write_safetensors(shards / "model-00002-of-00002.safetensors", {k: tiny_tensors()[k] for k in half[5:]})
    drafts["shards"] = shards
    odd = {  # files only the loader settles: each is loaded (or refused) by safetensors itself
        "gap": ({"a": {**f4, "data_offsets": [0, 4]}, "b": {**f4, "data_offsets": [8, 12]}}, 12),
        "overlap": ({"a": {**f4, "data_offsets": [0, 4]}, "b": {**f4, "data_offsets": [2, 6]}}, 6),
        "trailing-bytes": ({"a": {**f4, "data_offsets": [0, 4]}}, 8),
        "uint16": ({"a": {"dtype": "U16", "shape": [2], "data_offsets": [0, 4]}}, 4),
        "out-of-order": (
            {
                "c": {**f4, "data_offsets": [4, 8]},
                "a": {**f4, "data_offsets": [8, 12]},
                "b": {**f4, "data_offsets": [0, 4]},
            },
            12,
        ),
        "metadata-int": ({"__metadata__": {"x": 1}, "a": {**f4, "data_offsets": [0, 4]}}, 4),
    }
    for name, (header, size) in odd.items():
        drafts[name] = write_draft(tmp_path / name, TINY_DRAFT, None)
        _st(drafts[name] / "model.safetensors", header, b"\0" * size)
    drafts["not-safetensors"] = write_draft(tmp_path / "not-safetensors", TINY_DRAFT, None)
    (drafts["not-safetensors"] / "model.safetensors").write_bytes(b"\x00" * 7)
    drafts["no-weights"] = write_draft(tmp_path / "no-weights", TINY_DRAFT, None)

    for name, d in drafts.items():
        try:
            want = check_weights(TINY_DRAFT, read_tensors(d))
        except InputError as exc:
            with pytest.raises(InputError) as got:
                read_tensor_shapes(d)
            assert str(got.value) == str(exc), name
            continue
        got_shapes = read_tensor_shapes(d)
        assert list(got_shapes) == list(read_tensors(d)), name  # the loader's order
        assert check_weights(TINY_DRAFT, got_shapes) == want, name
    rep = check_weights(TINY_DRAFT, read_tensor_shapes(drafts["mis-shaped"]))
    assert rep.missing == ["lm_head.weight"] and rep.unexpected == ["midlayer.extra.weight"]
    assert {m["name"]: m["actual"] for m in rep.mismatched} == {"fc.weight": [16, 8], "d2t": "torch.float32 [16]"}
    for name in ("healthy", "mis-shaped", "shards", "out-of-order"):  # read from the headers
        assert all(isinstance(t, TensorShape) for t in read_tensor_shapes(drafts[name]).values()), name
    assert not any(isinstance(t, TensorShape) for t in read_tensor_shapes(drafts["uint16"]).values())


def test_the_check_of_a_safetensors_draft_does_not_import_torch(tmp_path):
    import subprocess
    import sys

    from tests.fixtures.drafts import TINY_DRAFT, tiny_tensors, write_draft

    d = write_draft(tmp_path / "d", TINY_DRAFT, tiny_tensors())
    code = (
        "import sys; from workbench.drafter.checkpoint import check_weights, read_config, read_tensor_shapes\n"
        f"r = check_weights(read_config({str(d)!r}), read_tensor_shapes({str(d)!r}))\n"
        "assert r.ok and r.present, r\nassert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
