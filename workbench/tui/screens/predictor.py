"""Predictor: expected accept length from per-depth accuracy, against what the server logs.

Inputs on the left (rates in an explicit convention, SGLang's steps/topk/draft tokens, optional
observed accept length and timings); on the right (below them, at 80 columns) a status line, the
prediction, the verdict, AL for steps 1..8 as a table and a plot, and the formula used. Everything
updates as the inputs change, and what is shown says at once when it no longer follows them:
"updating" from the keystroke on, the error of an input that does not read (on the input too),
and which inputs this prediction does not use (``workbench.forms``).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Select, Static

from workbench.errors import WorkbenchError
from workbench.forms import PREDICT_FIELDS, PredictForm, fields_of, read_predict_form
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.curve_plot import CurvePlot
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background

CONVENTIONS = [
    ("acc: SpecForge/EAGLE training acc_k", "acc"),
    ("conditional: c_1..c_K", "conditional"),
    ("marginal: vLLM per-position P_k", "marginal"),
    ("alpha: one rate for all depths", "alpha"),
]
CONVENTION_HELP = {
    "acc": "acc_k = teacher-forced top-1 at depth k, taken as the conditional acceptance at depth k+1",
    "conditional": "c_k = P(draft k accepted | drafts 1..k-1 accepted)",
    "marginal": "P_k = P(first k drafts accepted), as vLLM logs per position",
    "alpha": "one acceptance rate for every depth",
}

#: The numbers of a real debugging session: training acc ~0.75, served at 5/1/6, logged 1.12.
EXAMPLE = {
    "convention": "acc",
    "rates": "0.75",
    "topk_hits": "",
    "steps": "5",
    "topk": "1",
    "draft_tokens": "6",
    "observed": "1.12",
    "verify_ms": "",
    "draft_ms": "",
    "baseline_ms": "",
}

TEXT_FIELDS = tuple(f for f in PREDICT_FIELDS if f != "convention")

#: Labels beside the inputs (the placeholders say the format).
LABEL_WIDTH = 12


def cli_command(fields: dict[str, Any], skip: set[str] | frozenset[str] = frozenset()) -> str:
    """The equivalent ``eagle-workbench predict`` command line (without the fields in ``skip``:
    those the prediction does not use)."""
    argv = ["eagle-workbench", "predict", f"--{fields['convention']}", fields["rates"].strip()]
    flags = [
        ("topk_hits", "--topk-hits"),
        ("steps", "--steps"),
        ("topk", "--topk"),
        ("draft_tokens", "--draft-tokens"),
        ("observed", "--observed-accept-length"),
        ("verify_ms", "--verify-ms"),
        ("draft_ms", "--draft-ms"),
        ("baseline_ms", "--baseline-ms"),
    ]
    for name, flag in flags:
        if fields[name].strip() and name not in skip:
            argv += [flag, fields[name].strip()]
    return " ".join(shlex.quote(a) for a in argv) + " --json"


class PredictorScreen(WorkbenchScreen):
    CSS_PATH = "predictor.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+r",
            "reset",
            "Example",
            id="predictor.reset",
            tooltip="restore the example numbers (acc 0.75, 5/1/6, observed 1.12)",
        ),
        Binding(
            "ctrl+y",
            "copy_command",
            "Copy CLI",
            id="predictor.copy_cli",
            tooltip="copy the equivalent `eagle-workbench predict` command",
        ),
    ]
    #: Seconds of quiet after the last keystroke before predicting (each prediction is journaled).
    DEBOUNCE_S = 0.2

    def __init__(self, **initial: str):
        super().__init__()
        unknown = set(initial) - set(EXAMPLE)
        if unknown:
            raise TypeError(f"unknown predictor fields: {', '.join(sorted(unknown))}")
        self.initial = {**EXAMPLE, **{k: str(v) for k, v in initial.items()}}
        self.result = None  # the last Prediction shown
        self.error: str | None = None  # why the inputs give no prediction now (None: they do)
        self.form: PredictForm | None = None  # the form the shown result was predicted from
        self.state = "updating"  # "current" | "updating" | "invalid": what the shown result is
        self._generation = 0  # one per edit: a result of older inputs never clears the stale mark
        self._timer: Timer | None = None

    # -- layout ---------------------------------------------------------------------------------
    def compose_body(self) -> Iterable[Widget]:
        v = self.initial

        def label(text: str) -> Label:
            return Label(text, classes="field-label")

        with Horizontal(id="predictor-body"):
            with Vertical(id="inputs"):
                with Horizontal(classes="row"):
                    yield label("Convention")
                    yield Select(CONVENTIONS, value=v["convention"], allow_blank=False, id="convention", compact=True)
                yield Static(CONVENTION_HELP[v["convention"]], id="convention-help", classes="muted")
                with Horizontal(classes="row"):
                    yield label("Rates")
                    yield Input(
                        v["rates"], placeholder="per depth: 0.8,0.7,0.6 (last reused)", id="rates", compact=True
                    )
                with Horizontal(classes="row"):
                    yield label("Top-k hits")
                    yield Input(
                        v["topk_hits"],
                        placeholder="trees: 0.75,0.85,0.9 (depths split by /)",
                        id="topk_hits",
                        compact=True,
                    )
                with Horizontal(classes="row"):
                    for name, title in (("steps", "Steps"), ("topk", "Top-k"), ("draft_tokens", "Draft tokens")):
                        yield Label(title, classes="field-label" if name == "steps" else "field-label inline")
                        yield Input(v[name], type="integer", id=name, compact=True, classes="short")
                with Horizontal(classes="row"):
                    yield label("Observed AL")
                    yield Input(
                        v["observed"], placeholder="the server log's accept len, e.g. 1.12", id="observed", compact=True
                    )
                with Horizontal(classes="row"):
                    yield label("Verify ms")
                    yield Input(
                        v["verify_ms"], placeholder="by draft tokens: 2:20.1,4:21.8", id="verify_ms", compact=True
                    )
                with Horizontal(classes="row"):
                    yield label("Draft ms")
                    yield Input(v["draft_ms"], placeholder="1 step", id="draft_ms", compact=True, classes="short")
                    yield Label("Baseline ms", classes="field-label inline")
                    yield Input(
                        v["baseline_ms"], placeholder="no spec", id="baseline_ms", compact=True, classes="short"
                    )
            with VerticalScroll(id="results"):
                yield Static("", id="status", markup=False)
                with Vertical(id="outputs"):
                    yield Static("", id="headline")
                    yield Static("", id="verdict")
                    yield Static("", id="warnings", classes="warn", markup=False)
                    with Horizontal(id="curve-row"):
                        yield Table(id="curve", cursor_type="none", zebra_stripes=True)
                        yield CurvePlot("", id="plot")
                    yield Static("", id="formula", classes="muted", markup=False)

    def on_mount(self) -> None:
        self.query_one("#rates", Input).focus()
        self._stale()
        self.recompute()

    # -- inputs -----------------------------------------------------------------------------------
    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: self.query_one(f"#{name}", Input).value for name in TEXT_FIELDS}
        out["convention"] = self.query_one("#convention", Select).value
        return out

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id in TEXT_FIELDS:
            self._edited()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "convention":
            self.query_one("#convention-help", Static).update(CONVENTION_HELP.get(str(event.value), ""))
            self._edited()

    def _edited(self) -> None:
        """An input changed: what is shown is stale from this moment, until its own result comes."""
        self._generation += 1
        self._stale()
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.DEBOUNCE_S, self.recompute)

    def _stale(self) -> None:
        results = self.query_one("#results")
        if self.state != "invalid":  # after an error the results stay marked as the last valid ones
            self.state = "updating"
            results.add_class("-stale")
        self._status("◌ updating for the new inputs…", "updating")

    def recompute(self) -> None:
        """Read the form; an input the accept length needs that does not read is shown at once
        (above the results, and on the input); otherwise predict off the UI thread."""
        self._timer = None
        form = read_predict_form(self.fields())
        self._mark_fields(form.marked())
        if not form.ok:
            self._invalid(form.errors[0].message, form)
            return
        self.predict(self._generation, form)

    @background("predictor", done="_predicted")
    def predict(self, generation: int, form: PredictForm) -> tuple[int, PredictForm, Any, str | None]:
        """A core error is an answer about the inputs (the screen shows it on them), not a failure."""
        try:
            return generation, form, self.app.wb.predict(**form.kwargs), None
        except WorkbenchError as exc:
            return generation, form, None, str(exc)

    def _predicted(self, done: tuple[int, PredictForm, Any, str | None]) -> None:
        generation, form, result, error = done
        if generation != self._generation:
            return  # the inputs changed meanwhile: their own result is on its way
        if error is not None:
            marks = form.marked()
            marks.update({f: "error" for f in fields_of(error)})
            self._mark_fields(marks)
            self._invalid(error, form)
            return
        self.show_result(result, form)

    # -- output -----------------------------------------------------------------------------------
    def _mark_fields(self, marks: dict[str, str]) -> None:
        for name in TEXT_FIELDS:
            box = self.query_one(f"#{name}", Input)
            box.set_class(marks.get(name) == "error", "-bad")
            box.set_class(marks.get(name) == "ignored", "-unused")

    def _status(self, text: str, kind: str) -> None:
        status = self.query_one("#status", Static)
        status.update(text)
        for k in ("current", "updating", "invalid"):
            status.set_class(k == kind, f"-{k}")

    def _invalid(self, message: str, form: PredictForm | None) -> None:
        self.error, self.state = message, "invalid"
        results = self.query_one("#results")
        results.remove_class("-stale")
        results.add_class("-invalid")
        below = "below: the last valid inputs' result" if self.result is not None else "no prediction yet"
        self._status(f"✗ {message}  ({below})", "invalid")

    def show_error(self, message: str) -> None:
        """A message about the inputs from elsewhere (kept for callers of the old name)."""
        self._invalid(message, None)

    def show_result(self, r, form: PredictForm | None = None) -> None:
        self.result, self.error, self.form, self.state = r, None, form, "current"
        results = self.query_one("#results")
        results.remove_class("-stale", "-invalid")
        notes = [n.message for n in (form.ignored if form else [])]
        notes += [n.message for n in (form.invalid.values() if form else [])]
        self._status("● up to date" + "".join(f" · {n}" for n in notes), "current")
        rate = r.sglang_accept_rate
        self.query_one("#headline", Static).update(
            f"[b $accent]{r.accept_length:.3f}[/] [b]accept length[/]  [dim]bonus token included, as SGLang "
            f"logs accept len; {r.model} {r.steps}/{r.topk}/{r.draft_tokens}[/]\n"
            f"[b]{r.accepted_drafts:.3f}[/] accepted drafts per step   SGLang accept rate "
            f"[b]{rate['>=0.5.12']:.3f}[/] on ≥0.5.12, [b]{rate['0.5.5']:.3f}[/] on 0.5.5"
            + self._throughput_line(r, form)
        )
        verdict = self.query_one("#verdict", Static)
        verdict.remove_class("ok", "bad")
        bad_observed = form.invalid.get("verdict") if form else None
        if r.verdict:
            v = r.verdict
            verdict.add_class("ok" if v.code == "ok" else "bad")
            verdict.update(f"[b]{v.code}[/b]  ratio {v.ratio:.2f}  {_escape(v.explanation)}")
        elif bad_observed is not None:
            verdict.add_class("bad")
            verdict.update(f"[b]no verdict[/b]  {_escape(bad_observed.message)}")
        else:
            verdict.update("[dim]Enter an observed accept length for a verdict.[/dim]")
        self._fill_table(r)
        observed = r.verdict.ratio * r.accept_length if r.verdict else None
        self.query_one("#plot", CurvePlot).show(
            [p.steps for p in r.curve],
            [p.accept_length for p in r.curve],
            current=r.steps if r.topk == 1 else None,
            observed=observed,
        )
        self.query_one("#formula", Static).update(f"formula: {r.formula}")
        self.query_one("#warnings", Static).update("\n".join(f"⚠ {w}" for w in r.warnings))

    @staticmethod
    def _throughput_line(r, form: PredictForm | None) -> str:
        if r.throughput:
            t = r.throughput
            return f"\n[b]{t.tokens_per_s:.1f}[/] tok/s per request, cycle {t.cycle_ms:.2f} ms" + (
                f", [b]{t.speedup:.2f}×[/] baseline" if t.speedup else ""
            )
        bad = form.invalid.get("throughput") if form else None
        return f"\n[dim]no throughput: {_escape(bad.message)}[/dim]" if bad else ""

    def _fill_table(self, r) -> None:
        table = self.query_one("#curve", DataTable)
        table.clear(columns=True)
        timed = any(p.tokens_per_s is not None for p in r.curve)
        table.add_columns("steps", "draft tok.", "accept len", "accepted", *(["tok/s"] if timed else []))
        for p in r.curve:
            mark = "▶ " if (p.steps == r.steps and r.topk == 1) else "  "
            row = [f"{mark}{p.steps}", str(p.draft_tokens), f"{p.accept_length:.3f}", f"{p.accepted_drafts:.3f}"]
            if timed:  # a step count past the measured verify times has none (the warning says so)
                row.append(f"{p.tokens_per_s:.1f}" if p.tokens_per_s is not None else "-")
            table.add_row(*row)

    # -- actions ----------------------------------------------------------------------------------
    def action_reset(self) -> None:
        for name in TEXT_FIELDS:
            self.query_one(f"#{name}", Input).value = EXAMPLE[name]
        self.query_one("#convention", Select).value = EXAMPLE["convention"]
        self.notify("example restored: acc 0.75, 5/1/6, observed 1.12")

    def action_copy_command(self) -> None:
        fields = self.fields()
        form = read_predict_form(fields)
        unused = {n.field for n in form.ignored} | {n.field for n in form.invalid.values()}
        command = cli_command(fields, skip=unused)
        self.app.copy_to_clipboard(command)
        self.notify(command, title="copied", markup=False)


def _escape(text: str) -> str:
    from textual.markup import escape

    return escape(text)


SPEC = ScreenSpec(id="predictor", title="Predictor", key="f2", factory=PredictorScreen, order=10)
