"""How screens run work off the UI thread, and the messages that bring its news back.

Every worker goes through ``background``: a thread worker that never takes the app down
(``exit_on_error=False``). A worker that raises ends in ``WorkerState.ERROR``; the app's one
``Worker.StateChanged`` handler reports it in the screen's error line (``WorkbenchApp.report``),
and the screen's busy bar shows what runs meanwhile. Core ``Progress`` events reach the UI thread
as ``ProgressMessage`` (``post_message`` is thread-safe), never by a call into a widget.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from textual import work
from textual.message import Message

F = TypeVar("F", bound=Callable[..., Any])

#: Groups whose work is routine (a monitor's refresh, a prediction per keystroke): no busy bar, so
#: the screen does not flicker.
QUIET_GROUPS = frozenset({"poll", "predictor"})


def background(group: str, label: str = "", *, exclusive: bool = True) -> Callable[[F], F]:
    """``@background("doctor", "running the doctor")``: run the method in a thread worker of that
    group; the busy bar shows ``label`` (the group without one); a failure is reported, the app
    stays up."""
    return work(thread=True, exclusive=exclusive, group=group, exit_on_error=False,  # type: ignore[return-value]
                name=label or group)


class ProgressMessage(Message):
    """A core ``workbench.progress.Progress`` event, delivered on the UI thread."""

    def __init__(self, progress: Any) -> None:
        super().__init__()
        self.progress = progress
