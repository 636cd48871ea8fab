"""How much context a drafter knows: its config's ``max_position_embeddings`` and the length of the
sequences it was trained on, read from its training data where that is at hand.

A drafter trained on short sequences and served on long contexts attends over more of its own
cache, at relative distances it never saw: acceptance can fall past its trained length while its
``max_position_embeddings`` (often copied from the target's) says nothing of it.

    facts = draft_context(draft_config, training_data="/data/rows", trained_length=None)
    facts.trained_length, facts.trained_from, facts.max_position_embeddings

Training data: SpecForge's offline rows (``data_{i}.ckpt``: the length of ``input_ids`` less trailing
padding) or speculators' (``hs_{i}.safetensors``: the length of ``token_ids``, from the header); a
sample of at most ``SAMPLE`` files, the longest row taken (a trainer packs or cuts to its maximum).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError
from workbench.numbers import Range, integer
from workbench.results import Result

SAMPLE = 64  # training files read for their lengths (evenly spread over the folder)
LENGTH = Range(1, 1 << 24)


@dataclass
class DraftContext(Result):
    """What is known of a drafter's context: ``None`` where it is not known."""

    max_position_embeddings: int | None = None
    trained_length: int | None = None
    trained_from: str = ""  # "training data <path> (<n> rows sampled)", "given", ""
    rows_sampled: int = 0
    notes: list[Any] = field(default_factory=list)


def draft_context(
    config: dict[str, Any] | None,
    *,
    training_data: str | os.PathLike[str] | None = None,
    trained_length: int | None = None,
) -> DraftContext:
    """The facts from the draft's ``config.json`` (a dict, None where unread), the training data and
    a length the user gives (which wins over the data)."""
    out = DraftContext()
    if config is not None:
        mpe = config.get("max_position_embeddings")
        if isinstance(mpe, int) and not isinstance(mpe, bool) and mpe > 0:
            out.max_position_embeddings = mpe
    if trained_length is not None:
        out.trained_length = integer(trained_length, "trained_length", LENGTH)
        out.trained_from = "given"
        return out
    if training_data is not None:
        try:
            n, rows = trained_length_of(training_data)
        except InputError as exc:
            out.notes.append(f"trained length not read: {exc}")
        else:
            out.trained_length, out.rows_sampled = n, rows
            out.trained_from = f"training data {training_data} (longest of {rows} rows sampled)"
    if out.trained_length is None and not out.notes:
        out.notes.append("trained length unknown: give the training data or the length the drafter was trained on")
    return out


def trained_length_of(path: str | os.PathLike[str]) -> tuple[int, int]:
    """(the longest row, rows read) of a SpecForge or speculators training data folder."""
    from workbench.hidden import specforge, speculators

    if specforge.is_specforge(path):
        files = _spread(specforge.sample_files(path))
        lengths = [_specforge_length(f) for f in files]
    elif speculators.is_speculators(path):
        files = _spread(speculators.sample_files(path))
        lengths = [_speculators_length(f) for f in files]
    else:
        raise InputError(f"{path}: neither SpecForge (data_*.ckpt) nor speculators (hs_*.safetensors) training data")
    return max(lengths), len(lengths)


def _spread(files: list[Any]) -> list[Any]:
    if len(files) <= SAMPLE:
        return files
    step = len(files) / SAMPLE
    return [files[int(i * step)] for i in range(SAMPLE)]


def _specforge_length(f: Any) -> int:
    import torch

    from workbench.hidden.pt_io import load_pt
    from workbench.hidden.specforge import _trailing_pad
    from workbench.hidden.view import as_int_array

    raw = load_pt(f)  # memory-mapped: the hidden states are not read
    if not isinstance(raw, dict) or not isinstance(raw.get("input_ids"), torch.Tensor):
        raise InputError(f"{f}: no input_ids tensor")
    ids = as_int_array(raw["input_ids"], f"{f}:input_ids")
    mask = raw.get("loss_mask")
    pad = _trailing_pad(ids, as_int_array(mask, f"{f}:loss_mask")) if isinstance(mask, torch.Tensor) else 0
    return int(len(ids) - pad)


def _speculators_length(f: Any) -> int:
    from workbench.hidden.st_io import SafetensorsFile

    st = SafetensorsFile(f)
    ent = st.entries.get("token_ids")
    if ent is None or not ent.shape:
        raise InputError(f"{f}: no token_ids")
    return int(ent.shape[0])
