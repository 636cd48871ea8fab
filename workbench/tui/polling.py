"""Polling for monitor screens: the next poll is armed when the last one finishes (polls never
overlap), and a poll is skipped while the screen is not the one shown (a modal on top, another
screen active). The remote work runs in a thread worker, never on the UI thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.tui.workers import background

if TYPE_CHECKING:
    from workbench.tui.base import WorkbenchScreen

    _ScreenBase = WorkbenchScreen  # the mixin goes before WorkbenchScreen; the checker sees its members
else:
    _ScreenBase = object


class PollingScreenMixin(_ScreenBase):
    poll_interval: float = 2.0
    polls: int = 0  # polls actually run (tests count them)
    _poll_running: bool = False

    def start_polling(self, first_delay: float = 0.0) -> None:
        self._arm(first_delay)

    def _arm(self, delay: float) -> None:
        self.set_timer(max(0.01, delay), self._tick, name="poll")

    def _tick(self) -> None:
        if not self.is_attached:
            return
        if self.app.screen is not self or self._poll_running:
            self._arm(self.poll_interval)  # paused: a modal or another screen is in front
            return
        self.poll_now()

    def poll_now(self) -> None:
        if self._poll_running:
            return
        self._poll_running = True
        self.polls += 1
        self._poll_worker()

    @background("poll", done="_poll_done")
    def _poll_worker(self) -> tuple[Any, Exception | None]:
        """A failed poll is news for the screen (``poll_failed``), not a failed worker."""
        try:
            return self.poll(), None
        except Exception as exc:  # shown inline; the next poll tries again
            return None, exc

    def _poll_done(self, polled: tuple[Any, Exception | None]) -> None:
        result, error = polled
        self._poll_running = False
        try:
            if error is not None:
                self.poll_failed(error)
            else:
                self.render_poll(result)
        finally:
            if self.is_attached:
                self._arm(self.poll_interval)

    # -- for subclasses ---------------------------------------------------------------------------
    def poll(self) -> Any:  # worker thread: remote work
        raise NotImplementedError

    def render_poll(self, result: Any) -> None:  # UI thread
        raise NotImplementedError

    def poll_failed(self, error: BaseException) -> None:
        self.app.report(error, what="refresh")
