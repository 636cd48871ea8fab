"""vLLM speculators offline data: ``hs_{i}.safetensors``.

Keys: ``token_ids [L]`` and ``hidden_states [L, n, H]``, the captured layers stacked on dim 1 in
layer order. hs_connectors' FP8 connector stores ``hidden_states`` as ``float8_e4m3fn`` with one
float32 scale per token, ``hidden_states_scales [L, 1, 1]``; the reader dequantizes as
hs_connectors does (``fp8.float() * scale``, in float32 rather than its default bf16), so every
slot loads as float32. With the generator's default ``--include-last-layer`` the last slot is the final
residual before the final norm (layer id N in the capture-before convention); the others are the
drafter-input slots. Layer ids, when given, are in speculators' convention (capture before layer j,
i.e. out(j-1); j = 0 is the embedding output, j = N the final pre-norm residual).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from workbench.errors import InputError
from workbench.hidden.st_io import Entry, SafetensorsFile
from workbench.hidden.view import FINAL, SLOT, Capture, HiddenTensor, as_int_array, indexed_files

if TYPE_CHECKING:
    import torch

FILE_RE = re.compile(r"^hs_(\d+)\.safetensors$")


def sample_files(root: str | os.PathLike[str]) -> list[Path]:
    """All ``hs_{i}.safetensors`` under ``root`` (a file or a folder), in index order."""
    return indexed_files(root, "hs_*.safetensors", FILE_RE, "speculators hs_{i}.safetensors")


def is_speculators(path: str | os.PathLike[str]) -> bool:
    path = Path(path)
    if path.is_file():
        return bool(FILE_RE.match(path.name))
    return path.is_dir() and any(FILE_RE.match(p.name) for p in path.rglob("hs_*.safetensors"))


def read_speculators(
    path: str | os.PathLike[str],
    *,
    sample: int | None = None,
    include_last_layer: bool = True,
    layer_ids: Sequence[int] | None = None,
    num_layers: int | None = None,
) -> Capture:
    files = sample_files(path)
    if sample is None:
        f = files[0]
    else:
        match = [p for p in files if int(cast("re.Match[str]", FILE_RE.match(p.name)).group(1)) == sample]
        if not match:
            raise InputError(f"{path}: no sample hs_{sample}.safetensors")
        f = match[0]
    st = SafetensorsFile(f)
    for key in ("token_ids", "hidden_states"):
        if key not in st.entries:
            raise InputError(f"{f}: missing key {key!r} (have: {', '.join(st.names())})")
    ids = as_int_array(st.load("token_ids"), f"{f}:token_ids")
    ent = st.entries["hidden_states"]
    if len(ent.shape) != 3:
        raise InputError(f"{f}: hidden_states has shape {list(ent.shape)}; expected [L, n, H]")
    length, n, h = ent.shape
    if length != len(ids):
        raise InputError(f"{f}: hidden_states has {length} rows for {len(ids)} token_ids")
    scales = _scales(st, f, ent, length)
    dtype = "float32" if scales is not None else ent.torch_dtype_name
    n_aux = n - 1 if include_last_layer else n
    if n_aux < 1:
        raise InputError(f"{f}: hidden_states holds {n} slot(s); no drafter-input slot left")
    if layer_ids is None and num_layers is not None:
        layer_ids = [2, num_layers // 2, num_layers - 3]  # speculators' default (capture-before)
    tensors: list[HiddenTensor] = []
    for j in range(n):
        last = include_last_layer and j == n - 1
        if last:
            name, role, physical = "last", FINAL, "final-prenorm"
        else:
            name, role = f"slot[{j}]", SLOT
            physical = None
            if layer_ids is not None and j < len(layer_ids):
                b = int(layer_ids[j])
                physical = (
                    "embed"
                    if b == 0
                    else ("final-prenorm" if num_layers is not None and b == num_layers else f"out({b - 1})")
                )
        tensors.append(HiddenTensor(name, length, h, dtype, role, physical, str(f), _slot(st, j, scales)))
    meta: dict[str, Any] = {"slots": n_aux, "hidden_size": h, "include_last_layer": include_last_layer}
    if scales is not None:
        meta["fp8"] = f"{ent.torch_dtype_name} x {SCALES_KEY} (dequantized to float32)"
    return Capture(
        str(f), "speculators", tensors, token_ids=ids, positions=np.arange(length, dtype=np.int64), meta=meta
    )


SCALES_KEY = "hidden_states_scales"  # hs_connectors.fp8_utils.SCALES_KEY


def _scales(st: SafetensorsFile, f: Path, ent: Entry, length: int) -> torch.Tensor | None:
    """The per-token scales of an FP8 file as float32 ``[L, 1]``; None for an unscaled file."""
    import torch

    from workbench.hidden.st_io import FP8

    sc = st.entries.get(SCALES_KEY)
    if ent.dtype not in FP8:
        if sc is not None:
            raise InputError(f"{f}: {SCALES_KEY} present but hidden_states is {ent.dtype}, not FP8")
        return None
    if sc is None:
        raise InputError(f"{f}: hidden_states is {ent.dtype} but {SCALES_KEY} is missing (FP8 needs its scales)")
    if sc.dtype not in ("F32", "F16", "BF16") or tuple(sc.shape) not in ((length, 1, 1), (length, 1), (length,)):
        raise InputError(f"{f}: {SCALES_KEY} is {sc.dtype}{list(sc.shape)}; expected F32[{length}, 1, 1]")
    s = st.load(SCALES_KEY).float().reshape(length, 1)
    if not bool(torch.isfinite(s).all()) or bool((s <= 0).any()):
        raise InputError(f"{f}: {SCALES_KEY} holds a non-finite or non-positive scale")
    return s


def _slot(st: SafetensorsFile, j: int, scales: torch.Tensor | None = None) -> Callable[[], torch.Tensor]:
    if scales is None:
        return lambda: st.load("hidden_states")[:, j, :]
    return lambda: st.load("hidden_states", fp8=True)[:, j, :].float() * scales
