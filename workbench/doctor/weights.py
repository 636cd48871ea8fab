"""Weight checks from the safetensors headers, and the d2t/t2d vocabulary mapping."""

from __future__ import annotations

from typing import Optional

from workbench.errors import InputError


def check_weights(ck) -> Optional[int]:
    """Run the weight checks on a _Checker; returns fc's input width when fc.weight is present."""
    d = ck.d
    if not d.tensors:
        return None
    check_d2t(ck)
    fc = d.tensors.get("fc.weight")
    return fc.shape[1] if fc is not None and len(fc.shape) == 2 else None


def check_d2t(ck) -> None:
    d = ck.d
    if "d2t" not in d.tensors:
        return
    import numpy as np

    vocab = (ck.t.vocab_size if ck.t else None) or d.vocab_size
    ev: dict = {"target_vocab_size": vocab, "draft_vocab_size": d.draft_vocab_size}
    problems: list[str] = []
    try:
        d2t = np.asarray(d.tensor("d2t"))
    except InputError as exc:
        problems.append(str(exc))
        d2t = None
    if d2t is not None:
        ev["d2t_shape"] = list(d2t.shape)
        if d2t.ndim != 1 or d2t.dtype.kind not in "iu":
            problems.append(f"d2t must be a 1-D integer tensor, got shape {list(d2t.shape)} {d2t.dtype}")
        else:
            if d.draft_vocab_size and d2t.shape[0] != d.draft_vocab_size:
                problems.append(f"d2t has {d2t.shape[0]} entries, draft_vocab_size is {d.draft_vocab_size}")
            tgt = d2t.astype(np.int64) + np.arange(d2t.shape[0], dtype=np.int64)
            steps = np.diff(tgt)
            if steps.size and (steps <= 0).any():
                first = int(np.argmax(steps <= 0))
                problems.append(f"target ids not strictly increasing at draft id {first + 1} "
                                f"({int(tgt[first])} then {int(tgt[first + 1])})")
            if tgt.size and (tgt.min() < 0 or (vocab and tgt.max() >= vocab)):
                problems.append(f"target ids span {int(tgt.min())}..{int(tgt.max())}, outside 0..{(vocab or 0) - 1}")
            if "t2d" in d.tensors:
                try:
                    t2d = np.asarray(d.tensor("t2d"))
                except InputError as exc:
                    problems.append(str(exc))
                    t2d = None
                if t2d is not None:
                    ev["t2d_shape"] = list(t2d.shape)
                    ev["t2d_true"] = int(t2d.astype(bool).sum())
                    if t2d.ndim != 1 or (vocab and t2d.shape[0] != vocab):
                        problems.append(f"t2d has shape {list(t2d.shape)}, expected [{vocab}]")
                    else:
                        mask = t2d.astype(bool)
                        if int(mask.sum()) != d2t.shape[0]:
                            problems.append(f"t2d marks {int(mask.sum())} tokens, d2t maps {d2t.shape[0]}")
                        inside = tgt[(tgt >= 0) & (tgt < mask.shape[0])]
                        if inside.size and not mask[inside].all():
                            problems.append(f"{int((~mask[inside]).sum())} target ids of d2t are false in t2d")
    if problems:
        ck.add("d2t-invalid", "error",
               f"The vocabulary mapping is invalid: {problems[0]}.", {**ev, "problems": problems})
