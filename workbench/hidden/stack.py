"""Plain layer stacks: one forward pass's residual streams in a safetensors or npz file.

Two layouts are read:

* named: ``embed`` (embedding output), ``layers.{k}`` (residual stream after decoder layer k),
  optional ``final_norm`` (after the final norm); token ids in a ``token_ids``/``input_ids`` tensor
  or as a JSON list in the safetensors metadata (``token_ids``, ``positions``).
* HF-style: ``hidden_states [N+1, T, H]`` (``output_hidden_states=True`` stacked): index 0 is the
  embedding output, index i (1..N-1) is out(i-1), index N is post-norm.

A leading batch dimension of 1 is dropped. Each tensor is mapped and loaded on its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from workbench import strictjson
from workbench.draftconfig.schema import MAX_LAYERS
from workbench.errors import InputError
from workbench.hidden.view import FINAL, ITEMSIZE, LAYER, Capture, FileSpan, HiddenTensor, as_int_array
from workbench.numbers import Range, integer

LAYER_KEY = re.compile(r"^(?:model\.)?layers\.(\d+)$")
ID_KEYS = ("token_ids", "input_ids")
POS_KEYS = ("positions", "position_ids")

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch

    from workbench.hidden.npz_io import NpzFile
    from workbench.hidden.st_io import SafetensorsFile


def read_stack(path: str | os.PathLike[str], *, hf_num_layers: int | None = None) -> Capture:
    path = Path(path)
    f: NpzFile | SafetensorsFile
    if path.suffix == ".npz":
        from workbench.hidden.npz_io import NpzFile

        f = NpzFile(path)
        shapes = {m.name: tuple(m.shape) for m in f.members.values()}
        dtypes = {m.name: ("bfloat16" if m.dtype.kind == "V" else str(m.dtype)) for m in f.members.values()}
        metadata: dict[str, str] = {}
        fmt = "stack-npz"
    else:
        from workbench.hidden.st_io import SafetensorsFile

        f = SafetensorsFile(path)
        shapes = {e.name: e.shape for e in f.entries.values()}
        dtypes = {e.name: e.torch_dtype_name for e in f.entries.values()}
        metadata = f.metadata
        fmt = "stack-safetensors"

    token_ids = _ids(f, shapes, metadata, ID_KEYS, path)
    positions = _ids(f, shapes, metadata, POS_KEYS, path)
    tensors: list[HiddenTensor] = []
    if "hidden_states" in shapes:
        tensors = _hf_stack(f, path, shapes["hidden_states"], dtypes["hidden_states"], hf_num_layers)
        fmt += "-hf"
    else:
        for name, shape in shapes.items():
            if name in ID_KEYS + POS_KEYS or name == "loss_mask":
                continue
            shape = _squeeze(shape)
            if len(shape) != 2:
                continue
            if shape[1] == 0:
                raise InputError(f"{path}: tensor {name!r} has shape {list(shape)}; expected [T, H] with H > 0")
            m = LAYER_KEY.match(name)
            if name in ("embed", "embed_tokens", "embedding"):
                physical, role = "embed", LAYER
            elif m:
                physical, role = f"out({int(m.group(1))})", LAYER
            elif name in ("final_norm", "norm"):
                physical, role = "final-postnorm", FINAL
            elif name in ("final_prenorm",):
                physical, role = "final-prenorm", FINAL
            else:
                physical, role = None, LAYER
            tensors.append(
                HiddenTensor(
                    name,
                    shape[0],
                    shape[1],
                    dtypes[name],
                    role,
                    physical,
                    str(path),
                    _loader(f, name, shape),
                    span=_span(f, name, 0, shape[1], dtypes[name]),
                )
            )
        tensors.sort(key=_order)
    if not tensors:
        raise InputError(f"{path}: no [T, H] tensors (expected 'embed', 'layers.K' or 'hidden_states')")
    rows = {t.rows for t in tensors}
    if len(rows) != 1:
        raise InputError(f"{path}: tensors disagree on the token count ({sorted(rows)})")
    t_rows = rows.pop()
    for what, arr in (("token ids", token_ids), ("positions", positions)):
        if arr is not None and len(arr) != t_rows:
            raise InputError(f"{path}: {len(arr)} {what} for {t_rows} rows")
    meta: dict[str, Any] = {k: v for k, v in metadata.items() if k not in ID_KEYS + POS_KEYS}
    outs = [int(t.physical[4:-1]) for t in tensors if t.physical and t.physical.startswith("out(")]
    if fmt.endswith("-hf"):
        meta["num_layers"] = len(tensors) - 1
    elif outs and any(t.physical == "final-postnorm" for t in tensors):
        meta["num_layers"] = max(outs) + 1  # a stack with its final norm holds every layer
    return Capture(str(path), fmt, tensors, token_ids=token_ids, positions=positions, meta=meta)


def _order(t: HiddenTensor) -> tuple[int, int, str]:
    p = t.physical or ""
    if p == "embed":
        return (0, 0, t.name)
    m = re.match(r"out\((\d+)\)", p)
    if m:
        return (1, int(m.group(1)), t.name)
    if p.startswith("final"):
        return (2, 0 if "pre" in p else 1, t.name)
    return (3, 0, t.name)


def _squeeze(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(shape)
    while len(shape) > 2 and shape[0] == 1:
        shape = shape[1:]
    return shape


def _span(f: NpzFile | SafetensorsFile, name: str, skip_rows: int, width: int, dtype: str) -> FileSpan | None:
    """Where a safetensors tensor's rows lie (``skip_rows`` rows of ``width`` in); None elsewhere."""
    entries = getattr(f, "entries", None)
    if entries is None or dtype not in ITEMSIZE:
        return None
    row = width * ITEMSIZE[dtype]
    return FileSpan(str(f.path), entries[name].begin + skip_rows * row, row)


def _loader(f: NpzFile | SafetensorsFile, name: str, shape: tuple[int, ...]) -> Callable[[], torch.Tensor]:
    return lambda: f.load(name).reshape(shape)


def _ids(
    f: NpzFile | SafetensorsFile,
    shapes: dict[str, tuple[int, ...]],
    metadata: dict[str, str],
    keys: tuple[str, ...],
    path: Path,
) -> npt.NDArray[np.int64] | None:
    for k in keys:
        if k in shapes:
            return as_int_array(f.load(k), f"{path}:{k}")
        if k in metadata:
            try:
                values = strictjson.loads(metadata[k], f"{path}: __metadata__.{k}")
            except InputError as exc:
                raise InputError(f"{exc} (expected a JSON list of integers)") from None
            return as_int_array(values, f"{path}: __metadata__.{k}")
    return None


def _hf_stack(
    f: NpzFile | SafetensorsFile, path: Path, shape: Sequence[int], dtype: str, num_layers: int | None
) -> list[HiddenTensor]:
    shape = tuple(shape)
    if len(shape) == 4 and shape[1] == 1:
        shape = (shape[0], shape[2], shape[3])
    if len(shape) != 3:
        raise InputError(f"{path}: hidden_states has shape {list(shape)}; expected [N+1, T, H]")
    n1, rows, width = shape
    if not 2 <= n1 <= MAX_LAYERS + 1 or width == 0:
        raise InputError(
            f"{path}: hidden_states has shape {list(shape)}; expected [N+1, T, H] with "
            f"1 <= N <= {MAX_LAYERS} layers and H > 0"
        )
    n = n1 - 1 if num_layers is None else integer(num_layers, "hf_num_layers", Range(1, MAX_LAYERS))
    if n1 != n + 1:
        raise InputError(f"{path}: hidden_states holds {n1} entries, expected N+1 = {n + 1}")
    out: list[HiddenTensor] = []
    for i in range(n1):
        if i == 0:
            physical, role = "embed", LAYER
        elif i < n:
            physical, role = f"out({i - 1})", LAYER
        else:
            physical, role = "final-postnorm", FINAL
        out.append(
            HiddenTensor(
                f"hidden_states[{i}]",
                rows,
                width,
                dtype,
                role,
                physical,
                str(path),
                _hf_loader(f, i, (n1, rows, width)),
                span=_span(f, "hidden_states", i * rows, width, dtype),
            )
        )
    return out


def _hf_loader(f: NpzFile | SafetensorsFile, i: int, shape: tuple[int, int, int]) -> Callable[[], torch.Tensor]:
    def load() -> torch.Tensor:
        if hasattr(f, "entries"):  # safetensors: map just this layer's rows
            return cast("SafetensorsFile", f).load("hidden_states", rows=slice(i, i + 1)).reshape(shape[1:])
        return f.load("hidden_states").reshape(shape)[i]

    return load
