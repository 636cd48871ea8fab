"""``DrafterWidget``: a drafter evaluated on its training data, in a notebook.

    from workbench.notebook import DrafterWidget
    d = DrafterWidget(wb, draft="/data/eagle3/output/4", data="/data/eagle3/synth_100k",
                      target="/shared/kimi-k2.5-int4", depth=5)
    d.to_predictor()          # a PredictorWidget fed with the drafter's rates

Per-depth SpecForge acc_k, full and conditional accuracy, top-k hit rates, vocabulary coverage,
the strict weight check and the predicted accept length.
"""

from __future__ import annotations

import html

import ipywidgets as w

from workbench.errors import InputError, WorkbenchError


def pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def table_html(r) -> str:
    head = "".join(f"<th>top{k}</th>" for k in r.topk)
    sf = r.speculators_full_acc or [None] * r.depth
    sc = r.speculators_cond_acc or [None] * r.depth
    rows = "".join(
        f"<tr><td>{d}</td><td>{pct(r.acc[d])}</td><td>{pct(r.full_acc[d])}</td><td>{pct(r.cond_acc[d])}</td>"
        f"<td>{pct(sf[d])}</td><td>{pct(sc[d])}</td>"
        + "".join(f"<td>{pct(v)}</td>" for v in r.topk_acc[d])
        + f"<td>{r.positions_per_depth[d]}</td></tr>"
        for d in range(r.depth)
    )
    return (
        "<table><tr><th>depth</th><th>SpecForge acc_k</th><th>chain full</th><th>chain cond</th>"
        "<th>speculators full_acc</th><th>speculators cond_acc</th>" + head + f"<th>positions</th></tr>{rows}</table>"
    )


def summary_html(r) -> str:
    p = r.predicted
    out = []
    if p.get("accept_length") is not None:
        out.append(
            f"<b style='font-size:120%'>{p['accept_length']:.3f}</b> predicted accept length "
            f"({p['steps']} steps, chain, bonus token included, from chain full)"
        )
    if p.get("from_acc") is not None:
        out.append(f"<b>{p['from_acc']:.3f}</b> from acc_k alone (SpecForge-style)")
    out.append(
        f"{r.samples} samples, {r.positions} positions; the draft vocabulary covers "
        f"{pct(r.vocab_coverage)} of the target's tokens"
    )
    wr = r.weights
    bad = wr["missing"] + wr["unexpected"] + [m["name"] for m in wr["mismatched"]]
    out.append(
        "weights: "
        + (
            "<b style='color:#2e7d32'>ok</b>"
            if not bad
            else "<b style='color:#c62828'>PROBLEMS</b> " + html.escape(", ".join(bad))
        )
    )
    out += [f"<small>note: {html.escape(n)}</small>" for n in r.notes]
    return "<br>".join(out)


class DrafterWidget(w.VBox):
    def __init__(
        self,
        wb=None,
        *,
        workspace: str | None = None,
        draft: str = "",
        data: str = "",
        target: str = "",
        depth: int = 3,
        run: bool | None = None,
    ):
        if wb is None:
            from workbench.api import Workbench

            wb = Workbench.open(workspace)
        self.wb = wb
        self.result = None
        self.error: str | None = None
        box = dict(layout=w.Layout(width="100%"), style={"description_width": "110px"})
        self.controls = {
            "draft": w.Text(value=str(draft), description="draft dir", **box),
            "data": w.Text(value=str(data), description="training data", **box),
            "target": w.Text(value=str(target), description="target dir", **box),
            "depth": w.BoundedIntText(value=int(depth), min=1, max=16, description="depth", **box),
        }
        self.run_button = w.Button(description="Evaluate", button_style="primary")
        self.run_button.on_click(lambda _b: self.run())
        self.error_line = w.HTML()
        self.table = w.HTML()
        self.summary = w.HTML()
        inputs = w.VBox(
            [*list(self.controls.values()), self.run_button, self.error_line], layout=w.Layout(width="420px")
        )
        super().__init__(
            [w.HBox([inputs, w.VBox([self.table, self.summary], layout=w.Layout(flex="1", padding="0 0 0 16px"))])]
        )
        if run if run is not None else bool(draft and data and target):
            self.run()

    def run(self):
        f = {k: c.value for k, c in self.controls.items()}
        try:
            missing = [k for k in ("draft", "data", "target") if not str(f[k]).strip()]
            if missing:
                raise InputError(f"{missing[0]}: enter a directory")
            r = self.wb.drafter_eval(f["draft"].strip(), f["data"].strip(), f["target"].strip(), depth=f["depth"])
        except WorkbenchError as exc:
            self.error = str(exc)
            self.error_line.value = f'<span style="color:#c62828;font-weight:bold">{html.escape(self.error)}</span>'
            return None
        self.result, self.error = r, None
        self.error_line.value = ""
        self.table.value = table_html(r)
        self.summary.value = summary_html(r)
        return r

    def predictor_fields(self) -> dict:
        if self.result is None:
            raise InputError("evaluate a drafter first")
        p = self.wb.drafter_predictor_inputs(self.result)
        obs = p["observed_accept_length"]
        return {
            "convention": "marginal",
            "rates": ",".join(f"{v:.4f}" for v in p["marginal"]),
            "topk_hits": " / ".join(",".join(f"{v:.4f}" for v in row) for row in (p["topk_hits"] or [])),
            "steps": p["steps"],
            "topk": 1,
            "draft_tokens": p["steps"] + 1,
            "observed": "" if obs is None else f"{obs:.2f}",
        }

    def to_predictor(self, widget=None):
        """Feed a PredictorWidget (a new one unless given) with this drafter's rates."""
        from workbench.notebook.predictor import PredictorWidget

        fields = self.predictor_fields()
        if widget is None:
            return PredictorWidget(self.wb, **fields)
        widget.set(**fields)
        return widget
