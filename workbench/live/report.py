"""Results of the live loop: the doctor's report on a running server, a fix's outcome, and the
before/after comparison (plain dataclasses; torch-free)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.doctor.findings import ConfigEdit, Finding, Fix
from workbench.live.types import (
    Alignment,
    ComparisonRow,
    ComparisonSide,
    Draft,
    Features,
    Observed,
    Predicted,
    Spec,
    Target,
)
from workbench.results import Result, jsonable


def fix_from_dict(fd: dict[str, Any], location: Callable[[str], str] | None = None) -> Fix:
    """A Fix back from its JSON form (a job's answer or a journal entry, as read)."""
    file = fd.get("file")
    if file and location:
        file = location(file)
    return Fix(
        fd.get("summary", ""),
        file,
        [ConfigEdit(e["key"], e.get("value"), bool(e.get("delete", False))) for e in fd.get("edits", [])],
        list(fd.get("launch", [])),
    )


def finding_from_dict(d: dict[str, Any], location: Callable[[str], str] | None = None) -> Finding:
    """A Finding back from its JSON form (a job's answer); ``location(path)`` rewrites fix files."""
    fd = d.get("fix")
    fix = fix_from_dict(fd, location) if fd else None
    return Finding(
        d["code"], d["severity"], d["message"], dict(d.get("evidence") or {}), fix, d.get("evidence_class") or ""
    )


@dataclass
class RankedFinding(Result):
    """A finding with where it came from and how much of the accept-length gap it accounts for."""

    finding: Finding
    source: str  # "static", "hidden states"
    explains: float | None = None  # accept length this finding costs (measured offline)
    share: float | None = None  # explains / (predicted - observed)

    @property
    def code(self) -> str:
        return self.finding.code

    @property
    def severity(self) -> str:
        return self.finding.severity

    @property
    def message(self) -> str:
        return self.finding.message

    @property
    def fix(self) -> Fix | None:
        return self.finding.fix

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.finding.to_dict(),
            "source": self.source,
            "explains": jsonable(self.explains),
            "share": jsonable(self.share),
        }


_SEV = {"error": 0, "warning": 1, "info": 2}


def rank(findings: list[RankedFinding]) -> list[RankedFinding]:
    """Most of the gap first; findings without a measured share follow by severity."""
    return sorted(findings, key=lambda r: (r.explains is None, -(r.explains or 0.0), _SEV.get(r.severity, 3), r.code))


@dataclass
class LiveReport(Result):
    server_id: int
    profile: str
    host: str
    state: str
    engine: str  # the capture rule used: "sglang==0.5.23"
    version: str | None  # from /server_info
    spec: Spec  # the speculative settings the server resolved
    target: Target  # the target model it loaded
    draft: Draft  # the draft it loaded, and whether the file changed since
    observed: Observed  # the server's accept length, and its source
    predicted: Predicted  # the drafter's accept length, and its source
    gap: float | None  # predicted - observed
    features: Features  # the drafter on the server's features vs on the training features
    alignment: Alignment | None  # training slots vs the server's capture (None: not compared)
    findings: list[Any] = field(default_factory=list)  # RankedFinding, most of the gap first
    fix: Fix | None = None  # the top applicable fix
    pending: Any = None  # a Plan the caller must confirm (the dump relaunch)
    transfers: list[Any] = field(default_factory=list)  # Transfer per job run on the host
    steps: list[Any] = field(default_factory=list)  # what was done, in order
    notes: list[Any] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LiveReport:
        """The report back from its JSON form (a journal entry or a saved ``--json`` answer)."""
        from workbench.confirm import Plan

        findings = [
            RankedFinding(finding_from_dict(f), f.get("source", ""), f.get("explains"), f.get("share"))
            for f in d.get("findings") or []
        ]
        p = d.get("pending")
        return cls(
            d["server_id"],
            d["profile"],
            d["host"],
            d.get("state", "ready"),
            d["engine"],
            d.get("version"),
            Spec.from_dict(d.get("spec")),
            Target.from_dict(d.get("target")),
            Draft.from_dict(d.get("draft")),
            Observed.from_dict(d.get("observed")),
            Predicted.from_dict(d.get("predicted")),
            d.get("gap"),
            Features.from_dict(d.get("features")),
            Alignment.from_dict(d["alignment"]) if d.get("alignment") is not None else None,
            findings,
            fix_from_dict(d["fix"]) if d.get("fix") else None,
            Plan(**p) if isinstance(p, dict) else None,
            [],
            list(d.get("steps") or []),
            list(d.get("notes") or []),
            float(d.get("seconds") or 0.0),
        )

    def text(self) -> str:
        lines = [f"server {self.server_id} ({self.profile} on {self.host}, {self.engine}): {self.state}"]
        o, p = self.observed.accept_length, self.predicted.accept_length
        lines.append(
            f"  accept length: observed {_f(o)} ({self.observed.source or '-'}), predicted {_f(p)} "
            f"({self.predicted.source or '-'})" + (f", gap {_f(self.gap)}" if self.gap is not None else "")
        )
        pos, full = self.observed.per_position, self.predicted.full_acc
        if pos:
            lines.append(
                "  per position, P(first k+1 drafts accepted): observed "
                + " ".join(f"{x:.3f}" for x in pos)
                + ("; the drafter on training data " + " ".join(f"{x:.3f}" for x in full[: len(pos)]) if full else "")
            )
        ft = self.features
        if ft.live_accept_length is not None:
            lines.append(
                f"  drafter on the server's features: {_f(ft.live_accept_length)} vs "
                f"{_f(ft.train_accept_length)} on the training features "
                f"({'?' if ft.samples is None else ft.samples} samples): the features cost {_f(ft.explains)}"
            )
        if ft.verdict:
            lines.append(f"  hidden states: {ft.verdict}")
        a = self.alignment
        if a:
            lines.append(f"  alignment ({a.mode}, {a.tokens_compared or 0} tokens):")
            for b in a.best:
                v = b.value
                lines.append(
                    f"    {b.slot or '-':<8} -> {b.point or '-':<16} rel_diff "
                    f"{'-' if v is None else f'{v:.2g}':<8}  {(b.verdict or '').upper()}"
                )
        if not self.findings:
            lines.append("  no findings")
        for i, r in enumerate(self.findings, 1):
            share = (
                f" (explains {_f(r.explains)}" + (f", {100 * r.share:.0f}% of the gap)" if r.share is not None else ")")
                if r.explains is not None
                else ""
            )
            cls = r.finding.evidence_class
            lines.append(
                f"  {i}. {r.severity.upper():7} {r.code}{share} [{'unsettled' if cls == 'convention' else cls}]"
                f": {r.message}"
            )
            if r.fix:
                lines.append(f"       fix: {r.fix.summary}")
        if self.pending is not None:
            lines.append(f"  needs confirmation: {self.pending.summary}")
        for t in self.transfers:
            if t.bundle != "in-process":
                lines.append(f"  data: {t.text()}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


@dataclass
class Comparison(Result):
    """Before and after side by side: one row per quantity."""

    before_server: int
    after_server: int
    rows: list[ComparisonRow]
    before: ComparisonSide
    after: ComparisonSide

    def value(self, name: str, side: str = "after") -> Any:
        for r in self.rows:
            if r["name"] == name:
                row: Mapping[str, Any] = r
                return row[side]
        return None

    def text(self) -> str:
        w = max(len(r["name"]) for r in self.rows) if self.rows else 10
        out = [f"{'':<{w}}  {'before':>20}  {'after':>20}  change"]
        for r in self.rows:
            out.append(f"{r['name']:<{w}}  {_s(r['before']):>20}  {_s(r['after']):>20}  {r.get('change') or ''}")
        return "\n".join(out)


@dataclass
class FixOutcome(Result):
    server_before: int
    fix: Fix
    change: Any  # the ConfigChange written through the history
    server_after: int | None = None
    ready: bool | None = None
    comparison: Comparison | None = None
    notes: list[Any] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"fix applied to {self.change.location}: v{self.change.version.number} ({self.fix.summary})"]
        if self.server_after is not None:
            lines.append(f"relaunched as server {self.server_after}: {'ready' if self.ready else 'not ready'}")
        if self.comparison is not None:
            lines.append(self.comparison.text())
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _s(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)
