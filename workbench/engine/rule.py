"""The typed capture rule of one SGLang release for one architecture, and what it captures.

A ``CaptureRule`` is what ``workbench.engine.extract`` read in that release's code; every field that
the code did not settle is ``"unknown"`` (never a guess), and ``evidence`` names file:line for each.

Fields (their JSON spelling is the same):

- ``id_map``       how ``set_eagle3_layers_to_capture(ids)`` turns config ids into the engine's internal
                   capture-before indices: ``plus-one`` (``[i + 1 for i in ids]``), ``plus-one-if-first-is-1``,
                   ``as-is-if-max-is-n`` (else plus-one), ``as-is``, ``unsupported`` (no hook), ``unknown``;
- ``default``      the indices when no ids are given, as expressions of N (``["2", "N//2", "N-3"]``);
- ``membership``   ``index`` (``i in layers_to_capture``) or ``layer-attr`` (a flag ``setattr`` on
                   ``self.layers[idx]``: a negative index marks layer ``idx + N``);
- ``startup``      ``index-error`` when the hook indexes ``self.layers[idx]`` (an index >= N fails at start-up);
- ``index0``       what index 0 captures: ``embed`` (guarded ``residual is not None`` or an in-layer capture
                   that handles the first layer's missing residual), ``type-error`` (``hidden_states + None``);
- ``boundary``     what index N captures: ``final-prenorm``, ``final-postnorm``, ``none`` (never fires);
- ``missing``      a state that never fires: ``dropped`` (the concatenation is narrower) or ``fatal``
                   (``AuxHiddenStatePacker.finalize`` raises at the first forward);
- ``graph_reset``  the CUDA-graph runner calls ``set_eagle3_layers_to_capture()`` with no argument before
                   capturing (decode graphs then capture the defaults); ``config_before_graphs`` whether the
                   config ids are applied before ``init_device_graphs`` (then they are overwritten too).
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
_EXPR = re.compile(r"^(?:(-?\d+)|N|N//(\d+)|N-(\d+)|N\+(\d+))$")


@dataclass(frozen=True)
class Evidence(Result):
    """One line of engine source that settles (or fails to settle) a part of a rule."""

    what: str  # the rule part, e.g. "id_map", "index0", "graph_reset"
    file: str  # relative to the installation, e.g. "sglang/srt/models/llama.py"
    line: int
    text: str  # the source line (stripped), or what was not recognised

    def __str__(self) -> str:
        return f"{self.what}: {self.file}:{self.line}: {self.text}"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evidence:
        return cls(str(d["what"]), str(d["file"]), int(d["line"]), str(d["text"]))


@dataclass(frozen=True)
class CaptureRule(Result):
    engine: str  # "sglang"
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
    id_source: tuple[str, ...] = ()
    delegate: str | None = None  # a wrapper's inner class (Kimi-K2.5 -> DeepseekV3ForCausalLM)
    evidence: tuple[Evidence, ...] = ()

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
        return out

    def to_dict(self) -> dict[str, Any]:
        d = {
            k: getattr(self, k)
            for k in (
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
                "delegate",
            )
        }
        d["default"] = list(self.default) if self.default is not None else None
        d["id_source"] = list(self.id_source)
        d["evidence"] = [e.to_dict() for e in self.evidence]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CaptureRule:
        kw: dict[str, Any]
        kw = {
            k: d.get(k)
            for k in (
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
                "delegate",
            )
        }
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
        """The engine's ``layers_to_capture``; None when the rule does not say."""
        if ids is None:
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
class EngineCapture(Result):
    """What an engine captures for a target and config ids. ``points`` in concatenation order,
    spelled ``embed``/``out(K)``/``final-prenorm``/``final-postnorm``/``missing``; ``cuda_graph_points``:
    what CUDA-graph decode captures (None when graphs are off or the rule does not say)."""

    engine: str
    arch: str | None
    num_layers: int
    ids: list[int] | None
    indices: list[int] | None
    points: list[str]
    fatal: str | None
    cuda_graph_points: list[str] | None
    evidence: list[str]
    source: str  # "host" | "table" | "wheel"
    notes: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # rule parts the code did not settle
    cuda_graph: bool = True

    @property
    def graph_differs(self) -> bool:
        return self.cuda_graph_points is not None and self.cuda_graph_points != self.points

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
        }


def _point_of(rule: CaptureRule, idx: int, n: int) -> tuple[str | None, str | None]:
    """(point, problem) for one internal index."""
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
            return None, f"index {idx} is outside the capture loop 0..{n - 1}: never fires"
        return None, UNKNOWN
    return None, f"index {idx} is outside the capture loop 0..{n - 1}: never fires"


def apply(
    rule: CaptureRule, ids: Sequence[int] | None, num_layers: int, *, cuda_graph: bool = True, source: str = "table"
) -> EngineCapture:
    """Run a rule: the points for ``ids`` (None: the config has none), CUDA-graph decode included."""
    n = int(num_layers)
    if n < 1:
        raise InputError(f"num_layers: expected a positive integer, got {num_layers!r}")
    if ids is not None:
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool):
                raise InputError(f"layer id: expected an integer, got {i!r}")
    name = f"{rule.engine}=={rule.version}"
    evidence = [str(e) for e in rule.evidence]
    notes: list[str] = []
    unknown = rule.unknowns
    points, fatal, indices = _eager(rule, ids, n, notes)
    graph_points = None
    if cuda_graph and rule.supported:
        if rule.graph_reset is None:
            notes.append(
                "CUDA-graph decode: the release's graph runner was not recognised; what decode "
                "graphs capture is unknown (settle it with a tensor dump taken with CUDA graphs on)"
            )
        elif rule.graph_reset:
            gp, gfatal, _ = _eager(rule, None, n, [])
            graph_points = gp
            if ids is not None:
                notes.append(
                    f"{name}: the CUDA-graph runner calls set_eagle3_layers_to_capture() with no ids "
                    f"before capturing, so decode graphs capture the defaults {gp}; the config's ids "
                    "reach only the eager paths (prefill, --disable-cuda-graph)"
                )
                if rule.config_before_graphs:
                    points, fatal = gp, gfatal
                    notes.append(
                        "the config ids are applied before the graphs are initialised and then "
                        "overwritten: the eager paths capture the defaults too"
                    )
        else:
            graph_points = list(points)
    if rule.id_map == "unsupported":
        fatal = f"{name}: {rule.arch} has no set_eagle3_layers_to_capture (no EAGLE-3 capture on this target)"
    elif fatal is None and points and any(p == UNKNOWN for p in points):
        notes.append("some states depend on code the extractor did not recognise (see evidence)")
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
        unknown,
        cuda_graph,
    )


def _eager(
    rule: CaptureRule, ids: Sequence[int] | None, n: int, notes: list[str]
) -> tuple[list[str], str | None, list[int] | None]:
    name = f"{rule.engine}=={rule.version}"
    if not rule.supported:
        return [], None, None
    indices = rule.indices_for(ids, n)
    if indices is None:
        notes.append(f"{name}: how {rule.arch} maps ids to indices is unknown (see evidence)")
        return [UNKNOWN] * (len(ids) if ids is not None else 3), None, None
    fatal = None
    if rule.startup == "index-error":
        bad = [i for i in indices if not -n <= i < n]
        if bad:
            fatal = (
                f"IndexError at start-up: set_eagle3_layers_to_capture indexes self.layers[{bad[0]}] "
                f"of a {n}-layer model"
            )
            return ["missing"] * len(indices), fatal, indices
    yields = []
    for idx in indices:
        p, prob = _point_of(rule, idx, n)
        eff = idx + n if (rule.membership == "layer-attr" and -n <= idx < 0) else idx
        yields.append((eff, p, prob))
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
    captured.sort(key=lambda t: t[0])
    points = [p for _, p in captured] + ["missing"] * missing + [UNKNOWN] * unknown
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
    return points, fatal, indices
