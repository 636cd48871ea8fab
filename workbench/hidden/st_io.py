"""Memory-mapped reading of safetensors files, one tensor at a time.

The format is an 8-byte little-endian header length, a JSON header
(``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``) and the raw
bytes. Each ``load`` maps only the pages of one tensor (private copy-on-write mapping) and the
mapping goes away with the tensor, so streaming through a large file keeps resident memory flat.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.hidden.mapping import map_range

if TYPE_CHECKING:
    import torch

DTYPES = {
    "BF16": "bfloat16",
    "F16": "float16",
    "F32": "float32",
    "F64": "float64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
    "U16": "uint16",
    "U32": "uint32",
    "U64": "uint64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E8M0": "float8_e8m0fnu",
}
ITEMSIZE = {
    "BF16": 2,
    "F16": 2,
    "F32": 4,
    "F64": 8,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}
FP8 = ("F8_E4M3", "F8_E5M2", "F8_E8M0")  # stored scaled: a reader applies the file's scales, never the raw codes


@dataclass
class Entry:
    name: str
    dtype: str  # safetensors code, e.g. "BF16"
    shape: tuple[int, ...]
    begin: int  # absolute file offset
    end: int

    @property
    def torch_dtype_name(self) -> str:
        return DTYPES.get(self.dtype, self.dtype.lower())


class SafetensorsFile:
    """Header of one safetensors file; ``load(name)`` maps that tensor only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from workbench.draftconfig.safetensors_header import read_header

        self.path = Path(path)
        infos, self.metadata = read_header(self.path)  # every header field validated there
        self.entries: dict[str, Entry] = {
            name: Entry(name, i.dtype, tuple(i.shape), i.offset, i.offset + i.nbytes) for name, i in infos.items()
        }

    def names(self) -> list[str]:
        return list(self.entries)

    def load(self, name: str, rows: slice | None = None, fp8: bool = False) -> torch.Tensor:
        """Zero-copy torch view of one tensor (optionally a range of its first dimension). FP8
        tensors are refused unless ``fp8`` (a reader that applies their scales) asks for the codes."""
        import torch

        ent = self.entries.get(name)
        if ent is None:
            raise InputError(f"{self.path}: no tensor {name!r}")
        if ent.dtype in FP8 and not fp8:
            raise InputError(
                f"{self.path}: tensor {name!r} is {ent.dtype} (scaled FP8); this reader does not know its scales"
            )
        dtype = getattr(torch, ent.torch_dtype_name, None)
        if not isinstance(dtype, torch.dtype):
            raise InputError(f"{self.path}: tensor {name!r} has dtype {ent.dtype}, which this torch cannot read")
        shape = list(ent.shape)
        begin, end = ent.begin, ent.end
        if rows is not None and shape:
            row_bytes = (end - begin) // max(shape[0], 1)
            lo, hi, _ = rows.indices(shape[0])
            begin, end = begin + lo * row_bytes, begin + hi * row_bytes
            shape[0] = hi - lo
        nbytes = end - begin
        if nbytes == 0:
            return torch.empty(shape, dtype=dtype)
        flat = torch.frombuffer(map_range(self.path, begin, end), dtype=torch.uint8, count=nbytes)
        return flat.view(dtype).view(shape)


def write_safetensors(
    path: str | os.PathLike[str], tensors: dict[str, torch.Tensor], metadata: dict[str, Any] | None = None
) -> None:
    """Atomic write (temp + rename) through the safetensors package."""
    from safetensors.torch import save_file

    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    save_file(
        {k: v.contiguous() for k, v in tensors.items()},
        str(tmp),
        metadata={k: str(v) for k, v in (metadata or {}).items()},
    )
    os.replace(tmp, path)


CODES = {v: k for k, v in DTYPES.items()}


def write_streaming(
    path: str | os.PathLike[str],
    specs: Sequence[tuple[str, str, Sequence[int]]],
    tensors: Iterable[torch.Tensor],
    metadata: dict[str, Any] | None = None,
) -> int:
    """Write a safetensors file one tensor at a time: ``specs`` is ``[(name, dtype_name, shape)]``
    and ``tensors`` yields the tensors in that order (each may be dropped once written). Atomic
    (temp file + rename); returns the number of data bytes."""
    path = Path(path)
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    off = 0
    for name, dtype, shape in specs:
        code = CODES[dtype]
        n = ITEMSIZE[code]
        for s in shape:
            n *= s
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    written = 0
    with open(tmp, "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little"))
        fh.write(raw)
        for (name, dtype, shape), t in zip(specs, tensors):
            if tuple(t.shape) != tuple(shape) or str(t.dtype).replace("torch.", "") != dtype:
                raise InputError(f"{path}: {name}: got {t.dtype}{list(t.shape)}, declared {dtype}{list(shape)}")
            buf = t.contiguous().view(-1).view(__import__("torch").uint8).numpy()
            fh.write(buf.data)  # the array's memoryview (numpy types ndarray as a Buffer only on 3.12+)
            written += buf.nbytes
    if written != off:
        tmp.unlink(missing_ok=True)
        raise InputError(f"{path}: wrote {written} of {off} bytes (fewer tensors than declared)")
    os.replace(tmp, path)
    return written
