"""``PredictorWidget``: the Predictor in a notebook, on the same ``Workbench.predict``.

    from workbench.notebook import PredictorWidget
    PredictorWidget(wb)          # or PredictorWidget(workspace="~/my-workspace")

Sliders and text boxes on the left; the prediction, verdict, a table of AL for steps 1..8, a plot
and the formula on the right, recomputed whenever an input changes. Bad input shows one red line.
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as w

from workbench.errors import WorkbenchError

CONVENTIONS = [
    ("acc (SpecForge/EAGLE training acc_k)", "acc"),
    ("conditional (c_1..c_K)", "conditional"),
    ("marginal (vLLM per-position P_k)", "marginal"),
    ("alpha (one rate)", "alpha"),
]
#: The numbers of a real debugging session: training acc ~0.75, served at 5/1/6, logged 1.12.
EXAMPLE = {
    "convention": "acc",
    "rates": "0.75",
    "topk_hits": "",
    "steps": 5,
    "topk": 1,
    "draft_tokens": 6,
    "observed": "1.12",
    "verify_ms": "",
    "draft_ms": "",
    "baseline_ms": "",
}


class PredictorWidget(w.VBox):
    def __init__(self, wb=None, *, workspace: str | None = None, **initial: Any):
        unknown = set(initial) - set(EXAMPLE)
        if unknown:
            raise TypeError(f"unknown predictor fields: {', '.join(sorted(unknown))}")
        if wb is None:
            from workbench.api import Workbench

            wb = Workbench.open(workspace)
        self.wb = wb
        self.result = None  # the last Prediction shown
        self.error: str | None = None
        v = {**EXAMPLE, **initial}
        text = dict(continuous_update=False, layout=w.Layout(width="100%"), style={"description_width": "150px"})
        self.controls: dict[str, w.ValueWidget] = {
            "convention": w.Dropdown(
                options=CONVENTIONS,
                value=v["convention"],
                description="convention",
                layout=w.Layout(width="100%"),
                style={"description_width": "150px"},
            ),
            "rates": w.Text(value=str(v["rates"]), description="per-depth rates", placeholder="0.8,0.7,0.6", **text),
            "topk_hits": w.Text(
                value=str(v["topk_hits"]),
                description="top-k hits (trees)",
                placeholder="0.75,0.85,0.9 (depths split by /)",
                **text,
            ),
            "steps": w.IntSlider(value=int(v["steps"]), min=1, max=16, description="steps", **text),
            "topk": w.IntSlider(value=int(v["topk"]), min=1, max=8, description="topk", **text),
            "draft_tokens": w.BoundedIntText(
                value=int(v["draft_tokens"]), min=1, max=1024, description="draft tokens", **text
            ),
            "observed": w.Text(
                value=str(v["observed"]), description="observed accept len", placeholder="from the server log", **text
            ),
            "verify_ms": w.Text(
                value=str(v["verify_ms"]), description="verify ms (NDT:MS)", placeholder="2:20.1,4:21.8,6:23.5", **text
            ),
            "draft_ms": w.Text(value=str(v["draft_ms"]), description="draft step ms", placeholder="1.2", **text),
            "baseline_ms": w.Text(
                value=str(v["baseline_ms"]), description="baseline ms", placeholder="decode without speculation", **text
            ),
        }
        self.error_line = w.HTML()
        self.headline = w.HTML()
        self.verdict = w.HTML()
        self.table = w.HTML()
        self.plot = w.HTML()
        self.formula = w.HTML()
        self.warnings = w.HTML()
        inputs = w.VBox([*list(self.controls.values()), self.error_line], layout=w.Layout(width="420px"))
        outputs = w.VBox(
            [self.headline, self.verdict, w.HBox([self.table, self.plot]), self.formula, self.warnings],
            layout=w.Layout(flex="1", padding="0 0 0 16px"),
        )
        super().__init__([w.HBox([inputs, outputs])])
        self._muted = False
        for control in self.controls.values():
            control.observe(self._changed, names="value")
        self.update()

    def _changed(self, _change) -> None:
        if not self._muted:
            self.update()

    # -- state ------------------------------------------------------------------------------------
    def fields(self) -> dict[str, Any]:
        return {name: c.value for name, c in self.controls.items()}

    def set(self, **values: Any) -> None:
        """Change several inputs, then recompute once."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise TypeError(f"unknown predictor fields: {', '.join(sorted(unknown))}")
        self._muted = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._muted = False
        self.update()

    def update(self) -> None:
        """Read the form as the TUI's Predictor does (``workbench.forms``: the same inputs give the
        same numbers) and predict; an input the accept length needs that does not read is shown in
        red and the result stays the last valid one's, said so; inputs this prediction does not use
        are named, never a block."""
        from workbench.forms import read_predict_form

        form = read_predict_form(self.fields())
        try:
            if not form.ok:
                raise WorkbenchError(form.errors[0].message)
            result = self.wb.predict(**form.kwargs)
        except WorkbenchError as exc:
            self.error = str(exc)
            below = "below: the last valid inputs' result" if self.result is not None else "no prediction yet"
            self.error_line.value = (
                f'<span style="color:#c62828;font-weight:bold">{html.escape(self.error)}</span> '
                f'<span style="color:#666">({below})</span>'
            )
            self.headline.value = self._stale_mark(self.headline.value)
            return
        self.error, self.result = None, result
        notes = [n.message for n in form.ignored] + [n.message for n in form.invalid.values()]
        self.error_line.value = "".join(f"<div style='color:#666'>not used: {html.escape(n)}</div>" for n in notes)
        self._render(result, form)

    @staticmethod
    def _stale_mark(headline: str) -> str:
        mark = "<div class='wb-stale' style='color:#c62828'>(the last valid inputs' result)</div>"
        return headline if mark in headline else mark + headline

    # -- rendering --------------------------------------------------------------------------------
    def _render(self, r, form=None) -> None:
        rate = r.sglang_accept_rate
        tp = ""
        if r.throughput:
            t = r.throughput
            tp = f"<br><b>{t.tokens_per_s:.1f}</b> tok/s per request (cycle {t.cycle_ms:.2f} ms)" + (
                f", <b>{t.speedup:.2f}×</b> baseline" if t.speedup else ""
            )
        self.headline.value = (
            f"<span style='font-size:1.6em;font-weight:bold'>{r.accept_length:.3f}</span> accept length "
            f"<span style='color:#666'>(bonus token included, as SGLang logs accept len; {r.model} "
            f"{r.steps}/{r.topk}/{r.draft_tokens})</span><br><b>{r.accepted_drafts:.3f}</b> accepted drafts per "
            f"step · SGLang accept rate <b>{rate['>=0.5.12']:.3f}</b> on ≥0.5.12, <b>{rate['0.5.5']:.3f}</b> "
            f"on 0.5.5{tp}"
        )
        bad_observed = form.invalid.get("verdict") if form is not None else None
        bad_timing = form.invalid.get("throughput") if form is not None else None
        if bad_timing is not None and not r.throughput:
            self.headline.value += (
                f"<br><span style='color:#666'>no throughput: {html.escape(bad_timing.message)}</span>"
            )
        if r.verdict:
            v = r.verdict
            colour = "#2e7d32" if v.code == "ok" else "#c62828"
            self.verdict.value = (
                f"<div style='border-left:4px solid {colour};padding-left:8px'>"
                f"<b style='color:{colour}'>{v.code}</b> ratio {v.ratio:.2f} — "
                f"{html.escape(v.explanation)}</div>"
            )
        elif bad_observed is not None:
            self.verdict.value = (
                f"<div style='border-left:4px solid #c62828;padding-left:8px'><b>no verdict</b> "
                f"{html.escape(bad_observed.message)}</div>"
            )
        else:
            self.verdict.value = "<i style='color:#666'>Enter an observed accept length for a verdict.</i>"
        self.table.value = curve_table_html(r)
        observed = r.verdict.ratio * r.accept_length if r.verdict else None
        self.plot.value = curve_svg(
            [p.steps for p in r.curve],
            [p.accept_length for p in r.curve],
            current=r.steps if r.topk == 1 else None,
            observed=observed,
        )
        self.formula.value = f"<code>{html.escape(r.formula)}</code>"
        self.warnings.value = "".join(f"<div style='color:#e65100'>⚠ {html.escape(x)}</div>" for x in r.warnings)


def curve_table_html(r) -> str:
    timed = any(p.tokens_per_s is not None for p in r.curve)
    head = (
        "<tr><th>steps</th><th>draft tokens</th><th>accept length</th><th>accepted drafts</th>"
        + ("<th>tok/s</th>" if timed else "")
        + "</tr>"
    )
    rows = []
    for p in r.curve:
        bold = " style='font-weight:bold;background:#fff3e0'" if (p.steps == r.steps and r.topk == 1) else ""
        cells = [p.steps, p.draft_tokens, f"{p.accept_length:.3f}", f"{p.accepted_drafts:.3f}"]
        if timed:  # a step count past the measured verify times has none (the warnings say so)
            cells.append(f"{p.tokens_per_s:.1f}" if p.tokens_per_s is not None else "-")
        rows.append(f"<tr{bold}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table class='predictor-curve'>{head}{''.join(rows)}</table>"


def curve_svg(steps, values, *, current=None, observed=None, width: int = 360, height: int = 220) -> str:
    """A small dependency-free SVG line plot of accept length against steps."""
    left, right, top, bottom = 40, 10, 14, 28
    hi = max([*values, observed or 1.0, 2.0]) * 1.08
    xs = [left + (s - steps[0]) / max(steps[-1] - steps[0], 1) * (width - left - right) for s in steps]

    def y(v):
        return top + (hi - v) / (hi - 1.0) * (height - top - bottom)

    pts = " ".join(f"{x:.1f},{y(v):.1f}" for x, v in zip(xs, values))
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' class='predictor-plot'>",
        f"<text x='{left}' y='10' font-size='11'>accept length vs steps (chain, bonus included)</text>",
        f"<line x1='{left}' y1='{y(1.0):.1f}' x2='{width - right}' y2='{y(1.0):.1f}' stroke='#999'/>",
        f"<line x1='{left}' y1='{top}' x2='{left}' y2='{y(1.0):.1f}' stroke='#999'/>",
    ]
    for tick in range(1, int(hi) + 1):
        parts.append(f"<text x='{left - 6}' y='{y(tick) + 4:.1f}' font-size='10' text-anchor='end'>{tick}</text>")
    for x, s in zip(xs, steps):
        parts.append(f"<text x='{x:.1f}' y='{height - 10}' font-size='10' text-anchor='middle'>{s}</text>")
    parts.append(f"<polyline points='{pts}' fill='none' stroke='#1565c0' stroke-width='2'/>")
    for x, s, v in zip(xs, steps, values):
        r = 5 if s == current else 3
        fill = "#ef6c00" if s == current else "#1565c0"
        parts.append(
            f"<circle cx='{x:.1f}' cy='{y(v):.1f}' r='{r}' fill='{fill}'><title>{s} steps: {v:.3f}</title></circle>"
        )
    if observed is not None:
        parts.append(
            f"<line x1='{left}' y1='{y(observed):.1f}' x2='{width - right}' y2='{y(observed):.1f}' "
            f"stroke='#c62828' stroke-dasharray='4 3'/><text x='{width - right}' y='{y(observed) - 4:.1f}' "
            f"font-size='10' text-anchor='end' fill='#c62828'>observed {observed:.2f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
