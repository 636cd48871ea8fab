"""The Textual app: discovers screens, owns the Workbench, confirmations, notifications and the keymap.

Every key is a ``Binding`` with an ``id``; users remap them in ``keymap.toml`` in the workspace
(``"screen.predictor" = "f5"``), and the help screen, the footer and the command palette are built
from the live bindings, so they never disagree with the keys.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import cast

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.screen import Screen

from workbench.confirm import Plan
from workbench.tui.screens import ScreenSpec, discover
from workbench.tui.widgets.confirm import ConfirmModal
from workbench.tui.workers import ProgressMessage

KEYMAP_FILE = "keymap.toml"

#: Screens found in ``workbench/tui/screens`` (each module's ``SPEC``), in footer order.
SCREENS: list[ScreenSpec] = discover()


def screen_bindings(specs: Iterable[ScreenSpec]) -> list[Binding]:
    """One app-level binding per screen, id ``screen.<id>``, so a keymap can move it."""
    # Not shown in the footer (help and the palette list them): the footer stays about the screen
    # in front, and adding a screen does not change every other screen's look.
    return [
        Binding(
            spec.key,
            f"app.show_screen('{spec.id}')",
            spec.title,
            id=f"screen.{spec.id}",
            tooltip=f"switch to the {spec.title} screen",
            show=False,
        )
        for spec in specs
    ]


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
                yield Hit(
                    score,
                    matcher.highlight(text),
                    lambda s=spec.id: app.show_screen(s),
                    help=f"switch to the {spec.title} screen ({spec.key})",
                )
        for key, description, action, target in app.current_actions(self.screen):
            text = f"action: {description}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(text),
                    lambda a=action, t=target: app.call_later(t.run_action, a),
                    help=f"key {key}",
                )


class WorkbenchApp(App):
    TITLE = "eagle-workbench"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {ScreensProvider}
    BINDINGS = [
        Binding("f1,question_mark", "help", "Help", id="app.help"),
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True),
        *screen_bindings(SCREENS),
    ]
    selected_server: int | None  # set by the Servers and Launch screens, read by the Server screen

    def __init__(
        self,
        workspace: str | None = None,
        *,
        start: str | None = None,
        wb=None,
        screen_args: dict | None = None,
    ):
        """``screen_args``: keyword arguments for a screen's factory, by screen id (e.g. the demo's
        numbers for the Predictor)."""
        super().__init__()
        self._workspace_arg = workspace
        self._wb = wb
        self._wb_lock = threading.Lock()  # workers may ask for it first, from their threads
        self.specs: list[ScreenSpec] = list(SCREENS)
        self.start = start or (self.specs[0].id if self.specs else None)
        self._screen_args = screen_args or {}
        for spec in self.specs:
            args = self._screen_args.get(spec.id, {})
            self.add_mode(
                spec.id, cast("Callable[[], Screen]", lambda f=spec.factory, a=args: f(**a)) if args else spec.factory
            )

    # -- the core -----------------------------------------------------------------------------
    @property
    def wb(self):
        """The Workbench this UI drives (opened on first use, off the startup path)."""
        with self._wb_lock:
            if self._wb is None:
                from workbench.api import Workbench

                self._wb = Workbench.open(self._workspace_arg)
            if not getattr(self._wb, "_tui_progress", False):
                self._wire_progress(self._wb)
        return self._wb

    def _wire_progress(self, wb) -> None:
        """Core progress events become messages to the app (thread-safe), then the busy bar."""
        before = wb.progress

        def forward(p) -> None:
            before(p)
            self.post_message(ProgressMessage(p))

        wb.progress = forward
        wb._tui_progress = True

    def on_progress_message(self, message: ProgressMessage) -> None:
        from workbench.tui.base import WorkbenchScreen

        for screen in reversed(self.screen_stack):
            if isinstance(screen, WorkbenchScreen):
                screen.on_progress_message(message)
                return

    def title_of(self, screen: Screen) -> str | None:
        for spec in self.specs:
            if isinstance(spec.factory, type) and isinstance(screen, spec.factory):
                return spec.title
        return None

    @property
    def workspace_root(self) -> Path:
        from workbench.api import default_root

        return Path(self._workspace_arg).expanduser() if self._workspace_arg else default_root()

    def on_mount(self) -> None:
        self.load_keymap()
        if self.start:
            self.switch_mode(self.start)

    def on_unmount(self) -> None:
        if self._wb is not None:
            self._wb.close()

    def show_screen(self, screen_id: str) -> None:
        if screen_id not in {s.id for s in self.specs}:
            self.notify(f"no screen {screen_id!r}", severity="error")
            return
        self.switch_mode(screen_id)

    def action_show_screen(self, screen_id: str) -> None:
        self.show_screen(screen_id)

    # -- keymap ---------------------------------------------------------------------------------
    def load_keymap(self) -> None:
        """User remapping: ``keymap.toml`` in the workspace maps binding ids to keys."""
        from workbench.api import load_keymap
        from workbench.tui.keymap import check_keymap

        path = self.workspace_root / KEYMAP_FILE
        if not path.exists():
            return
        try:
            keymap = load_keymap(path)
            self.set_keymap(keymap)
        except Exception as exc:  # a bad keymap must not stop the UI
            self.notify(f"{path}: ignored ({' '.join(str(exc).split())})", severity="warning", markup=False)
            return
        for warning in check_keymap(keymap, self.known_bindings()):
            self.notify(f"{path.name}: {warning}", severity="warning", markup=False, timeout=10)

    def known_bindings(self):
        """Every binding with an id, with where it is active (for the keymap's checks)."""
        from workbench.tui.keymap import APP_SCOPE, bindings_of
        from workbench.tui.screens.help import HelpScreen

        known = bindings_of(APP_SCOPE, self.BINDINGS)
        for cls in [s.factory for s in self.specs if isinstance(s.factory, type)] + [ConfirmModal, HelpScreen]:
            for klass in cls.__mro__:
                known += bindings_of(cls.__name__, klass.__dict__.get("BINDINGS", ()))
        return known

    # -- confirmations and notifications --------------------------------------------------------
    def confirm(self, plan: Plan, then: Callable[[], object]) -> None:
        """Show exactly what will happen; run ``then`` only on yes."""

        def done(ok: bool | None) -> None:
            if ok:
                then()
            else:
                self.notify(f"cancelled: {plan.action} {plan.target}", severity="information")

        self.push_screen(ConfirmModal(plan), done)

    def report(self, exc: BaseException, *, what: str = "") -> None:
        """Turn an exception from the core into one notification line (never a traceback)."""
        from workbench.errors import WorkbenchError
        from workbench.tui.base import WorkbenchScreen

        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if isinstance(exc, WorkbenchError):
            line = first
            self.notify(first, title=what, severity="error", markup=False)
        else:
            line = f"{type(exc).__name__}: {first}"
            self.notify(line, title=what or "internal error", severity="error", markup=False)
        for screen in reversed(self.screen_stack):
            if isinstance(screen, WorkbenchScreen):
                screen.show_failure(f"{what}: {line}" if what else line)
                break

    # -- help and palette -----------------------------------------------------------------------
    def current_actions(self, screen: Screen | None = None) -> Iterable[tuple[str, str, str, object]]:
        """(key, description, action, node) for each described binding active on ``screen``."""
        seen = set()
        for active in (screen or self.screen).active_bindings.values():
            binding = active.binding
            if binding.description and (active.node, binding.action) not in seen:
                seen.add((active.node, binding.action))
                yield self.get_key_display(binding), binding.description, binding.action, active.node

    def help_rows(self) -> list[tuple[str, str, str]]:
        """(keys, description, binding id) for every active binding, keymap applied."""
        by_id: dict[str, tuple[list[str], str]] = {}
        for _key, active in self.active_bindings.items():
            b = active.binding
            # the app's own keys: declared with an id, or shown; not every editing key of an Input
            if not b.description or not (b.id or b.show or b.action.endswith("command_palette")):
                continue
            ident = b.id or b.action
            keys, _ = by_id.setdefault(ident, ([], b.description))
            display = self.get_key_display(b)
            if display not in keys:
                keys.append(display)
        return sorted(((" ".join(k), d, i) for i, (k, d) in by_id.items()), key=_help_order)

    def action_help(self) -> None:
        from workbench.tui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.help_rows()))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help", "Show every key binding", self.action_help)


def screen_keys_markdown() -> str:
    """The README's table of screen keys, from the bindings (tests/foundation/test_readme.py)."""
    from workbench.tui.widgets.screen_bar import _key_order

    rows = sorted(SCREENS, key=lambda s: _key_order(s.key))
    return "\n".join(["| key | screen |", "|---|---|", *(f"| `{s.key.upper()}` | {s.title} |" for s in rows)])


def _help_order(row: tuple[str, str, str]) -> tuple:
    """Screens first, by key (F2, F3, ... F12), then the app's keys, then the screen's own."""
    from workbench.tui.widgets.screen_bar import _key_order

    keys, _desc, ident = row
    if ident.startswith("screen."):
        return (0, _key_order(keys.split()[0] if keys else ""), ident)
    return (1 if ident.startswith("app.") else 2, (), ident)


def run_app(workspace: str | None = None, start: str | None = None, screen_args: dict | None = None) -> int:
    if not sys.stdout.isatty():
        print(
            "eagle-workbench: the terminal UI needs a terminal; see `eagle-workbench --help` "
            "for the commands (each has --json)",
            file=sys.stderr,
        )
        return 2
    WorkbenchApp(workspace, start=start, screen_args=screen_args).run()
    return 0
