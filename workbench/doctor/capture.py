"""The capture report: config ids -> what this engine release captures -> what training used.

What a drafter was trained on is what the engine that *captured its training data* made of the ids.
``trained_readings`` returns every reading the evidence allows: one when the trained layers or the
capturing engine are given (provenance), else one per distinct capture among the SGLang releases read
that a SpecForge-format drafter may have been captured with (speculators-format: vLLM's capture indices).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from workbench.engine import EngineCapture, Release, apply
from workbench.errors import InputError
from workbench.layers import Point, default_ids, to_points
from workbench.results import Result

if TYPE_CHECKING:
    from workbench.draftconfig import DraftCheckpoint
    from workbench.provenance import Provenance


@dataclass
class Reading(Result):
    """One account of what the training data holds."""

    label: str  # "captured by sglang==0.5.14"
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
    rule: str  # where the rule was read (file:line of the id mapping) and from what (table, wheel, ...)
    arch: str | None  # the class the release serves for the target
    num_layers: int | None
    ids_source: str  # which config key the release reads, or "default"
    config_ids: list[int] | None
    engine_indices: list[int] | None
    engine_points: list[str | None]
    trained_points: list[str] | None
    trained_source: str  # how the trained points are known (or which reading is shown)
    match: bool | None
    rows: list[CaptureRow]
    notes: list[str] = field(default_factory=list)
    fatal: str | None = None
    across_engines: dict[str, list[str | None]] = field(default_factory=dict)  # span of releases -> points
    across_releases: dict[str, list[str]] = field(default_factory=dict)  # span -> every release in it
    readings: list[dict[str, Any]] = field(default_factory=list)  # every reading of the training capture
    settled: bool = True  # False: the readings disagree and nothing given settles them
    source: str = "table"  # where the release's code was read: table | wheel | installed | shipped
    cuda_graph_points: list[str] | None = None

    def captured_by(self, release: str) -> list[str | None] | None:
        """What ``release`` (``vllm==0.33.0``) captures for the config's ids, from the spans read."""
        for label, names in self.across_releases.items():
            if release in names:
                return self.across_engines[label]
        return None

    def text(self) -> str:
        lines = [
            f"capture under {self.engine} ({self.arch or 'unknown target'}, "
            f"{self.num_layers if self.num_layers else '?'} layers), ids from {self.ids_source} "
            f"[read from: {self.source}]"
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
        if self.cuda_graph_points is not None and self.cuda_graph_points != self.engine_points:
            lines.append(f"  CUDA-graph decode captures: {', '.join(self.cuda_graph_points)}")
        if self.fatal:
            lines.append(f"  engine fails: {self.fatal}")
        return "\n".join(lines)


def _s(v: object, none: str = "-") -> str:
    return none if v is None else str(v)


def points_of(res: EngineCapture) -> list[Point | None]:
    """The capture's points as the vocabulary's (a state that never fires or is not settled: None)."""
    return [None if p in ("missing", "unknown") else Point.parse(p) for p in res.points]


def _trainer_ids(draft: DraftCheckpoint, num_layers: int) -> tuple[list[int], str]:
    """The ids a trainer hands its capture engine: SpecForge's eagle_config ids (or its default
    [1, N//2-1, N-4], resolve_eagle_capture_layers), speculators' top-level ids (default [2, N//2, N-3])."""
    f = draft.capture
    if draft.layout == "speculators":
        ids = f.top_ids if _ints(f.top_ids) else None
        return (ids or [2, num_layers // 2, num_layers - 3]), "top-level ids" if ids else "speculators default ids"
    ids = f.nested_ids if _ints(f.nested_ids) else None
    return (ids if ids is not None else default_ids(num_layers)), "eagle_config ids" if ids is not None else (
        "SpecForge default ids"
    )


def _ints(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)


def _through(rel: Release, archs: Sequence[str], ids: list[int], n: int, label: str, basis: str) -> Reading:
    served = rel.serve(archs)
    if served.rule is None:
        return Reading(label, None, basis, [rel.name], served.problem)
    res = apply(served.rule, ids, n, cuda_graph=False, source=rel.source)
    if not res.complete:
        why = res.fatal or "; ".join(c.problem for c in res.by_id if c.problem) or "a state is missing"
        return Reading(label, None, basis, [rel.name], why)
    return Reading(label, [Point.parse(p) for p in res.points], basis, [rel.name])


def trained_readings(
    draft: DraftCheckpoint,
    num_layers: int,
    archs: Sequence[str],
    trained_layers: list[int] | None,
    trained_convention: str,
    provenance: Provenance | None = None,
    serving: Release | None = None,
) -> list[Reading]:
    """``serving``: the release the draft is served with. With no provenance, a SpecForge-format draft
    served by vLLM has two readings: SpecForge's SGLang capture, and vLLM's own (data generated through
    vLLM, as speculators and the lab do); the file cannot tell them apart."""
    from workbench.engine import draft_ids, release, releases

    n = num_layers
    if trained_layers is not None:
        pts = to_points(trained_layers, trained_convention, n)
        return [Reading(f"given: {trained_layers} ({trained_convention})", pts, "given")]
    ids, where = _trainer_ids(draft, n)
    if provenance is not None and provenance.engine:
        rel = release(provenance.engine)
        label = f"{provenance.how}; {where} {ids} through {rel.name}"
        return [_through(rel, archs, list(ids), n, label, "provenance")]
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
    # SpecForge format: each SGLang release read that may have captured the data (SpecForge captures
    # through SGLang; data captured otherwise is named with --trained-engine), grouped by what they yield
    groups: dict[tuple[str, ...], Reading] = {}
    impossible: list[Reading] = []
    for v in releases("sglang"):
        rel = release(f"sglang=={v}")
        if rel.serve(archs).rule is None:
            continue
        rd = _through(rel, archs, list(ids), n, "", "assumed")
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
        rd.label = f"assumed: SpecForge captured the {where} {list(ids)} through {span(rd.engines)}"
        out.append(rd)
    if out and serving is not None and serving.engine == "vllm":
        own, own_key = draft_ids(serving, draft.capture)
        rd = _through(serving, archs, list(own) if _ints(own) else [], n, "", "assumed")
        if rd.points is not None and own is not None:
            rd.label = f"assumed: {serving.name} itself captured the training data from the {own_key} {list(own)}"
            out.append(rd)
    if not out:
        by_why: dict[str, list[str]] = {}
        for r in impossible:
            by_why.setdefault(r.problem or "a state is missing", []).extend(r.engines)
        why = "; ".join(f"{span(e)}: {w}" for w, e in by_why.items())
        return [
            Reading(
                f"assumed: SpecForge captured the {where} {list(ids)} through SGLang",
                None,
                "assumed",
                [e for r in impossible for e in r.engines],
                why or "no SGLang release read captures them",
            )
        ]
    return out


def span(engines: list[str]) -> str:
    return engines[0] if len(engines) == 1 else f"{engines[0]} .. {engines[-1]} ({len(engines)} releases read)"


def across(
    archs: Sequence[str], fields: Any, num_layers: int
) -> tuple[dict[str, list[str | None]], dict[str, list[str]]]:
    """What every release read captures for the config's ids (by each release's own id keys), grouped
    into spans of consecutive releases that capture the same: ({span: points}, {span: releases})."""
    from workbench.engine import draft_ids, release, releases

    points: dict[str, list[str | None]] = {}
    members: dict[str, list[str]] = {}
    for name in ("sglang", "vllm"):
        run: list[str] = []
        last: list[str | None] | None = None
        for v in releases(name):
            rel = release(f"{name}=={v}")
            served = rel.serve(archs)
            if served.rule is None:
                pts: list[str | None] = ["cannot serve"]
            else:
                ids, _key = draft_ids(rel, fields)
                if ids is not None and not _ints(ids):
                    continue
                res = apply(served.rule, ids, num_layers, cuda_graph=False)
                pts = [None] * len(res.points) if res.fatal else [None if p == "missing" else p for p in res.points]
            if pts != last and run:
                points[span(run)], members[span(run)] = cast("list[str | None]", last), run
                run = []
            last = pts
            run.append(rel.name)
        if run:
            points[span(run)], members[span(run)] = cast("list[str | None]", last), run
    return points, members


def build_report(
    rel: Release,
    res: EngineCapture,
    ids_source: str,
    trained: list[Point] | None,
    trained_source: str,
    readings: list[Reading] | None = None,
    settled: bool = True,
    across_engines: tuple[dict[str, list[str | None]], dict[str, list[str]]] | None = None,
) -> CaptureReport:
    n = res.num_layers
    engine_pts = points_of(res)
    by_index = {c.index: c.id for c in res.by_id}
    captured_indices = sorted({c.index for c in res.by_id if c.point is not None and c.index is not None})
    rows: list[CaptureRow] = []
    slots = max(len(engine_pts), len(trained or []))
    missing = [c for c in res.by_id if c.point is None]
    for k in range(slots):
        ep = engine_pts[k] if k < len(engine_pts) else None
        tp = trained[k] if trained is not None and k < len(trained) else None
        idx = captured_indices[k] if k < len(captured_indices) else None
        cid = by_index.get(idx) if idx is not None else None
        if idx is None:  # a state the engine never captures: show which id asked for it
            j = k - len(captured_indices)
            if 0 <= j < len(missing):
                cid, idx = missing[j].id, missing[j].index
        match = None
        shown = None if tp is None else str(tp)
        if trained is not None and settled:
            match = ep is not None and tp is not None and ep.same_stream(tp, n)
        elif not settled and readings:
            alts: list[str] = []
            for rd in readings:
                if rd.points is not None and k < len(rd.points) and str(rd.points[k]) not in alts:
                    alts.append(str(rd.points[k]))
            shown = " | ".join(alts) or None
        rows.append(CaptureRow(k, cid, idx, None if ep is None else str(ep), shown, match))
    match = None if trained is None or not settled else (all(r.match for r in rows) and res.fatal is None)
    id_ev = next((e for e in res.evidence if e.startswith("id_map:")), "")
    where = id_ev.split(": ", 2)[1] if id_ev.count(": ") >= 2 else ""
    return CaptureReport(
        engine=res.engine,
        rule=f"{rel.name} ({rel.source}): {where}" if where else f"{rel.name} ({rel.source})",
        arch=res.arch,
        num_layers=n,
        ids_source=ids_source,
        config_ids=res.ids,
        engine_indices=res.indices,
        engine_points=[None if p is None else str(p) for p in engine_pts],
        trained_points=None if trained is None else [str(p) for p in trained],
        trained_source=trained_source,
        match=match,
        rows=rows,
        notes=res.notes,
        fatal=res.fatal,
        across_engines=across_engines[0] if across_engines else {},
        across_releases=across_engines[1] if across_engines else {},
        readings=[r.to_dict() for r in readings or []],
        settled=settled,
        source=rel.source,
        cuda_graph_points=res.cuda_graph_points,
    )
