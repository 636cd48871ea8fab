"""Draft checkpoints and target configs as read from disk (no weight data loaded)."""

from workbench.draftconfig.reader import (
    DraftCheckpoint,
    FieldProblem,
    TargetInfo,
    derived_context_length,
    load_json,
    read_draft,
    read_target,
    read_weights,
)
from workbench.draftconfig.safetensors_header import TensorInfo, read_header, read_tensor, write_safetensors

__all__ = [
    "DraftCheckpoint",
    "FieldProblem",
    "TargetInfo",
    "TensorInfo",
    "derived_context_length",
    "load_json",
    "read_draft",
    "read_header",
    "read_target",
    "read_tensor",
    "read_weights",
    "write_safetensors",
]
