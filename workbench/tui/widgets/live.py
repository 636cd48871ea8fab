"""Shared pieces of the screens that drive a live server."""

from __future__ import annotations

import contextlib
import threading
import time

from workbench.tui.widgets.confirm import CONFIRM_TIMEOUT_S


def ask_from_thread(app, plan, timeout: float | None = CONFIRM_TIMEOUT_S) -> bool:
    """From a worker thread: show ``plan`` in the confirm modal and wait for the answer (the core
    calls this in the middle of an operation, e.g. before the doctor's tensor-dump relaunch).

    No answer is a no: the modal cancels itself after ``timeout``; a worker cancelled meanwhile
    (the app quits, the screen starts other work) closes the modal and answers no, so the thread
    never waits forever."""
    from textual.worker import NoActiveWorker, get_current_worker

    from workbench.tui.widgets.confirm import ConfirmModal

    done, answer, shown = threading.Event(), {}, {}

    def show() -> None:
        def back(ok) -> None:
            answer["ok"] = bool(ok)
            done.set()

        modal = ConfirmModal(plan, timeout=timeout)
        shown["modal"] = modal
        app.push_screen(modal, back)

    def close() -> None:
        modal = shown.get("modal")
        if modal is not None and modal.is_attached and app.screen is modal:
            modal.dismiss(False)

    try:
        worker = get_current_worker()
    except NoActiveWorker:
        worker = None
    try:
        app.call_from_thread(show)
    except RuntimeError:  # the app is no longer running
        return False
    deadline = None if timeout is None else time.monotonic() + timeout + 5.0
    while not done.wait(0.1):
        gone = not app.is_running or (worker is not None and worker.is_cancelled)
        if gone or (deadline is not None and time.monotonic() > deadline):
            with contextlib.suppress(RuntimeError):  # the app is gone: nothing to close
                app.call_from_thread(close)
            return False
    return answer.get("ok", False)
