"""The one view every hidden-state reader returns.

A ``Capture`` is a set of named ``[T, H]`` tensors that share one token axis, with the token ids
and positions of those rows where the format carries them. Tensors are loaded lazily, one at a
time (``HiddenTensor.load()``), in the dtype they were stored in: bf16 stays bf16, so nothing is
rounded before the comparison.

``physical`` names the capture point in the workbench's physical vocabulary (the str form of
``workbench.layers.Point``): ``embed``, ``out(K)`` (residual stream after decoder layer K),
``final-prenorm``, ``final-postnorm``; ``None`` when the format does not say.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt
    import torch

# Roles: what a tensor is in its file.
SLOT = "slot"  # one drafter-input slot of a training sample (SpecForge aux chunk, speculators slot)
LAYER = "layer"  # a residual-stream capture point of a forward pass (a candidate)
PACKED = "packed"  # K slots side by side, [T, K*H] (SGLang aux capture); split on demand
FINAL = "final"  # the last hidden state (teacher input), pre- or post-norm per ``physical``
LOGITS = "logits"  # logits stored where a hidden state was expected


ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}


@dataclass(frozen=True)
class FileSpan:
    """Where a tensor's bytes lie in its file, as they are in memory (no encoding): row r at byte
    ``begin + r * row_bytes``, its elements contiguous. A reader that needs only addresses (the
    compiled CPU pass) maps the file once for all of its tensors instead of loading each."""

    path: str
    begin: int
    row_bytes: int


@dataclass
class HiddenTensor:
    name: str
    rows: int
    width: int
    dtype: str
    role: str = LAYER
    physical: str | None = None
    source: str = ""
    loader: Callable[[], torch.Tensor] | None = field(default=None, repr=False)
    part_physical: list[str | None] | None = None  # physical points of the parts of a packed tensor
    span: FileSpan | None = None  # where ``load()``'s bytes lie in the file, where they lie as they are

    def load(self) -> torch.Tensor:
        """The tensor as torch ``[rows, width]`` in its stored dtype (CPU)."""
        from workbench.errors import InputError

        if self.loader is None:
            raise InputError(f"{self.source or self.name}: tensor {self.name!r} has no data")
        t = self.loader()
        if tuple(t.shape) != (self.rows, self.width):
            raise InputError(
                f"{self.source or self.name}: {self.name} has shape {tuple(t.shape)}, "
                f"expected {(self.rows, self.width)}"
            )
        return t

    def split(self, parts: int) -> list[HiddenTensor]:
        """Columns cut into ``parts`` equal slots: a packed [T, K*H] becomes K tensors [T, H]."""
        h = self.width // parts
        known = self.part_physical if self.part_physical and len(self.part_physical) == parts else None
        out: list[HiddenTensor] = []
        for i in range(parts):
            out.append(
                HiddenTensor(
                    name=f"{self.name}[{i}]",
                    rows=self.rows,
                    width=h,
                    dtype=self.dtype,
                    role=SLOT if self.role == SLOT else LAYER,
                    physical=known[i] if known else None,
                    source=self.source,
                    loader=_column_loader(self, i * h, (i + 1) * h),
                    span=(
                        FileSpan(self.span.path, self.span.begin + i * h * ITEMSIZE[self.dtype], self.span.row_bytes)
                        if self.span is not None and self.dtype in ITEMSIZE
                        else None
                    ),
                )
            )
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": [self.rows, self.width],
            "dtype": self.dtype,
            "role": self.role,
            "physical": self.physical,
        }


def _column_loader(parent: HiddenTensor, lo: int, hi: int) -> Callable[[], torch.Tensor]:
    return lambda: parent.load()[:, lo:hi]


@dataclass
class Capture:
    """Named [T, H] tensors on one token axis, with ids/positions where known."""

    path: str
    format: str
    tensors: list[HiddenTensor]
    token_ids: npt.NDArray[np.int64] | None = None  # int64 [T]
    positions: npt.NDArray[np.int64] | None = None  # int64 [T]
    loss_mask: npt.NDArray[np.int64] | None = None  # int64 [T] (training files)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        if self.token_ids is not None:
            return len(self.token_ids)
        return max((t.rows for t in self.tensors), default=0)

    def names(self) -> list[str]:
        return [t.name for t in self.tensors]

    def get(self, name: str) -> HiddenTensor:
        from workbench.errors import InputError

        for t in self.tensors:
            if t.name == name:
                return t
        raise InputError(f"{self.path}: no tensor named {name!r} (have: {', '.join(self.names()) or 'none'})")

    def slots(self) -> list[HiddenTensor]:
        """The reference slots of a training capture: its SLOT tensors (packed ones split)."""
        return [t for t in self.tensors if t.role == SLOT]

    def candidates(self, width: int) -> Iterator[HiddenTensor]:
        """Every tensor of ``width`` columns; packed tensors of k*width columns split into k."""
        for t in self.tensors:
            if t.role == LOGITS:
                continue
            if t.width == width:
                yield t
            elif t.role in (PACKED, SLOT) and t.width % width == 0 and t.width > width:
                yield from t.split(t.width // width)

    def describe(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "rows": self.rows,
            "has_token_ids": self.token_ids is not None,
            "has_positions": self.positions is not None,
            "tensors": [t.describe() for t in self.tensors],
            "notes": list(self.notes),
            "meta": self.meta,
        }


def dtype_name(dtype: object) -> str:
    return str(dtype).replace("torch.", "")


def indexed_files(root: str | os.PathLike[str], pattern: str, name_re: re.Pattern[str], what: str) -> list[Path]:
    """The files matching ``name_re`` (its group 1 is the index) under ``root`` (a file or a folder),
    in index order; a clear error naming ``what`` when there are none."""
    from workbench.errors import InputError

    root = Path(root)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise InputError(f"{root}: no such file or folder")
    found = [p for p in root.rglob(pattern) if name_re.match(p.name)]
    found.sort(key=lambda p: (_index(name_re, p.name), p.name))
    if not found:
        raise InputError(f"{root}: no {what} files found")
    return found


def _index(name_re: re.Pattern[str], name: str) -> int:
    m = name_re.match(name)  # the caller kept only matching names
    return int(m.group(1)) if m else -1


def as_int_array(values: Any, where: str) -> npt.NDArray[np.int64]:
    """Token ids / positions as int64 numpy (from torch, numpy or lists); 1-D."""
    from workbench.errors import InputError

    if hasattr(values, "detach"):
        if values.is_floating_point() and values.element_size() < 4:
            # bf16 / fp16 hold integers exactly only up to 256 / 2048: such ids are already rounded
            raise InputError(
                f"{where}: token ids stored as {str(values.dtype).replace('torch.', '')} "
                "are not exact; expected an integer tensor"
            )
        try:
            values = values.detach().cpu().numpy()
        except (TypeError, RuntimeError):
            raise InputError(f"{where}: token ids stored as {values.dtype}; expected an integer tensor") from None
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"{where}: expected a 1-D list of integers (rows of unequal length or non-numbers)") from None
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise InputError(f"{where}: expected integers, got {_kind(arr)}")
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 1:
        raise InputError(f"{where}: expected a 1-D list of integers, got shape {list(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if (
            np.issubdtype(arr.dtype, np.floating)
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
            and float(np.abs(arr).max()) < 2.0**53
        ):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{where}: expected integers, got {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _kind(arr: np.ndarray) -> str:
    return {"U": "strings", "S": "bytes", "V": "raw bytes"}.get(arr.dtype.kind, "mixed values")


def short(path: str | os.PathLike[str]) -> str:
    p = Path(path)
    return p.name if p.name else str(p)
