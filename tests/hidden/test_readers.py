"""Every capture format opens into the one view: names, physical points, tokens, exact values."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch

from tests.fixtures.capture_files import PROMPT
from tests.fixtures.tiny_llama import N_LAYERS, SEQ_LEN, TRAIN_IDS
from workbench.errors import InputError
from workbench.hidden import FINAL, LOGITS, detect_format, open_capture


def test_specforge_slots_tokens_and_teacher(capture_files, tiny_world):
    cap = open_capture(capture_files.specforge, layer_ids=TRAIN_IDS)
    assert cap.format == "specforge"
    assert [t.name for t in cap.slots()] == ["aux[0]", "aux[1]", "aux[2]"]
    assert [t.physical for t in cap.slots()] == [f"out({k})" for k in TRAIN_IDS]
    assert cap.get("hidden_state").role == FINAL and cap.get("hidden_state").physical == "final-postnorm"
    assert np.array_equal(cap.token_ids, tiny_world.input_ids[0].numpy())
    assert torch.equal(cap.get("aux[1]").load(), tiny_world.train["out(4)"][0])
    assert cap.meta["slots"] == 3 and cap.meta["variant"] == "hidden"


def test_specforge_folder_gz_and_padding(capture_files, tiny_world):
    assert detect_format(capture_files.specforge_dir) == "specforge"
    cap = open_capture(capture_files.specforge_dir, sample=1)
    assert cap.path.endswith("data_1.ckpt.gz")
    assert cap.rows == SEQ_LEN and cap.meta["file_rows"] == SEQ_LEN + 8
    assert any("stripped 8 trailing padding rows" in n for n in cap.notes)
    assert torch.equal(cap.get("aux[2]").load(), tiny_world.train["out(6)"][1])
    with pytest.raises(InputError, match="no sample data_9"):
        open_capture(capture_files.specforge_dir, sample=9)


def test_specforge_logits_variant(capture_files):
    cap = open_capture(capture_files.specforge_logits)
    assert cap.meta["variant"] == "logits"
    assert cap.get("hidden_state").role == LOGITS and cap.get("hidden_state").width == 128
    assert len(cap.slots()) == 3 and cap.slots()[0].width == 64


def test_speculators_slots_and_last_layer(capture_files, tiny_world):
    cap = open_capture(capture_files.speculators, num_layers=N_LAYERS)
    assert cap.format == "speculators"
    assert [t.physical for t in cap.slots()] == ["out(1)", "out(4)", "out(6)"]  # default [2, N//2, N-3]
    assert cap.get("last").physical == "final-prenorm"
    assert cap.get("slot[0]").dtype == "bfloat16"
    assert torch.equal(cap.get("slot[1]").load(), tiny_world.infer_hs[5, 0])


def test_hf_stack_and_npz_stack_keep_bf16_bits(capture_files, tiny_world):
    hf = open_capture(capture_files.hf_stack)
    assert hf.format == "stack-safetensors-hf"
    assert [t.physical for t in hf.tensors][:3] == ["embed", "out(0)", "out(1)"]
    assert hf.tensors[-1].physical == "final-postnorm" and hf.tensors[-1].role == FINAL
    assert torch.equal(hf.get("hidden_states[3]").load().view(torch.int16), tiny_world.infer_hs[3, 0].view(torch.int16))
    npz = open_capture(capture_files.npz_stack)
    assert npz.format == "stack-npz"
    t = npz.get("layers.4")
    assert t.physical == "out(4)" and t.dtype == "bfloat16"
    assert torch.equal(t.load().view(torch.int16), tiny_world.infer_hs[5, 0].view(torch.int16))
    assert npz.get("final_norm").physical == "final-postnorm"
    assert np.array_equal(npz.token_ids, tiny_world.input_ids[0].numpy())


def test_payload_rows_tokens_and_packing(capture_files, tiny_world):
    cap = open_capture(capture_files.payload)
    assert cap.format == "sglang-payload"
    (t,) = cap.tensors
    assert (t.rows, t.width) == (SEQ_LEN - 1, 3 * 64)
    assert np.array_equal(cap.token_ids, tiny_world.input_ids[0, : SEQ_LEN - 1].numpy())
    assert cap.meta["prefill_rows"] == PROMPT and cap.meta["decode_entries"] == SEQ_LEN - 1 - PROMPT
    parts = list(cap.candidates(64))
    assert [p.name for p in parts] == ["hidden_states[0]", "hidden_states[1]", "hidden_states[2]"]
    assert torch.equal(parts[1].load().bfloat16(), tiny_world.infer_hs[5, 0, : SEQ_LEN - 1])


def test_payload_prefix_cache_offset(tmp_path, capture_files):
    doc = json.loads(capture_files.payload.read_text())
    doc["response"]["meta_info"]["hidden_states"][0] = doc["response"]["meta_info"]["hidden_states"][0][10:]
    doc["response"]["meta_info"]["cached_tokens"] = 10
    p = tmp_path / "cached.json"
    p.write_text(json.dumps(doc))
    cap = open_capture(p)
    assert cap.positions[0] == 10 and cap.rows == SEQ_LEN - 11
    assert any("prefix cache" in n for n in cap.notes)


def test_tensor_dump_reads_residual_streams_from_the_norms(capture_files, tiny_world):
    cap = open_capture(capture_files.dump)
    assert cap.format == "sglang-tensor-dump"
    phys = [t.physical for t in cap.tensors]
    assert phys[0] == "embed" and phys[1:N_LAYERS] == [f"out({k})" for k in range(N_LAYERS - 1)]
    assert set(phys[N_LAYERS:]) == {"final-prenorm", "final-postnorm"}
    assert not any("o_proj" in t.name for t in cap.tensors)  # not residual-stream points
    assert cap.rows == SEQ_LEN + 1 and cap.meta["passes"] == SEQ_LEN - PROMPT + 2
    t = cap.get("model.layers.5.input_layernorm[1]")
    assert t.physical == "out(4)"
    assert torch.equal(t.load()[:SEQ_LEN], tiny_world.infer_hs[5, 0])
    every = open_capture(capture_files.dump, everything=True)
    assert any("o_proj" in t.name for t in every.tensors)


def test_dumper_sums_layer_output_pairs(capture_files, tiny_world):
    cap = open_capture(capture_files.dumper)
    assert cap.format == "sglang-dumper"
    t = [x for x in cap.tensors if x.physical == "out(3)"]
    assert len(t) == 1 and t[0].name.endswith("[sum]")
    assert np.array_equal(cap.token_ids, tiny_world.input_ids[0].numpy())
    y = t[0].load().double()
    x = tiny_world.infer_hs[4, 0].double()
    assert float(((x - y) ** 2).sum() / (x * x + y * y).sum()) < 1e-4


# ----------------------------------------------------------------------------------- bad input
def _one_line(exc) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def test_truncated_files_are_one_line_errors(tmp_path, capture_files):
    raw = capture_files.specforge.read_bytes()
    bad = tmp_path / "data_0.ckpt"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError) as e:
        open_capture(bad)
    assert "truncated or corrupt" in _one_line(e)
    gz = tmp_path / "data_1.ckpt.gz"
    gz.write_bytes(capture_files.specforge_gz.read_bytes()[:200])
    with pytest.raises(InputError) as e:
        open_capture(gz)
    assert "data_1.ckpt.gz" in _one_line(e)
    st = tmp_path / "x.safetensors"
    st.write_bytes(capture_files.hf_stack.read_bytes()[:5000])
    with pytest.raises(InputError) as e:
        open_capture(st)
    assert "truncated or malformed" in _one_line(e)
    npz = tmp_path / "x.npz"
    npz.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(InputError) as e:
        open_capture(npz)
    assert "npz" in _one_line(e)


class Sneaky:
    def __reduce__(self):
        return (print, ("pwned",))


def test_unexpected_pickles_are_refused(tmp_path, capsys):
    p = tmp_path / "data_0.ckpt"
    torch.save({"input_ids": torch.zeros(3), "evil": Sneaky()}, p)
    with pytest.raises(InputError) as e:
        open_capture(p)
    assert "refused to unpickle" in _one_line(e)
    assert "pwned" not in capsys.readouterr().out
    p2 = tmp_path / "data_1.ckpt"
    torch.save([1, 2, 3], p2)
    with pytest.raises(InputError, match="expected a dict"):
        open_capture(p2)
    p3 = tmp_path / "data_2.ckpt"
    torch.save({"input_ids": torch.zeros(3, dtype=torch.long)}, p3)
    with pytest.raises(InputError, match=r"missing key.*loss_mask"):
        open_capture(p3)
    p4 = tmp_path / "raw.pkl.ckpt"
    p4.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(InputError):
        open_capture(p4, format="specforge")


def test_shape_mismatches_in_training_files(tmp_path):
    p = tmp_path / "data_0.ckpt"
    torch.save(
        {
            "input_ids": torch.ones(4, dtype=torch.long),
            "loss_mask": torch.ones(5, dtype=torch.long),
            "hidden_state": torch.zeros(1, 4, 8),
            "aux_hidden_state": torch.zeros(1, 4, 24),
        },
        p,
    )
    with pytest.raises(InputError, match="loss_mask has 5 entries for 4 input_ids"):
        open_capture(p)
    torch.save(
        {
            "input_ids": torch.ones(4, dtype=torch.long),
            "loss_mask": torch.ones(4, dtype=torch.long),
            "hidden_state": torch.zeros(1, 4, 8),
            "aux_hidden_state": torch.zeros(1, 4, 20),
        },
        p,
    )
    with pytest.raises(InputError, match=r"not 3 slots|!= slot width"):
        open_capture(p, slots=3)


def test_payload_and_unknown_inputs(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"text": "hi", "meta_info": {}}))
    with pytest.raises(InputError, match="return_hidden_states"):
        open_capture(p)
    p.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        open_capture(p)
    p.write_text(json.dumps({"meta_info": {"hidden_states": [[[1.0, 2.0]], [[1.0, 2.0, 3.0]]]}}))
    with pytest.raises(InputError, match="different widths"):
        open_capture(p)
    with pytest.raises(InputError, match="no such file"):
        open_capture(tmp_path / "missing.ckpt")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="unknown capture format"):
        open_capture(tmp_path / "notes.txt")
    with pytest.raises(InputError, match="format 'bogus'"):
        open_capture(p, format="bogus")
