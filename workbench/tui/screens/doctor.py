"""Doctor: findings by severity with their evidence, the capture report, and "apply fix" through the
config history (a confirm shows the diff first). With a server id it diagnoses that running server:
the config it loaded, observed vs predicted accept length, and its hidden states against the
training data (findings ranked by the accept length they cost; the Diagnose screen has the loop).

The form keeps the keys until the user moves them (a run's findings never take the focus: a path
typed on is typed, never an "apply fix"); ``f`` acts on the findings table. A fix written here
or elsewhere shows at once: on files the checks run again (the fixed finding goes), on a live
report the finding says "fix written" until the server is relaunched (Diagnose)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Label, Select, Static

from workbench.api import engine_choices
from workbench.display import evidence_label
from workbench.errors import WorkbenchError
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.findings import FindingDetail, FindingItem, FindingsView, VerdictTable
from workbench.tui.workers import background

ENGINES = engine_choices()  # SGLang releases, then every vLLM release read

ALGORITHMS = [("EAGLE3", "EAGLE3"), ("EAGLE", "EAGLE"), ("not given", "")]
CONVENTIONS = [("output-of-layer", "output-of-layer"), ("capture-before", "capture-before"), ("hf-index", "hf-index")]


class DoctorScreen(WorkbenchScreen):
    CSS_PATH = "doctor.tcss"
    KEYS_OF = (FindingsView,)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run checks", id="doctor.run"),
        Binding("ctrl+y", "copy_command", "Copy CLI", id="doctor.copy_cli"),
    ]

    def __init__(
        self,
        draft: str = "",
        target: str = "",
        engine: str = "sglang==0.5.23",
        algorithm: str = "EAGLE3",
        trained: str = "",
        convention: str = "output-of-layer",
        autorun: bool | None = None,
        server: str = "",
    ):
        super().__init__()
        self.initial = dict(
            draft=draft,
            target=target,
            engine=engine,
            algorithm=algorithm,
            trained=trained,
            convention=convention,
            server=str(server or ""),
        )
        self.autorun = bool(draft or server) if autorun is None else autorun
        self.live = None
        self.report = None
        self.code = None  # the release code's capture (workbench.engine), for the notes
        self.error: str | None = None
        self._checked_stamp: tuple | None = None  # the draft config's (mtime, size) the report read

    def compose_body(self) -> ComposeResult:
        v = self.initial

        def label(text: str, inline: bool = False) -> Label:
            return Label(text, classes="field-label inline" if inline else "field-label")

        with Vertical(id="doctor-form"):
            with Horizontal(classes="row"):
                yield label("Draft")
                yield Input(v["draft"], placeholder="the draft checkpoint's folder", id="draft", compact=True)
                yield label("or server", inline=True)
                yield Input(v["server"], placeholder="id", id="server", compact=True, restrict=r"\d*")
            with Horizontal(classes="row"):
                yield label("Target")
                yield Input(
                    v["target"], placeholder="target config.json or folder (optional)", id="target", compact=True
                )
            with Horizontal(classes="row"):
                yield label("Engine")
                yield Select(ENGINES, value=v["engine"], allow_blank=False, id="engine", compact=True)
                yield label("Algorithm", inline=True)
                yield Select(ALGORITHMS, value=v["algorithm"], allow_blank=False, id="algorithm", compact=True)
            with Horizontal(classes="row"):
                yield label("Trained on")
                yield Input(v["trained"], placeholder="layer ids, e.g. 2,30,58 (optional)", id="trained", compact=True)
                yield label("read as", inline=True)
                yield Select(CONVENTIONS, value=v["convention"], allow_blank=False, id="convention", compact=True)
        yield Static("", id="doctor-error", classes="error-line", markup=False)
        # findings with the highlighted one's detail under them; the capture report beside them
        # (under them, narrower than NARROW_WIDTH: then everything scrolls as one)
        with Horizontal(id="doctor-body"):
            with Vertical(id="findings-pane"):
                yield Label("Findings", classes="title")
                yield FindingsView(["evidence", "code", "fix"], detail="detail", id="findings")
                with VerticalScroll(id="detail-pane"):
                    yield FindingDetail("Enter a draft directory (or a server id) and press ctrl+r.", id="detail")
            with VerticalScroll(id="capture-pane"):
                yield Label("Capture: config ids -> engine -> training", classes="title")
                cap = VerdictTable(id="capture", cursor_type="none")
                cap.add_columns("slot", "config id", "index", "engine captures", "trained on", "")
                yield cap
                yield Static("", id="capture-notes", classes="muted")

    def on_mount(self) -> None:
        if self.autorun:
            self.action_run()

    # -- inputs --------------------------------------------------------------------------------
    def fields(self) -> dict:
        q = self.query_one
        return {
            "draft": q("#draft", Input).value.strip(),
            "target": q("#target", Input).value.strip(),
            "engine": q("#engine", Select).value,
            "algorithm": q("#algorithm", Select).value,
            "trained": q("#trained", Input).value.strip(),
            "convention": q("#convention", Select).value,
            "server": q("#server", Input).value.strip(),
        }

    @on(Input.Submitted)
    def _submitted(self, _event) -> None:
        self.action_run()

    def action_run(self) -> None:
        f = self.fields()
        if f["server"]:
            self._show_error("")
            self.query_one("#detail", Static).update(
                f"diagnosing server {f['server']}: measuring, sending training samples, evaluating the drafter..."
            )
            self.run_live(int(f["server"]))
            return
        if not f["draft"]:
            self._show_error("draft: enter the draft checkpoint directory (or a server id)")
            return
        self.run_checks(f)

    @background("doctor", done="_show_live", failed="_show_error")
    def run_live(self, sid: int):
        from workbench.tui.widgets.live import ask_from_thread

        return self.app.wb.doctor_live(sid, confirm=lambda plan: ask_from_thread(self.app, plan))

    def _show_live(self, live) -> None:
        """A live report in the same panes: findings ranked, the capture table from the alignment."""
        from types import SimpleNamespace

        from rich.text import Text

        self.live = live
        self._show(
            SimpleNamespace(findings=[r.finding for r in live.findings], capture=None),
            None,
            [
                FindingItem(r.finding, _cells(r.finding), source=r.source, cost=r.explains, share=r.share)
                for r in live.findings
            ],
        )
        table = self.query_one("#capture", VerdictTable)
        table.clear()
        al = live.alignment
        ids = live.draft.ids or []
        rec = al.recommendation if al else None
        engine_points = (rec.current_points if rec else None) or (al.cols_physical if al else None) or []
        for i, b in enumerate(al.best if al else []):
            trained = b.physical or "?"
            have = engine_points[i] if i < len(engine_points) else None
            ok = have == trained and b.verdict == "match"
            table.add_row(
                str(i),
                _s(ids[i] if i < len(ids) else None),
                "-",
                have or table.mark("missing"),
                trained,
                table.mark("ok" if ok else "MISMATCH"),
            )
        o, p = live.observed.accept_length, live.predicted.accept_length
        lines = [
            f"server {live.server_id} ({live.profile}, {live.engine}): accept length observed "
            f"{'-' if o is None else f'{o:.2f}'}, predicted {'-' if p is None else f'{p:.2f}'}",
            f"trained on: numeric alignment of the training slots ({al.mode if al else 'no hidden states'})",
        ]
        for r in live.findings:
            if r.explains is not None:
                lines.append(f"{r.code} costs {r.explains:.2f} accept length")
        self.query_one("#capture-notes", Static).update(Text("\n".join(lines)))

    @background("doctor", done="_show_checks", failed="_show_error")
    def run_checks(self, f: dict) -> tuple:
        from workbench.parsing import parse_ids

        self._checked_stamp = _stamp(f["draft"])
        trained = parse_ids(f["trained"], "trained layers") if f["trained"] else None
        report = self.app.wb.doctor(
            f["draft"],
            f["target"] or None,
            engine=f["engine"],
            algorithm=f["algorithm"] or None,
            trained_layers=trained,
            trained_convention=f["convention"],
        )
        return report, self._code_capture(report.capture)

    def _show_checks(self, checked: tuple) -> None:
        report, code = checked
        self.live = None
        self._show(report, code)

    def _code_capture(self, cap):
        """What the release's own code says (the generated table): its evidence lines for the notes."""
        if cap is None or not str(cap.engine).startswith("sglang") or not cap.num_layers:
            return None
        try:
            return self.app.wb.engine_capture(
                cap.engine, arch=cap.arch, num_layers=cap.num_layers, ids=cap.config_ids, source="table"
            )
        except WorkbenchError:
            return None

    def _show_error(self, message: str) -> None:
        self.error = message
        self.query_one("#doctor-error", Static).update(message)

    # -- rendering -----------------------------------------------------------------------------
    def _show(self, report, code=None, items: list | None = None) -> None:
        self.error, self.report, self.code = None, report, code
        self.query_one("#doctor-error", Static).update("")
        if items is None:
            items = [FindingItem(f, _cells(f)) for f in report.findings]
        # arrows walk the findings, f applies a fix (tab moves the keys to them: never a run)
        self.query_one("#findings", FindingsView).show(items, hint=_hint)
        self.refresh_bindings()
        if not report.findings:
            skipped = getattr(report, "skipped", None) or []
            text = "No findings in the checks that ran."
            if skipped:
                text += f"\nSkipped {len(skipped)} for lack of inputs (not an all-clear):\n" + "\n".join(
                    f"  {s.check}: needs {s.needs}" for s in skipped
                )
            self.query_one("#detail", FindingDetail).show_text(text, "ok" if not skipped else "")
        self._show_capture(report.capture)

    def _show_capture(self, cap) -> None:
        from rich.text import Text

        table = self.query_one("#capture", VerdictTable)
        table.clear()
        notes = self.query_one("#capture-notes", Static)
        if cap is None:
            notes.update("no capture report (give a target config for the layer count)")
            return
        for r in cap.rows:
            mark = "" if r.match is None else table.mark("ok" if r.match else "MISMATCH")
            table.add_row(
                str(r.slot),
                _s(r.config_id),
                _s(r.engine_index),
                r.engine_point or table.mark("missing"),
                _s(r.trained_point),
                mark,
            )
        lines = [
            f"{cap.engine} on {cap.arch or 'unknown target'} ({cap.num_layers} layers); ids from {cap.ids_source}",
            f"training: {cap.trained_source}",
        ]
        if cap.fatal:
            lines.append(f"engine fails: {cap.fatal}")
        code = getattr(self, "code", None)
        if code is not None:
            if code.cuda_graph_points is not None and code.graph_differs:
                lines.append(f"CUDA-graph decode captures {', '.join(code.cuda_graph_points)}")
            lines.append(f"SGLang code ({code.source}):")
            lines += [
                "  " + e
                for e in code.evidence
                if e.split(":", 1)[0] in ("id_map", "index0", "boundary", "missing", "startup", "graph_reset")
            ]
        notes.update(Text("\n".join(lines)))

    def selected(self):
        item = self.query_one("#findings", FindingsView).selected()
        return item.finding if item is not None else None

    # -- following the journal ------------------------------------------------------------------
    def follow_journal(self) -> None:
        """A fix written elsewhere (Diagnose, Alignment, a revert on Configs, the CLI): checks of
        files run again when the draft's config changed; a live report is of the server as it
        runs, which a config write does not change."""
        if self.report is None or self.live is not None or self.busy_with("doctor"):
            return
        f = self.fields()
        if f["draft"] and _stamp(f["draft"]) != self._checked_stamp:
            self.run_checks(f)

    # -- actions -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "apply_fix":
            return self.report is not None and bool(self.report.findings)
        return super().check_action(action, parameters)

    def action_apply_fix(self) -> None:
        item = self.query_one("#findings", FindingsView).selected()
        finding = item.finding if item is not None else None
        if finding is None or finding.fix is None:
            self.notify("this finding has no fix", severity="warning")
            return
        if item is not None and item.status:
            self.notify(f"{finding.code}: {item.status} already", severity="information")
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

    @background("doctor-fix", done="_fix_applied", what="", exclusive=False)
    def apply_fix(self, fix) -> tuple:
        change = self.app.wb.config_apply_fix(fix, confirm=True)
        return fix, change

    def _fix_applied(self, applied: tuple) -> None:
        fix, change = applied
        note = f"applied: {change.location} is now v{change.version.number}"
        self.notify(note)
        if self.live is None:
            self.action_run()  # files: the checks again; the fixed finding goes
            return
        view = self.query_one("#findings", FindingsView)
        for i, item in enumerate(view.items):  # a live report: the server runs the old config until relaunched
            if item.finding.fix is not None and item.finding.fix.edits == fix.edits:
                view.mark(i, "fix written")
        view.refresh_detail(
            lambda item: (
                f"{note}; the server loads it when relaunched (Diagnose, F8: r)" if item.status else _hint(item)
            )
        )

    def action_copy_command(self) -> None:
        import shlex

        f = self.fields()
        argv = ["eagle-workbench", "doctor", "--draft", f["draft"]]
        for key, flag in (
            ("target", "--target-config"),
            ("engine", "--engine"),
            ("algorithm", "--algorithm"),
            ("trained", "--trained-layers"),
        ):
            if f[key]:
                argv += [flag, f[key]]
        if f["trained"]:
            argv += ["--trained-convention", f["convention"]]
        cmd = " ".join(shlex.quote(a) for a in argv) + " --json"
        self.app.copy_to_clipboard(cmd)
        self.notify(cmd)


def _cells(f) -> tuple:
    return (evidence_label(getattr(f, "evidence_class", None)), f.code, _fix_kind(f))


def _fix_kind(f) -> str:
    return "config" if f.fix and f.fix.applicable else ("launch" if f.fix else "")


def _hint(item) -> str | None:
    fix = item.finding.fix
    if not (fix and fix.applicable):
        return None
    return "press f on the findings to apply it (tab takes the keys there; it goes through the config history)"


def _s(v) -> str:
    return "-" if v is None else str(v)


def _stamp(draft: str) -> tuple | None:
    """(mtime, size) of a local draft's config.json: whether the file changed since a run read it."""
    import os

    try:
        st = os.stat(os.path.join(os.path.expanduser(draft), "config.json"))
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


SPEC = ScreenSpec("doctor", "Doctor", "f3", DoctorScreen, order=20)
