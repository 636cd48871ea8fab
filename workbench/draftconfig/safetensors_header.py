"""Read a safetensors file's header by hand (8-byte little-endian length + JSON), and small
tensors on demand, without loading the weights or importing torch."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from workbench.errors import InputError
from workbench.results import Result

DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
MAX_HEADER = 100 * 1024 * 1024   # safetensors itself refuses larger headers
SMALL_TENSOR_LIMIT = 64 * 1024 * 1024


@dataclass
class TensorInfo(Result):
    name: str
    dtype: str
    shape: list[int]
    file: str            # file name inside the checkpoint directory
    offset: int          # absolute byte offset of the data in that file
    nbytes: int


def read_header(path: "str | Path") -> tuple[dict[str, TensorInfo], dict]:
    """Tensor infos and ``__metadata__`` of one safetensors file; InputError naming the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise InputError(f"{path}: corrupt safetensors header (file has {size} bytes, "
                                 "expected an 8-byte length)")
            (n,) = struct.unpack("<Q", head)
            if n == 0 or n > MAX_HEADER or n > size - 8:
                raise InputError(f"{path}: corrupt safetensors header (declared header length {n}, "
                                 f"file has {size} bytes)")
            raw = fh.read(n)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: corrupt safetensors header (not JSON: {exc})") from None
    if not isinstance(header, dict):
        raise InputError(f"{path}: corrupt safetensors header (expected a JSON object)")
    data_start = 8 + n
    data_len = size - data_start
    meta = header.pop("__metadata__", {}) or {}
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        where = f"{path}: tensor {name!r}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: corrupt header entry (expected an object)")
        dtype, shape, offs = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if dtype not in DTYPE_BYTES:
            raise InputError(f"{where}: unknown dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise InputError(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)
                and 0 <= offs[0] <= offs[1] <= data_len):
            raise InputError(f"{where}: data_offsets {offs!r} outside the {data_len}-byte data section")
        count = 1
        for d in shape:
            count *= d
        if offs[1] - offs[0] != count * DTYPE_BYTES[dtype]:
            raise InputError(f"{where}: {offs[1] - offs[0]} bytes for shape {shape} {dtype} "
                             f"(expected {count * DTYPE_BYTES[dtype]})")
        out[name] = TensorInfo(name, dtype, list(shape), path.name, data_start + offs[0], offs[1] - offs[0])
    return out, meta if isinstance(meta, dict) else {}


def read_tensor(directory: "str | Path", info: TensorInfo, *, limit: int = SMALL_TENSOR_LIMIT):
    """A numpy array for one (small) tensor; BF16 widened to float32, F8 refused."""
    import numpy as np

    if info.nbytes > limit:
        raise InputError(f"{info.file}: tensor {info.name!r} has {info.nbytes} bytes; "
                         f"only tensors up to {limit} bytes are read")
    np_types = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
                "F16": np.float16, "I32": np.int32, "U32": np.uint32, "F32": np.float32,
                "I64": np.int64, "U64": np.uint64, "F64": np.float64}
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


def write_safetensors(path: "str | Path", tensors: dict, metadata: Optional[dict] = None) -> None:
    """Write numpy arrays as a safetensors file (sample checkpoints and tests; no torch needed)."""
    import numpy as np

    names = {np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8",
             np.dtype(np.int16): "I16", np.dtype(np.float16): "F16", np.dtype(np.int32): "I32",
             np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.float64): "F64"}
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, pos = [], 0
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
