"""The typed capture rule of one engine release for one target class, and what it captures.

One rule type for SGLang and vLLM. A ``CaptureRule`` is what the extractor read in that release's
code; every field the code did not settle is ``"unknown"`` (never a guess), and ``evidence`` names
file:line for each.

Fields (their JSON spelling is the same):

- ``id_map``       how the release turns the draft config's ids into the capture loop's indices:
                   ``plus-one`` (``[i + 1 for i in ids]``), ``plus-one-if-first-is-1``,
                   ``as-is-if-max-is-n`` (else plus-one), ``as-is`` (vLLM: the ids are the indices),
                   ``unsupported`` (no capture hook), ``unknown``;
- ``default``      the indices when no ids are given, as expressions of N (``["2", "N//2", "N-3"]``);
- ``membership``   ``index`` (``i in layers_to_capture``), ``layer-attr`` (a flag ``setattr`` on
                   ``self.layers[idx]``: a negative index marks layer ``idx + N``) or ``never`` (the
                   forward tests a flag the hook never sets: no state fires);
- ``startup``      ``index-error`` when the hook indexes ``self.layers[idx]`` (an index >= N fails at start-up);
- ``index0``       what index 0 captures: ``embed`` (a guarded residual or an input stage that handles
                   the first layer's missing residual), ``type-error`` (``hidden_states + None``);
- ``boundary``     what index N captures: ``final-prenorm``, ``final-postnorm``, ``none`` (never fires);
- ``missing``      a state that never fires: ``dropped`` (the concatenation is narrower) or ``fatal``
                   (``AuxHiddenStatePacker.finalize`` raises at the first forward);
- ``graph_reset``  the CUDA-graph runner sets the defaults before capturing (decode graphs then capture
                   the defaults); ``config_before_graphs`` whether the config ids are applied before the
                   graphs are initialised (then they are overwritten too);
- ``config_ids``   ``read`` (the runner reads ids from the draft config by ``id_source``, in that order),
                   ``ignored`` (the runner asks the model for its defaults) or ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.errors import InputError
from workbench.results import Result

ID_MAPS = ("plus-one", "plus-one-if-first-is-1", "as-is-if-max-is-n", "as-is", "unsupported", "unknown")
UNKNOWN = "unknown"
MISSING = "missing"
_TYPE_ERROR = "index 0 adds a None residual at layer 0 (TypeError at the first forward)"
_EXPR = re.compile(r"^(?:(-?\d+)|N|N//(\d+)|N-(\d+)|N\+(\d+))$")
_FIELDS = (
    "engine",
    "version",
    "arch",
    "file",
    "id_map",
    "membership",
    "startup",
    "index0",
    "boundary",
    "missing",
    "graph_reset",
    "config_before_graphs",
    "config_ids",
    "delegate",
)


@dataclass(frozen=True)
class Evidence(Result):
    """One line of engine source that settles (or fails to settle) a part of a rule."""

    what: str  # the rule part, e.g. "id_map", "index0", "graph_reset"
    file: str  # relative to the installation, e.g. "sglang/srt/models/llama.py"
    line: int
    text: str  # the source line (stripped), or what was not recognised

    def __str__(self) -> str:
        return f"{self.what}: {self.file}:{self.line}: {self.text}"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evidence:
        return cls(str(d["what"]), str(d["file"]), int(d["line"]), str(d["text"]))


@dataclass(frozen=True)
class CaptureRule(Result):
    engine: str  # "sglang" | "vllm"
    version: str  # "0.5.23"
    arch: str  # the model class (HF ``architectures`` entry)
    file: str  # the model file the class lives in
    id_map: str = UNKNOWN
    default: tuple[str, ...] | None = None  # expressions of N; None = unknown
    membership: str = UNKNOWN
    startup: str = "none"
    index0: str = UNKNOWN
    boundary: str = UNKNOWN
    missing: str = UNKNOWN
    graph_reset: bool | None = None
    config_before_graphs: bool | None = None
    id_source: tuple[str, ...] = ()  # the draft-config keys the runner reads ids from, in order
    config_ids: str = "read"
    delegate: str | None = None  # a wrapper's inner class (Kimi-K2.5 -> DeepseekV3ForCausalLM)
    evidence: tuple[Evidence, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.engine}=={self.version}"

    @property
    def supported(self) -> bool:
        return self.id_map != "unsupported"

    @property
    def unknowns(self) -> list[str]:
        out = [k for k in ("id_map", "membership", "index0", "boundary", "missing") if getattr(self, k) == UNKNOWN]
        if self.default is None and self.supported:
            out.append("default")
        if self.graph_reset is None:
            out.append("graph_reset")
        if self.config_ids == UNKNOWN:
            out.append("config_ids")
        return out

    def where(self, what: str) -> list[str]:
        """file:line: text of every piece of evidence for one rule part."""
        return [f"{e.file}:{e.line}: {e.text}" for e in self.evidence if e.what == what]

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in _FIELDS}
        d["default"] = list(self.default) if self.default is not None else None
        d["id_source"] = list(self.id_source)
        d["evidence"] = [e.to_dict() for e in self.evidence]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CaptureRule:
        # a field the table does not write takes the dataclass default; None stays None only where it means "unknown"
        kw: dict[str, Any] = {k: d[k] for k in _FIELDS if d.get(k) is not None}
        for k in ("graph_reset", "config_before_graphs", "delegate"):
            kw[k] = d.get(k)
        kw["default"] = tuple(d["default"]) if d.get("default") is not None else None
        kw["id_source"] = tuple(d.get("id_source") or ())
        kw["evidence"] = tuple(Evidence.from_dict(e) for e in d.get("evidence") or ())
        return cls(**kw)

    def with_evidence(self, *ev: Evidence) -> CaptureRule:
        return replace(self, evidence=tuple(self.evidence) + tuple(ev))

    # -- what the rule does with ids ---------------------------------------------------------------
    def default_indices(self, num_layers: int) -> list[int] | None:
        if self.default is None:
            return None
        return [eval_expr(e, num_layers) for e in self.default]

    def indices_for(self, ids: Sequence[int] | None, num_layers: int) -> list[int] | None:
        """The capture loop's indices (SGLang's ``layers_to_capture``); None when the rule does not say."""
        if ids is None or self.config_ids == "ignored":
            return self.default_indices(num_layers)
        ids = list(ids)
        m = self.id_map
        if m == "plus-one":
            return [i + 1 for i in ids]
        if m == "plus-one-if-first-is-1":
            return [i + 1 for i in ids] if ids and ids[0] == 1 else ids
        if m == "as-is-if-max-is-n":
            return ids if ids and max(ids) == num_layers else [i + 1 for i in ids]
        if m == "as-is":
            return ids
        return None


def eval_expr(expr: str, n: int) -> int:
    m = _EXPR.match(str(expr).replace(" ", ""))
    if not m:
        raise InputError(f"rule default {expr!r}: not an expression of N like 2, N//2 or N-3")
    if m.group(1) is not None:
        return int(m.group(1))
    if m.group(2):
        return n // int(m.group(2))
    if m.group(3):
        return n - int(m.group(3))
    if m.group(4):
        return n + int(m.group(4))
    return n


@dataclass
class IdCapture(Result):
    """One config id: the capture loop's index and what it yields (``point`` None: nothing)."""

    id: int | None  # None when the engine's defaults apply
    index: int | None
    point: str | None
    problem: str | None = None


@dataclass
class EngineCapture(Result):
    """What an engine release captures for a target and config ids. ``points`` in concatenation
    order, spelled ``embed``/``out(K)``/``final-prenorm``/``final-postnorm``, then ``missing`` for
    each state that never fires and ``unknown`` for each the code did not settle;
    ``cuda_graph_points``: what CUDA-graph decode captures (None when graphs are off or not settled)."""

    engine: str  # "sglang==0.5.23"
    arch: str | None
    num_layers: int
    ids: list[int] | None
    indices: list[int] | None
    points: list[str]
    fatal: str | None
    cuda_graph_points: list[str] | None
    evidence: list[str]
    source: str  # where the rule was read: "table" | "wheel" | "installed" | "host" | "shipped"
    notes: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # rule parts the code did not settle
    cuda_graph: bool = True
    by_id: list[IdCapture] = field(default_factory=list)  # in config order
    ids_ignored: bool = False  # the release reads no ids from the draft config

    @property
    def graph_differs(self) -> bool:
        return self.cuda_graph_points is not None and self.cuda_graph_points != self.points

    @property
    def captured(self) -> list[str]:
        return [p for p in self.points if p not in (MISSING, UNKNOWN)]

    @property
    def complete(self) -> bool:
        return self.fatal is None and all(p not in (MISSING, UNKNOWN) for p in self.points)

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": list(self.points),
            "fatal": self.fatal,
            "cuda_graph_points": self.cuda_graph_points,
            "evidence": list(self.evidence),
            "source": self.source,
            "engine": self.engine,
            "arch": self.arch,
            "num_layers": self.num_layers,
            "ids": self.ids,
            "indices": self.indices,
            "notes": list(self.notes),
            "unknown": list(self.unknown),
            "cuda_graph": self.cuda_graph,
            "by_id": [c.to_dict() for c in self.by_id],
            "ids_ignored": self.ids_ignored,
        }


def _point_of(rule: CaptureRule, idx: int, n: int) -> tuple[str | None, str | None]:
    """(point, problem) for one loop index."""
    if rule.membership == "never":
        return None, "the forward tests a per-layer flag this release's hook never sets: never fires"
    if rule.membership == "layer-attr" and -n <= idx < 0:
        idx += n
    if idx == 0:
        if rule.index0 == "embed":
            return "embed", None
        if rule.index0 == "type-error":
            return None, "type-error"
        return None, UNKNOWN
    if 1 <= idx <= n - 1:
        return f"out({idx - 1})", None
    if idx == n:
        if rule.boundary in ("final-prenorm", "final-postnorm"):
            return rule.boundary, None
        if rule.boundary == "none":
            return None, f"index {idx} (the final boundary) is outside the capture loop 0..{n - 1}: never fires"
        return None, UNKNOWN
    return None, f"index {idx} is outside the capture loop 0..{n - 1}: never fires"


def apply(
    rule: CaptureRule, ids: Sequence[int] | None, num_layers: int, *, cuda_graph: bool = True, source: str = "table"
) -> EngineCapture:
    """Run a rule: the points for ``ids`` (None: the config has none), CUDA-graph decode included."""
    n = num_layers
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"num_layers: expected a positive integer, got {num_layers!r}")
    if ids is not None:
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool):
                raise InputError(f"layer id: expected an integer, got {i!r}")
    name = rule.name
    evidence = [str(e) for e in rule.evidence]
    notes: list[str] = []
    ignored = rule.config_ids == "ignored" and ids is not None
    if ignored:
        notes.append(
            f"{name} reads no layer ids from the draft config (its runner asks the model for its "
            f"defaults): the config's {list(ids or [])} are ignored"
        )
    eager_ids = None if ignored else ids
    points, fatal, indices, by_id = _eager(rule, eager_ids, n, notes)
    graph_points = None
    if cuda_graph and rule.supported:
        if rule.graph_reset is None:
            notes.append(
                "CUDA-graph decode: the release's graph runner was not recognised; what decode "
                "graphs capture is unknown (settle it with a tensor dump taken with CUDA graphs on)"
            )
        elif rule.graph_reset:
            gp, gfatal, _, _ = _eager(rule, None, n, [])
            graph_points = gp
            if eager_ids is not None:
                notes.append(
                    f"{name}: the CUDA-graph runner sets the default layers before capturing, so decode "
                    f"graphs capture the defaults {gp}; the config's ids reach only the eager paths "
                    "(prefill, graphs off)"
                )
                if rule.config_before_graphs:
                    points, fatal = gp, gfatal
                    notes.append(
                        "the config ids are applied before the graphs are initialised and then "
                        "overwritten: the eager paths capture the defaults too"
                    )
        else:
            graph_points = list(points)
    if not rule.supported:
        fatal = f"{name}: {rule.arch} has no EAGLE-3 capture hook (no aux hidden states on this target)"
    elif fatal is None and UNKNOWN in points:
        notes.append("some states depend on code the extractor did not recognise (see evidence)")
    if ids is not None and not ignored:
        by_id = [IdCapture(i, c.index, c.point, c.problem) for i, c in zip(ids, by_id)]
    return EngineCapture(
        name,
        rule.arch,
        n,
        list(ids) if ids is not None else None,
        indices,
        points,
        fatal,
        graph_points,
        evidence,
        source,
        notes,
        rule.unknowns,
        cuda_graph,
        by_id,
        ignored,
    )


def _eager(
    rule: CaptureRule, ids: Sequence[int] | None, n: int, notes: list[str]
) -> tuple[list[str], str | None, list[int] | None, list[IdCapture]]:
    if not rule.supported:
        return [], None, None, []
    indices = rule.indices_for(ids, n)
    if indices is None:
        notes.append(f"{rule.name}: how {rule.arch} maps ids to indices is unknown (see evidence)")
        k = len(ids) if ids is not None else 3
        return [UNKNOWN] * k, None, None, [IdCapture(None, None, None, UNKNOWN) for _ in range(k)]
    by_id: list[IdCapture] = []
    if rule.startup == "index-error":
        bad = [i for i in indices if not -n <= i < n]
        if bad:
            failed = f"IndexError at start-up: the capture hook indexes self.layers[{bad[0]}] of a {n}-layer model"
            by_id = [IdCapture(None, i, None, "start-up IndexError" if i in bad else None) for i in indices]
            return [MISSING] * len(indices), failed, indices, by_id
    fatal: str | None = None
    yields = []
    for idx in indices:
        p, prob = _point_of(rule, idx, n)
        eff = idx + n if (rule.membership == "layer-attr" and -n <= idx < 0) else idx
        yields.append((eff, p, prob))
        by_id.append(IdCapture(None, idx, p, _TYPE_ERROR if prob == "type-error" else prob))
        if prob == "type-error" and fatal is None:
            fatal = (
                "TypeError at the first forward: capture index 0 computes hidden_states + residual "
                "with residual None at layer 0"
            )
        elif prob and prob != UNKNOWN:
            notes.append(prob)
    # loop order (ascending index), each index once; states that never fire are missing
    seen: set[int] = set()
    captured: list[tuple[int, str]] = []
    missing = 0
    unknown = 0
    for eff, p, prob in yields:
        if prob == UNKNOWN:
            unknown += 1
        elif p is None:
            missing += 1
        elif eff in seen:
            missing += 1
            notes.append(f"index {eff} appears twice: captured once")
        else:
            seen.add(eff)
            captured.append((eff, p))
    if indices != sorted(indices):
        notes.append(f"ids not ascending: {rule.name} concatenates in layer order")
    captured.sort(key=lambda t: t[0])
    points = [p for _, p in captured] + [MISSING] * missing + [UNKNOWN] * unknown
    if missing and fatal is None:
        if rule.missing == "fatal":
            fatal = (
                f"fails at the first forward: captured {len(captured)} of {len(indices)} aux hidden "
                "states (AuxHiddenStatePacker.finalize)"
            )
        elif rule.missing == UNKNOWN:
            notes.append(f"{missing} state(s) never fire; whether that is fatal is unknown (see evidence)")
        else:
            notes.append(
                f"{missing} of {len(indices)} states never fire: the concatenation is "
                f"{len(captured)}*H wide and the drafter's fc input no longer fits"
            )
    return points, fatal, indices, by_id


def ids_for(rule: CaptureRule, points: Sequence[str], num_layers: int, *, cuda_graph: bool = False) -> list[int] | None:
    """Config ids that make this release capture ``points`` in that order (``final-prenorm`` and
    ``out(N-1)`` are one stream); None when no ids do (or the release reads none)."""
    from workbench.layers import Point, from_points

    n = num_layers
    if not rule.supported or rule.config_ids != "read":
        return None
    want = [Point.parse(p).canonical(n) for p in points]
    candidates: list[list[int]] = []
    for conv in ("output-of-layer", "capture-before"):
        try:
            cand = from_points(want, conv, n)
        except InputError:
            continue
        candidates.append(cand)
        if len(cand) > 1:  # a rotation can dodge a first-id heuristic
            candidates.append(cand[1:] + cand[:1])
    for cand in candidates:
        res = apply(rule, cand, n, cuda_graph=cuda_graph)
        if res.complete and [Point.parse(p).canonical(n) for p in res.points] == want:
            return cand
    return None
