"""Doctor: findings by severity with their evidence, the capture report, and "apply fix" through the
config history (a confirm shows the diff first)."""

from __future__ import annotations

import json
from typing import Optional

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Label, Select, Static

from workbench.errors import WorkbenchError
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec

ENGINES = [("sglang 0.5.23 (latest)", "sglang==0.5.23"), ("sglang 0.5.13", "sglang==0.5.13"),
           ("sglang 0.5.12.post1", "sglang==0.5.12.post1"), ("vllm", "vllm")]
ALGORITHMS = [("EAGLE3", "EAGLE3"), ("EAGLE", "EAGLE"), ("not given", "")]
CONVENTIONS = [("output-of-layer", "output-of-layer"), ("capture-before", "capture-before"),
               ("hf-index", "hf-index")]
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


class DoctorScreen(WorkbenchScreen):
    CSS_PATH = "doctor.tcss"
    BINDINGS = [
        Binding("ctrl+r", "run", "Run checks", id="doctor.run"),
        Binding("f", "apply_fix", "Apply fix", id="doctor.apply_fix"),
        Binding("ctrl+y", "copy_command", "Copy CLI", id="doctor.copy_cli"),
    ]

    def __init__(self, draft: str = "", target: str = "", engine: str = "sglang==0.5.23",
                 algorithm: str = "EAGLE3", trained: str = "", convention: str = "output-of-layer",
                 autorun: Optional[bool] = None):
        super().__init__()
        self.initial = dict(draft=draft, target=target, engine=engine, algorithm=algorithm, trained=trained,
                            convention=convention)
        self.autorun = bool(draft) if autorun is None else autorun
        self.report = None
        self.error: Optional[str] = None

    def compose_body(self) -> ComposeResult:
        v = self.initial
        with Vertical(id="doctor-form"):
            with Horizontal(classes="row"):
                yield Input(v["draft"], placeholder="draft directory", id="draft", compact=True)
                yield Input(v["target"], placeholder="target config.json (optional)", id="target", compact=True)
            with Horizontal(classes="row"):
                yield Select(ENGINES, value=v["engine"], allow_blank=False, id="engine", compact=True)
                yield Select(ALGORITHMS, value=v["algorithm"], allow_blank=False, id="algorithm", compact=True)
                yield Input(v["trained"], placeholder="trained layers, e.g. 2,30,58", id="trained", compact=True)
                yield Select(CONVENTIONS, value=v["convention"], allow_blank=False, id="convention", compact=True)
        yield Static("", id="doctor-error", classes="error-line")
        with Horizontal(id="doctor-body"):
            with Vertical(id="findings-pane"):
                yield Label("Findings", classes="title")
                table = DataTable(id="findings", cursor_type="row", zebra_stripes=True)
                table.add_columns("severity", "code", "fix")
                yield table
                yield Label("Capture: config ids -> engine -> training", classes="title")
                cap = DataTable(id="capture", cursor_type="none")
                cap.add_columns("slot", "config id", "index", "engine captures", "trained on", "")
                yield cap
                yield Static("", id="capture-notes", classes="muted")
            with VerticalScroll(id="detail-pane"):
                yield Static("Enter a draft directory and press ctrl+r.", id="detail", markup=True)

    def on_mount(self) -> None:
        if self.autorun:
            self.action_run()

    # -- inputs --------------------------------------------------------------------------------
    def fields(self) -> dict:
        q = self.query_one
        return {"draft": q("#draft", Input).value.strip(), "target": q("#target", Input).value.strip(),
                "engine": q("#engine", Select).value, "algorithm": q("#algorithm", Select).value,
                "trained": q("#trained", Input).value.strip(), "convention": q("#convention", Select).value}

    @on(Input.Submitted)
    def _submitted(self, _event) -> None:
        self.action_run()

    def action_run(self) -> None:
        f = self.fields()
        if not f["draft"]:
            self._show_error("draft: enter the draft checkpoint directory")
            return
        self.run_checks(f)

    @work(thread=True, exclusive=True, group="doctor")
    def run_checks(self, f: dict) -> None:
        from workbench.cli.cmd_doctor import parse_ids

        try:
            trained = parse_ids(f["trained"], "trained layers") if f["trained"] else None
            report = self.app.wb.doctor(f["draft"], f["target"] or None, engine=f["engine"],
                                        algorithm=f["algorithm"] or None, trained_layers=trained,
                                        trained_convention=f["convention"])
        except WorkbenchError as exc:
            self.app.call_from_thread(self._show_error, str(exc))
            return
        self.app.call_from_thread(self._show, report)

    def _show_error(self, message: str) -> None:
        self.error = message
        self.query_one("#doctor-error", Static).update(message)

    # -- rendering -----------------------------------------------------------------------------
    def _show(self, report) -> None:
        from rich.text import Text

        self.error, self.report = None, report
        self.query_one("#doctor-error", Static).update("")
        table = self.query_one("#findings", DataTable)
        table.clear()
        for i, f in enumerate(report.findings):
            fix = "config" if f.fix and f.fix.applicable else ("launch" if f.fix else "")
            table.add_row(Text(f.severity, style=SEVERITY_STYLE[f.severity]), f.code, fix, key=str(i))
        if not report.findings:
            self.query_one("#detail", Static).update("[green]No findings.[/green]")
        self._show_capture(report.capture)
        if report.findings:
            table.move_cursor(row=0)
            self._show_detail(0)
            table.focus()       # arrows walk the findings, f applies a fix

    def _show_capture(self, cap) -> None:
        from rich.text import Text

        table = self.query_one("#capture", DataTable)
        table.clear()
        notes = self.query_one("#capture-notes", Static)
        if cap is None:
            notes.update("no capture report (give a target config for the layer count)")
            return
        for r in cap.rows:
            mark = "" if r.match is None else (Text("ok", style="green") if r.match else Text("MISMATCH", style="bold red"))
            table.add_row(str(r.slot), _s(r.config_id), _s(r.engine_index),
                          r.engine_point or Text("missing", style="red"), _s(r.trained_point), mark)
        lines = [f"{cap.engine} on {cap.arch or 'unknown target'} ({cap.num_layers} layers); ids from {cap.ids_source}",
                 f"training: {cap.trained_source}"]
        if cap.fatal:
            lines.append(f"engine fails: {cap.fatal}")
        notes.update(Text("\n".join(lines)))

    def _show_detail(self, index: int) -> None:
        from rich.text import Text

        if self.report is None or not 0 <= index < len(self.report.findings):
            return
        f = self.report.findings[index]
        out = Text()
        out.append(f"{f.code}  ", style="bold")
        out.append(f.severity + "\n\n", style=SEVERITY_STYLE[f.severity])
        out.append(f.message + "\n\n")
        out.append("evidence\n", style="bold")
        for key, value in f.evidence.items():
            out.append(f"  {key}: ", style="dim")
            out.append((value if isinstance(value, str) else json.dumps(value, default=str)) + "\n")
        out.append("\n")
        if f.fix:
            out.append("fix\n", style="bold")
            out.append(f.fix.summary + "\n")
            for e in f.fix.edits:
                out.append(f"  {e.text()}\n", style="cyan")
            for l in f.fix.launch:
                out.append(f"  {l}\n", style="cyan")
            if f.fix.applicable:
                out.append("press f to apply it (goes through the config history)\n", style="dim")
        self.query_one("#detail", Static).update(out)

    @on(DataTable.RowHighlighted, "#findings")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.cursor_row)

    def selected(self):
        if self.report is None or not self.report.findings:
            return None
        row = self.query_one("#findings", DataTable).cursor_row
        return self.report.findings[row] if 0 <= row < len(self.report.findings) else None

    # -- actions -------------------------------------------------------------------------------
    def action_apply_fix(self) -> None:
        finding = self.selected()
        if finding is None or finding.fix is None:
            self.notify("this finding has no fix", severity="warning")
            return
        if not finding.fix.applicable:
            self.notify(f"change the launch: {' '.join(finding.fix.launch)}", severity="information")
            return
        try:
            plan = self.app.wb.config_fix_plan(finding.fix)
        except WorkbenchError as exc:
            self.app.report(exc)
            return
        self.app.confirm(plan, lambda: self.apply_fix(finding.fix))

    @work(thread=True, exclusive=True, group="doctor-fix")
    def apply_fix(self, fix) -> None:
        try:
            change = self.app.wb.config_apply_fix(fix, confirm=True)
        except WorkbenchError as exc:
            self.app.call_from_thread(self.app.report, exc)
            return
        self.app.call_from_thread(self.notify, f"applied: {change.location} is now v{change.version.number}")
        self.app.call_from_thread(self.action_run)

    def action_copy_command(self) -> None:
        import shlex

        f = self.fields()
        argv = ["eagle-workbench", "doctor", "--draft", f["draft"]]
        for key, flag in (("target", "--target-config"), ("engine", "--engine"), ("algorithm", "--algorithm"),
                          ("trained", "--trained-layers")):
            if f[key]:
                argv += [flag, f[key]]
        if f["trained"]:
            argv += ["--trained-convention", f["convention"]]
        cmd = " ".join(shlex.quote(a) for a in argv) + " --json"
        self.app.copy_to_clipboard(cmd)
        self.notify(cmd)


def _s(v) -> str:
    return "-" if v is None else str(v)


SPEC = ScreenSpec("doctor", "Doctor", "f3", DoctorScreen, order=20)
