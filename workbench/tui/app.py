"""The Textual app: discovers screens, owns the Workbench, confirmations, notifications and the keymap.

Every key is a ``Binding`` with an ``id``; users remap them in ``keymap.toml`` in the workspace
(``"screen.predictor" = "f5"``), and the help screen, the footer and the command palette are built
from the live bindings, so they never disagree with the keys.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import ClassVar, cast

from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from workbench.confirm import Plan
from workbench.tui.screens import ScreenSpec, discover
from workbench.tui.widgets.confirm import ConfirmModal
from workbench.tui.widgets.context_line import Context
from workbench.tui.workers import ProgressMessage, background, check_cancelled, check_routes, route_of

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


class WorkbenchCommands(Provider):
    """The command palette: every workbench command, the screen in front's first, then every
    screen, every other screen's actions (switching to it first), the servers to open, and the
    app's own (help, theme, screenshot, quit) last."""

    def commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        app = self.app
        assert isinstance(app, WorkbenchApp)
        return app.palette_commands(self.screen)

    async def discover(self) -> Hits:
        for text, help_text, run in self.commands():
            yield DiscoveryHit(text, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, run in self.commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), run, help=help_text)


#: Seconds between two looks at the journal's revision (one cheap local read, off the UI thread).
JOURNAL_POLL_S = 1.0


class WorkbenchApp(App):
    TITLE = "eagle-workbench"
    CSS_PATH = "app.tcss"
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {
        WorkbenchCommands
    }  # the workbench's commands, not Textual's stock list first
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1,question_mark", "help", "Help", id="app.help"),
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True, show=False),
        *screen_bindings(SCREENS),
    ]
    #: What the context line shows (workspace, host, server); see ``select_server``.
    context: reactive[Context] = reactive(Context, always_update=True)
    #: A note on every screen (``Banner``) until the screen ``banner_until`` is shown.
    banner: reactive[str] = reactive("")
    banner_until: str | None = None

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
        self.selected_server: int | None = None  # the server the screens act on (context line)
        self.selected_host: str | None = None
        self.revision: object = None  # the journal's, as last seen (``follow_journal``)
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
        """Core progress events become messages to the app (thread-safe), then the busy bar; a
        job the user cancelled stops there (``workbench.tui.workers``)."""
        before = wb.progress

        def forward(p) -> None:
            before(p)
            check_cancelled()
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
        self.context = Context(workspace=str(self.workspace_root))
        self.load_keymap()
        if self.start:
            self.switch_mode(self.start)
        self.set_interval(JOURNAL_POLL_S, self.look_at_journal, name="journal")
        self.look_at_journal()

    # -- following the journal, and what is in play -----------------------------------------------
    def select_server(self, server_id: int | None, host: str | None = None) -> None:
        """The server (and its host) the screens act on now: the context line names it."""
        self.selected_server = server_id
        if host is not None or server_id is None:
            self.selected_host = host
        self.context = Context(
            workspace=self.context.workspace,
            host=host or self.selected_host,
            server=server_id,
            problem=self.context.problem,
        )
        self.look_at_journal()

    def look_at_journal(self) -> None:
        if self.is_running and self.screen_stack:
            self._journal_worker(self.selected_server)

    @background("journal", done="_journal_seen")
    def _journal_worker(self, server_id: int | None) -> tuple[object, Context]:
        wb = self.wb
        host, profile, state = self.selected_host, None, None
        if server_id is not None:
            from workbench.errors import WorkbenchError

            try:
                rec = wb.server(server_id)
                host, profile, state = rec.host, rec.profile, rec.state
            except WorkbenchError:
                pass
        context = Context(str(self.workspace_root), host, server_id, profile, state, wb.settings_problem())
        return wb.revision(), context

    def _journal_seen(self, seen: tuple[object, Context]) -> None:
        from workbench.tui.base import WorkbenchScreen

        revision, context = seen
        if not self.screen_stack:  # the app is closing
            return
        if context.server == self.selected_server and context != self.context:
            self.context = context
        if revision != self.revision:
            self.revision = revision
            if isinstance(self.screen, WorkbenchScreen):
                self.screen.journal_moved(revision)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The app's own workers (the journal's revision): their result to the method they name;
        a failure is reported once per kind, never a crash."""
        worker = event.worker
        if worker.node is not self:
            return
        route = route_of(worker)
        if event.state == WorkerState.SUCCESS and route.done and not worker.is_cancelled:
            getattr(self, route.done)(worker.result)
        elif event.state == WorkerState.ERROR and worker.error is not None:
            message = f"{type(worker.error).__name__}: {worker.error}"
            if message != getattr(self, "_journal_error", None):
                self._journal_error = message
                self.report(worker.error, what="journal")

    def on_unmount(self) -> None:
        if self._wb is not None:
            self._wb.close()

    def show_screen(self, screen_id: str) -> None:
        if screen_id not in {s.id for s in self.specs}:
            self.notify(f"no screen {screen_id!r}", severity="error")
            return
        self.switch_mode(screen_id)

    def switch_mode(self, mode: str):
        if self.banner and mode == self.banner_until:
            self.banner = ""  # the note led there: its job is done
        return super().switch_mode(mode)

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
        from workbench.tui.keymap import bindings_of, screen_bindings_of

        known = []
        for scope, _title, bindings in screen_bindings_of(self, None):
            known += bindings_of(scope, bindings)
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
    def keys_of(self, binding: Binding) -> str:
        """A binding's keys as the footer shows them, the user's keymap applied."""
        keys = self._keymap.get(binding.id, binding.key) if binding.id else binding.key
        shown = []
        for key in keys.split(","):
            display = self.get_key_display(Binding(key.strip(), binding.action))
            if display not in shown:
                shown.append(display)
        return " ".join(shown)

    def help_rows(self) -> list[tuple[str, str, str, str]]:
        """(keys, description, where, binding id) for every key of the workbench, keymap applied:
        the screen keys and the app's first, then the screen in front's, then every other screen's
        (and the dialogs' and widgets' keys that have an id)."""
        from workbench.tui.keymap import APP_SCOPE, screen_bindings_of

        front = type(self.screen) if self.screen is not None else None
        everywhere: list[tuple[str, str, str, str]] = []
        rows: list[tuple[str, str, str, str]] = []
        for scope, title, bindings in screen_bindings_of(self, front):
            seen: set[str] = set()
            for b in bindings:
                ident = b.id or b.action
                if not b.description or ident in seen:
                    continue
                seen.add(ident)
                if scope == APP_SCOPE:
                    everywhere.append((self.keys_of(b), b.description, "everywhere", ident))
                else:
                    rows.append((self.keys_of(b), b.description, title, ident))
        return sorted(everywhere, key=_help_order) + rows

    def action_help(self) -> None:
        from workbench.tui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.help_rows(), front=self.title_of(self.screen) or ""))

    def palette_commands(self, screen: Screen) -> list[tuple[str, str, Callable[[], object]]]:
        """(text, help, run) for every command of the palette, in its order (``WorkbenchCommands``)."""
        from workbench.tui.keymap import APP_SCOPE, screen_bindings_of

        out: list[tuple[str, str, Callable[[], object]]] = []
        front_title = self.title_of(screen) or ""
        by_title = {s.title: s for s in self.specs}
        groups = screen_bindings_of(self, type(screen))
        for scope, title, bindings in groups:
            if scope == APP_SCOPE or title not in by_title:
                continue
            spec = by_title[title]
            for b in bindings:
                if not b.description or b.id == "job.cancel":
                    continue
                where = "" if title == front_title else f"{title}: "
                run = _runner(self, spec.id if title != front_title else None, b.action)
                out.append((f"{where}{b.description}", f"{b.tooltip or b.description} ({self.keys_of(b)})", run))
            if title == front_title:  # then the screens themselves
                for s in self.specs:
                    key = self.keys_of(Binding(s.key, "x", id=f"screen.{s.id}"))
                    out.append(
                        (f"Go to {s.title}", f"switch to the {s.title} screen ({key})", partial(self.show_screen, s.id))
                    )
        out += [(f"Open server {sid}", what, partial(self.open_server, sid)) for sid, what in self._open_servers()]
        out += [
            ("Keys (help)", "every key of every screen, with its binding id (f1)", self.action_help),
            ("Theme", "change the colours", self.action_change_theme),
            ("Screenshot", "save an SVG picture of the screen in the workspace", self.screenshot_to_workspace),
            ("Quit", "leave the workbench (ctrl+q)", self.exit),
        ]
        return out

    def _open_servers(self) -> list[tuple[int, str]]:
        """The journal's active servers, for the palette (a local read; nothing when it fails)."""
        try:
            return [(r.id, f"{r.profile} on {r.host}, {r.state}") for r in self.wb.servers(active=True)]
        except Exception:  # the palette must open whatever the journal says
            return []

    def open_server(self, server_id: int) -> None:
        self.select_server(server_id)
        if "server" in {s.id for s in self.specs}:
            self.switch_mode("server")

    def screenshot_to_workspace(self) -> None:
        path = self.save_screenshot(path=str(self.workspace_root))
        self.notify(f"saved {path}", markup=False)


def screen_keys_markdown() -> str:
    """The README's table of screen keys, from the bindings (tests/foundation/test_readme.py)."""
    from workbench.tui.widgets.screen_bar import _key_order

    rows = sorted(SCREENS, key=lambda s: _key_order(s.key))
    return "\n".join(["| key | screen |", "|---|---|", *(f"| `{s.key.upper()}` | {s.title} |" for s in rows)])


def _help_order(row: tuple[str, str, str, str]) -> tuple:
    """Screens first, by key (F2, F3, ... F12), then the app's other keys."""
    from workbench.tui.widgets.screen_bar import _key_order

    keys, _desc, _where, ident = row
    if ident.startswith("screen."):
        return (0, _key_order(keys.split()[0] if keys else ""), ident)
    return (1 if ident.startswith("app.") else 2, (), ident)


def _runner(app: WorkbenchApp, screen_id: str | None, action: str) -> Callable[[], None]:
    """Run ``action`` on the screen in front, or switch to ``screen_id`` first and run it there."""

    def run() -> None:
        if screen_id is not None:
            app.switch_mode(screen_id)
        app.call_after_refresh(lambda: app.call_later(app.screen.run_action, action))

    return run


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


check_routes(WorkbenchApp)
