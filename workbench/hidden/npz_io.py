"""Lazy, memory-mapped reading of ``.npz`` archives, one member at a time.

Stored (uncompressed) members are mapped in place; compressed ones are inflated only when that
member is loaded. numpy has no bfloat16: a 2-byte void dtype (``|V2``, what numpy writes for
ml_dtypes' bfloat16) is taken as raw bf16 bits and viewed as torch.bfloat16, bit-exact.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from workbench.errors import InputError
from workbench.hidden.mapping import map_range

if TYPE_CHECKING:
    import os

    import torch


@dataclass
class Member:
    name: str  # without ".npy"
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran: bool
    offset: int  # absolute offset of the array data when stored uncompressed, else -1


class NpzFile:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.members: dict[str, Member] = {}
        try:
            with zipfile.ZipFile(self.path) as zf:
                for info in zf.infolist():
                    if not info.filename.endswith(".npy"):
                        continue
                    with zf.open(info) as fh:
                        version = np.lib.format.read_magic(fh)
                        shape, fortran, dtype = _read_header(fh, version)
                        header_len = fh.tell()
                    offset = -1
                    if info.compress_type == zipfile.ZIP_STORED:
                        offset = self._data_offset(info) + header_len
                    self.members[info.filename[:-4]] = Member(
                        info.filename[:-4], dtype, tuple(shape), bool(fortran), offset
                    )
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error, SyntaxError) as exc:
            raise InputError(f"{self.path}: not a readable .npz archive ({exc})") from None

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        with open(self.path, "rb") as fh:
            fh.seek(info.header_offset)
            local = fh.read(30)
            if local[:4] != b"PK\x03\x04":
                raise InputError(f"{self.path}: corrupt zip entry {info.filename}")
            name_len = int.from_bytes(local[26:28], "little")
            extra_len = int.from_bytes(local[28:30], "little")
        return info.header_offset + 30 + name_len + extra_len

    def names(self) -> list[str]:
        return list(self.members)

    def load(self, name: str) -> torch.Tensor:
        """torch tensor of one member, memory-mapped when stored; bf16 bits preserved."""

        m = self.members.get(name)
        if m is None:
            raise InputError(f"{self.path}: no array {name!r}")
        arr: np.ndarray
        try:
            if m.offset >= 0 and not m.fortran and m.dtype.itemsize > 0:
                count = int(np.prod(m.shape, dtype=np.int64))
                buf = map_range(self.path, m.offset, m.offset + count * m.dtype.itemsize)
                arr = np.frombuffer(buf, dtype=m.dtype, count=count).reshape(m.shape)
            else:
                with zipfile.ZipFile(self.path) as zf, zf.open(name + ".npy") as fh:
                    arr = np.lib.format.read_array(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, MemoryError) as exc:
            raise InputError(f"{self.path}: array {name!r} is truncated or corrupt ({str(exc)[:100]})") from None
        return to_torch(arr, f"{self.path}:{name}")


def _read_header(fh: IO[bytes], version: tuple[int, int]) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fh)
    # 3.0: utf-8 header, same layout; numpy's stubs do not declare this private reader
    return np.lib.format._read_array_header(fh, version)  # type: ignore[attr-defined,no-any-return]


def to_torch(arr: np.ndarray, where: str) -> torch.Tensor:
    import torch

    if arr.dtype.kind == "V" and arr.dtype.itemsize == 2:
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
    if arr.dtype.name == "bfloat16":  # ml_dtypes
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
    if arr.dtype.kind not in "fiub":
        raise InputError(f"{where}: unsupported dtype {arr.dtype}")
    return torch.from_numpy(np.ascontiguousarray(arr))
