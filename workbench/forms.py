"""The Predictor's form read the same way in every face (the TUI screen, the notebook widget): text
fields to ``Workbench.predict``'s keyword arguments, with what does not read and what the
prediction does not use said apart.

- ``errors``: inputs the accept length needs that do not read (the rates, steps/topk/draft
  tokens): no prediction until they do, and what is shown is marked as the last valid one's.
- ``invalid``: an input of one part of the result that does not read (the observed accept length:
  the verdict; the timings: the throughput): the rest is predicted, that part says why it is not.
- ``ignored``: inputs this prediction does not use (top-k hit rates of a chain, timings without
  their pair): never an error, never a block, and said so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError
from workbench.parsing import optional, parse_float_rows, parse_floats, parse_pairs

#: The form's fields, in the order they are laid out.
PREDICT_FIELDS = (
    "convention",
    "rates",
    "topk_hits",
    "steps",
    "topk",
    "draft_tokens",
    "observed",
    "verify_ms",
    "draft_ms",
    "baseline_ms",
)

#: The part of a prediction each optional field feeds.
PARTS = {"observed": "verdict", "verify_ms": "throughput", "draft_ms": "throughput", "baseline_ms": "throughput"}

#: An input's name as errors spell it (the core's or the form's) -> the form's field.
_NAMES = {
    "acc": "rates",
    "conditional": "rates",
    "marginal": "rates",
    "alpha": "rates",
    "rates": "rates",
    "steps": "steps",
    "topk": "topk",
    "draft_tokens": "draft_tokens",
    "draft tokens": "draft_tokens",
    "topk_hits": "topk_hits",
    "top-k hits": "topk_hits",
    "observed accept length": "observed",
    "verify_ms": "verify_ms",
    "verify ms": "verify_ms",
    "draft_ms": "draft_ms",
    "draft ms": "draft_ms",
    "baseline_ms": "baseline_ms",
    "baseline ms": "baseline_ms",
}


@dataclass(frozen=True)
class FieldNote:
    field: str  # one of PREDICT_FIELDS
    message: str


@dataclass
class PredictForm:
    kwargs: dict[str, Any] = field(default_factory=dict)
    errors: list[FieldNote] = field(default_factory=list)
    invalid: dict[str, FieldNote] = field(default_factory=dict)  # part -> why it is not computed
    ignored: list[FieldNote] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def marked(self) -> dict[str, str]:
        """Field -> "error" or "ignored", for the faces to mark the inputs themselves."""
        out = {n.field: "ignored" for n in self.ignored}
        out.update({n.field: "error" for n in [*self.invalid.values(), *self.errors]})
        return out


def fields_of(message: str) -> list[str]:
    """The form's fields an error names at its start ("draft_tokens: ..." -> ["draft_tokens"];
    "steps/topk/draft_tokens: ..." -> all three)."""
    head = message.split(":", 1)[0].strip()
    if head in _NAMES:
        return [_NAMES[head]]
    parts = [p.strip() for p in head.split("/")]
    return [_NAMES[p] for p in parts if p in _NAMES] if all(p in _NAMES for p in parts) else []


def _int(text: str, name: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise InputError(f"{name}: {text.strip()!r} is not an integer") from None


def _float(text: str, name: str) -> float:
    from workbench.numbers import number

    try:
        return number(text.strip(), name)
    except InputError:
        raise InputError(f"{name}: {text.strip()!r} is not a number") from None


def read_predict_form(values: Mapping[str, Any]) -> PredictForm:
    """The form's text (numbers are taken as their text too) read into a ``PredictForm``."""
    f = {k: "" if values.get(k) is None else str(values.get(k)) for k in PREDICT_FIELDS}
    form = PredictForm()
    conv = f["convention"] or "acc"
    try:
        form.kwargs[conv] = parse_floats(f["rates"], conv)
    except InputError as exc:
        form.errors.append(FieldNote("rates", str(exc)))
    for name, label in (("steps", "steps"), ("topk", "topk"), ("draft_tokens", "draft tokens")):
        text = optional(f[name])
        try:
            form.kwargs[name] = _int(text, label) if text else None
        except InputError as exc:
            form.errors.append(FieldNote(name, str(exc)))
    topk = form.kwargs.get("topk")
    chain = topk == 1 or (topk is None and not any(form.kwargs.get(k) for k in ("steps", "draft_tokens")))
    if optional(f["topk_hits"]):
        if chain:  # a chain has one candidate per depth: the hit rates of ranks 2.. do not enter it
            form.ignored.append(FieldNote("topk_hits", "top-k hit rates: not used while topk is 1 (a chain)"))
        else:
            try:
                form.kwargs["topk_hits"] = parse_float_rows(f["topk_hits"], "top-k hits")
            except InputError as exc:
                form.errors.append(FieldNote("topk_hits", str(exc)))
    if optional(f["observed"]):
        try:
            form.kwargs["observed_accept_length"] = _float(f["observed"], "observed accept length")
        except InputError as exc:
            form.invalid["verdict"] = FieldNote("observed", f"{exc}; no verdict until it reads")
    _timings(f, form)
    return form


def _timings(f: dict[str, str], form: PredictForm) -> None:
    got: dict[str, Any] = {}
    for name, label in (("verify_ms", "verify ms"), ("draft_ms", "draft ms"), ("baseline_ms", "baseline ms")):
        if not optional(f[name]):
            continue
        try:
            got[name] = parse_pairs(f[name], label) if name == "verify_ms" else _float(f[name], label)
        except InputError as exc:
            form.invalid["throughput"] = FieldNote(name, f"{exc}; no throughput until it reads")
            return
    pair = [n for n in ("verify_ms", "draft_ms") if n in got]
    if len(pair) == 1:
        other = "draft step ms" if pair == ["verify_ms"] else "verify ms"
        form.ignored.append(FieldNote(pair[0], f"{pair[0].replace('_', ' ')}: not used until {other} is given too"))
        got.pop(pair[0])
    if "baseline_ms" in got and len(pair) < 2:
        form.ignored.append(FieldNote("baseline_ms", "baseline ms: not used without verify ms and draft step ms"))
        got.pop("baseline_ms")
    form.kwargs.update(got)
