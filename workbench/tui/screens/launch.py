"""Launch: pick a profile, see every problem found before anything starts (first: what stops a
launch is on screen at 80x24, the highlighted one in full under them), the exact command (for the
host's SGLang version) and its diff against the last launch of that profile; then launch after
confirming."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Label, Select, Static

from workbench.tui.base import WorkbenchScreen
from workbench.tui.screens import ScreenSpec
from workbench.tui.widgets.findings import FindingDetail, FindingItem, FindingsView
from workbench.tui.workers import background


class LaunchScreen(WorkbenchScreen):
    CSS_PATH = "launch.tcss"
    AUTO_FOCUS = "#profile"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "check", "Check", id="launch.check"),
        Binding("ctrl+l", "launch", "Launch", id="launch.launch"),
    ]

    def __init__(self):
        super().__init__()
        self.preview = None

    def compose_body(self):
        with Horizontal(id="launch-form"):
            yield Select([], prompt="profile", id="profile", compact=True)
            yield Button("Check", id="check", compact=True)
            yield Button("Launch", id="launch", variant="error", compact=True, disabled=True)
        # the problems first: what stops a launch is above the fold at 80x24
        with VerticalScroll(id="launch-body"):
            yield Label("Checks", classes="title")
            yield FindingsView(["code"], detail="launch-detail", id="findings")
            yield FindingDetail("", id="launch-detail")
            yield Static("", id="warnings", markup=False)
            yield Label("Command", classes="title")
            yield Static("(pick a profile)", id="command", markup=False)
            yield Label("Against the last launch of this profile", classes="title")
            yield Static("", id="diff", markup=False)

    def on_mount(self) -> None:
        self.load_profiles()

    def follow_journal(self) -> None:
        """workbench.toml changed (a profile added or mended): the picker reads it again."""
        self.load_profiles()

    @background("launch-profiles", done="_set_profiles", what="profiles")
    def load_profiles(self) -> list:
        return self.app.wb.profiles()

    def _set_profiles(self, profiles) -> None:
        sel = self.query_one("#profile", Select)
        keep = sel.value
        options = [(f"{p.name}  ({p.host})", p.name) for p in profiles]
        if options == getattr(self, "_options", None):
            return
        self._options = options
        sel.set_options(options)
        if keep in {name for _label, name in options}:
            sel.value = keep

    def _profile(self) -> str | None:
        v = self.query_one("#profile", Select).value
        return v if isinstance(v, str) else None

    @on(Select.Changed, "#profile")
    def _changed(self, _event) -> None:
        if self._profile():
            self.action_check()

    @on(Button.Pressed, "#check")
    def _check_pressed(self, _event) -> None:
        self.action_check()

    @on(Button.Pressed, "#launch")
    def _launch_pressed(self, _event) -> None:
        self.action_launch()

    def action_check(self) -> None:
        name = self._profile()
        if not name:
            self.notify("pick a profile first", severity="warning")
            return
        self.query_one("#command", Static).update(f"checking {name} (host, SGLang parser, rules)…")
        self.query_one("#launch", Button).disabled = True
        self.check(name)

    @background("launch-check", done="_checked")
    def check(self, name: str) -> tuple[str, Any]:
        """A failed check is an answer too: the command pane says why, and the error line."""
        try:
            return name, self.app.wb.launch_preview(name)
        except Exception as exc:
            return name, exc

    def _checked(self, checked: tuple[str, Any]) -> None:
        name, got = checked
        if isinstance(got, Exception):
            self.app.report(got, what=f"check {name}")
            self.query_one("#command", Static).update(str(got))
            return
        self._show(got)

    def _show(self, p) -> None:
        if p.profile != self._profile():
            return  # a check of a profile no longer selected finished late: not what is on screen
        self.preview = p
        version = f"SGLang {p.version}" if p.version else "SGLang version unknown"
        self.query_one("#command", Static).update(f"on {p.host}, {version}:\n{p.display}")
        self.query_one("#diff", Static).update("\n".join(p.diff) or "(same command as last time)")
        self.query_one("#findings", FindingsView).show([FindingItem(f, (f.code,)) for f in p.findings])
        self.query_one("#warnings", Static).update("\n".join(f"warning: {w}" for w in p.warnings))
        self.query_one("#launch", Button).disabled = not p.ok

    def action_launch(self) -> None:
        p = self.preview
        if p is None or p.profile != self._profile():
            self.notify("check the profile first (ctrl+r)", severity="warning")
            return
        if not p.ok:
            self.notify(f"{p.profile}: fix the errors first", severity="error")
            return
        self.app.confirm(self.app.wb.launch_plan(p), lambda: self.launch(p))

    @background("launch-run", done="_launched", what="launch {preview.profile}", exclusive=False)
    def launch(self, preview):
        return self.app.wb.launch(preview.profile, confirm=True, preview=preview)

    def _launched(self, rec) -> None:
        self.notify(f"server {rec.id} ({rec.profile}) started: pid {rec.pid} on {rec.host}")
        self.app.select_server(rec.id, rec.host)
        self.app.switch_mode("server")


SPEC = ScreenSpec("launch", "Launch", "f7", LaunchScreen, order=42)
