"""Alignment: which capture point is each training slot.

The candidate x slot matrix of rel_diff as a heat map (one row per candidate point, one column per
training slot; the best cell of each slot in reverse video), the verdict per slot with its margin
over the runner-up, the recommended layer ids with "apply to config" (through the config history,
after a confirm that shows the diff), and the per-token rel_diff of the highlighted cell.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable
from typing import Any, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Select, Sparkline, Static

from workbench.api import engine_choices
from workbench.display import fmt_rel as fmt
from workbench.display import heat_colour, text_on
from workbench.errors import WorkbenchError
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.findings import VerdictTable
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background

ENGINES = engine_choices()  # SGLang releases, then every vLLM release read


def heat_style(v: float | None) -> str:
    colour = heat_colour(v)
    return f"{text_on(colour)} on {colour}" if colour else "dim"


class MatrixTable(Table):
    """The candidate x slot matrix: ``a`` applies the recommendation (a key of the result, not of
    the form, whose inputs take letters as text)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "screen.apply", "Apply to config", id="alignment.apply", tooltip="shows the diff first"),
    ]


class AlignmentScreen(WorkbenchScreen):
    CSS_PATH = "alignment.tcss"
    KEYS_OF = (MatrixTable,)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Align", id="alignment.run"),
        Binding("ctrl+y", "copy_command", "Copy CLI", id="alignment.copy_cli"),
    ]

    def __init__(
        self,
        train: str = "",
        infer: str = "",
        engine: str = "sglang==0.5.23",
        draft: str = "",
        target: str = "",
        num_layers: str = "",
        autorun: bool | None = None,
    ):
        super().__init__()
        self.initial = dict(train=train, infer=infer, engine=engine, draft=draft, target=target, num_layers=num_layers)
        self.autorun = bool(train and infer) if autorun is None else autorun
        self.result = None
        self.error: str | None = None

    def compose_body(self) -> Iterable[Widget]:
        v = self.initial
        with Vertical(id="align-form"):
            with Horizontal(classes="row"):
                yield Label("Training", classes="field-label")
                yield Input(
                    v["train"],
                    placeholder="training capture: data_0.ckpt, hs_0.safetensors, ...",
                    id="train",
                    compact=True,
                )
            with Horizontal(classes="row"):
                yield Label("Inference", classes="field-label")
                yield Input(
                    v["infer"],
                    placeholder="inference capture: payload .json, dump folder, ...",
                    id="infer",
                    compact=True,
                )
            with Horizontal(classes="row"):
                yield Label("Engine", classes="field-label")
                yield Select(ENGINES, value=v["engine"], allow_blank=False, id="engine", compact=True)
                yield Label("Layers", classes="field-label inline")
                yield Input(v["num_layers"], placeholder="count", id="num_layers", type="integer", compact=True)
            with Horizontal(classes="row"):
                yield Label("Draft", classes="field-label")
                yield Input(v["draft"], placeholder="draft folder (optional)", id="draft", compact=True)
                yield Label("Target", classes="field-label inline")
                yield Input(v["target"], placeholder="target config (optional)", id="target", compact=True)
        yield Static("", id="align-error", classes="error-line", markup=False)
        # the verdicts first, the whole width: runner-up, margin and verdict are never cut off
        yield Label("Best match per slot", classes="title")
        yield VerdictTable(id="best", cursor_type="none")
        with Horizontal(id="align-body"):
            with Vertical(id="matrix-pane"):
                yield Label("rel_diff: candidates x training slots (best per slot reversed)", classes="title")
                yield MatrixTable(id="matrix", cursor_type="cell", zebra_stripes=False)
            with VerticalScroll(id="summary-pane"):
                yield Static("Enter both captures and press ctrl+r.", id="recommendation")
                yield Label("Per token (highlighted cell)", classes="title")
                yield Static("", id="drill-title", markup=False)
                yield Sparkline([], id="drill-spark")
                yield Static("", id="drill", markup=False)
                yield Static("", id="align-notes", classes="muted", markup=False)

    def on_mount(self) -> None:
        best = self.query_one("#best", DataTable)
        best.add_columns("slot", "best", "point", "rel_diff", "runner-up", "margin", "verdict")
        if self.autorun:
            self.action_run()

    # -- inputs -----------------------------------------------------------------------------------
    def fields(self) -> dict:
        q = self.query_one
        out: dict[str, Any] = {
            k: q(f"#{k}", Input).value.strip() for k in ("train", "infer", "draft", "target", "num_layers")
        }
        out["engine"] = q("#engine", Select).value
        return out

    @on(Input.Submitted)
    def _submitted(self, _event) -> None:
        self.action_run()

    def action_run(self) -> None:
        f = self.fields()
        if not f["train"] or not f["infer"]:
            self.show_error("enter the training capture and the inference capture")
            return
        self.align(f)

    @background("alignment", done="show_result", failed="show_error")
    def align(self, f: dict):
        n = int(f["num_layers"]) if f["num_layers"] else None
        return self.app.wb.align(
            f["train"],
            f["infer"],
            engine=f["engine"],
            draft=f["draft"] or None,
            target=f["target"] or None,
            num_layers=n,
        )

    def show_error(self, message: str) -> None:
        self.error = message
        self.query_one("#align-error", Static).update(message)

    # -- output -----------------------------------------------------------------------------------
    def show_result(self, r) -> None:
        from rich.text import Text

        self.result, self.error = r, None
        self.query_one("#align-error", Static).update("")
        best_of = {i: r.cols.index(b.candidate) for i, b in enumerate(r.best) if b.candidate in r.cols}
        m = self.query_one("#matrix", DataTable)
        m.clear(columns=True)
        m.add_columns("candidate", "point", *[f"{s}" + (f" {p}" if p else "") for s, p in zip(r.rows, r.rows_physical)])
        for c, name in enumerate(r.cols):
            cells = []
            for s in range(len(r.rows)):
                v = r.matrix[s][c]
                style = heat_style(v) + (" bold reverse" if best_of.get(s) == c else "")
                cells.append(Text(f" {fmt(v)} ", style=style))
            m.add_row(name, r.cols_physical[c] or "?", *cells, key=str(c))
        self._fill_best()
        self.query_one("#recommendation", Static).update(self._recommendation_text(r))
        notes = [
            f"{r.tokens_compared} tokens compared ({r.tokens['method']}); dropped: "
            f"{r.tokens['dropped_ref']} training, {r.tokens['dropped_infer']} inference rows"
        ]
        notes += [f"{b.slot}: {b.reason}" for b in r.best]
        notes += [f"non-finite: {n.side} {n.tensor}: {n.nan} nan, {n.inf} inf, first {n.first}" for n in r.nonfinite]
        notes += list(r.notes)
        self.query_one("#align-notes", Static).update("\n".join(notes))
        if best_of:
            m.move_cursor(row=best_of.get(0, 0), column=2)
            self.drill(0, best_of.get(0, 0))

    def _fit_width(self, width: int) -> None:
        narrow = self.has_class("-narrow")
        super()._fit_width(width)
        if narrow != self.has_class("-narrow") and self.result is not None:
            self._fill_best()

    def _fill_best(self) -> None:
        """The verdicts, every column whole: narrower than NARROW_WIDTH columns the candidates are
        named by their points (the matrix beside names the tensors)."""
        r = self.result
        if r is None:
            return
        t = self.query_one("#best", VerdictTable)
        wide = not self.has_class("-narrow")
        labels = ["slot", *(["best"] if wide else []), "point", "rel_diff", "runner-up", "margin", "verdict"]
        rows = []
        for b in r.best:
            runner = (b.runner_up or "-") if wide else (getattr(b, "runner_up_physical", None) or b.runner_up or "-")
            margin = "-" if b.margin is None else ("inf" if b.margin == math.inf else f"x{b.margin:.3g}")
            rows.append(
                [b.slot, *([b.candidate or "-"] if wide else []), b.physical or "?", fmt(b.value), runner, margin]
            )
        t.clear(columns=True)
        # each column as wide as its widest cell from the start: a table refilled on a resize would
        # otherwise draw cut cells until its next idle moment measures the new rows
        for i, label in enumerate(labels):
            cells = [str(row[i]) for row in rows] if i < len(labels) - 1 else [str(b.verdict) for b in r.best]
            t.add_column(label, width=max([len(label), *map(len, cells)]))
        for b, row in zip(r.best, rows):
            t.add_row(*row, t.mark(b.verdict))

    def _recommendation_text(self, r):
        from rich.text import Text

        out = Text()
        rec = r.recommendation
        if rec is None:
            out.append("No engine given: no layer-id recommendation.", style="dim")
            return out
        if rec.layer_ids is not None:
            out.append("Recommended ", style="bold")
            out.append(f"{rec.key} = {rec.layer_ids}", style="bold cyan")
            out.append(f"\nfor {rec.engine}: captures {', '.join(p or '?' for p in rec.points)}")
            if not rec.confident:
                out.append("\nnot every slot matched firmly: check the verdicts", style="yellow")
        else:
            out.append(f"No recommendation: {rec.reason}", style="yellow")
        for f in r.findings:
            out.append(
                f"\n{f.severity.upper()} {f.code}: ", style="bold red" if f.severity == "error" else "bold yellow"
            )
            out.append(f.message)
            if f.fix and f.fix.applicable:
                out.append("\na on the matrix applies it to the config (shows the diff first)", style="dim")
        if rec.differs is False:
            out.append(f"\nthe draft's config already captures these points ({rec.current_ids})", style="green")
        return out

    @on(DataTable.CellHighlighted, "#matrix")
    def _cell(self, event: DataTable.CellHighlighted) -> None:
        if self.result is None:
            return
        col = event.coordinate.column - 2
        if 0 <= col < len(self.result.rows):
            self.drill(col, event.coordinate.row)

    def drill(self, slot: int, cand: int) -> None:
        import numpy as np

        r = self.result
        if r is None or not (0 <= cand < len(r.cols)):
            return
        pt = r.per_token(slot, cand)
        vals = np.asarray(pt["rel_diff"], dtype=float)
        self.query_one("#drill-title", Static).update(
            f"{r.rows[slot]} vs {r.cols[cand]} ({r.cols_physical[cand] or '?'})"
            + ("" if pt["exact"] else "  [screen values]")
        )
        self.query_one("#drill-spark", Sparkline).data = list(np.log10(np.maximum(vals, 1e-9))) if vals.size else []
        if vals.size:
            worst = np.argsort(vals)[::-1][:5]
            pos = pt["positions"]
            text = (
                f"median {fmt(float(np.median(vals)))}  p95 {fmt(float(np.percentile(vals, 95)))}  "
                f"max {fmt(float(vals.max()))}\nworst tokens: "
                + ", ".join(f"{pos[i]}:{fmt(float(vals[i]))}" for i in worst)
            )
        else:
            text = "no tokens"
        self.query_one("#drill", Static).update(text)

    # -- actions ----------------------------------------------------------------------------------
    def _fix(self):
        if self.result is None:
            return None
        for f in self.result.findings:
            if f.fix and f.fix.applicable:
                return f.fix
        return None

    def action_apply(self) -> None:
        fix = self._fix()
        if fix is None:
            self.notify("nothing to apply: give the draft dir, or the config already agrees", severity="warning")
            return
        try:
            plan = self.app.wb.config_fix_plan(fix)
        except WorkbenchError as exc:
            self.notify(str(exc), severity="error")
            return
        self.app.confirm(plan, lambda: self.apply(fix))

    @background("alignment-apply", done="_applied", failed="_apply_failed", exclusive=False)
    def apply(self, fix) -> str:
        change = self.app.wb.config_apply_fix(fix, confirm=True)
        return f"applied: {change.location} is now v{change.version.number}"

    def _applied(self, note: str) -> None:
        self.notify(note)
        self.action_run()

    def _apply_failed(self, message: str) -> None:
        self.notify(message, severity="error")

    def action_copy_command(self) -> None:
        self.app.copy_to_clipboard(cli_command(self.fields()))
        self.notify(cli_command(self.fields()), title="copied", markup=False)


def cli_command(f: dict) -> str:
    argv = ["eagle-workbench", "align", "--train", f["train"], "--infer", f["infer"], "--engine", f["engine"]]
    for key, flag in (("draft", "--draft"), ("target", "--target"), ("num_layers", "--num-layers")):
        if f.get(key):
            argv += [flag, f[key]]
    return " ".join(shlex.quote(a) for a in argv) + " --json"


SPEC = ScreenSpec("alignment", "Alignment", "f12", AlignmentScreen, order=40)
