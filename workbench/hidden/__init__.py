"""Hidden states: readers for every capture format, one view, and the alignment engine.

    from workbench.hidden import open_capture
    train = open_capture("rows_0-2000/data_17.ckpt")          # SpecForge: 3 SLOT tensors aux[0..2]
    infer = open_capture("dump/", format="sglang-tensor-dump")  # every residual-stream point

Formats: ``specforge``, ``speculators``, ``sglang-payload``, ``sglang-tensor-dump``,
``sglang-dumper``, ``stack`` (safetensors/npz layer stacks, HF ``hidden_states``). Importing this
package does not import torch; loading a tensor does.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from workbench.errors import InputError
from workbench.hidden.view import FINAL, LAYER, LOGITS, PACKED, SLOT, Capture, HiddenTensor

FORMATS = ("specforge", "speculators", "sglang-payload", "sglang-tensor-dump", "sglang-dumper", "stack")

__all__ = [
    "FINAL",
    "FORMATS",
    "LAYER",
    "LOGITS",
    "PACKED",
    "SLOT",
    "Capture",
    "HiddenTensor",
    "detect_format",
    "open_capture",
]


def detect_format(path: str | os.PathLike[str]) -> str:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or folder")
    fmt = _folder_format(p) if p.is_dir() else _file_format(p)
    if fmt is not None:
        return fmt
    if p.is_dir():
        raise InputError(f"{p}: no known capture files in this folder")
    raise InputError(
        f"{p}: unknown capture format (expected .ckpt[.gz], .safetensors, .npz, .json, "
        "a DUMPER step=*.pt or a tensor-dump folder)"
    )


def _folder_format(p: Path) -> str | None:
    from workbench.hidden import sglang_dump, specforge, speculators

    if sglang_dump.is_pass_dump(p):
        return "sglang-tensor-dump"
    if sglang_dump.is_dumper(p):
        return "sglang-dumper"
    if specforge.is_specforge(p):
        return "specforge"
    if speculators.is_speculators(p):
        return "speculators"
    return None


def _file_format(p: Path) -> str | None:
    from workbench.hidden import sglang_dump, specforge, speculators

    name = p.name
    if specforge.FILE_RE.match(name):
        return "specforge"
    if speculators.FILE_RE.match(name):
        return "speculators"
    if name.endswith(".json"):
        return "sglang-payload"
    if sglang_dump.is_dumper(p):
        return "sglang-dumper"
    if name.endswith(".safetensors"):
        return _safetensors_format(p)
    if name.endswith(".npz"):
        return "stack"
    if name.endswith((".ckpt", ".pt", ".ckpt.gz", ".pt.gz")):
        return "specforge"
    return None


def _safetensors_format(p: Path) -> str:
    """A speculators sample (token ids and a [tokens, layers, width] stack of the same tokens), or
    a layer stack."""
    from workbench.hidden.st_io import SafetensorsFile

    ents = SafetensorsFile(p).entries
    if (
        "token_ids" in ents
        and "hidden_states" in ents
        and len(ents["hidden_states"].shape) == 3
        and ents["token_ids"].shape
        and ents["hidden_states"].shape[0] == ents["token_ids"].shape[0]
    ):
        return "speculators"
    return "stack"


def open_capture(
    path: str | os.PathLike[str], *, format: str | None = None, sample: int | None = None, **hints: Any
) -> Capture:
    """Open any supported capture as a Capture (lazy: tensors are read by ``load()``).

    ``hints`` go to the format's reader: ``layer_ids``, ``slots``, ``vocab_size`` (specforge);
    ``layer_ids``, ``num_layers`` (speculators); ``offset``, ``slot_points`` (payload);
    ``side``, ``tp_rank``, ``everything`` (tensor dump); ``rank`` (dumper).
    """
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise InputError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    hints = {k: v for k, v in hints.items() if v is not None}
    if fmt == "specforge":
        from workbench.hidden.specforge import read_specforge

        return read_specforge(path, sample=sample, **_only(hints, "slots", "layer_ids", "vocab_size"))
    if fmt == "speculators":
        from workbench.hidden.speculators import read_speculators

        return read_speculators(path, sample=sample, **_only(hints, "layer_ids", "num_layers", "include_last_layer"))
    if fmt == "sglang-payload":
        from workbench.hidden.sglang_payload import read_payload

        return read_payload(path, sample=sample or 0, **_only(hints, "offset", "slot_points"))
    if fmt == "sglang-tensor-dump":
        from workbench.hidden.sglang_dump import read_pass_dump

        return read_pass_dump(path, **_only(hints, "side", "tp_rank", "everything"))
    if fmt == "sglang-dumper":
        from workbench.hidden.sglang_dump import read_dumper

        return read_dumper(path, **_only(hints, "rank", "everything"))
    from workbench.hidden.stack import read_stack

    return read_stack(path, **_only(hints, "hf_num_layers"))


def _only(hints: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: hints[k] for k in keys if k in hints}
