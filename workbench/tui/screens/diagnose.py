"""Diagnose: the loop on a running server, one key per step.

accept length (``m`` measures) -> doctor (``d``: findings ranked by the accept length they cost; a
tensor-dump relaunch is asked in a modal) -> alignment (``a``: each training slot's best capture
point) -> apply fix (``f``: the diff in a modal, written through the config history, then the
relaunch is offered) -> relaunch (``r``: same profile, measured like before) -> compare (``c``:
before and after side by side, under the numbers: on screen at 80x24 too). With ``guided=True``
(the demo) a bar names the next key. A fixed finding says so instead of staying red ("fix
written", then "fixed" once the relaunched server runs it); ``ctrl+c`` cancels a step at its next
stage (the doctor's long run included); a measurement or a fix made on another screen shows here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Label, Static
from textual.worker import Worker

from workbench.errors import WorkbenchError
from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.findings import FindingDetail, FindingItem, FindingsView, VerdictTable
from workbench.tui.widgets.table import Table
from workbench.tui.workers import background, route_of

if TYPE_CHECKING:
    from workbench.api import Alignment

STEPS = [
    ("accept", "accept length", "m"),
    ("doctor", "doctor", "d"),
    ("alignment", "alignment", "a"),
    ("fix", "apply fix", "f"),
    ("relaunch", "relaunch", "r"),
    ("compare", "compare", "c"),
]


class DiagnoseScreen(WorkbenchScreen):
    CSS_PATH = "diagnose.tcss"
    AUTO_FOCUS = "#findings"  # letters are the step keys; an Input would swallow them
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "measure", "Measure", id="diagnose.measure"),
        Binding("d", "doctor", "Doctor", id="diagnose.doctor"),
        Binding("a", "alignment", "Align", id="diagnose.alignment", tooltip="each training slot's best capture point"),
        Binding("f", "apply_fix", "Fix", id="diagnose.apply_fix", tooltip="apply the fix (shows the diff first)"),
        Binding("r", "relaunch", "Relaunch", id="diagnose.relaunch"),
        Binding("c", "compare", "Compare", id="diagnose.compare"),
    ]

    def __init__(
        self,
        server_id: int | None = None,
        guided: bool = False,
        training_data: str = "",
        measure_tokens: int | None = None,
        samples: int = 4,
    ):
        super().__init__()
        self.server_id = server_id
        self.before_id: int | None = None
        self.guided = guided
        self.training_data = training_data
        self.measure_tokens = measure_tokens
        self.samples = samples
        self.done: set[str] = set()
        self.report = None
        self.fix_applied = None  # the config change written by f (the panes say so)
        self.relaunched = False
        self.comparison = None
        self._doing = ""  # what the last step started does (``busy`` while it runs)

    # -- layout --------------------------------------------------------------------------------
    def compose_body(self) -> ComposeResult:
        with Horizontal(id="diag-form"):
            yield Label("server", classes="field-label")
            yield Input(str(self.server_id or ""), placeholder="id", id="server", compact=True, restrict=r"\d*")
            yield Label("training data", classes="field-label")
            yield Input(
                self.training_data,
                placeholder="a path on the server's host (optional)",
                id="training",
                compact=True,
            )
        yield Static("", id="guide")
        yield Static("", id="status")
        yield Static("", id="numbers")
        # the loop's outcome, under the numbers: hidden until there is a comparison
        c: Table[str | Text] = Table(id="compare", cursor_type="none")
        c.add_columns("before / after", "before", "after", "change")
        yield c
        with Horizontal(id="diag-body"):
            with Vertical(id="left"):
                yield Label("Findings, most of the gap first", classes="title")
                yield FindingsView(["code", "costs", "share", "from"], numbered=True, detail="detail", id="findings")
                yield Label(
                    "Alignment: training slot -> point the server captures", classes="title", id="alignment-title"
                )
                a = VerdictTable(id="alignment", cursor_type="row")
                a.add_columns("slot", "best point", "rel_diff", "runner-up", "margin", "verdict")
                yield a
            with VerticalScroll(id="right"):
                yield FindingDetail("", id="detail", skip=("verdicts",), evidence_limit=10)

    def on_mount(self) -> None:
        for node in self.query(Input):
            node.cursor_blink = False
        self._render_guide()
        if self.server_id is not None:
            self.load_server(self.server_id)
        else:
            self._status("Enter a server id (see the Servers screen), then press d for the doctor.")

    # -- state ---------------------------------------------------------------------------------
    def current_server(self) -> int | None:
        text = self.query_one("#server", Input).value.strip()
        return int(text) if text.isdigit() else None

    def _status(self, text: str, style: str = "") -> None:
        self.query_one("#status", Static).update(Text(text, style=style))

    def _mark(self, step: str) -> None:
        self.done.add(step)
        self._render_guide()

    def next_step(self) -> tuple | None:
        for s in STEPS:
            if s[0] not in self.done:
                return s
        return None

    def _render_guide(self) -> None:
        g = self.query_one("#guide", Static)
        if not self.guided:
            g.display = False
            return
        out = Text("Guided path: ", style="bold")
        nxt = self.next_step()
        for i, (sid, title, key) in enumerate(STEPS, 1):
            style = "green" if sid in self.done else ("bold reverse" if nxt and sid == nxt[0] else "dim")
            out.append(f"{i} {title} [{key}]", style=style)
            if i < len(STEPS):
                out.append("  >  ", style="dim")
        if nxt is None:
            out.append("   all done", style="green")
        else:
            out.append(f"   next: press {nxt[2]}", style="bold")
        g.update(out)

    # -- step 1: accept length ---------------------------------------------------------------------
    @background("diagnose-load", done="_loaded", failed="_load_failed")
    def load_server(self, sid: int) -> tuple:
        wb = self.app.wb
        rec = wb.server(sid)
        rows = [r for r in wb.measurements(sid) if r.get("kind") == "protocol"]
        td = self.training_data or wb.live_training_data(rec.profile) or ""
        return rec, rows[-1] if rows else None, td

    def _load_failed(self, message: str) -> None:
        self._status(message, "bold red")

    def _loaded(self, loaded: tuple) -> None:
        rec, last, td = loaded
        if self.app.selected_server != rec.id:
            self.app.select_server(rec.id, rec.host)
        if not self.query_one("#training", Input).value and td:
            self.query_one("#training", Input).value = td
        text = Text()
        text.append(f"server {rec.id}  ", style="bold")
        text.append(f"{rec.profile} on {rec.host}, {rec.state}")
        if last:
            al = last.get("accept_length")
            text.append(f"   accept length {al:.2f}" if al is not None else "", style="bold")
            text.append(
                f"   {last.get('tokens_per_s', 0):.1f} tok/s (measured with the protocol: cache "
                "flushed, fixed prompts; the Dashboard shows the log's last window)"
            )
            for why in last.get("unstable") or []:
                text.append(f"\nUNSTABLE: {why} (press m to measure again)", style="bold yellow")
            self._mark("accept")
        else:
            text.append("   not measured yet: press m (or d: the doctor measures first)", style="dim")
        self.query_one("#numbers", Static).update(text)
        self._status("Press d to ask the doctor why accept length is what it is." if self.guided else "")

    def action_measure(self) -> None:
        sid = self.current_server()
        if sid is None:
            self._status("server id: enter the id of a running server", "bold red")
            return
        self._run(self._measure, sid)

    @background("diagnose", done="_measured", failed="_step_failed", what="measuring")
    def _measure(self, sid: int) -> int:
        wb = self.app.wb
        wb.server_measure(sid, max_new_tokens=self.measure_tokens, prompts=wb.live_prompts(), label="diagnose screen")
        return sid

    def _measured(self, sid: int) -> None:
        self.load_server(sid)

    # -- step 2: doctor --------------------------------------------------------------------------
    def action_doctor(self) -> None:
        sid = self.current_server()
        if sid is None:
            self._status("server id: enter the id of a running server", "bold red")
            return
        self._run(self._doctor, sid, self.query_one("#training", Input).value.strip() or None)

    @background(
        "diagnose",
        done="show_report",
        failed="_step_failed",
        what="the doctor is working (measure, hidden states, drafter)",
    )
    def _doctor(self, sid: int, training: str | None):
        from workbench.tui.widgets.live import ask_from_thread

        wb = self.app.wb
        measured = any(r.get("kind") == "protocol" for r in wb.measurements(sid))
        return wb.doctor_live(
            sid,
            training,
            samples=self.samples,
            measure=not measured,
            measure_tokens=self.measure_tokens,
            confirm=lambda plan: ask_from_thread(self.app, plan),
            dump_alongside=self.guided,
        )

    def show_report(self, report) -> None:
        self.report = report
        self._mark("accept")
        self._mark("doctor")
        o, p = report.observed.accept_length, report.predicted.accept_length
        text = Text()
        text.append(f"server {report.server_id}  ", style="bold")
        text.append(f"{report.profile}, {report.engine}   ")
        text.append("accept length observed ", style="")
        text.append("-" if o is None else f"{o:.2f}", style="bold red" if o and p and o < p - 0.25 else "bold")
        text.append("   predicted ")
        text.append("-" if p is None else f"{p:.2f}", style="bold")
        if report.gap is not None:
            text.append(f"   gap {report.gap:+.2f}")
        ft = report.features
        if ft.live_accept_length is not None:
            train = ft.train_accept_length
            text.append(
                f"\nthe drafter on the server's features: {ft.live_accept_length:.2f} "
                f"(on the training features {'-' if train is None else f'{train:.2f}'})"
            )
        self.query_one("#numbers", Static).update(text)
        self.fix_applied, self.relaunched = None, False
        items = [
            FindingItem(
                r.finding,
                (
                    r.code,
                    "-" if r.explains is None else f"{r.explains:.2f}",
                    "-" if r.share is None else f"{100 * r.share:.0f}%",
                    r.source,
                ),
                source=r.source,
                cost=r.explains,
                share=r.share,
            )
            for r in report.findings
        ]
        self._show_alignment(report.alignment)
        self.query_one("#findings", FindingsView).show(items, hint=self._hint)
        if not report.findings:
            self.query_one("#detail", FindingDetail).show_text(ft.verdict or "No findings.", "ok")
        pending = f"  Not done: {report.pending.summary}." if report.pending else ""
        nxt = "press a for the alignment, f to apply the fix" if report.fix else "no config fix to apply"
        self._status(f"Doctor: {len(report.findings)} finding(s). {nxt}.{pending}")

    def _hint(self, item) -> str | None:
        fix = item.finding.fix
        if not (fix and fix.applicable):
            return None
        if self.fix_applied is not None:
            return (
                f"applied: {self.fix_applied.location} is v{self.fix_applied.version.number}; "
                "the server loads it when relaunched (r)"
            )
        return "press f to apply it (through the config history; the relaunch is offered next)"

    # -- step 3: alignment ---------------------------------------------------------------------
    def _show_alignment(self, al: Alignment | None) -> None:
        table = self.query_one("#alignment", VerdictTable)
        table.clear()
        if not al:
            return
        for b in al.best:
            v, m = b.value, b.margin
            table.add_row(
                b.slot or "-",
                b.point or "-",
                "-" if v is None else f"{v:.2g}",
                b.runner_up_physical or b.runner_up or "-",
                "-" if m is None else ("inf" if m == float("inf") else f"x{m:.3g}"),
                table.mark(b.verdict or ""),
            )
        self._alignment_title()

    def _alignment_title(self) -> None:
        al = self.report.alignment if self.report else None
        if not al:
            return
        rec = al.recommendation
        title = f"Alignment ({al.mode}, {al.tokens_compared or 0} tokens)"
        ids, now = (rec.layer_ids, rec.current_ids) if rec else (None, None)
        if ids is not None and self.relaunched:
            title += f": {ids} live since the relaunch"
        elif ids is not None and self.fix_applied is not None:
            title += f": {ids} written as v{self.fix_applied.version.number}; the server runs {now} until relaunched"
        elif ids is not None:
            title += f": write {ids} (the server runs {now})"
        self.query_one("#alignment-title", Label).update(title)

    def action_alignment(self) -> None:
        if self.report is None or not self.report.alignment:
            self._status("no alignment yet: press d (the doctor needs training data)", "yellow")
            return
        self._mark("alignment")
        self.query_one("#alignment", DataTable).focus()
        rec = self.report.alignment.recommendation
        points = (rec.points if rec else None) or []
        self._status(
            f"Each training slot matches {', '.join(p or '?' for p in points)} in the server's own "
            f"capture; {(rec.reason if rec else None) or ''}. Press f to apply the fix."
        )

    # -- step 4-5: fix and relaunch ------------------------------------------------------------------
    def action_apply_fix(self) -> None:
        if self.report is None or self.report.fix is None:
            self._status("no fix to apply: run the doctor (d) first", "yellow")
            return
        try:
            plan = self.app.wb.config_fix_plan(self.report.fix)
        except WorkbenchError as exc:
            self.app.report(exc)
            return
        self.app.confirm(plan, lambda: self._run(self._apply, self.report.server_id, self.report.fix))

    @background("diagnose", done="_applied", failed="_step_failed", what="writing the fix")
    def _apply(self, sid: int, fix):
        return self.app.wb.live_apply_fix(sid, fix, confirm=True)

    def _applied(self, change) -> None:
        self._mark("alignment")
        self._mark("fix")
        self.fix_applied = change
        self._mark_fixed("fix written")
        self.query_one("#findings", FindingsView).refresh_detail(self._hint)
        self._alignment_title()
        self._status(
            f"{change.location} is now v{change.version.number}; the server still runs the old "
            "config until it is relaunched (press r)."
        )
        self.action_relaunch()

    def action_relaunch(self) -> None:
        sid = self.current_server()
        if sid is None:
            return
        try:
            plan = self.app.wb.live_relaunch_plan(sid)
        except WorkbenchError as exc:
            self.app.report(exc)
            return
        self.app.confirm(plan, lambda: self._run(self._relaunch, sid))

    @background("diagnose", done="_relaunch_done", failed="_step_failed", what="relaunching and measuring")
    def _relaunch(self, sid: int) -> tuple:
        wb = self.app.wb
        rec = wb.live_relaunch(sid, confirm=True, measure_tokens=self.measure_tokens)
        cmp = wb.live_compare(sid, rec.id) if rec.state == "ready" else None
        return sid, rec, cmp

    def _relaunch_done(self, relaunched: tuple) -> None:
        self._relaunched(*relaunched)

    def _relaunched(self, old: int, rec, cmp) -> None:
        self.before_id = old
        self.server_id = rec.id
        self.query_one("#server", Input).value = str(rec.id)
        self._mark("relaunch")
        self.app.select_server(rec.id, rec.host)
        if rec.state == "ready" and self.fix_applied is not None:
            self.relaunched = True
            self._mark_fixed("fixed")
            self._alignment_title()
            self.query_one("#findings", FindingsView).refresh_detail(
                lambda item: (
                    f"fixed: server {rec.id} runs v{self.fix_applied.version.number}; press c to compare"
                    if item.finding.fix and item.finding.fix.applicable
                    else None
                )
            )
        text = Text()
        text.append(f"server {rec.id}  ", style="bold")
        text.append(f"{rec.profile} on {rec.host}, {rec.state} (relaunched from server {old})")
        if cmp is not None:
            b, a = cmp.value("accept length", "before"), cmp.value("accept length", "after")
            text.append("\naccept length ")
            text.append("-" if a is None else f"{a:.2f}", style="bold green")
            text.append(f" now, {b:.2f} before" if b is not None else "")
            p = self.report.predicted.accept_length if self.report else None
            text.append(f"; the drafter predicts {p:.2f}" if p is not None else "")
        self.query_one("#numbers", Static).update(text)
        self._status(
            f"server {rec.id} ({rec.profile}) is {rec.state}"
            + (": press c to compare with the old one" if cmp is not None else "")
        )

    def _mark_fixed(self, status: str) -> None:
        """The findings the written fix settles say so in place of their severity."""
        view = self.query_one("#findings", FindingsView)
        fix = self.report.fix if self.report else None
        for i, item in enumerate(view.items):
            f = item.finding.fix
            if fix is not None and f is not None and f.applicable and f.edits == fix.edits:
                view.mark(i, status)

    # -- step 6: compare -----------------------------------------------------------------------
    def action_compare(self) -> None:
        after = self.current_server()
        if self.before_id is None or after is None:
            self._status("nothing to compare yet: apply a fix and relaunch first", "yellow")
            return
        self._run(self._compare, self.before_id, after)

    @background("diagnose", done="show_comparison", failed="_step_failed", what="comparing")
    def _compare(self, before: int, after: int):
        return self.app.wb.live_compare(before, after)

    def show_comparison(self, cmp) -> None:
        self.comparison = cmp
        t = self.query_one("#compare", DataTable)
        t.clear()
        t.add_class("-shown")
        for r in cmp.rows:
            t.add_row(
                r["name"],
                _cell(r["before"]),
                _cell(r["after"]),
                Text(
                    r.get("change") or "",
                    style="bold green"
                    if (r.get("change") or "").startswith("x") and r["name"] == "accept length"
                    else "",
                ),
            )
        self._mark("compare")
        b, a = cmp.value("accept length", "before"), cmp.value("accept length", "after")
        if a is not None and b:
            self._status(f"accept length {b:.2f} -> {a:.2f} (x{a / b:.2f}); the Timeline (F10) shows every step")

    # -- running work -----------------------------------------------------------------------------
    @property
    def busy(self) -> str | None:
        """What the running step does (one step at a time), None when none runs."""
        running = any(w.node is self and w.group == "diagnose" and not w.is_finished for w in self.workers)
        return self._doing if running else None

    def _run(self, step: Callable[..., Worker], *args) -> None:
        """Start a step's worker (``background("diagnose", what=...)``): its ``what`` is the status
        line meanwhile and the title of a bug's report; a WorkbenchError ends in the status line."""
        if self.busy:
            self.notify(f"busy: {self.busy}", severity="warning")
            return
        self._doing = route_of(step(*args)).what
        self._status(f"{self._doing}...", "italic")

    def _step_failed(self, message: str) -> None:
        self._status(message.splitlines()[0], "bold red")

    def job_cancelled(self, message: str) -> None:
        self._status(f"{message}: press the step's key to run it again", "yellow")

    def follow_journal(self) -> None:
        """A measurement or a server's change recorded elsewhere: the numbers again (a local read;
        a report on screen stays what the doctor found)."""
        sid = self.current_server()
        if sid is not None and self.report is None and not self.busy:
            self.load_server(sid)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


SPEC = ScreenSpec("diagnose", "Diagnose", "f8", DiagnoseScreen, order=45)
