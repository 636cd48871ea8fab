"""Result dataclasses of the alignment engine (torch-free, so faces can import them cheaply)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.results import Result

if TYPE_CHECKING:
    from workbench.doctor.findings import Finding

MATCH, AMBIGUOUS, NO_MATCH = "match", "ambiguous", "no-match"


@dataclass
class Thresholds(Result):
    """Verdict rules (see ``workbench.hidden.align``). Defaults calibrated on a bf16-vs-fp32 lab
    (true match 1e-5..6.5e-5, adjacent layer >= 7.4e-3, ratio >= 540) and widened for real
    cross-engine noise (true match near 1e-3 with the adjacent layer only a few times larger)."""

    exact: float = 1e-9  # at or below: the same numbers (up to summation order)
    match_max: float = 5e-3  # a match's rel_diff is at most this
    min_ratio: float = 2.0  # runner-up / best (aggregate or per-token median) at least this
    min_gap: float = 1e-4  # runner-up - best at least this (two near-identical points are a tie)
    min_win_rate: float = 0.5  # share of tokens where the best beats the runner-up
    no_match_min: float = 5e-2  # above: nothing here is this slot
    min_tokens: int = 16  # fewer compared tokens: never more than ambiguous


@dataclass
class SlotBest(Result):
    slot: str
    slot_physical: str | None
    candidate: str | None
    physical: str | None
    value: float | None
    runner_up: str | None
    runner_up_physical: str | None
    runner_up_value: float | None
    margin: float | None  # runner_up_value / value (inf when value is 0)
    token_margin: float | None  # median per-token rel_diff, runner-up over best
    win_rate: float | None  # share of tokens where best < runner-up
    verdict: str
    reason: str
    exact: bool = False
    cosine: float | None = None
    max_abs: float | None = None
    mean_abs: float | None = None
    median_token: float | None = None
    p95_token: float | None = None


@dataclass
class NonFinite(Result):
    side: str  # "train" or "infer"
    tensor: str
    nan: int
    inf: int
    tokens: int  # rows holding at least one non-finite value
    first: list[list[int]]  # up to 5 [row, column] positions (rows in that capture's own numbering)


@dataclass
class Recommendation(Result):
    engine: str
    arch: str | None
    num_layers: int | None
    points: list[str | None]  # best physical point per slot (None where unknown)
    layer_ids: list[int] | None  # the ids to write, in this engine's convention
    key: str  # where they go in the draft config.json
    confident: bool  # every slot matched
    current_ids: list[Any] | None = None
    current_points: list[str | None] | None = None
    differs: bool | None = None
    reason: str = ""
    rule: str = ""


@dataclass
class AlignResult(Result):
    train: str
    infer: str
    rows: list[str]  # slot names
    rows_physical: list[str | None]
    row_roles: list[str]  # "slot" (a drafter input) or "final" (the teacher's input)
    cols: list[str]  # candidate names
    cols_physical: list[str | None]
    metric: str
    matrix: list[list[float | None]]  # rel_diff [rows][cols]
    cosine: list[list[float | None]]
    max_abs: list[list[float | None]]  # None where not computed (see ``exact``)
    mean_abs: list[list[float | None]]
    exact: list[list[bool]]  # [rows][cols] True where refined exactly (fp32 differences)
    best: list[SlotBest]  # SlotBest per row
    tokens_compared: int
    tokens: dict[str, Any]  # the token alignment (method, dropped, notes)
    recommendation: Recommendation | None
    findings: list[Finding] = field(default_factory=list)
    nonfinite: list[NonFinite] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)
    device: str = "cpu"
    precision: str = "fp32"
    seconds: float = 0.0
    bytes_read: int = 0
    notes: list[str] = field(default_factory=list)
    timing: dict[str, Any] = field(default_factory=dict)
    per_token_values: Any = field(default=None, repr=False, metadata={"internal": True})
    token_positions: Any = field(default=None, repr=False, metadata={"internal": True})

    def per_token(self, slot: int | str, candidate: int | str) -> dict[str, Any]:
        """Per-token rel_diff of one pair (by index or name), with the reference positions."""
        s = slot if isinstance(slot, int) else self.rows.index(slot)
        c = candidate if isinstance(candidate, int) else self.cols.index(candidate)
        vals = np.asarray(self.per_token_values[s, c], dtype=np.float64)
        pos = np.asarray(self.token_positions)
        ok = np.isfinite(vals)  # tokens left out (NaN/Inf on either side) have no value
        return {
            "slot": self.rows[s],
            "candidate": self.cols[c],
            "exact": bool(self.exact[s][c]),
            "positions": pos[ok].tolist(),
            "rel_diff": vals[ok].tolist(),
            "left_out": pos[~ok].tolist(),
        }

    def verdicts(self) -> list[str]:
        return [b.verdict for b in self.best]

    def text(self) -> str:
        lines = [
            f"alignment of {self.train} (rows) against {self.infer} (columns): {self.metric}, "
            f"{self.tokens_compared} tokens"
        ]
        for b in self.best:
            lines.append(
                f"  {b.slot:<10} -> {b.candidate or '-':<28} {_p(b.physical):<16} "
                f"{_f(b.value):>10}  runner-up {b.runner_up or '-'} {_f(b.runner_up_value)} "
                f"(x{_f(b.margin, 3)})  {b.verdict.upper()}"
            )
        if self.recommendation is not None:
            r = self.recommendation
            lines.append(
                f"  recommend {r.key} = {r.layer_ids} for {r.engine}"
                + ("" if r.confident else " (not confident: see verdicts)")
            )
        for f in self.findings:
            lines.append(f"  [{f.severity}] {f.code}: {f.message}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


def _f(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "-"
    if v == float("inf"):
        return "inf"
    return f"{v:.{digits}g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


def _p(v: str | None) -> str:
    return v if v is not None else "?"
