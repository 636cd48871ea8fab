"""Shared pieces of the screens that drive a live server."""

from __future__ import annotations

import threading


def ask_from_thread(app, plan) -> bool:
    """From a worker thread: show ``plan`` in the confirm modal and wait for the answer (the core
    calls this in the middle of an operation, e.g. before the doctor's tensor-dump relaunch)."""
    from workbench.tui.widgets.confirm import ConfirmModal

    done, answer = threading.Event(), {}

    def show() -> None:
        def back(ok) -> None:
            answer["ok"] = bool(ok)
            done.set()
        app.push_screen(ConfirmModal(plan), back)

    app.call_from_thread(show)
    done.wait()
    return answer["ok"]
