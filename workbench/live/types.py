"""The live report's parts as small frozen records (torch-free).

Each record's JSON form is the dict the report has always written, key for key and in the same order:
a field named in ``absent`` is a key the dict leaves out (not a null), so a saved report or journal
entry read back with ``from_dict`` writes the same JSON again.

The live loop's working dicts (what the doctor reads from the server and the host, the jobs it sends,
the before/after sides) are ``TypedDict``s below: plain dicts at run time, so what is journaled and
written is the same JSON, and their keys are checked by mypy."""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import (
    Any,
    ClassVar,
    NotRequired,
    Required,
    TypeAlias,
    TypedDict,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from workbench.errors import InputError
from workbench.results import jsonable

R = TypeVar("R", bound="Record")
_OWN = frozenset({"absent", "extra"})  # the record's bookkeeping, not keys of its JSON form


@dataclass(frozen=True)
class Record:
    """Base of the report's parts. ``OPTIONAL``: fields a producer may leave out of the JSON form; left
    as None they are left out unless ``absent`` is given (then exactly the fields it names are)."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    absent: frozenset[str] | None = field(default=None, kw_only=True, repr=False)
    # keys of another version: whatever a newer or older report wrote, kept as it was
    extra: dict[str, Any] | None = field(default=None, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if self.absent is None:
            object.__setattr__(self, "absent", frozenset(n for n in self.OPTIONAL if getattr(self, n) is None))

    def keys(self) -> list[str]:
        """The keys of the JSON form, in order."""
        gone = self.absent or frozenset()
        return [f.name for f in dataclasses.fields(self) if f.name not in _OWN and f.name not in gone]

    def to_dict(self) -> dict[str, Any]:  # the JSON form of any record (each its own keys)
        return {**{k: jsonable(getattr(self, k)) for k in self.keys()}, **jsonable(self.extra or {})}

    @classmethod
    def from_dict(cls: type[R], d: Mapping[str, Any] | None, *, check: bool = True, where: str = "") -> R:
        """The record back from its JSON form: a missing key stays missing, an unknown one (a report
        of another version) is kept and written back after the known ones. ``check``: every known
        value has its field's type (numbers finite), else an InputError names the field (``where``:
        the record's place in what is read; its class name by default)."""
        where = where or cls.__name__.lower()
        d = d or {}
        if not isinstance(d, dict):
            raise InputError(f"{where}: expected an object, got {type(d).__name__}")
        names = [f.name for f in dataclasses.fields(cls) if f.name not in _OWN]
        hints = get_type_hints(cls)
        if check:
            for k in names:
                if k in d:
                    _check(f"{where}.{k}", d[k], hints[k])
        extra = {k: v for k, v in d.items() if k not in names}
        values = {k: _nested(f"{where}.{k}", d[k], hints[k], check) for k in names if k in d}
        return cls(**values, absent=frozenset(k for k in names if k not in d), extra=extra or None)


@dataclass(frozen=True)
class Spec(Record):
    """The speculative settings the server resolved (from /server_info)."""

    algorithm: str | None = None
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None


@dataclass(frozen=True)
class Target(Record):
    """The target model the server loaded; ``context_length`` is unknown when its config cannot be read."""

    OPTIONAL = frozenset({"context_length"})
    path: str | None = None
    arch: str | None = None
    num_layers: int | None = None
    context_length: int | None = None


@dataclass(frozen=True)
class Draft(Record):
    """The draft the server loaded: its config, the ids it captures, and whether the file changed since."""

    path: str | None = None
    config: str | None = None
    location: str | None = None
    ids: list[int] | None = None
    loaded_sha256: str | None = None
    current_sha256: str | None = None
    changed_since_launch: bool = False


@dataclass(frozen=True)
class Observed(Record):
    """The server's accept length and where it came from; ``per_request`` (the protocol's per-request
    mean, stdev, min, max) only when measured now; ``counters`` and ``per_position`` (P(the first k+1
    drafts accepted)) where the engine counts them (vLLM)."""

    OPTIONAL = frozenset({"per_request", "counters", "per_position"})
    accept_length: float | None = None
    tokens_per_s: float | None = None
    # as the protocol and the engine give them (each engine names its own counters); a record's fields
    # stay plain JSON types, which ``from_dict`` checks
    per_request: dict[str, Any] | None = None
    source: str | None = None
    counters: dict[str, Any] | None = None
    per_position: list[float] | None = None


@dataclass(frozen=True)
class Predicted(Record):
    """The accept length the drafter should reach; ``acc`` and ``samples`` as the source gives them;
    ``full_acc``: the drafter's chain rates on training data (steps 0..k right: what an engine's
    per-position acceptance measures)."""

    OPTIONAL = frozenset({"acc", "samples", "full_acc"})
    accept_length: float | None = None
    acc: list[float] | None = None
    source: str | None = None
    samples: int | None = None
    full_acc: list[float] | None = None


@dataclass(frozen=True)
class Features(Record):
    """The drafter on the server's features against the training features; every key only when known."""

    OPTIONAL = frozenset({"verdict", "train_accept_length", "live_accept_length", "samples", "explains"})
    verdict: str | None = None
    train_accept_length: float | None = None
    live_accept_length: float | None = None
    samples: int | None = None
    explains: float | None = None


@dataclass(frozen=True)
class Alignment(Record):
    """The numeric alignment of the training slots with the server's capture (``mode``: payload|dump).
    ``best``: one entry per training slot (slot, candidate, physical, value, verdict)."""

    mode: str = ""
    rows: list[str] | None = None
    rows_physical: list[str | None] | None = None
    cols: list[str] | None = None
    cols_physical: list[str | None] | None = None
    matrix: list[list[float | None]] | None = None
    best: list[AlignedSlot] = field(default_factory=list)
    tokens_compared: int | None = None
    recommendation: LayerRecommendation | None = None
    device: str | None = None
    precision: str | None = None
    notes: list[str] | None = None
    thresholds: dict[str, float] | None = None
    samples: list[Any] | None = None
    tensor_bytes: int | None = None


@dataclass(frozen=True)
class AlignedSlot(Record):
    """One training slot's best match among the server's hidden states (the JSON form of
    ``workbench.hidden.results.SlotBest``, as the host's alignment job answers it)."""

    slot: str | None = None
    slot_physical: str | None = None
    candidate: str | None = None
    physical: str | None = None
    value: float | None = None
    runner_up: str | None = None
    runner_up_physical: str | None = None
    runner_up_value: float | None = None
    margin: float | None = None  # runner-up over best (None: infinite, or no runner-up)
    token_margin: float | None = None
    win_rate: float | None = None
    verdict: str | None = None
    reason: str | None = None
    exact: bool | None = None
    cosine: float | None = None
    max_abs: float | None = None
    mean_abs: float | None = None
    median_token: float | None = None
    p95_token: float | None = None

    @property
    def point(self) -> str | None:
        """Where the slot's best match sits in the server's residual stream (its name if unknown)."""
        return self.physical or self.candidate


@dataclass(frozen=True)
class LayerRecommendation(Record):
    """The layer ids that make the server capture what the drafter was trained on (the JSON form of
    ``workbench.hidden.results.Recommendation``)."""

    engine: str | None = None
    arch: str | None = None
    num_layers: int | None = None
    points: list[str | None] | None = None
    layer_ids: list[int] | None = None
    key: str | None = None
    confident: bool | None = None
    current_ids: list[Any] | None = None
    current_points: list[str | None] | None = None
    differs: bool | None = None
    reason: str | None = None
    rule: str | None = None


_NAMES = {str: "a string", bool: "true or false"}


def _record_type(tp: Any) -> type[Record] | None:
    """The Record class ``tp`` is, Optional or not (None: not a record)."""
    if get_origin(tp) is Union or get_origin(tp) is types.UnionType:
        inner = [a for a in get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else None
    return tp if isinstance(tp, type) and issubclass(tp, Record) else None


def _nested(where: str, value: Any, tp: Any, check: bool) -> Any:
    """A field's value from JSON: a nested record (or a list of them) made from its dict."""
    rec = _record_type(tp)
    if rec is not None:
        return None if value is None else rec.from_dict(value, check=check, where=where)
    if get_origin(tp) is list and isinstance(value, list):
        (item,) = get_args(tp)
        rec = _record_type(item)
        if rec is not None:
            return [
                rec.from_dict(v, check=check, where=f"{where}[{i}]") if isinstance(v, dict) or check else v
                for i, v in enumerate(value)
            ]
    return value


def _check(where: str, value: Any, tp: Any) -> None:
    """``value`` (from JSON) has type ``tp``: Optional, float (finite; an int will do), int, str, bool,
    list[X], dict[str, X] or Any."""
    if tp is Any:
        return
    if _record_type(tp) is not None and not (value is None and _record_type(tp) is not tp):
        if not isinstance(value, dict):
            raise InputError(f"{where}: expected an object, got {value!r:.60}")
        return  # its own fields are checked by its from_dict
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return
        (inner,) = [a for a in args if a is not type(None)]
        _check(where, value, inner)
    elif origin is list:
        if not isinstance(value, list):
            raise InputError(f"{where}: expected a list, got {value!r:.60}")
        for i, v in enumerate(value):
            _check(f"{where}[{i}]", v, args[0])
    elif origin is dict:
        if not isinstance(value, dict):
            raise InputError(f"{where}: expected an object, got {value!r:.60}")
        for k, v in value.items():
            _check(f"{where}.{k}", v, args[1])
    elif tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"{where}: expected a finite number, got {value!r:.60}")
    elif tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: expected an integer, got {value!r:.60}")
    elif not isinstance(value, tp):
        raise InputError(f"{where}: expected {_NAMES.get(tp, tp.__name__)}, got {value!r:.60}")


# ------------------------------------------------------------------ the live loop's working dicts
# The capture rules shipped to a host job (``workbench.remote.engine.shipment``): tables keyed by release
# and class name, open-ended by nature.
Rules: TypeAlias = dict[str, Any]


class ServerFacts(TypedDict):
    """What a server runs, normalised by its engine's client (``EngineClient.facts``) and completed
    from the launch command; None where unknown."""

    version: str | None
    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    model: str | None
    draft: str | None
    context_length: int | None
    return_hidden_states: bool
    avg_spec_accept_length: float | None


class TargetFacts(TypedDict, total=False):
    """The target the server loaded, from its ``config.json`` on the host (only path, arch and
    num_layers, all None but the path, when that cannot be read)."""

    path: Required[str | None]
    arch: Required[str | None]
    archs: list[str]
    num_layers: Required[int | None]
    context_length: int | None


class DraftFacts(TypedDict):
    """The draft the server loaded: the config bytes recorded at launch (else the file as it is now)
    and what the serving release reads from it (``ids``, ``ids_key``: set once the release is known)."""

    path: str
    config: str
    location: str
    loaded: dict[str, Any] | None  # the draft's config.json as loaded: any keys its trainer wrote
    loaded_text: str | None
    ids: list[int] | None
    ids_key: NotRequired[str | None]
    loaded_sha256: str | None
    current_sha256: str | None
    changed_since_launch: bool


class FeatureFacts(TypedDict, total=False):
    """What becomes ``Features``: each key only once known."""

    verdict: str
    train_accept_length: float | None
    live_accept_length: float | None
    samples: int | None
    explains: float


# the jobs the doctor sends to the host (``workbench.remote.jobs``: the keywords of each job)
class StaticJob(TypedDict):
    draft: str
    config_text: str | None
    target_config: str | None
    engine: str
    algorithm: str | None
    context_length: int | None
    env: dict[str, str]
    cuda_graph: bool
    rules: Rules


class EngineCaptureJob(TypedDict):
    engine: str
    archs: list[str]
    num_layers: int
    ids: list[int] | None
    cuda_graph: bool
    rules: Rules


class HiddenStatesJob(TypedDict):
    """The ``live`` job: training samples through the server (``url``, ``mode`` and the mode's keys
    added when it is sent)."""

    training_data: str
    count: int
    part_points: list[str | None] | None
    engine: str
    rules: Rules
    arch: str | None
    num_layers: int | None
    draft_config: dict[str, Any] | None  # DraftFacts.loaded
    draft_config_path: str
    draft: str | None
    target: str | None
    steps: int | None
    eval_samples: int
    url: NotRequired[str]
    mode: NotRequired[str]
    dump_dir: NotRequired[str]
    extract_ids: NotRequired[list[int]]
    extract_points: NotRequired[list[str | None]]


class DrafterJob(TypedDict):
    draft: str | None
    target: str | None
    training_data: str
    steps: int | None
    samples: int


# what the host's jobs answer (``workbench.remote.jobs``), as JSON: every key read with care
class DrafterSummary(TypedDict, total=False):
    """One drafter evaluation (``jobs.summary``)."""

    samples: int
    positions: int
    acc: list[float]
    full_acc: list[float]
    cond_acc: list[float]
    accept_length: float | None
    from_acc: float | None
    steps: int
    notes: list[str]


class Evaluations(TypedDict, total=False):
    """The drafter on the training features (``train``), on the server's (``live``), and on more
    training samples (``headline``)."""

    steps: int
    notes: list[str]
    train: DrafterSummary
    live: DrafterSummary
    headline: DrafterSummary


class HiddenStatesAnswer(TypedDict, total=False):
    """The ``live`` job's answer: the alignment (its JSON form, read into ``Alignment``, plus the
    findings it names), the samples sent and the evaluations made on the way."""

    align: dict[str, Any]  # ``workbench.hidden``'s result JSON: read by Alignment.from_dict and .get
    samples: list[str]
    tensor_bytes: int
    evals: Evaluations


# before and after a fix (``workbench.live.fix``)
class ComparisonSide(TypedDict):
    """One server's side: what it measured and which config version it loaded."""

    server: int
    profile: str
    state: str
    accept_length: float | None
    tokens_per_s: float | None
    measurement: int | None
    layer_ids: list[int] | None
    config_sha256: str | None
    config_version: int | None


class ComparisonRow(TypedDict):
    name: str
    before: Any  # a number, a list of ids or a label: the quantity's own
    after: Any
    change: str | None
