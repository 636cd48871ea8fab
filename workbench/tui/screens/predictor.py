"""Predictor: expected accept length from per-depth accuracy, against what the server logs.

Inputs on the left (rates in an explicit convention, SGLang's steps/topk/draft tokens, optional
observed accept length and timings); on the right the prediction, the verdict, AL for steps 1..8
as a table and a plot, and the formula used. Everything updates as the inputs change.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Select, Static

from workbench.errors import WorkbenchError
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

TEXT_FIELDS = (
    "rates",
    "topk_hits",
    "steps",
    "topk",
    "draft_tokens",
    "observed",
    "verify_ms",
    "draft_ms",
    "baseline_ms",
)


def request_from_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The ``Workbench.predict`` keyword arguments for the form's text; InputError names the field."""
    from workbench.parsing import optional, parse_float_rows, parse_floats, parse_pairs

    conv = fields["convention"]
    kw: dict[str, Any] = {conv: parse_floats(fields["rates"], conv)}
    if optional(fields["topk_hits"]):
        kw["topk_hits"] = parse_float_rows(fields["topk_hits"], "top-k hits")
    for name in ("steps", "topk", "draft_tokens"):
        text = optional(fields[name])
        kw[name] = _number(text, name, int) if text else None
    if optional(fields["observed"]):
        kw["observed_accept_length"] = _number(fields["observed"], "observed accept length", float)
    if optional(fields["verify_ms"]):
        kw["verify_ms"] = parse_pairs(fields["verify_ms"], "verify ms")
    for name in ("draft_ms", "baseline_ms"):
        if optional(fields[name]):
            kw[name] = _number(fields[name], name.replace("_", " "), float)
    return kw


def _number(text: str, name: str, kind):
    from workbench.errors import InputError

    try:
        return kind(text.strip())
    except ValueError:
        raise InputError(f"{name}: {text.strip()!r} is not {'an integer' if kind is int else 'a number'}") from None


def cli_command(fields: dict[str, Any]) -> str:
    """The equivalent ``eagle-workbench predict`` command line."""
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
        if fields[name].strip():
            argv += [flag, fields[name].strip()]
    return " ".join(shlex.quote(a) for a in argv) + " --json"


class PredictorScreen(WorkbenchScreen):
    CSS_PATH = "predictor.tcss"
    BINDINGS = [
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
        self.error: str | None = None
        self._timer: Timer | None = None

    # -- layout ---------------------------------------------------------------------------------
    def compose_body(self) -> Iterable[Widget]:
        v = self.initial
        with Horizontal(id="predictor-body"):
            with VerticalScroll(id="inputs"):
                yield Label("Convention", classes="field-label")
                yield Select(CONVENTIONS, value=v["convention"], allow_blank=False, id="convention", compact=True)
                yield Static(CONVENTION_HELP[v["convention"]], id="convention-help", classes="muted")
                yield Label("Per-depth rates (last value reused)", classes="field-label")
                yield Input(v["rates"], placeholder="0.8,0.7,0.6", id="rates", compact=True)
                yield Label("Top-k hit rates for trees (depth/depth)", classes="field-label")
                yield Input(v["topk_hits"], placeholder="0.75,0.85,0.9", id="topk_hits", compact=True)
                with Horizontal(classes="triple"):
                    for name, title in (("steps", "Steps"), ("topk", "Top-k"), ("draft_tokens", "Draft tok.")):
                        with Vertical():
                            yield Label(title, classes="field-label")
                            yield Input(v[name], type="integer", id=name, compact=True)
                yield Label("Observed accept len (from the log)", classes="field-label")
                yield Input(v["observed"], placeholder="e.g. 1.12", id="observed", compact=True)
                yield Label("Verify ms by draft tokens (NDT:MS,..)", classes="field-label")
                yield Input(v["verify_ms"], placeholder="2:20.1,4:21.8,6:23.5", id="verify_ms", compact=True)
                with Horizontal(classes="pair"):
                    with Vertical():
                        yield Label("Draft step ms", classes="field-label")
                        yield Input(v["draft_ms"], placeholder="1.2", id="draft_ms", compact=True)
                    with Vertical():
                        yield Label("Baseline ms", classes="field-label")
                        yield Input(v["baseline_ms"], placeholder="no spec", id="baseline_ms", compact=True)
                yield Static("", id="error", classes="error-line", markup=False)
            with VerticalScroll(id="results"):
                yield Static("", id="headline")
                yield Static("", id="verdict")
                yield Table(id="curve", cursor_type="none", zebra_stripes=True)
                yield CurvePlot("", id="plot")
                yield Static("", id="formula", classes="muted", markup=False)
                yield Static("", id="warnings", classes="warn", markup=False)

    def on_mount(self) -> None:
        self.query_one("#rates", Input).focus()
        self.recompute()

    # -- inputs -----------------------------------------------------------------------------------
    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: self.query_one(f"#{name}", Input).value for name in TEXT_FIELDS}
        out["convention"] = self.query_one("#convention", Select).value
        return out

    def on_input_changed(self, _event: Input.Changed) -> None:
        self._schedule()

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "convention":
            self.query_one("#convention-help", Static).update(CONVENTION_HELP.get(str(event.value), ""))
            self._schedule()

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.DEBOUNCE_S, self.recompute)

    def recompute(self) -> None:
        """Parse the form; show a field error inline, or predict off the UI thread."""
        self._timer = None
        try:
            request = request_from_fields(self.fields())
        except WorkbenchError as exc:
            self.show_error(str(exc))
            return
        self.predict(request)

    @background("predictor", done="show_result", failed="show_error")
    def predict(self, request: dict[str, Any]):
        return self.app.wb.predict(**request)

    # -- output -----------------------------------------------------------------------------------
    def show_error(self, message: str) -> None:
        self.error = message
        self.query_one("#error", Static).update(message)
        self.query_one("#results").add_class("stale")

    def show_result(self, r) -> None:
        self.result, self.error = r, None
        self.query_one("#error", Static).update("")
        self.query_one("#results").remove_class("stale")
        rate = r.sglang_accept_rate
        self.query_one("#headline", Static).update(
            f"[b $accent]{r.accept_length:.3f}[/] [b]accept length[/]  [dim]bonus token included, as SGLang "
            f"logs accept len; {r.model} {r.steps}/{r.topk}/{r.draft_tokens}[/]\n"
            f"[b]{r.accepted_drafts:.3f}[/] accepted drafts per step   SGLang accept rate "
            f"[b]{rate['>=0.5.12']:.3f}[/] on ≥0.5.12, [b]{rate['0.5.5']:.3f}[/] on 0.5.5"
            + (
                f"\n[b]{r.throughput.tokens_per_s:.1f}[/] tok/s per request, cycle {r.throughput.cycle_ms:.2f} ms"
                + (f", [b]{r.throughput.speedup:.2f}×[/] baseline" if r.throughput.speedup else "")
                if r.throughput
                else ""
            )
        )
        verdict = self.query_one("#verdict", Static)
        verdict.remove_class("ok", "bad")
        if r.verdict:
            v = r.verdict
            verdict.add_class("ok" if v.code == "ok" else "bad")
            verdict.update(f"[b]{v.code}[/b]  ratio {v.ratio:.2f}  {_escape(v.explanation)}")
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

    def _fill_table(self, r) -> None:
        table = self.query_one("#curve", DataTable)
        table.clear(columns=True)
        timed = any(p.tokens_per_s is not None for p in r.curve)
        table.add_columns("steps", "draft tok.", "accept len", "accepted", *(["tok/s"] if timed else []))
        for p in r.curve:
            mark = "▶ " if (p.steps == r.steps and r.topk == 1) else "  "
            row = [f"{mark}{p.steps}", str(p.draft_tokens), f"{p.accept_length:.3f}", f"{p.accepted_drafts:.3f}"]
            if timed:
                row.append(f"{p.tokens_per_s:.1f}" if p.tokens_per_s is not None else "")
            table.add_row(*row)

    # -- actions ----------------------------------------------------------------------------------
    def action_reset(self) -> None:
        for name in TEXT_FIELDS:
            self.query_one(f"#{name}", Input).value = EXAMPLE[name]
        self.query_one("#convention", Select).value = EXAMPLE["convention"]
        self.notify("example restored: acc 0.75, 5/1/6, observed 1.12")

    def action_copy_command(self) -> None:
        command = cli_command(self.fields())
        self.app.copy_to_clipboard(command)
        self.notify(command, title="copied", markup=False)


def _escape(text: str) -> str:
    from textual.markup import escape

    return escape(text)


SPEC = ScreenSpec(id="predictor", title="Predictor", key="f2", factory=PredictorScreen, order=10)
