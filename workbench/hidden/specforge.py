"""SpecForge offline training data: ``rows_*/data_{i}.ckpt`` and ``.ckpt.gz``.

Each file is a ``torch.save`` dict: ``input_ids [L]``, ``loss_mask [L]``, ``hidden_state [1, L, H]``
(the target's final hidden state after its final norm: the teacher) and ``aux_hidden_state
[1, L, K*H]`` (the drafter input, K slots side by side in layer order). Note the swap: the file's
``hidden_state`` is the last layer, ``aux_hidden_state`` the drafter input.

Handled variants: trailing padding rows (``input_ids == 0`` and ``loss_mask == 0`` at the end,
written when capture ran on padded batches) are stripped; files where ``hidden_state`` holds
logits ([1, L', V], the 2025-11 HF-capture window) are detected and the tensor is marked LOGITS.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from workbench.draftconfig.schema import MAX_AUX, MAX_VOCAB
from workbench.errors import InputError
from workbench.hidden.pt_io import load_pt
from workbench.hidden.view import FINAL, LOGITS, SLOT, Capture, HiddenTensor, as_int_array, dtype_name, indexed_files
from workbench.numbers import Range, integer

if TYPE_CHECKING:
    import torch

REQUIRED = ("input_ids", "loss_mask", "hidden_state", "aux_hidden_state")
FILE_RE = re.compile(r"^data_(\d+)\.ckpt(\.gz)?$")


def sample_files(root: str | os.PathLike[str]) -> list[Path]:
    """All ``data_{i}.ckpt[.gz]`` under ``root`` (a file or a folder), in index order."""
    return indexed_files(root, "data_*.ckpt*", FILE_RE, "SpecForge data_{i}.ckpt")


def is_specforge(path: str | os.PathLike[str]) -> bool:
    path = Path(path)
    if path.is_file():
        return bool(FILE_RE.match(path.name))
    return path.is_dir() and any(FILE_RE.match(p.name) for p in path.rglob("data_*.ckpt*"))


def read_specforge(
    path: str | os.PathLike[str],
    *,
    sample: int | None = None,
    slots: int | None = None,
    layer_ids: Sequence[int] | None = None,
    vocab_size: int | None = None,
    strip_padding: bool = True,
) -> Capture:
    """One training sample as a Capture whose SLOT tensors are the K drafter-input slots.

    ``sample`` picks ``data_{sample}`` in a folder (default: the first file). ``layer_ids`` (SpecForge
    convention: out(k)) labels the slots with their physical points when known.
    """
    files = sample_files(path)
    if sample is None:
        f = files[0]
    else:
        sample = integer(sample, "sample", Range(0, None))
        match = [p for p in files if int(cast("re.Match[str]", FILE_RE.match(p.name)).group(1)) == sample]
        if not match:
            raise InputError(f"{path}: no sample data_{sample}.ckpt (have {len(files)} files)")
        f = match[0]
    return read_file(f, slots=slots, layer_ids=layer_ids, vocab_size=vocab_size, strip_padding=strip_padding)


def iter_samples(path: str | os.PathLike[str], **kw: Any) -> Iterator[Capture]:
    for f in sample_files(path):
        yield read_file(f, **kw)


def read_file(
    f: str | os.PathLike[str],
    *,
    slots: int | None = None,
    layer_ids: Sequence[int] | None = None,
    vocab_size: int | None = None,
    strip_padding: bool = True,
) -> Capture:
    f = Path(f)
    ids, mask, aux, last = _checked(f)
    if slots is not None:
        slots = integer(slots, "slots", Range(1, MAX_AUX))
    if layer_ids is not None:
        layer_ids = [integer(i, f"layer_ids[{j}]") for j, i in enumerate(layer_ids)]
    if vocab_size is not None:
        vocab_size = integer(vocab_size, "vocab_size", Range(1, MAX_VOCAB))
    notes: list[str] = []
    k, h, is_logits = _layout(f, aux.shape[1], last.shape[1], slots, layer_ids, vocab_size, notes)
    length = _length(f, ids, mask, aux.shape[0], last.shape[0], is_logits, strip_padding, notes)

    src = str(f)
    dtype = dtype_name(aux.dtype)
    tensors: list[HiddenTensor] = []
    for i in range(k):
        physical = f"out({int(layer_ids[i])})" if layer_ids and i < len(layer_ids) else None
        tensors.append(
            HiddenTensor(f"aux[{i}]", length, h, dtype, SLOT, physical, src, _slice(aux, length, i * h, (i + 1) * h))
        )
    width = last.shape[1] if is_logits else h
    role, physical = (LOGITS, None) if is_logits else (FINAL, "final-postnorm")
    tensors.append(
        HiddenTensor(
            "hidden_state", length, width, dtype_name(last.dtype), role, physical, src, _slice(last, length, 0, width)
        )
    )
    return Capture(
        src,
        "specforge",
        tensors,
        token_ids=ids[:length].copy(),
        positions=np.arange(length, dtype=np.int64),
        loss_mask=mask[:length].copy(),
        notes=notes,
        meta={"slots": k, "hidden_size": h, "variant": "logits" if is_logits else "hidden", "file_rows": len(ids)},
    )


def _checked(f: Path) -> tuple[np.ndarray, np.ndarray, torch.Tensor, torch.Tensor]:
    """The file's input ids, loss mask, aux hidden states and hidden state, each checked."""
    import torch

    raw = load_pt(f)
    if not isinstance(raw, dict):
        raise InputError(f"{f}: expected a dict with keys {', '.join(REQUIRED)}, got {type(raw).__name__}")
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise InputError(f"{f}: missing key(s) {', '.join(missing)} (have: {', '.join(map(str, raw))})")
    for req in REQUIRED:
        if not isinstance(raw[req], torch.Tensor):
            raise InputError(f"{f}: {req} is a {type(raw[req]).__name__}, expected a tensor")
    ids = as_int_array(raw["input_ids"], f"{f}:input_ids")
    mask = as_int_array(raw["loss_mask"], f"{f}:loss_mask")
    if len(mask) != len(ids):
        raise InputError(f"{f}: loss_mask has {len(mask)} entries for {len(ids)} input_ids")
    aux = _rows2d(raw["aux_hidden_state"], f, "aux_hidden_state")
    last = _rows2d(raw["hidden_state"], f, "hidden_state")
    for key, t in (("aux_hidden_state", aux), ("hidden_state", last)):
        if t.shape[1] == 0 or not t.dtype.is_floating_point:
            raise InputError(
                f"{f}: {key} is {str(t.dtype).replace('torch.', '')} {list(t.shape)}; "
                "expected floating-point rows of a non-zero width"
            )
    return ids, mask, aux, last


def _layout(
    f: Path,
    a_w: int,
    l_w: int,
    slots: int | None,
    layer_ids: Sequence[int] | None,
    vocab_size: int | None,
    notes: list[str],
) -> tuple[int, int, bool]:
    """``(slots, slot width, whether hidden_state holds logits)`` from the widths of
    aux_hidden_state (``a_w``) and hidden_state (``l_w``) and what the caller knows."""
    k = slots if slots is not None else (len(layer_ids) if layer_ids else None)
    if vocab_size is not None:
        is_logits = l_w == vocab_size
    elif k is not None:
        is_logits = l_w * k != a_w
    else:  # a hidden state is one slot wide; logits are far wider than the packed slots
        is_logits = not (a_w % l_w == 0 and a_w >= l_w)
    if k is None and not is_logits:
        k = a_w // l_w
    if is_logits:
        notes.append(
            f"hidden_state holds logits ({l_w} wide): the HF-capture variant; no final hidden state in this file"
        )
    k = k or 3
    if k > MAX_AUX:
        raise InputError(
            f"{f}: aux_hidden_state {a_w} wide over hidden_state {l_w} wide makes {k} slots; expected at most {MAX_AUX}"
        )
    if a_w % k:
        raise InputError(f"{f}: aux_hidden_state width {a_w} is not {k} slots of equal width")
    h = a_w // k
    if not is_logits and l_w != h:
        raise InputError(f"{f}: hidden_state width {l_w} != slot width {h} (aux_hidden_state {a_w} / {k} slots)")
    return k, h, is_logits


def _length(
    f: Path,
    ids: np.ndarray,
    mask: np.ndarray,
    aux_rows: int,
    last_rows: int,
    is_logits: bool,
    strip_padding: bool,
    notes: list[str],
) -> int:
    """The tokens the file holds rows for, trailing padding stripped."""
    length = len(ids)
    if aux_rows > length:
        raise InputError(f"{f}: aux_hidden_state has {aux_rows} rows for {length} input_ids")
    if aux_rows < length:
        notes.append(f"aux_hidden_state covers {aux_rows} of {length} input_ids (rest treated as padding)")
        length = aux_rows
    if is_logits:
        length = min(length, last_rows)
    elif last_rows < length:
        raise InputError(f"{f}: hidden_state has {last_rows} rows for {length} tokens")
    if strip_padding:
        pad = _trailing_pad(ids[:length], mask[:length])
        if pad:
            notes.append(f"stripped {pad} trailing padding rows (input_ids 0, loss_mask 0)")
            length -= pad
    return length


def _rows2d(t: torch.Tensor, f: Path, key: str) -> torch.Tensor:
    if t.dim() == 3 and t.shape[0] == 1:
        return t[0]
    if t.dim() == 2:
        return t
    raise InputError(f"{f}: {key} has shape {list(t.shape)}; expected [1, L, W] or [L, W]")


def _slice(t: torch.Tensor, length: int, lo: int, hi: int) -> Callable[[], torch.Tensor]:
    return lambda: t[:length, lo:hi]


def _trailing_pad(ids: np.ndarray, mask: np.ndarray) -> int:
    pad = (ids == 0) & (mask == 0)
    if not pad.size or not pad[-1]:
        return 0
    nonpad = np.flatnonzero(~pad)
    return int(len(ids) - (nonpad[-1] + 1 if nonpad.size else 0))
