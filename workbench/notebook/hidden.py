"""``AlignmentWidget``: the hidden-state diff table in a notebook, on ``Workbench.align``.

    from workbench.notebook import AlignmentWidget
    AlignmentWidget(wb, train="rows_0-2000/data_17.ckpt", infer="dump/", engine="sglang==0.5.12.post1",
                    draft="/data/eagle3/output/4", target="/shared/kimi-k2.5-int4")

The candidate x slot matrix as a heat map (best per slot outlined), verdicts with margins, the
recommended layer ids with "apply to config" as an arm-then-confirm button (through the config
history), and the per-token rel_diff of any pair.
"""

from __future__ import annotations

import html
import math

import ipywidgets as w

from workbench.api import engine_choices
from workbench.display import fmt_rel as fmt
from workbench.display import heat_colour
from workbench.errors import InputError, WorkbenchError
from workbench.notebook._arm import ArmButton

ENGINES = engine_choices()  # SGLang releases, then every vLLM release read

VERDICT_COLOUR = {"match": "#2e7d32", "ambiguous": "#b26a00", "no-match": "#c62828"}


def heat(v: float | None) -> str:
    return heat_colour(v) or "#999"


def matrix_html(r) -> str:
    best = {i: r.cols.index(b.candidate) for i, b in enumerate(r.best) if b.candidate in r.cols}
    head = "".join(
        f"<th>{html.escape(s)}<br><small>{html.escape(p or '')}</small></th>" for s, p in zip(r.rows, r.rows_physical)
    )
    rows = []
    for c, name in enumerate(r.cols):
        cells = []
        for s in range(len(r.rows)):
            v = r.matrix[s][c]
            edge = "outline:3px solid #000;font-weight:bold;" if best.get(s) == c else ""
            cells.append(f"<td style='background:{heat(v)};color:#fff;text-align:right;{edge}'>{fmt(v)}</td>")
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td>{html.escape(r.cols_physical[c] or '?')}</td>"
            + "".join(cells)
            + "</tr>"
        )
    return (
        f"<b>rel_diff</b> ({r.tokens_compared} tokens): candidates x training slots"
        f"<table><tr><th>candidate</th><th>point</th>{head}</tr>{''.join(rows)}</table>"
    )


def best_html(r) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(b.slot)}</td><td><code>{html.escape(b.candidate or '-')}</code></td>"
        f"<td>{html.escape(b.physical or '?')}</td><td>{fmt(b.value)}</td>"
        f"<td>{html.escape(b.runner_up or '-')}</td><td>{'-' if b.margin is None else 'x' + fmt(b.margin)}</td>"
        f"<td style='color:{VERDICT_COLOUR.get(b.verdict, '#000')};font-weight:bold'>{b.verdict}</td>"
        f"<td><small>{html.escape(b.reason)}</small></td></tr>"
        for b in r.best
    )
    return (
        "<table><tr><th>slot</th><th>best</th><th>point</th><th>rel_diff</th><th>runner-up</th>"
        f"<th>margin</th><th>verdict</th><th>why</th></tr>{rows}</table>"
    )


def recommendation_html(r) -> str:
    rec = r.recommendation
    if rec is None:
        return "<i style='color:#666'>No engine given: no layer-id recommendation.</i>"
    out = []
    if rec.layer_ids is not None:
        out.append(
            f"<b>Recommended</b> <code>{html.escape(rec.key)} = {rec.layer_ids}</code> for "
            f"{html.escape(rec.engine)} (captures {html.escape(', '.join(p or '?' for p in rec.points))})"
        )
        if not rec.confident:
            out.append("<span style='color:#b26a00'>not every slot matched firmly</span>")
    else:
        out.append(f"<span style='color:#b26a00'>No recommendation: {html.escape(rec.reason)}</span>")
    for f in r.findings:
        colour = "#c62828" if f.severity == "error" else "#b26a00"
        out.append(
            f"<span style='color:{colour};font-weight:bold'>{f.severity} {f.code}</span>: {html.escape(f.message)}"
        )
    if rec.differs is False:
        out.append("<span style='color:#2e7d32'>the draft's config already captures these points</span>")
    return "<br>".join(out)


def sparkline_svg(values, width: int = 480, height: int = 60) -> str:
    vals = [math.log10(max(v, 1e-9)) for v in values]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    step = width / max(1, len(vals) - 1)
    pts = " ".join(f"{i * step:.1f},{height - (v - lo) / span * (height - 4) - 2:.1f}" for i, v in enumerate(vals))
    return (
        f"<svg width='{width}' height='{height}' style='background:#fafafa'>"
        f"<polyline fill='none' stroke='#1565c0' stroke-width='1' points='{pts}'/></svg>"
        f"<br><small>log10 rel_diff per token, {10**lo:.1e} .. {10**hi:.1e}</small>"
    )


class AlignmentWidget(w.VBox):
    def __init__(
        self,
        wb=None,
        *,
        workspace: str | None = None,
        train: str = "",
        infer: str = "",
        engine: str = "sglang==0.5.23",
        draft: str = "",
        target: str = "",
        num_layers: int | None = None,
        run: bool | None = None,
    ):
        if wb is None:
            from workbench.api import Workbench

            wb = Workbench.open(workspace)
        self.wb = wb
        self.result = None
        self.error: str | None = None
        box = dict(layout=w.Layout(width="100%"), style={"description_width": "130px"})
        self.controls = {
            "train": w.Text(value=str(train), description="training capture", placeholder="data_0.ckpt", **box),
            "infer": w.Text(value=str(infer), description="inference capture", placeholder="dump/ or .json", **box),
            "engine": w.Dropdown(options=ENGINES, value=engine, description="engine", **box),
            "draft": w.Text(value=str(draft), description="draft dir", placeholder="optional", **box),
            "target": w.Text(value=str(target), description="target config", placeholder="optional", **box),
            "num_layers": w.Text(
                value="" if num_layers is None else str(num_layers), description="layers", placeholder="optional", **box
            ),
        }
        self.run_button = w.Button(description="Align", button_style="primary")
        self.run_button.on_click(lambda _b: self.run())
        self.error_line = w.HTML()
        self.matrix = w.HTML()
        self.best = w.HTML()
        self.recommendation = w.HTML()
        self.apply_button = ArmButton("Apply to config", self._plan, self._apply, on_error=self._show_error)
        self.status = w.HTML()
        self.slot = w.Dropdown(description="slot", options=[])
        self.candidate = w.Dropdown(description="candidate", options=[])
        self.drill = w.HTML()
        self.slot.observe(lambda _c: self._drill(), names="value")
        self.candidate.observe(lambda _c: self._drill(), names="value")
        inputs = w.VBox(
            [*list(self.controls.values()), self.run_button, self.error_line], layout=w.Layout(width="420px")
        )
        outputs = w.VBox(
            [
                self.best,
                self.recommendation,
                self.apply_button,
                self.status,
                w.HBox([self.slot, self.candidate]),
                self.drill,
            ],
            layout=w.Layout(flex="1", padding="0 0 0 16px"),
        )
        super().__init__([w.HBox([inputs, outputs]), self.matrix])
        if run if run is not None else bool(train and infer):
            self.run()

    def set(self, **values) -> None:
        for k, v in values.items():
            self.controls[k].value = "" if v is None else (v if k == "engine" else str(v))

    def run(self):
        f = {k: c.value.strip() if isinstance(c.value, str) else c.value for k, c in self.controls.items()}
        try:
            if not f["train"] or not f["infer"]:
                raise InputError("enter the training capture and the inference capture")
            try:
                n = int(f["num_layers"]) if f["num_layers"] else None
            except ValueError:
                raise InputError(f"layers: {f['num_layers']!r} is not an integer") from None
            r = self.wb.align(
                f["train"],
                f["infer"],
                engine=f["engine"],
                draft=f["draft"] or None,
                target=f["target"] or None,
                num_layers=n,
            )
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return None
        self.result, self.error = r, None
        self.error_line.value = ""
        self.matrix.value = matrix_html(r)
        self.best.value = best_html(r)
        self.recommendation.value = recommendation_html(r)
        fix = self._fix()
        self.apply_button.layout.display = None if fix else "none"
        self.apply_button.disarm()
        self.slot.options = [(s, i) for i, s in enumerate(r.rows)]
        self.candidate.options = [(f"{c} ({p or '?'})", i) for i, (c, p) in enumerate(zip(r.cols, r.cols_physical))]
        if r.best and r.best[0].candidate in r.cols:
            self.slot.value, self.candidate.value = 0, r.cols.index(r.best[0].candidate)
        self._drill()
        return r

    def _show_error(self, message: str) -> None:
        self.error = message
        self.error_line.value = f'<span style="color:#c62828;font-weight:bold">{html.escape(message)}</span>'

    def _drill(self) -> None:
        r = self.result
        if r is None or self.slot.value is None or self.candidate.value is None:
            self.drill.value = ""
            return
        pt = r.per_token(self.slot.value, self.candidate.value)
        vals = pt["rel_diff"]
        worst = sorted(range(len(vals)), key=lambda i: -vals[i])[:5]
        self.drill.value = (
            f"<b>{html.escape(pt['slot'])} vs {html.escape(pt['candidate'])}</b>"
            f"{'' if pt['exact'] else ' <i>(screen values)</i>'}<br>"
            + sparkline_svg(vals)
            + "<br>worst tokens: "
            + ", ".join(f"{pt['positions'][i]}: {fmt(vals[i])}" for i in worst)
        )

    def _fix(self):
        if self.result is None:
            return None
        return next((f.fix for f in self.result.findings if f.fix and f.fix.applicable), None)

    def _plan(self):
        fix = self._fix()
        if fix is None:
            raise InputError("nothing to apply: give the draft dir, or the config already agrees")
        return self.wb.config_fix_plan(fix)

    def _apply(self):
        change = self.wb.config_apply_fix(self._fix(), confirm=True)
        self.status.value = f"applied: <code>{html.escape(change.location)}</code> is now v{change.version.number}"
        self.run()
        return change
