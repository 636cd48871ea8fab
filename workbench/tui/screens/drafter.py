"""Drafter: a draft checkpoint run on its training data the way training measures it.

Per-depth SpecForge acc_k, the chain view (full and conditional accuracy), top-k hit rates, the
draft vocabulary's coverage, the strict weight check and the predicted accept length; one key sends
the rates to the Predictor screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Static

from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background


def pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def predictor_fields(wb, result) -> dict:
    """The Predictor screen's form for this drafter: marginal rates P_k = full_acc (chain), and no
    observed accept length (an offline evaluation has none: the field is cleared, not kept)."""
    p = wb.drafter_predictor_inputs(result)
    obs = p["observed_accept_length"]
    return {
        "convention": "marginal",
        "rates": ",".join(f"{v:.4f}" for v in p["marginal"]),
        "topk_hits": " / ".join(",".join(f"{v:.4f}" for v in row) for row in (p["topk_hits"] or [])),
        "steps": str(p["steps"]),
        "topk": "1",
        "draft_tokens": str(p["steps"] + 1),
        "observed": "" if obs is None else f"{obs:.2f}",
    }


class DepthsTable(Table):
    """The per-depth result: ``p`` sends it to the Predictor (a key of the table: the form's inputs
    take letters as text)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "screen.to_predictor", "To predictor", id="drafter.to_predictor"),
    ]


class DrafterScreen(WorkbenchScreen):
    CSS_PATH = "drafter.tcss"
    KEYS_OF = (DepthsTable,)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Evaluate", id="drafter.run"),
    ]

    def __init__(
        self, draft: str = "", data: str = "", target: str = "", depth: str = "3", autorun: bool | None = None
    ):
        super().__init__()
        self.initial = dict(draft=draft, data=data, target=target, depth=depth)
        self.autorun = bool(draft and data and target) if autorun is None else autorun
        self.result = None
        self.error: str | None = None

    def compose_body(self) -> Iterable[Widget]:
        v = self.initial
        with Vertical(id="drafter-form"):
            with Horizontal(classes="row"):
                yield Label("Draft", classes="field-label")
                yield Input(v["draft"], placeholder="the draft checkpoint's folder", id="draft", compact=True)
            with Horizontal(classes="row"):
                yield Label("Data", classes="field-label")
                yield Input(v["data"], placeholder="training data folder (rows_*/data_*.ckpt)", id="data", compact=True)
            with Horizontal(classes="row"):
                yield Label("Target", classes="field-label")
                yield Input(
                    v["target"], placeholder="target model folder (embedding, lm_head)", id="target", compact=True
                )
                yield Label("Depth", classes="field-label inline")
                yield Input(v["depth"], placeholder="3", id="depth", type="integer", compact=True)
        yield Static("", id="drafter-error", classes="error-line", markup=False)
        with Horizontal(id="drafter-body"):
            with Vertical(id="depth-pane"):
                yield Label("Per depth (teacher-forced, training-time test)", classes="title")
                yield DepthsTable(id="depths", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="drafter-side"):
                yield Static("Enter the draft, its data and the target, then ctrl+r.", id="drafter-summary")
                yield Static("", id="drafter-weights")
                yield Static("", id="drafter-notes", classes="muted", markup=False)

    def on_mount(self) -> None:
        if self.autorun:
            self.action_run()

    def fields(self) -> dict:
        return {k: self.query_one(f"#{k}", Input).value.strip() for k in ("draft", "data", "target", "depth")}

    @on(Input.Submitted)
    def _submitted(self, _event) -> None:
        self.action_run()

    def action_run(self) -> None:
        f = self.fields()
        missing = [k for k in ("draft", "data", "target") if not f[k]]
        if missing:
            self.show_error(f"{missing[0]}: enter a directory")
            return
        self.evaluate(f)

    @background("drafter", done="show_result", failed="show_error")
    def evaluate(self, f: dict):
        depth = int(f["depth"]) if f["depth"] else None
        return self.app.wb.drafter_eval(f["draft"], f["data"], f["target"], depth=depth)

    def show_error(self, message: str) -> None:
        self.error = message
        self.query_one("#drafter-error", Static).update(message)

    def show_result(self, r) -> None:
        from rich.text import Text

        self.result, self.error = r, None
        self.query_one("#drafter-error", Static).update("")
        self._fill_depths()
        p = r.predicted
        out = Text()
        if p.get("accept_length") is not None:
            out.append(f"{p['accept_length']:.3f}", style="bold")
            out.append(f" predicted accept length ({p['steps']} steps, chain, bonus token included, from chain full)\n")
        if p.get("from_acc") is not None:
            out.append(f"{p['from_acc']:.3f}", style="bold")
            out.append(" from acc_k alone (SpecForge-style; ignores how depths correlate)\n")
        out.append(
            f"{r.samples} samples, {r.positions} positions; draft vocabulary covers "
            f"{pct(r.vocab_coverage)} of the target's tokens\n"
        )
        out.append("p on the table sends the rates to the Predictor", style="dim")
        self.query_one("#drafter-summary", Static).update(out)
        w = r.weights
        ok = not (w["missing"] or w["unexpected"] or w["mismatched"])
        wt = Text("weights: ", style="bold")
        wt.append("ok" if ok else "PROBLEMS", style="green" if ok else "bold red")
        wt.append(f" ({w['present']} tensors, {w['naming']} names)")
        for n in w["missing"]:
            wt.append(f"\n  missing {n}", style="red")
        for n in w["unexpected"]:
            wt.append(f"\n  unexpected {n} (SGLang drops it silently)", style="red")
        for m in w["mismatched"]:
            wt.append(f"\n  {m['name']}: {m['actual']}, expected {m['expected']}", style="red")
        self.query_one("#drafter-weights", Static).update(wt)
        self.query_one("#drafter-notes", Static).update("\n".join(r.notes))

    def _fit_width(self, width: int) -> None:
        narrow = self.has_class("-narrow")
        super()._fit_width(width)
        if narrow != self.has_class("-narrow") and self.result is not None:
            self._fill_depths()

    def _fill_depths(self) -> None:
        """Narrower than NARROW_WIDTH columns speculators' own full/cond columns give way (the chain
        columns are the same quantities, computed here; the notes say where they differ)."""
        r = self.result
        if r is None:
            return
        t = self.query_one("#depths", DataTable)
        t.clear(columns=True)
        wide = not self.has_class("-narrow")
        speculators = ["speculators full_acc", "speculators cond_acc"] if wide else []
        t.add_columns(
            "depth",
            "SpecForge acc_k",
            "chain full",
            "chain cond",
            *speculators,
            *[f"top{k}" for k in r.topk],
            "positions",
        )
        sf = r.speculators_full_acc or [None] * r.depth
        sc = r.speculators_cond_acc or [None] * r.depth
        for d in range(r.depth):
            t.add_row(
                str(d),
                pct(r.acc[d]),
                pct(r.full_acc[d]),
                pct(r.cond_acc[d]),
                *([pct(sf[d]), pct(sc[d])] if wide else []),
                *[pct(v) for v in r.topk_acc[d]],
                str(r.positions_per_depth[d]),
            )

    def action_to_predictor(self) -> None:
        if self.result is None:
            self.notify("evaluate a drafter first", severity="warning")
            return
        fields = predictor_fields(self.app.wb, self.result)
        if "predictor" not in [s.id for s in getattr(self.app, "specs", [])]:
            self.notify("no Predictor screen", severity="error")
            return
        self.app.switch_mode("predictor")
        self.app.call_after_refresh(lambda: fill_predictor(self.app.screen, fields))


def fill_predictor(screen, fields: dict) -> None:
    for name, value in fields.items():
        screen.query_one(f"#{name}").value = value


SPEC = ScreenSpec("drafter", "Drafter", "f9", DrafterScreen, order=45)
