"""SGLang ``return_hidden_states`` payloads (a saved ``/generate`` response, JSON).

``meta_info.hidden_states`` is a list: first a 2-D list for the prefill (extend) tokens, then one
entry per decode step (a row, or ``accept_len`` rows per verify step under speculative decoding).
Under EAGLE-3 aux capture (or ``--enable-return-aux-hidden-states``) each row is the packed aux
tensor ``[K*H]`` fed to the draft's fc, in ascending layer order; otherwise the last hidden state.

Accepted shapes of the JSON: a response object, a list of them (``sample`` picks one), or
``{"request": {...}, "response": {...}}``. Token ids come from ``input_ids`` (the request, or a
top-level key) followed by ``output_ids``; row r is the hidden state computed for token r.
Tokens served from the prefix cache have no prefill rows: pass ``offset`` (or flush the cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench import strictjson
from workbench.errors import InputError
from workbench.hidden.view import PACKED, Capture, HiddenTensor, as_int_array
from workbench.numbers import NON_NEGATIVE, integer

if TYPE_CHECKING:
    import os

    import torch


def _rows(entry: Any, where: str) -> np.ndarray:
    """One entry of ``hidden_states`` as float64 rows; ragged rows, strings or objects are refused."""
    try:
        arr = np.asarray(entry, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"{where}: expected rows of numbers of one width (got ragged rows or non-numbers)") from None
    if arr.ndim == 0:
        raise InputError(f"{where}: expected a row or a list of rows, got one number")
    return arr


def is_payload(path: str | os.PathLike[str]) -> bool:
    path = Path(path)
    if not path.is_file() or path.suffix.lower() != ".json":
        return False
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    return b"hidden_states" in head or b"meta_info" in head


def _response(doc: Any, path: Path, sample: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The response object (sample ``sample`` of a list) and the request saved beside it."""
    request: dict[str, Any] = {}
    if isinstance(doc, dict) and "response" in doc:
        request = doc.get("request") or {}
        if not isinstance(request, dict):
            raise InputError(f"{path}: request: expected an object, got {type(request).__name__}")
        doc = doc["response"]
    if isinstance(doc, list):
        if not doc:
            raise InputError(f"{path}: empty list of responses")
        if not 0 <= sample < len(doc):
            raise InputError(f"{path}: sample {sample} out of range (have {len(doc)} responses)")
        doc = doc[sample]
        if (
            isinstance(request.get("input_ids"), list)
            and request["input_ids"]
            and isinstance(request["input_ids"][0], list)
        ):
            request = {**request, "input_ids": request["input_ids"][sample]}
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a /generate response object")
    return doc, request


def _blocks(hs: list[Any], path: Path) -> list[np.ndarray]:
    """The rows of each ``hidden_states`` entry (prefill, then one per decode step), empty ones left out."""
    blocks: list[np.ndarray] = []
    for i, entry in enumerate(hs):
        arr = _rows(entry, f"{path}: meta_info.hidden_states[{i}]") if entry is not None else None
        if arr is None or arr.size == 0:
            continue
        if arr.ndim == 1:
            arr = arr[None, :]
        elif arr.ndim == 3 and arr.shape[0] == 1:
            arr = arr[0]
        if arr.ndim != 2:
            raise InputError(
                f"{path}: meta_info.hidden_states[{i}] has shape {list(arr.shape)}; expected rows of one width"
            )
        blocks.append(arr)
    return blocks


def _first_position(meta: dict[str, Any], prefill: int, offset: int | None, path: Path, notes: list[str]) -> int:
    """The position of the first row: ``offset``, or where a prefix cache left fewer prefill rows
    than prompt tokens, the cached tokens (said in ``notes``)."""
    prompt_tokens = meta.get("prompt_tokens")
    if prompt_tokens is not None:
        prompt_tokens = integer(prompt_tokens, f"{path}: meta_info.prompt_tokens", NON_NEGATIVE, allow_str=False)
    if offset is None and prompt_tokens is not None and prefill < prompt_tokens:
        cached = meta.get("cached_tokens")
        offset = (
            integer(cached, f"{path}: meta_info.cached_tokens", NON_NEGATIVE, allow_str=False)
            if cached
            else prompt_tokens - prefill
        )
        notes.append(
            f"prefill rows cover {prefill} of {prompt_tokens} prompt tokens "
            f"(prefix cache): rows start at position {offset}"
        )
    return int(offset or 0)


def read_payload(
    path: str | os.PathLike[str],
    *,
    sample: int = 0,
    offset: int | None = None,
    slot_points: Sequence[str] | None = None,
) -> Capture:
    path = Path(path)
    doc = strictjson.load_file(path, "response JSON")  # finite numbers, bounded nesting
    sample = integer(sample, "sample", NON_NEGATIVE)
    if offset is not None:
        offset = integer(offset, "offset", NON_NEGATIVE)
    doc, request = _response(doc, path, sample)
    meta = doc.get("meta_info") or {}
    if not isinstance(meta, dict):
        raise InputError(f"{path}: meta_info: expected an object, got {type(meta).__name__}")
    hs = meta.get("hidden_states", doc.get("hidden_states"))
    if not isinstance(hs, list) or not hs:
        raise InputError(f"{path}: no meta_info.hidden_states (was the request sent with return_hidden_states?)")

    blocks = _blocks(hs, path)
    if not blocks:
        raise InputError(f"{path}: meta_info.hidden_states holds no rows")
    widths = {b.shape[1] for b in blocks}
    if len(widths) != 1:
        raise InputError(f"{path}: meta_info.hidden_states rows have different widths {sorted(widths)}")
    with np.errstate(over="ignore"):  # a value beyond float32 is refused just below
        data = np.concatenate(blocks).astype(np.float32)  # values came from bf16/fp32: exact in fp32
    if not np.isfinite(data).all():
        raise InputError(f"{path}: meta_info.hidden_states holds values beyond the float32 range")
    rows, width = data.shape

    notes: list[str] = []
    start = _first_position(meta, int(blocks[0].shape[0]), offset, path, notes)
    ids = None
    inp = request.get("input_ids", doc.get("input_ids"))
    out = doc.get("output_ids", meta.get("output_ids"))
    if inp is not None:
        seq = list(as_int_array(inp, f"{path}:input_ids")) + (
            list(as_int_array(out, f"{path}:output_ids")) if out is not None else []
        )
        if start + rows > len(seq):
            raise InputError(
                f"{path}: {rows} hidden-state rows but only {len(seq) - start} tokens from position {start}"
            )
        ids = np.asarray(seq[start : start + rows], dtype=np.int64)
    positions = np.arange(rows, dtype=np.int64) + start

    def load() -> torch.Tensor:
        import torch

        return torch.from_numpy(data)

    t = HiddenTensor(
        "hidden_states",
        rows,
        width,
        "float32",
        PACKED,
        None,
        str(path),
        load,
        part_physical=list(slot_points) if slot_points else None,
    )
    return Capture(
        str(path),
        "sglang-payload",
        [t],
        token_ids=ids,
        positions=positions,
        notes=notes,
        meta={"prefill_rows": int(blocks[0].shape[0]), "decode_entries": len(blocks) - 1, "width": width},
    )
