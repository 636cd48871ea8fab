"""Read a safetensors file's header by hand (8-byte little-endian length + JSON), and small
tensors on demand, without loading the weights or importing torch."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench import strictjson
from workbench.errors import InputError
from workbench.results import Result

if TYPE_CHECKING:
    import numpy.typing as npt

DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
MAX_HEADER = 100 * 1024 * 1024  # safetensors itself refuses larger headers
SMALL_TENSOR_LIMIT = 64 * 1024 * 1024


@dataclass
class TensorInfo(Result):
    name: str
    dtype: str
    shape: list[int]
    file: str  # file name inside the checkpoint directory
    offset: int  # absolute byte offset of the data in that file
    nbytes: int


MAX_DIMS = 16  # tensors have a few dimensions; a longer shape is a corrupt header


def read_header(path: str | Path) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """Tensor infos and ``__metadata__`` of one safetensors file; InputError naming the file.

    Everything the header says is checked before it is used: standard JSON, known dtypes, shapes
    of non-negative integers, offsets inside the data section that match the shape, metadata an
    object of strings (as the safetensors format defines it)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise InputError(
                    f"{path}: corrupt safetensors header (file has {size} bytes, expected an 8-byte length)"
                )
            (n,) = struct.unpack("<Q", head)
            if n == 0 or n > MAX_HEADER or n > size - 8:
                raise InputError(
                    f"{path}: corrupt safetensors header (declared header length {n}, file has {size} bytes)"
                )
            raw = fh.read(n)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        header = strictjson.loads(raw, "header")
    except InputError as exc:
        raise InputError(f"{path}: corrupt safetensors header (not JSON: {exc})") from None
    if not isinstance(header, dict):
        raise InputError(f"{path}: corrupt safetensors header (expected a JSON object)")
    data_start = 8 + n
    data_len = size - data_start
    meta = header.pop("__metadata__", None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise InputError(
            f"{path}: __metadata__: expected an object of strings, got {type(meta).__name__}"
            + ("" if not isinstance(meta, dict) else " values")
        )
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        out[name] = _entry(path, name, entry, data_start, data_len)
    return out, meta


def _shown(v: object) -> str:
    """A header value in an error line: as JSON, so a string's newline is shown escaped, cut short."""
    return json.dumps(v)[:60]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _entry(path: Path, name: str, entry: object, data_start: int, data_len: int) -> TensorInfo:
    where = f"{path}: tensor {name[:80]!r}"
    if not isinstance(entry, dict):
        raise InputError(f"{where}: corrupt header entry (expected an object)")
    dtype, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise InputError(f"{where}: unknown dtype {str(dtype)[:20]!r} (expected one of {', '.join(DTYPE_BYTES)})")
    if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(_is_int(d) and d >= 0 for d in shape)):
        raise InputError(
            f"{where}: shape must be a list of at most {MAX_DIMS} non-negative integers, got {_shown(shape)}"
        )
    if not (
        isinstance(offs, list)
        and len(offs) == 2
        and all(_is_int(o) for o in offs)
        and 0 <= offs[0] <= offs[1] <= data_len
    ):
        raise InputError(
            f"{where}: truncated or malformed: data_offsets {_shown(offs)} outside the {data_len}-byte data section"
        )
    count = 0 if 0 in shape else 1
    for d in shape if count else ():
        count *= d
        if count > data_len:  # it cannot fit: no need to multiply a huge product out
            break
    expected = count * DTYPE_BYTES[dtype]
    if offs[1] - offs[0] != expected:
        raise InputError(
            f"{where}: truncated or malformed: {offs[1] - offs[0]} bytes for shape {shape} {dtype} "
            f"(expected {expected if count <= data_len else 'more than the file holds'})"
        )
    return TensorInfo(name, dtype, list(shape), path.name, data_start + offs[0], offs[1] - offs[0])


def read_tensor(directory: str | Path, info: TensorInfo, *, limit: int = SMALL_TENSOR_LIMIT) -> npt.NDArray[Any]:
    """A numpy array for one (small) tensor; BF16 widened to float32, F8 refused."""
    import numpy as np

    if info.nbytes > limit:
        raise InputError(
            f"{info.file}: tensor {info.name!r} has {info.nbytes} bytes; only tensors up to {limit} bytes are read"
        )
    np_types = {
        "BOOL": np.bool_,
        "U8": np.uint8,
        "I8": np.int8,
        "I16": np.int16,
        "U16": np.uint16,
        "F16": np.float16,
        "I32": np.int32,
        "U32": np.uint32,
        "F32": np.float32,
        "I64": np.int64,
        "U64": np.uint64,
        "F64": np.float64,
    }
    path = Path(directory) / info.file
    try:
        with open(path, "rb") as fh:
            fh.seek(info.offset)
            raw = fh.read(info.nbytes)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) != info.nbytes:
        raise InputError(f"{path}: tensor {info.name!r} is truncated")
    if info.dtype == "BF16":
        arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    elif info.dtype in np_types:
        arr = np.frombuffer(raw, dtype=np.dtype(np_types[info.dtype]).newbyteorder("<"))
    else:
        raise InputError(f"{path}: tensor {info.name!r} has dtype {info.dtype}, which is not read")
    return arr.reshape(info.shape)


def write_safetensors(path: str | Path, tensors: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
    """Write numpy arrays as a safetensors file (sample checkpoints and tests; no torch needed)."""
    import numpy as np

    names = {
        np.dtype(np.bool_): "BOOL",
        np.dtype(np.uint8): "U8",
        np.dtype(np.int8): "I8",
        np.dtype(np.int16): "I16",
        np.dtype(np.float16): "F16",
        np.dtype(np.int32): "I32",
        np.dtype(np.float32): "F32",
        np.dtype(np.int64): "I64",
        np.dtype(np.float64): "F64",
    }
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs: list[bytes] = []
    pos = 0
    for name in sorted(tensors):
        value = tensors[name]
        if isinstance(value, tuple) and value[0] == "BF16":  # ("BF16", float32 array)
            arr = np.ascontiguousarray(value[1], dtype=np.float32)
            raw = (arr.view(np.uint32) >> 16).astype("<u2").tobytes()
            dtype, shape = "BF16", list(arr.shape)
        else:
            arr = np.ascontiguousarray(value)
            dtype, shape = names[arr.dtype], list(arr.shape)
            raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for raw in blobs:
            fh.write(raw)
    os.replace(tmp, path)
