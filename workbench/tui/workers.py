"""How screens run work off the UI thread, and how what it finds comes back.

Every worker goes through ``background``: a thread worker that never takes the app down
(``exit_on_error=False``). A worker never calls into the UI: it returns its result, or raises.
When it ends, Textual posts ``Worker.StateChanged`` to the screen, and
``WorkbenchScreen.on_worker_state_changed`` (``workbench/tui/base.py``) is the one place that
handles it, on the UI thread. The decorator declares where the outcome goes, by method name::

    @background("alignment", done="show_result", failed="show_error")
    def align(self, f: dict) -> Alignment:
        return self.app.wb.align(...)

- ``done``: the method that takes ``worker.result`` when the worker succeeds (none: the result is
  dropped);
- ``failed``: the method that takes ``str(error)`` when the worker raises a ``WorkbenchError`` (the
  screen's inline error line); without one, and for every other exception (a bug), the failure goes
  to ``WorkbenchApp.report`` (the error line and a notification), titled ``what``;
- ``what``: that title, a ``str.format`` template over the method's arguments
  (``"stop server {sid}"``, ``"launch {preview.profile}"``); by default the worker's name (its
  ``label``, else its group). ``what=""`` leaves a ``WorkbenchError`` untitled (its message names
  the input); a bug is always titled, with the worker's name at least.

Routes are kept per worker, from the decorated method (several workers share a group, a method is
unique), and the names are checked when the screen class is created (``check_routes``). A handler
runs before the busy bar stops, so a test that waits for the bar to go sees the result. A bug in a
handler is reported like a bug in the worker.

A cancelled worker delivers nothing: an exclusive worker cancels the older one of its group, and
that one's result (or its ``WorkbenchError``) never reaches the screen, even when it had already
finished; a bug in it is still reported.

A long job is cancelled by the user (``ctrl+c``, ``WorkbenchScreen.action_cancel``) through
``request_cancel``: the core is told at its next ``Progress`` event, where the app's progress
callback raises ``JobCancelledError`` in the worker's thread (once: the core's own clean-up, a dump server
stopped in a ``finally``, runs to its end), so the operation ends at a step boundary, and the screen
shows it ended. A job that finishes before its next step delivers its result: it happened.

News while a worker runs goes through ``post_message`` (thread-safe) of a small ``Message``
subclass, never by a call into a widget: core ``Progress`` events arrive as ``ProgressMessage``,
which the busy bar shows. A worker that blocks on the user's answer in the middle of its work
(``workbench.tui.widgets.live.ask_from_thread``) still needs ``App.call_from_thread`` for that.
"""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, ParamSpec, TypeVar
from weakref import WeakKeyDictionary

from textual import work
from textual.message import Message
from textual.worker import NoActiveWorker, Worker, get_current_worker

from workbench.errors import WorkbenchError

P = ParamSpec("P")
R = TypeVar("R")

#: Groups whose work is routine (a monitor's refresh, a prediction per keystroke): no busy bar, so
#: the screen does not flicker.
QUIET_GROUPS = frozenset({"poll", "predictor", "journal"})


@dataclass(frozen=True)
class Route:
    """Where one worker's outcome goes: handler names on its screen, and its failures' title."""

    done: str | None = None
    failed: str | None = None
    what: str = ""


#: The route of each running (or just finished) worker; a worker that is gone takes its route along.
_ROUTES: WeakKeyDictionary[Worker[Any], Route] = WeakKeyDictionary()
_DECLARED = "__workbench_route__"


def background(
    group: str,
    label: str = "",
    *,
    exclusive: bool = True,
    done: str | None = None,
    failed: str | None = None,
    what: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, Worker[R]]]:
    """``@background("doctor", "running the doctor", done="show", failed="show_error")``: run the
    method in a thread worker of that group (``exclusive``: starting one cancels the group's older
    ones); the busy bar shows ``label`` (the group without one); the outcome goes where the module's
    docstring says; a failure never takes the app down."""

    def decorate(method: Callable[P, R]) -> Callable[P, Worker[R]]:
        signature = inspect.signature(method)
        if what:
            _check_template(what, signature, method.__qualname__)
        start = work(thread=True, exclusive=exclusive, group=group, exit_on_error=False, name=label or group)(method)

        @wraps(method)
        def started(*args: P.args, **kwargs: P.kwargs) -> Worker[R]:
            worker = start(*args, **kwargs)
            title = worker.name if what is None else _format(what, signature, args, kwargs, worker.name)
            _ROUTES[worker] = Route(done, failed, title)
            return worker

        setattr(started, _DECLARED, Route(done, failed, what or ""))
        return started

    return decorate


def route_of(worker: Worker[Any]) -> Route:
    """The route ``background`` gave ``worker``; a worker started otherwise reports under its name."""
    return _ROUTES.get(worker) or Route(what=worker.name)


def check_routes(cls: type) -> None:
    """Every handler a ``background`` method of ``cls`` names is a method of ``cls`` (a typo fails
    when the class is created, not when the work ends)."""
    for klass in cls.__mro__:
        for attr, value in vars(klass).items():
            declared = getattr(value, _DECLARED, None)
            if not isinstance(declared, Route):
                continue
            for kind, name in (("done", declared.done), ("failed", declared.failed)):
                if name is not None and not callable(getattr(cls, name, None)):
                    raise TypeError(f"{cls.__name__}.{attr}: {kind}={name!r} is not a method of {cls.__name__}")


def _check_template(template: str, signature: inspect.Signature, where: str) -> None:
    for _text, field, _spec, _conv in string.Formatter().parse(template):
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if root not in signature.parameters:
            raise TypeError(f"{where}: what={template!r} names {root!r}, not one of its arguments")


def _format(template: str, signature: inspect.Signature, args: tuple, kwargs: dict, default: str) -> str:
    try:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return template.format(**bound.arguments)
    except Exception:  # a title must never stop the work from starting
        return default


class JobCancelledError(WorkbenchError):
    """The user cancelled the job; raised in its thread at the core's next progress event."""


#: Workers the user asked to stop, with whether ``JobCancelledError`` was raised in them yet.
_CANCELS: WeakKeyDictionary[Worker[Any], bool] = WeakKeyDictionary()


def request_cancel(worker: Worker[Any]) -> None:
    """Ask ``worker`` to stop at its next progress event (see the module's docstring)."""
    _CANCELS.setdefault(worker, False)


def cancel_requested(worker: Worker[Any]) -> bool:
    return worker in _CANCELS


def check_cancelled() -> None:
    """In a worker's thread, at a progress event: raise ``JobCancelledError`` once if the user asked."""
    try:
        worker = get_current_worker()
    except NoActiveWorker:
        return
    if _CANCELS.get(worker) is False:
        _CANCELS[worker] = True
        raise JobCancelledError(f"cancelled: {route_of(worker).what or worker.name}")


class ProgressMessage(Message):
    """A core ``workbench.progress.Progress`` event, delivered on the UI thread."""

    def __init__(self, progress: Any) -> None:
        super().__init__()
        self.progress = progress
