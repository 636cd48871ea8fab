"""``DoctorWidget``: the doctor in a notebook, on the same ``Workbench.doctor``.

    from workbench.notebook import DoctorWidget
    DoctorWidget(wb, draft="/data/eagle3/output/4", target="/shared/kimi-k2.5-int4",
                 engine="sglang==0.5.12.post1", trained="2,30,58")

Findings by severity with their evidence, the capture report side by side, and "apply fix" as an
arm-then-confirm button: the first click shows the diff, the second writes it through the history.
"""

from __future__ import annotations

import html
import json

import ipywidgets as w

from workbench.api import engine_choices
from workbench.display import evidence_label
from workbench.errors import WorkbenchError
from workbench.notebook._arm import ArmButton

ENGINES = engine_choices()  # SGLang releases, then every vLLM release read

ALGORITHMS = [("EAGLE3", "EAGLE3"), ("EAGLE", "EAGLE"), ("not given", "")]
CONVENTIONS = ["output-of-layer", "capture-before", "hf-index"]
COLOURS = {"error": "#c62828", "warning": "#b26a00", "info": "#666"}


class DoctorWidget(w.VBox):
    def __init__(
        self,
        wb=None,
        *,
        workspace: str | None = None,
        draft: str = "",
        target: str = "",
        engine: str = "sglang==0.5.23",
        algorithm: str = "EAGLE3",
        trained: str = "",
        convention: str = "output-of-layer",
        trained_engine: str = "",
        run: bool | None = None,
    ):
        if wb is None:
            from workbench.api import Workbench

            wb = Workbench.open(workspace)
        self.wb = wb
        self.report = None
        self.error: str | None = None
        box = dict(layout=w.Layout(width="100%"), style={"description_width": "130px"})
        self.controls = {
            "draft": w.Text(value=draft, description="draft dir", placeholder="/data/eagle3/output/4", **box),
            "target": w.Text(value=target, description="target config", placeholder="optional", **box),
            "engine": w.Dropdown(options=ENGINES, value=engine, description="engine", **box),
            "algorithm": w.Dropdown(options=ALGORITHMS, value=algorithm, description="algorithm", **box),
            "trained": w.Text(value=trained, description="trained layers", placeholder="2,30,58", **box),
            "convention": w.Dropdown(options=CONVENTIONS, value=convention, description="convention", **box),
            "trained_engine": w.Text(
                value=trained_engine,
                description="trained engine",
                placeholder="specforge==0.2.0 or sglang==0.5.14",
                **box,
            ),
        }
        self.run_button = w.Button(description="Run checks", button_style="primary")
        self.run_button.on_click(lambda _b: self.run())
        self.error_line = w.HTML()
        self.findings = w.HTML()
        self.capture = w.HTML()
        self.fix_choice = w.Dropdown(options=[], description="fix", layout=w.Layout(width="100%"))
        self.fix_button = ArmButton("Apply fix", self._fix_plan, self._apply_fix, on_error=self._show_error)
        self.status = w.HTML()
        inputs = w.VBox(
            [*list(self.controls.values()), self.run_button, self.error_line], layout=w.Layout(width="420px")
        )
        outputs = w.VBox(
            [self.findings, self.capture, self.fix_choice, self.fix_button, self.status],
            layout=w.Layout(flex="1", padding="0 0 0 16px"),
        )
        super().__init__([w.HBox([inputs, outputs])])
        if run if run is not None else bool(draft):
            self.run()

    def set(self, **values) -> None:
        for k, v in values.items():
            self.controls[k].value = v

    def run(self):
        from workbench.parsing import parse_ids

        f = {k: c.value for k, c in self.controls.items()}
        try:
            if not f["draft"].strip():
                from workbench.errors import InputError

                raise InputError("draft: enter the draft checkpoint directory")
            trained = parse_ids(f["trained"], "trained layers") if f["trained"].strip() else None
            report = self.wb.doctor(
                f["draft"].strip(),
                f["target"].strip() or None,
                engine=f["engine"],
                algorithm=f["algorithm"] or None,
                trained_layers=trained,
                trained_convention=f["convention"],
                trained_engine=f["trained_engine"].strip() or None,
            )
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return None
        self.error, self.report = None, report
        self.error_line.value = ""
        self._render(report)
        return report

    def _show_error(self, message: str) -> None:
        self.error = message
        self.error_line.value = f'<span style="color:#c62828;font-weight:bold">{html.escape(message)}</span>'

    # -- rendering --------------------------------------------------------------------------------
    def _render(self, r) -> None:
        rows = []
        for f in r.findings:
            ev = "<br>".join(
                f"<code>{html.escape(k)}</code>: {html.escape(v if isinstance(v, str) else json.dumps(v, default=str))}"
                for k, v in f.evidence.items()
            )
            fix = html.escape(f.fix.summary) if f.fix else ""
            rows.append(
                f"<tr><td style='color:{COLOURS[f.severity]};font-weight:bold'>{f.severity}</td>"
                f"<td class='evidence-class'>{evidence_label(f.evidence_class)}</td>"
                f"<td><code>{f.code}</code></td><td>{html.escape(f.message)}"
                f"<details><summary>evidence</summary><small>{ev}</small></details></td><td>{fix}</td></tr>"
            )
        skipped = getattr(r, "skipped", [])
        skipped_html = (
            "<details><summary>skipped " + str(len(skipped)) + " checks for lack of inputs (not an "
            "all-clear)</summary><small>"
            + "<br>".join(html.escape(f"{s.check}: needs {s.needs}") for s in skipped)
            + "</small></details>"
            if skipped
            else ""
        )
        self.findings.value = (
            (
                "<table><tr><th>severity</th><th>evidence</th><th>code</th><th>finding</th>"
                "<th>fix</th></tr>" + "".join(rows) + "</table>"
            )
            if rows
            else "<b style='color:#2e7d32'>No findings in the checks that ran.</b>"
        ) + skipped_html
        self.capture.value = capture_html(r.capture)
        fixes = [(f"{f.code}: {f.fix.summary}", i) for i, f in enumerate(r.findings) if f.fix and f.fix.applicable]
        self.fix_choice.options = fixes
        self.fix_choice.value = fixes[0][1] if fixes else None
        self.fix_choice.layout.display = None if fixes else "none"
        self.fix_button.layout.display = None if fixes else "none"
        self.fix_button.disarm()

    def _selected_fix(self):
        i = self.fix_choice.value
        if i is None or self.report is None:
            from workbench.errors import InputError

            raise InputError("no fix selected")
        return self.report.findings[i].fix

    def _fix_plan(self):
        return self.wb.config_fix_plan(self._selected_fix())

    def _apply_fix(self):
        change = self.wb.config_apply_fix(self._selected_fix(), confirm=True)
        self.status.value = f"applied: <code>{html.escape(change.location)}</code> is now v{change.version.number}"
        self.run()
        return change


def capture_html(cap) -> str:
    if cap is None:
        return "<i style='color:#666'>No capture report (give a target config for the layer count).</i>"
    rows = "".join(
        f"<tr><td>{r.slot}</td><td>{_s(r.config_id)}</td><td>{_s(r.engine_index)}</td>"
        f"<td>{r.engine_point or '<b style=color:#c62828>missing</b>'}</td><td>{_s(r.trained_point)}</td>"
        f"<td>{'' if r.match is None else ('ok' if r.match else '<b style=color:#c62828>MISMATCH</b>')}</td></tr>"
        for r in cap.rows
    )
    fatal = f"<br><b style='color:#c62828'>engine fails:</b> {html.escape(cap.fatal)}" if cap.fatal else ""
    return (
        f"<b>Capture</b> under {html.escape(cap.engine)} on {html.escape(cap.arch or 'unknown target')} "
        f"({cap.num_layers} layers), ids from <code>{html.escape(cap.ids_source)}</code>"
        "<table><tr><th>slot</th><th>config id</th><th>engine index</th><th>engine captures</th>"
        f"<th>trained on</th><th></th></tr>{rows}</table>"
        f"<small>training: {html.escape(cap.trained_source)}</small>{fatal}"
    )


def _s(v) -> str:
    return "-" if v is None else html.escape(str(v))
