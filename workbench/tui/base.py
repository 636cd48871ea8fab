"""The frame every screen shares: the context line (workspace, host, server), the bar of screen
keys, the screen's body, a busy bar for work in progress (``ctrl+c`` cancels it), the error line,
and a footer built from the bindings. A screen follows the journal: when anything was written
(by another screen, or another process), ``follow_journal`` shows it again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Label, ProgressBar, Static
from textual.worker import Worker, WorkerState

from workbench.errors import WorkbenchError
from workbench.tui.widgets.context_line import ContextLine
from workbench.tui.widgets.filter import FilterBar
from workbench.tui.widgets.screen_bar import ScreenBar
from workbench.tui.workers import (
    QUIET_GROUPS,
    JobCancelledError,
    ProgressMessage,
    cancel_requested,
    check_routes,
    request_cancel,
    route_of,
)

if TYPE_CHECKING:
    from workbench.tui.app import WorkbenchApp


class BusyBar(Horizontal):
    """What runs now (a worker's label, or the core's stage) with a bar: a fraction when the core
    says how far it is, an indeterminate pulse otherwise, and how to cancel it. Hidden when nothing
    runs."""

    DEFAULT_CSS = """
    BusyBar { height: 1; padding: 0 1; display: none; background: $boost; }
    BusyBar.-busy { display: block; }
    BusyBar > #busy-label { width: 1fr; color: $text-muted; }
    BusyBar > #busy-cancel { width: auto; color: $text-accent; margin-left: 1; }
    BusyBar > ProgressBar { width: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="busy-label", markup=False)
        # idle, the bar is a still one: an indeterminate bar redraws itself 15 times a second, hidden or not
        yield ProgressBar(total=1, show_eta=False, id="busy-progress")
        yield Label("ctrl+c cancel", id="busy-cancel", markup=False)

    def start(self, label: str) -> None:
        self.query_one("#busy-label", Label).update(f"{label}…")
        self.query_one("#busy-cancel", Label).update("ctrl+c cancel")
        self.query_one("#busy-progress", ProgressBar).update(total=None, progress=0)
        self.add_class("-busy")

    def cancelling(self) -> None:
        self.query_one("#busy-cancel", Label).update("cancelling: stops at its next step")

    def progress(self, p) -> None:
        text = f"{p.stage}: {p.message}" if p.message else p.stage
        if p.total:
            text += f"  ({_num(p.done)}/{_num(p.total)})"
        self.query_one("#busy-label", Label).update(text)
        bar = self.query_one("#busy-progress", ProgressBar)
        bar.update(total=p.total if p.total else None, progress=p.done if p.total else 0)
        self.add_class("-busy")

    def stop(self) -> None:
        self.remove_class("-busy")
        self.query_one("#busy-progress", ProgressBar).update(total=1, progress=0)


class ErrorLine(Static):
    """The screen's last failure in one line (the notification says it too, and fades)."""

    DEFAULT_CSS = """
    ErrorLine { height: auto; max-height: 2; padding: 0 1; color: $error; text-style: bold; display: none; }
    ErrorLine.-shown { display: block; }
    """

    def show(self, text: str) -> None:
        self.update(text)
        self.set_class(bool(text), "-shown")


class Banner(Static):
    """A note the app keeps on every screen until the user reaches where it leads (the demo's
    "press F8"): a line of the frame, never a toast over a dialog's buttons."""

    DEFAULT_CSS = """
    Banner { height: auto; padding: 0 1; background: $accent 25%; color: $text; display: none; }
    Banner.-shown { display: block; }
    """

    def on_mount(self) -> None:
        self.watch(self.app, "banner", self._show)

    def _show(self, text: str) -> None:
        self.update(text)
        self.set_class(bool(text), "-shown")


#: Below this many columns a screen carries the ``-narrow`` class: its tcss can stack panes.
NARROW_WIDTH = 120


class WorkbenchScreen(Screen):
    """Subclasses implement ``compose_body``; the footer lists their bindings (with keymap applied)."""

    app: WorkbenchApp
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: it reaches a job from a focused input too; with nothing running it is no binding
        # at all, and ctrl+c copies in an input as before
        Binding("ctrl+c", "cancel_job", "Cancel", id="job.cancel", priority=True, tooltip="cancel the running job"),
    ]
    #: Widgets whose keys act on this screen ("screen.revert" on its history table): help and the
    #: palette list them with the screen's own.
    KEYS_OF: ClassVar[tuple[type, ...]] = ()
    #: The journal revision this screen last showed (``follow_journal``).
    _seen_revision: object = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_routes(cls)

    def compose(self) -> ComposeResult:
        yield ContextLine()
        yield ScreenBar()
        yield Banner(markup=False)
        yield from self.compose_body()
        yield FilterBar()
        yield BusyBar()
        yield ErrorLine(markup=False)
        yield Footer(compact=True)

    def compose_body(self) -> Iterable[Widget]:
        return ()

    def on_mount(self) -> None:
        title = self.app.title_of(self) if hasattr(self.app, "title_of") else None
        if title:
            self.sub_title = title
        self._seen_revision = getattr(self.app, "revision", None)
        self._fit_width(self.app.size.width)

    # -- following the journal ----------------------------------------------------------------------
    def on_screen_resume(self) -> None:
        self.journal_moved(getattr(self.app, "revision", None))

    def journal_moved(self, revision: object) -> None:
        """The app saw the journal (or workbench.toml) change; a screen shown again catches up."""
        if revision is None or revision == self._seen_revision:
            return
        first = self._seen_revision is None
        self._seen_revision = revision
        if not first:
            self.follow_journal()

    def follow_journal(self) -> None:
        """Show again what depends on the journal (another screen wrote a config version, a
        measurement, a server's state). Cheap local reads only; a screen whose results come from
        a long job marks them instead of running it again."""

    def on_resize(self, event) -> None:
        self._fit_width(event.size.width)

    def _fit_width(self, width: int) -> None:
        self.set_class(width < NARROW_WIDTH, "-narrow")
        # at 80 columns the screen's keys need the room of the "^p palette" hint (F1 lists it)
        for footer in self.query(Footer):
            footer.show_command_palette = width >= 100

    # -- cancelling a job -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_job":
            return any(not cancel_requested(w) for w in self._loud_workers())
        # a widget's key for a screen action (``f`` on findings: "screen.apply_fix") is no key on a
        # screen without that action
        return callable(getattr(self, f"action_{action}", None))

    def action_cancel_job(self) -> None:
        running = [w for w in self._loud_workers() if not cancel_requested(w)]
        for worker in running:
            request_cancel(worker)
        bar = self._busy()
        if bar is not None and running:
            bar.cancelling()
        self.refresh_bindings()

    def job_cancelled(self, message: str) -> None:
        """A job ended because the user cancelled it (``message`` names it): the screen says so."""
        self.notify(message, severity="information")

    # -- the shared frame ---------------------------------------------------------------------------
    def show_failure(self, text: str) -> None:
        for line in self.query(ErrorLine):
            line.show(text)

    def _busy(self) -> BusyBar | None:
        found = self.query(BusyBar)
        return found.first() if found else None

    def busy_with(self, group: str) -> bool:
        """Whether work of ``group`` started by this screen is still running."""
        return any(w.node is self and w.group == group and not w.is_finished for w in self.workers)

    def _loud_workers(self) -> list[Worker]:
        return [
            w
            for w in self.workers
            if w.node is self and w.group not in QUIET_GROUPS and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        ]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a worker's start and end are handled: its result or its inline error goes
        to the handler its ``background`` names, other failures to the error line (never a crash),
        then the busy bar follows what still runs. A cancelled worker delivers nothing (see
        workbench/tui/workers.py)."""
        if event.state != WorkerState.PENDING:
            # After what the screen has queued already (its first Resize, when work ends as the
            # screen opens): a table filled just before a layout pass, and drawn in it before its
            # own idle, would keep the column widths of its empty state.
            self.call_later(self._worker_changed, event.worker, event.state)

    def _worker_changed(self, worker: Worker, state: WorkerState) -> None:
        if state == WorkerState.RUNNING and worker.group not in QUIET_GROUPS:
            self.show_failure("")  # the last failure stays on screen until new work starts
        elif state == WorkerState.SUCCESS:
            route = route_of(worker)
            if route.done is not None and not worker.is_cancelled:
                self._deliver(worker, route.done, worker.result)
        elif state == WorkerState.ERROR and worker.error is not None:
            self._failed(worker, worker.error)
        self._follow_busy(worker, state)  # after the result: a screen is complete when the bar goes

    def _follow_busy(self, worker: Worker, state: WorkerState) -> None:
        bar = self._busy()
        if bar is None or worker.group in QUIET_GROUPS:
            return
        if state == WorkerState.RUNNING:
            bar.start(worker.name)
        elif not self._loud_workers():
            bar.stop()
        self.refresh_bindings()  # the footer's "Cancel" follows what runs

    def _failed(self, worker: Worker, error: BaseException) -> None:
        route = route_of(worker)
        if isinstance(error, JobCancelledError):
            self.job_cancelled(str(error))
        elif not isinstance(error, WorkbenchError):
            self.app.report(error, what=route.what or worker.name)  # a bug: always says where
        elif worker.is_cancelled:
            return  # stale: newer work answers
        elif route.failed is not None:
            self._deliver(worker, route.failed, str(error))
        else:
            self.app.report(error, what=route.what)

    def _deliver(self, worker: Worker, handler: str, value: Any) -> None:
        try:
            getattr(self, handler)(value)
        except Exception as exc:  # a bug in a handler is reported like one in the worker
            self.app.report(exc, what=route_of(worker).what or worker.name)

    def on_progress_message(self, message: ProgressMessage) -> None:
        bar = self._busy()
        # a worker's last events can reach the screen after its end: they must not show the bar again
        if bar is not None and self._loud_workers():
            bar.progress(message.progress)


def _num(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"
