"""The capture report: config ids -> what this engine captures -> what training used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from workbench.errors import InputError
from workbench.layers import (KNOWN_ENGINES, CaptureResult, EngineRule, Point, default_points, point_str,
                              rule_for, to_points)
from workbench.results import Result


@dataclass
class CaptureRow(Result):
    slot: int                        # position in the concatenated aux vector
    config_id: Optional[int]
    engine_index: Optional[int]
    engine_point: Optional[str]
    trained_point: Optional[str]
    match: Optional[bool]


@dataclass
class CaptureReport(Result):
    engine: str
    rule: str                        # the source the rule was read from
    arch: Optional[str]
    arch_family: Optional[str]
    num_layers: Optional[int]
    ids_source: str                  # which config key the engine reads, or "default"
    config_ids: Optional[list[int]]
    engine_indices: list[int]
    engine_points: list[Optional[str]]
    trained_points: Optional[list[str]]
    trained_source: str              # "given (output-of-layer)" or the assumption made
    match: Optional[bool]
    rows: list[CaptureRow]
    notes: list[str] = field(default_factory=list)
    fatal: Optional[str] = None
    across_engines: dict[str, list[Optional[str]]] = field(default_factory=dict)

    def text(self) -> str:
        lines = [f"capture under {self.engine} ({self.arch or 'unknown target'}, "
                 f"{self.num_layers if self.num_layers else '?'} layers), ids from {self.ids_source}"]
        lines.append(f"  {'slot':>4}  {'config id':>9}  {'engine index':>12}  {'engine captures':<16}  "
                     f"{'trained on':<16}")
        for r in self.rows:
            mark = "" if r.match is None else ("ok" if r.match else "MISMATCH")
            lines.append(f"  {r.slot:>4}  {_s(r.config_id):>9}  {_s(r.engine_index):>12}  "
                         f"{_s(r.engine_point, 'missing'):<16}  {_s(r.trained_point):<16}  {mark}")
        lines.append(f"  training: {self.trained_source}")
        if self.fatal:
            lines.append(f"  engine fails: {self.fatal}")
        return "\n".join(lines)


def _s(v, none="-") -> str:
    return none if v is None else str(v)


def trained_points(draft, num_layers: int, trained_layers: Optional[list[int]],
                   trained_convention: str) -> tuple[Optional[list[Point]], str]:
    """What the drafter was trained on: given explicitly, or assumed from the config and layout."""
    if trained_layers is not None:
        pts = to_points(trained_layers, trained_convention, num_layers)
        return pts, f"given: {trained_layers} ({trained_convention})"
    if draft.layout == "speculators":
        ids = draft.top_level_layer_ids
        if ids is None:
            return default_points(num_layers), ("assumed: speculators default [2, N//2, N-3] "
                                                "(capture-before); pass --trained-layers if not")
        try:
            return to_points(ids, "capture-before", num_layers), (
                f"assumed: speculators read the top-level ids {ids} as capture-before; "
                "pass --trained-layers if not")
        except InputError:
            return None, f"unknown: top-level ids {ids} are out of range for {num_layers} layers"
    ids = draft.layer_ids
    if ids is None:
        return default_points(num_layers), ("assumed: SpecForge default [1, N//2-1, N-4] (output-of-layer) "
                                            "since the config has no eagle_config ids; pass --trained-layers if not")
    try:
        return to_points(ids, "output-of-layer", num_layers), (
            f"assumed: SpecForge read eagle_config ids {ids} as output-of-layer (a capture run on "
            "SGLang >= 0.5.13 with a DeepSeek/Kimi target follows that engine's rule instead); "
            "pass --trained-layers if not")
    except InputError:
        return None, f"unknown: eagle_config ids {ids} are out of range for {num_layers} layers"


def build_report(rule: EngineRule, config: dict, ids, ids_source: str, num_layers: int,
                 arch: Optional[str], trained: Optional[list[Point]], trained_source: str) -> tuple[CaptureReport, CaptureResult]:
    res = rule.capture(ids, num_layers)
    engine_pts = res.points
    by_index = {c.index: c.id for c in res.by_id}
    captured_indices = sorted({c.index for c in res.by_id if c.point is not None})
    rows = []
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
        if trained is not None:
            match = ep is not None and tp is not None and ep.same_stream(tp, n)
        rows.append(CaptureRow(k, cid, idx, point_str(ep), point_str(tp), match))
    match = None if trained is None else (all(r.match for r in rows) and res.fatal is None)
    across = {}
    for eng in KNOWN_ENGINES:
        other = rule_for(eng, arch)
        o_ids, _ = other.ids_from_config(config)
        if o_ids is not None and not (isinstance(o_ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in o_ids)):
            continue
        o_res = other.capture(o_ids, n)
        across[other.name] = [point_str(p) for p in o_res.points] if not o_res.fatal else \
            [None] * len(o_res.points)
    report = CaptureReport(
        engine=rule.name, rule=rule.source, arch=arch, arch_family=rule.family, num_layers=n,
        ids_source=ids_source, config_ids=None if ids is None else list(ids), engine_indices=res.indices,
        engine_points=[point_str(p) for p in engine_pts],
        trained_points=None if trained is None else [str(p) for p in trained], trained_source=trained_source,
        match=match, rows=rows, notes=res.notes, fatal=res.fatal, across_engines=across)
    return report, res
