"""The capture report: config ids -> what this engine captures -> what training used.

What a drafter was trained on is what the engine that *captured its training data* made of the ids.
``trained_readings`` returns every reading the evidence allows: one when the trained layers or the
capturing engine are given (provenance), else one per distinct capture among the SGLang releases a
SpecForge-format drafter may have been captured with (speculators-format: vLLM's capture indices).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from workbench.errors import InputError
from workbench.layers import CaptureResult, EngineRule, Point, default_ids, point_str, to_points
from workbench.results import Result

if TYPE_CHECKING:
    from workbench.draftconfig import DraftCheckpoint
    from workbench.provenance import Provenance


@dataclass
class Reading(Result):
    """One account of what the training data holds."""

    label: str  # "captured by sglang==0.5.14 (+1 only if the first id is 1)"
    points: list[Point] | None  # None: this capture path cannot produce training data for the ids
    basis: str  # "given" (--trained-layers), "provenance" (--trained-engine), "assumed"
    engines: list[str] = field(default_factory=list)
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "points": None if self.points is None else [str(p) for p in self.points],
            "basis": self.basis,
            "engines": self.engines,
            "problem": self.problem,
        }


@dataclass
class CaptureRow(Result):
    slot: int  # position in the concatenated aux vector
    config_id: int | None
    engine_index: int | None
    engine_point: str | None
    trained_point: str | None
    match: bool | None


@dataclass
class CaptureReport(Result):
    engine: str
    rule: str  # the source the rule was read from
    arch: str | None
    arch_family: str | None
    num_layers: int | None
    ids_source: str  # which config key the engine reads, or "default"
    config_ids: list[int] | None
    engine_indices: list[int]
    engine_points: list[str | None]
    trained_points: list[str] | None
    trained_source: str  # how the trained points are known (or which reading is shown)
    match: bool | None
    rows: list[CaptureRow]
    notes: list[str] = field(default_factory=list)
    fatal: str | None = None
    across_engines: dict[str, list[str | None]] = field(default_factory=dict)
    readings: list[dict[str, Any]] = field(default_factory=list)  # every reading of the training capture
    settled: bool = True  # False: the readings disagree and nothing given settles them

    def text(self) -> str:
        lines = [
            f"capture under {self.engine} ({self.arch or 'unknown target'}, "
            f"{self.num_layers if self.num_layers else '?'} layers), ids from {self.ids_source}"
        ]
        lines.append(
            f"  {'slot':>4}  {'config id':>9}  {'engine index':>12}  {'engine captures':<16}  {'trained on':<16}"
        )
        for r in self.rows:
            mark = "" if r.match is None else ("ok" if r.match else "MISMATCH")
            lines.append(
                f"  {r.slot:>4}  {_s(r.config_id):>9}  {_s(r.engine_index):>12}  "
                f"{_s(r.engine_point, 'missing'):<16}  {_s(r.trained_point):<16}  {mark}"
            )
        lines.append(f"  training: {self.trained_source}")
        if len(self.readings) > 1:
            for rd in self.readings:
                pts = "cannot capture them" if rd["points"] is None else ", ".join(rd["points"])
                lines.append(f"    reading: {rd['label']}: {pts}")
        if self.fatal:
            lines.append(f"  engine fails: {self.fatal}")
        return "\n".join(lines)


def _s(v: object, none: str = "-") -> str:
    return none if v is None else str(v)


def _trainer_ids(draft: DraftCheckpoint, num_layers: int) -> tuple[list[int], str]:
    """The ids a trainer hands its capture engine: SpecForge's eagle_config ids (or its default
    [1, N//2-1, N-4], resolve_eagle_capture_layers), speculators' top-level ids (default [2, N//2, N-3])."""
    if draft.layout == "speculators":
        ids = draft.top_level_layer_ids
        return (
            ids if ids is not None else [2, num_layers // 2, num_layers - 3]
        ), "top-level ids" if ids is not None else "speculators default ids"
    ids = draft.layer_ids
    return (
        ids if ids is not None else default_ids(num_layers)
    ), "eagle_config ids" if ids is not None else "SpecForge default ids"


def _through(rule: EngineRule, ids: list[int], n: int, label: str, basis: str) -> Reading:
    res = rule.capture(ids, n)
    if not res.complete:
        why = res.fatal or "; ".join(c.problem for c in res.by_id if c.problem) or "a state is missing"
        return Reading(label, None, basis, [rule.name], why)
    return Reading(label, list(res.captured), basis, [rule.name])


def trained_readings(
    draft: DraftCheckpoint,
    num_layers: int,
    arch: str | None,
    trained_layers: list[int] | None,
    trained_convention: str,
    provenance: Provenance | None = None,
) -> list[Reading]:
    from workbench.doctor.engines import engine_rule, sglang_releases, sglang_rule
    from workbench.layers import parse_version

    n = num_layers
    if trained_layers is not None:
        pts = to_points(trained_layers, trained_convention, n)
        return [Reading(f"given: {trained_layers} ({trained_convention})", pts, "given")]
    ids, where = _trainer_ids(draft, n)
    if provenance is not None and provenance.engine:
        rule = engine_rule(provenance.engine, arch)
        label = f"{provenance.how}; {where} {ids} through {rule.name}"
        return [_through(rule, list(ids), n, label, "provenance")]
    if draft.layout == "speculators":
        try:
            pts = to_points(ids, "capture-before", n)
        except InputError:
            return [
                Reading(
                    f"assumed: speculators ({where})", None, "assumed", [], f"ids {ids} are outside speculators' 0..{n}"
                )
            ]
        return [
            Reading(f"assumed: speculators read the {where} {ids} as vLLM capture indices", pts, "assumed", ["vllm"])
        ]
    # SpecForge format: each SGLang release that may have captured the data, grouped by what it yields
    groups: dict[tuple[str, ...], Reading] = {}
    impossible: list[Reading] = []
    for v in sglang_releases():
        rule = sglang_rule(parse_version(v), arch)
        if rule.plus_one == "unsupported":
            continue
        rd = _through(rule, list(ids), n, "", "assumed")
        if rd.points is None:
            impossible.append(rd)
            continue
        key = tuple(str(p.canonical(n)) for p in rd.points)
        if key in groups:
            groups[key].engines += rd.engines
        else:
            groups[key] = rd
    out: list[Reading] = []
    for rd in groups.values():
        rd.label = f"assumed: SpecForge captured the {where} {list(ids)} through {_span(rd.engines)}"
        out.append(rd)
    if not out:
        by_why: dict[str, list[str]] = {}
        for r in impossible:
            by_why.setdefault(r.problem or "a state is missing", []).extend(r.engines)
        why = "; ".join(f"{_span(e)}: {w}" for w, e in by_why.items())
        return [
            Reading(
                f"assumed: SpecForge captured the {where} {list(ids)} through SGLang",
                None,
                "assumed",
                [e for r in impossible for e in r.engines],
                why or "no SGLang release captures them",
            )
        ]
    return out


def _span(engines: list[str]) -> str:
    return engines[0] if len(engines) == 1 else f"{engines[0]} .. {engines[-1]} ({len(engines)} releases read)"


def build_report(
    rule: EngineRule,
    config: dict[str, Any],
    ids: Sequence[int] | None,
    ids_source: str,
    num_layers: int,
    arch: str | None,
    trained: list[Point] | None,
    trained_source: str,
    readings: list[Reading] | None = None,
    settled: bool = True,
) -> tuple[CaptureReport, CaptureResult]:
    from workbench.doctor.engines import engine_rule, known_engines

    res = rule.capture(ids, num_layers)
    engine_pts = res.points
    by_index = {c.index: c.id for c in res.by_id}
    captured_indices = sorted({cast(int, c.index) for c in res.by_id if c.point is not None})
    rows: list[CaptureRow] = []
    n = num_layers
    slots = max(len(engine_pts), len(trained or []))
    for k in range(slots):
        ep = engine_pts[k] if k < len(engine_pts) else None
        tp = trained[k] if trained is not None and k < len(trained) else None
        idx = captured_indices[k] if k < len(captured_indices) else None
        cid = by_index.get(idx) if idx is not None else None
        if idx is None:  # a state the engine never captures: show which id asked for it
            missing = [c for c in res.by_id if c.point is None]
            j = k - len(captured_indices)
            if 0 <= j < len(missing):
                cid, idx = missing[j].id, missing[j].index
        match = None
        shown = point_str(tp)
        if trained is not None and settled:
            match = ep is not None and tp is not None and ep.same_stream(tp, n)
        elif not settled and readings:
            alts: list[str] = []
            for rd in readings:
                if rd.points is not None and k < len(rd.points) and str(rd.points[k]) not in alts:
                    alts.append(str(rd.points[k]))
            shown = " | ".join(alts) or None
        rows.append(CaptureRow(k, cid, idx, point_str(ep), shown, match))
    match = None if trained is None or not settled else (all(r.match for r in rows) and res.fatal is None)
    across: dict[str, list[str | None]] = {}
    for eng in known_engines():
        other = engine_rule(eng, arch)
        o_ids, _ = other.ids_from_config(config)
        if o_ids is not None and not (
            isinstance(o_ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in o_ids)
        ):
            continue
        o_res = other.capture(o_ids, n)
        across[other.name] = [point_str(p) for p in o_res.points] if not o_res.fatal else [None] * len(o_res.points)
    report = CaptureReport(
        engine=rule.name,
        rule=rule.source,
        arch=arch,
        arch_family=rule.family,
        num_layers=n,
        ids_source=ids_source,
        config_ids=None if ids is None else list(ids),
        engine_indices=res.indices,
        engine_points=[point_str(p) for p in engine_pts],
        trained_points=None if trained is None else [str(p) for p in trained],
        trained_source=trained_source,
        match=match,
        rows=rows,
        notes=res.notes,
        fatal=res.fatal,
        across_engines=across,
        readings=[r.to_dict() for r in readings or []],
        settled=settled,
    )
    return report, res
