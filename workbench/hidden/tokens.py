"""Token alignment between two captures: which rows hold the same token at the same position.

Rules, in order of preference:

1. both sides have positions and token ids: rows pair on (position, id); on the inference side the
   first row of each (position, id) wins (a prefill row before a re-verified decode row);
2. both have ids: the offset that makes the most ids agree (the inference ids as a run inside the
   reference or the other way round), then pairs where the ids agree;
3. otherwise rows pair by index over the shorter length.

The result says how many tokens were compared and how many were dropped on each side and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.errors import InputError
from workbench.hidden.view import Capture

Index = slice | np.ndarray


@dataclass
class TokenAlignment:
    ref_index: Index
    infer_index: Index
    method: str  # "positions+ids", "ids", "index"
    compared: int
    ref_rows: int
    infer_rows: int
    dropped_ref: int  # reference rows with no partner
    dropped_infer: int  # inference rows with no partner
    id_mismatch: int = 0  # same position, different token id
    duplicates: int = 0  # inference rows repeating a (position, id) seen earlier (not used)
    notes: list[str] = field(default_factory=list)

    def ref_positions(self) -> np.ndarray:
        return np.arange(self.ref_rows)[self.ref_index]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "compared": self.compared,
            "ref_rows": self.ref_rows,
            "infer_rows": self.infer_rows,
            "dropped_ref": self.dropped_ref,
            "dropped_infer": self.dropped_infer,
            "id_mismatch": self.id_mismatch,
            "duplicates": self.duplicates,
            "notes": list(self.notes),
        }


def _as_slice(idx: np.ndarray) -> Index:
    """A contiguous ascending run becomes a slice (a view, no gather copy)."""
    if idx.size and (idx.size == 1 or np.all(np.diff(idx) == 1)):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def align_tokens(
    ref: Capture, infer: Capture, ref_rows: int | None = None, infer_rows: int | None = None
) -> TokenAlignment:
    nr = ref_rows if ref_rows is not None else ref.rows
    ni = infer_rows if infer_rows is not None else infer.rows
    rid, iid = ref.token_ids, infer.token_ids
    rpos, ipos = ref.positions, infer.positions
    if rid is not None and iid is not None and rpos is not None and ipos is not None:
        out = _by_position(rid[:nr], rpos[:nr], iid[:ni], ipos[:ni])
    elif rid is not None and iid is not None:
        out = _by_offset(rid[:nr], iid[:ni])
    else:
        n = min(nr, ni)
        out = TokenAlignment(slice(0, n), slice(0, n), "index", n, nr, ni, nr - n, ni - n)
        missing = "reference" if rid is None else "inference"
        out.notes.append(f"no token ids on the {missing} side: rows paired by index")
        if nr != ni:
            out.notes.append(f"lengths differ ({nr} reference rows, {ni} inference rows): compared the first {n}")
    if out.compared == 0:
        hint = ""
        if rid is not None and iid is not None:
            hint = f" (reference ids start {list(rid[:6])}, inference ids start {list(iid[:6])})"
        raise InputError(f"{infer.path}: no token in common with {ref.path}{hint}")
    return out


def _by_position(rid: np.ndarray, rpos: np.ndarray, iid: np.ndarray, ipos: np.ndarray) -> TokenAlignment:
    nr, ni = len(rid), len(iid)
    span = int(max(rid.max(initial=0), iid.max(initial=0))) + 1
    ikey = ipos.astype(np.int64) * span + iid
    uniq, first = np.unique(ikey, return_index=True)
    duplicates = ni - len(uniq)
    rkey = rpos.astype(np.int64) * span + rid
    at = np.searchsorted(uniq, rkey)
    at_c = np.minimum(at, max(len(uniq) - 1, 0))
    hit = (at < len(uniq)) & (uniq[at_c] == rkey) if len(uniq) else np.zeros(nr, dtype=bool)
    ref_idx = np.flatnonzero(hit)
    inf_idx = first[at_c[hit]]
    # Same position but another token: counted apart from plain absences.
    pos_set = set(ipos.tolist())
    miss = ~hit
    id_mismatch = int(sum(1 for p in rpos[miss].tolist() if p in pos_set))
    res = TokenAlignment(
        _as_slice(ref_idx),
        _as_slice(inf_idx),
        "positions+ids",
        len(ref_idx),
        nr,
        ni,
        nr - len(ref_idx),
        ni - len(ref_idx),
        id_mismatch,
        duplicates,
    )
    if id_mismatch:
        res.notes.append(f"{id_mismatch} reference positions hold another token id on the inference side")
    if duplicates:
        res.notes.append(f"{duplicates} inference rows repeat an already paired (position, id); first kept")
    return res


def _by_offset(rid: np.ndarray, iid: np.ndarray) -> TokenAlignment:
    nr, ni = len(rid), len(iid)
    best = (-1, 0)
    # Candidate offsets: where the first few inference ids occur in the reference, and vice versa.
    offsets: set[int] = set()
    for probe in range(min(4, ni)):
        offsets.update((np.flatnonzero(rid == iid[probe]) - probe).tolist()[:256])
    for probe in range(min(4, nr)):
        offsets.update((probe - np.flatnonzero(iid == rid[probe])).tolist()[:256])
    offsets.add(0)
    for off in sorted(offsets, key=abs):
        lo, hi = max(0, off), min(nr, ni + off)
        if hi <= lo:
            continue
        agree = int(np.count_nonzero(rid[lo:hi] == iid[lo - off : hi - off]))
        if agree > best[0]:
            best = (agree, off)
    agree, off = best
    lo, hi = max(0, off), min(nr, ni + off)
    if agree <= 0 or hi <= lo:
        return TokenAlignment(slice(0, 0), slice(0, 0), "ids", 0, nr, ni, nr, ni)
    same = np.flatnonzero(rid[lo:hi] == iid[lo - off : hi - off])
    ref_idx, inf_idx = same + lo, same + lo - off
    res = TokenAlignment(
        _as_slice(ref_idx),
        _as_slice(inf_idx),
        "ids",
        len(same),
        nr,
        ni,
        nr - len(same),
        ni - len(same),
        id_mismatch=int((hi - lo) - len(same)),
    )
    if off:
        res.notes.append(
            f"inference row 0 is reference token {off}" if off > 0 else f"reference row 0 is inference token {-off}"
        )
    if res.id_mismatch:
        res.notes.append(f"{res.id_mismatch} overlapping rows hold different token ids (dropped)")
    return res
