"""The compiled CPU pass reads a safetensors stack's candidates by address (one mapping of the
file, no tensor each): the same sums as from loaded tensors, for plain tensors, the rows of an HF
``hidden_states`` stack and the columns of a packed tensor; a candidate kept for the exact pass is
a view of that mapping, not a second one; and a candidate that cannot hold the compared rows is
refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

ps_mod = pytest.importorskip("workbench.hidden.pairstats")

from workbench.hidden import mapping, open_capture  # noqa: E402
from workbench.hidden.align import _cpu_group, _mapped_view  # noqa: E402
from workbench.hidden.st_io import write_safetensors  # noqa: E402
from workbench.hidden.view import PACKED  # noqa: E402

T, H = 40, 96


def _slots(g):
    return [torch.randn(T + 3, H, generator=g).bfloat16() for _ in range(3)]


def _same_sums(ps, cands):
    """The screen and the exact pass over the candidates, by address and from loaded tensors."""
    with mapping.shared():
        by_address = _cpu_group(ps, cands)
    assert by_address.tensors == () and by_address.owner is not None
    loaded = ps.group([c.load() for c in cands])
    pairs = [(0, 0), (2, len(cands) - 1)]
    a, b = (
        ps.dots(by_address, np.empty((3, T), np.float32), pairs),
        ps.dots(loaded, np.empty((3, T), np.float32), pairs),
    )
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(ps.exact(pairs, by_address), ps.exact(pairs, loaded)):
        np.testing.assert_array_equal(x, y)
    return a


@pytest.mark.parametrize("layout", ["plain", "hf", "packed"])
def test_candidates_read_by_address_give_the_loaded_sums(tmp_path, layout):
    g = torch.Generator().manual_seed(3)
    slots = _slots(g)
    path = tmp_path / "infer.safetensors"
    if layout == "plain":  # mixed dtypes: bf16 and fp32 rows
        write_safetensors(
            path,
            {
                "embed": torch.randn(T + 5, H, generator=g).bfloat16(),
                "layers.0": torch.randn(T + 5, H, generator=g),
                "layers.1": torch.randn(T + 5, H, generator=g).bfloat16(),
            },
        )
    elif layout == "hf":  # rows i*T.. of one [N+1, T, H] tensor
        write_safetensors(path, {"hidden_states": torch.randn(4, T + 5, H, generator=g).bfloat16()})
    else:  # a [T, 3H] tensor split into its slots: columns of one row stride
        write_safetensors(
            path,
            {
                "embed": torch.randn(T + 5, H, generator=g).bfloat16(),
                "layers.0": torch.randn(T + 5, H, generator=g).bfloat16(),
                "aux": torch.randn(T + 5, 3 * H, generator=g).bfloat16(),
            },
        )
    cap = open_capture(path)
    cands = list(cap.candidates(H))
    if layout == "packed":  # (as a packed capture's [T, K*H] tensor is split)
        aux = next(t for t in cap.tensors if t.name == "aux")
        cands += dataclasses.replace(aux, role=PACKED).split(3)
    assert len(cands) >= 3 and all(c.span is not None for c in cands)
    ps = ps_mod.PairStats(slots, np.arange(T) + 3, np.arange(T) + 5, threads=2)
    _, yy, *_ = _same_sums(ps, cands)
    want = torch.stack([c.load()[5 : T + 5].double().pow(2).sum(1) for c in cands]).numpy()
    np.testing.assert_allclose(yy, want, rtol=1e-5)  # (and the right bytes: each row's own norm)
    # a candidate kept for the exact pass: its own bytes, over the group's mapping
    with mapping.shared():
        grp = _cpu_group(ps, cands)
    lo, hi = grp.owner.data_ptr(), grp.owner.data_ptr() + grp.owner.numel()
    for g, c in enumerate(cands):
        view = _mapped_view(grp, g, c)
        assert (
            lo <= view.data_ptr()
            and view.data_ptr() + ((c.rows - 1) * view.stride(0) + c.width) * view.element_size() <= hi
        )
        assert view.dtype == c.load().dtype and torch.equal(view, c.load())


def test_a_candidate_too_short_for_the_compared_rows_is_refused():
    ps = ps_mod.PairStats(_slots(torch.Generator().manual_seed(0)), np.arange(T), np.arange(T) + 5)
    buf = torch.zeros((T + 5) * H, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="fall outside"):
        ps.group_at(buf, [buf.data_ptr()], [ps_mod.BF16], [2 * H], [T + 4])
    with pytest.raises(ValueError, match="fewer than"):
        ps.group_at(buf, [buf.data_ptr()], [ps_mod.F32], [2 * H], [T + 5])
    with pytest.raises(ValueError, match="element code"):
        ps.group_at(buf, [buf.data_ptr()], [7], [2 * H], [T + 5])
