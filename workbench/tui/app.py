"""The Textual app: discovers screens, owns the Workbench, confirmations and the keymap."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable, Optional

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.screen import Screen

from workbench.confirm import Plan
from workbench.tui.screens import ScreenSpec, discover
from workbench.tui.widgets.confirm import ConfirmModal

KEYMAP_FILE = "keymap.toml"


class ScreensProvider(Provider):
    """Command palette: jump to any screen, and every action the current screen offers."""

    async def search(self, query: str) -> Hits:
        app = self.app
        assert isinstance(app, WorkbenchApp)
        matcher = self.matcher(query)
        for spec in app.specs:
            text = f"screen: {spec.title}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), lambda s=spec.id: app.switch_mode(s),
                          help=f"switch to the {spec.title} screen ({spec.key})")
        for key, description, action, target in app.current_actions():
            text = f"action: {description}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text),
                          lambda a=action, t=target: app.call_later(t.run_action, a),
                          help=f"key {key}")


class WorkbenchApp(App):
    TITLE = "eagle-workbench"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {ScreensProvider}
    BINDINGS = [
        Binding("f1,question_mark", "help", "Help", id="app.help"),
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True),
    ]

    def __init__(self, workspace: Optional[str] = None, *, start: Optional[str] = None, wb=None):
        super().__init__()
        self._workspace_arg = workspace
        self._wb = wb
        self.specs: list[ScreenSpec] = discover()
        self.start = start or (self.specs[0].id if self.specs else None)
        for spec in self.specs:
            self.add_mode(spec.id, spec.factory)
        self._screen_bindings = [
            Binding(spec.key, f"switch_mode('{spec.id}')", spec.title, id=f"screen.{spec.id}")
            for spec in self.specs
        ]
        for b in self._screen_bindings:
            self._bindings._add_binding(b)

    # -- the core -----------------------------------------------------------------------------
    @property
    def wb(self):
        """The Workbench this UI drives (opened on first use, off the startup path)."""
        if self._wb is None:
            from workbench.api import Workbench

            self._wb = Workbench.open(self._workspace_arg)
        return self._wb

    def on_mount(self) -> None:
        self.load_keymap()
        if self.start:
            self.switch_mode(self.start)

    def load_keymap(self) -> None:
        """User remapping: ``keymap.toml`` in the workspace maps binding ids to keys."""
        from workbench.workspace import default_root, tomllib

        root = Path(self._workspace_arg).expanduser() if self._workspace_arg else default_root()
        path = root / KEYMAP_FILE
        if not path.exists():
            return
        try:
            with open(path, "rb") as fh:
                keymap = {str(k): str(v) for k, v in tomllib.load(fh).items()}
            self.set_keymap(keymap)
        except Exception as exc:  # a bad keymap must not stop the UI
            self.notify(f"{path}: ignored ({exc})", severity="warning")

    # -- confirmations ------------------------------------------------------------------------
    def confirm(self, plan: Plan, then: Callable[[], None]) -> None:
        """Show exactly what will happen; run ``then`` only on yes."""

        def done(ok: Optional[bool]) -> None:
            if ok:
                then()
            else:
                self.notify(f"cancelled: {plan.action} {plan.target}", severity="information")

        self.push_screen(ConfirmModal(plan), done)

    # -- help and palette -----------------------------------------------------------------------
    def current_actions(self) -> Iterable[tuple[str, str, str, object]]:
        seen = set()
        for target in (self.screen, self):
            for binding in getattr(target, "BINDINGS", []):
                if isinstance(binding, Binding) and binding.description and binding.action not in seen:
                    seen.add(binding.action)
                    yield self.get_key_display(binding), binding.description, binding.action, target

    def help_rows(self) -> list[tuple[str, str, str]]:
        rows = []
        for _key, active in self.active_bindings.items():
            b = active.binding
            if b.description:
                rows.append((self.get_key_display(b), b.description, b.id or ""))
        return sorted(set(rows), key=lambda r: r[2])

    def action_help(self) -> None:
        from workbench.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.help_rows()))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Show every key binding", self.action_help)


def run_app(workspace: Optional[str] = None, start: Optional[str] = None) -> int:
    if not sys.stdout.isatty():
        print("eagle-workbench: the terminal UI needs a terminal; see `eagle-workbench --help` "
              "for the commands (each has --json)", file=sys.stderr)
        return 2
    WorkbenchApp(workspace, start=start).run()
    return 0
