"""From an alignment to a config: the layer ids an engine release needs to capture what training used.

The best candidate of each drafter slot names a physical point (``out(K)``, ``embed``, ...). The
serving release's rule, as ``workbench.engine`` read it from that release's code, finds the ids that
make it capture exactly those points in that order; when the draft's ``config.json`` is known and its
ids make the release capture other points, the ``layer-ids-engine-mismatch`` finding carries the edit.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.doctor.findings import ConfigEdit, Finding, Fix
from workbench.errors import InputError
from workbench.hidden.results import MATCH, AlignResult, Recommendation
from workbench.hidden.view import SLOT
from workbench.layers import Point


def recommend(
    result: AlignResult,
    engine: str,
    *,
    arch: str | None = None,
    num_layers: int | None = None,
    draft_config: dict[str, Any] | None = None,
    draft_config_path: str | None = None,
) -> tuple[Recommendation, list[Finding]]:
    from workbench import engine as eng

    rel = eng.release(engine)
    rules, how = _rules(rel, arch)
    rule = rules[0] if rules else None
    key = rule.id_source[0] if rule is not None and rule.id_source else "eagle_config.eagle_aux_hidden_state_layer_ids"
    slot_rows = [i for i, r in enumerate(result.row_roles) if r == SLOT] or list(range(len(result.rows)))
    bests = [result.best[i] for i in slot_rows]
    points = [b.physical for b in bests]
    confident = all(b.verdict == MATCH for b in bests)
    where = "; ".join(rule.where("id_map")) if rule is not None and arch else how
    rec = Recommendation(
        rel.name, arch, num_layers, points, None, key, confident, rule=f"{rel.name} ({rel.source}): {where}"
    )
    findings: list[Finding] = []
    if rule is None:
        rec.reason = how
        return rec, findings
    if num_layers is None:
        rec.reason = "the target's layer count is unknown (give the target config or num_layers)"
        return rec, findings
    missing = [b.slot for b in bests if b.physical is None]
    if missing:
        rec.reason = f"no physical point known for the best candidate of {', '.join(missing)}"
        return rec, findings
    named = [p for p in points if p is not None]  # every one of them (none missing)
    try:
        pts = [Point.parse(p) for p in named]
    except InputError as exc:
        rec.reason = str(exc)
        return rec, findings
    answers = {tuple(x) if (x := eng.ids_for(r, named, num_layers)) is not None else None for r in rules}
    ids = list(next(iter(answers)) or []) or None if len(answers) == 1 else None
    rec.layer_ids = ids
    if len(answers) > 1:
        rec.reason = f"the EAGLE-3 classes of {rel.name} need different ids for these points: give the target config"
    elif ids is None:
        rec.reason = f"{rel.name} cannot capture {', '.join(named)} in this order with any ids"
    else:
        rec.reason = f"{rel.name} captures {', '.join(named)} from {key} = {ids}" + ("" if arch else f" ({how})")
    if draft_config is None:
        return rec, findings

    current, source = eng.draft_ids(rel, eng.read_draft_fields(draft_config))
    try:
        caps = [eng.apply(r, current, num_layers, cuda_graph=False, source=rel.source) for r in rules]
    except InputError as exc:
        rec.reason += f"; the draft's ids cannot be read ({exc})"
        return rec, findings
    if len({(tuple(c.points), c.fatal) for c in caps}) > 1:
        rec.reason += (
            f"; what {rel.name} captures for the draft's ids depends on the target's class (give the target config)"
        )
        return rec, findings
    cap = caps[0]
    rec.current_ids = current
    rec.current_points = [None if p in ("missing", "unknown") else p for p in cap.points]
    have = [None if p is None else Point.parse(p).canonical(num_layers) for p in rec.current_points]
    want = [p.canonical(num_layers) for p in pts]
    rec.differs = have != want or cap.fatal is not None
    if rec.differs:
        shift = _shift(have, want)
        where_ids = f"{source} {current}" if current is not None else "its defaults"
        msg = (
            f"{rel.name} captures {_fmt(rec.current_points)} from {where_ids}, but the training data's "
            f"slots match {_fmt(points)} numerically"
        )
        msg += f" (a {abs(shift)}-layer shift)" if shift else ""
        msg += "." if confident else "; not every slot matched firmly, check the alignment table."
        fix = None
        if ids is not None:
            fix = Fix(
                f"set {key} to {ids} so {rel.name} captures {', '.join(named)}",
                str(Path(draft_config_path)) if draft_config_path else None,
                [ConfigEdit(key, ids)],
            )
        findings.append(
            Finding(
                "layer-ids-engine-mismatch",
                "error" if confident else "warning",
                msg,
                {
                    "engine": rel.name,
                    "rule": rec.rule,
                    "num_layers": num_layers,
                    "config_ids": current,
                    "ids_key": source,
                    "engine_points": rec.current_points,
                    "trained_points": points,
                    "source": "numeric alignment",
                    "shift": shift,
                    "recommended_ids": ids,
                    "verdicts": [b.verdict for b in bests],
                },
                fix,
                "numbers",
            )
        )
    return rec, findings


def _rules(rel: Any, arch: str | None) -> tuple[list[Any], str]:
    """The rule of the class the release serves for ``arch``; with no class known, every EAGLE-3 class
    of the release (an answer then stands only where they all agree)."""
    if arch:
        served = rel.serve([arch])
        return ([served.rule] if served.rule is not None else []), served.problem or ""
    rules = [r for r in rel.rules if r.supported and r.id_map != "unknown" and not r.unknowns]
    if not rules:
        return [], f"{rel.name}: no EAGLE-3 class was read (give the target config)"
    return rules, f"the target's class is not known: every EAGLE-3 class of {rel.name} read agrees"


def _shift(have: Sequence[Point | None], want: Sequence[Point]) -> int | None:
    if len(have) != len(want) or any(p is None for p in have):
        return None
    diffs: set[int] = set()
    for a, b in zip(have, want):
        if a is None or a.kind != "out" or b.kind != "out" or a.layer is None or b.layer is None:
            return None
        diffs.add(a.layer - b.layer)
    return diffs.pop() if len(diffs) == 1 and 0 not in diffs else None


def _fmt(points: Sequence[str | None]) -> str:
    return "[" + ", ".join("missing" if p is None else str(p) for p in points) + "]"


def target_info(path: str | os.PathLike[str]) -> tuple[str | None, int | None]:
    """(architecture, num_hidden_layers) of a target ``config.json`` (file or folder)."""
    from workbench import strictjson
    from workbench.draftconfig.schema import validate

    p = Path(path)
    p = p / "config.json" if p.is_dir() else p
    if not p.exists():
        raise InputError(f"{p}: no such file; expected the target's config.json")
    cfg = strictjson.load_file(p, "target config")
    if not isinstance(cfg, dict):
        raise InputError(f"{p}: expected a JSON object at the top level")
    from workbench.engine.target import text_config

    text = text_config(cfg)
    n = text.get("num_hidden_layers")
    if n is not None:
        try:
            n = validate("num_hidden_layers", n)
        except InputError as exc:
            raise InputError(f"{p}: {exc}") from None
    archs = cfg.get("architectures")
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    mt = cfg.get("model_type") or text.get("model_type")
    arch = archs[0] if archs else (mt if isinstance(mt, str) else None)
    return arch, n
