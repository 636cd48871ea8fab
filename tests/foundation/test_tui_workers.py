"""Workers bring their news back as messages: a worker returns (or raises), and the screen's one
``Worker.StateChanged`` handler routes the outcome to the handler its ``background`` names, on the
UI thread, before the busy bar stops; a cancelled worker's result never reaches the screen."""

from __future__ import annotations

import threading

import pytest
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from tests.fixtures.tui import settle, until
from workbench.errors import InputError
from workbench.tui.app import WorkbenchApp
from workbench.tui.base import BusyBar, ErrorLine, WorkbenchScreen
from workbench.tui.workers import background, route_of

SIZE = (120, 40)


class Probe(WorkbenchScreen):
    """A screen whose work is a value given in advance (``wait``: until the test releases it)."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[str] = []
        self.errors: list[str] = []
        self.finished: list[str] = []  # what the worker threads returned, delivered or not
        self.bar_busy_at_delivery: list[bool] = []
        self.delivered_on: list[int] = []
        self.state_changes: list = []  # the Worker.StateChanged messages that reached the screen
        self.delivered_after: list = []  # the last of them when a result arrived
        self.release = threading.Event()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Textual calls every class's handler along the MRO: this one first, then the frame's
        self.state_changes.append((event.worker, event.state))

    def compose_body(self):
        yield Static("", id="answer", markup=False)

    @background("probe", "probing", done="show", failed="show_error")
    def compute(self, value: str, wait: bool = False) -> str:
        if wait:
            self.release.wait(10)
        self.finished.append(value)
        if value.startswith("bad"):
            raise InputError(f"{value}: not a value")
        if value.startswith("bug"):
            raise KeyError(value)
        return value

    @background("probe-write", done="show", what="write {value}", exclusive=False)
    def write(self, value: str) -> str:
        if value.startswith("bad"):
            raise InputError(f"{value}: refused")
        return value

    def show(self, value: str) -> None:
        self.shown.append(value)
        self.delivered_on.append(threading.get_ident())
        self.delivered_after.append(self.state_changes[-1] if self.state_changes else None)
        self.bar_busy_at_delivery.append(self.query_one(BusyBar).has_class("-busy"))
        self.query_one("#answer", Static).update(value)

    def show_error(self, message: str) -> None:
        self.errors.append(message)

    def answer(self) -> str:
        return str(self.query_one("#answer", Static).render())


async def _probe(app, pilot) -> Probe:
    probe = Probe()
    await app.push_screen(probe)
    await settle(pilot, 0.1)
    return probe


def _error_line(app) -> str:
    return str(app.screen.query_one(ErrorLine).render())


async def test_a_result_reaches_the_screen_as_a_message_before_the_busy_bar_stops(workspace):
    app = WorkbenchApp(str(workspace), start="predictor")
    async with app.run_test(size=SIZE) as pilot:
        probe = await _probe(app, pilot)
        calls: list = []
        app.call_from_thread = lambda *a, **k: calls.append(a)  # type: ignore[method-assign]
        worker = probe.compute("forty-two")
        assert route_of(worker).done == "show"
        await settle(pilot)
        assert probe.shown == ["forty-two"] and probe.answer() == "forty-two"
        assert probe.delivered_on == [threading.main_thread().ident]  # on the UI thread
        assert probe.bar_busy_at_delivery == [True]  # the bar stopped after
        assert not probe.query_one(BusyBar).has_class("-busy")
        assert probe.delivered_after == [(worker, WorkerState.SUCCESS)]  # from Worker.StateChanged
        assert worker.result == "forty-two"
        assert calls == []  # no call into the UI thread


async def test_a_cancelled_older_result_never_overwrites_a_newer_one(workspace):
    app = WorkbenchApp(str(workspace), start="predictor")
    async with app.run_test(size=SIZE) as pilot:
        probe = await _probe(app, pilot)
        slow = probe.compute("slow", wait=True)
        await pilot.pause(0.1)
        fast = probe.compute("fast")  # same exclusive group: cancels the slow one
        assert slow.is_cancelled
        assert await until(pilot, lambda: probe.shown == ["fast"])
        probe.release.set()  # the slow thread ends now, with its (stale) result
        assert await until(pilot, lambda: "slow" in probe.finished)
        await settle(pilot, 0.2)
        assert probe.shown == ["fast"] and probe.answer() == "fast"
        assert fast.state == WorkerState.SUCCESS and slow.state == WorkerState.CANCELLED
        # a stale WorkbenchError is dropped too
        probe.release.clear()
        probe.compute("bad-old", wait=True)
        await pilot.pause(0.1)
        probe.compute("newest")
        assert await until(pilot, lambda: probe.shown[-1:] == ["newest"])
        probe.release.set()
        assert await until(pilot, lambda: "bad-old" in probe.finished)
        await settle(pilot, 0.2)
        assert probe.errors == [] and probe.answer() == "newest" and _error_line(app) == ""


async def test_failures_go_inline_or_to_the_error_line_titled_by_what(workspace):
    app = WorkbenchApp(str(workspace), start="predictor")
    async with app.run_test(size=SIZE) as pilot:
        probe = await _probe(app, pilot)
        probe.compute("bad")
        await settle(pilot)
        assert probe.errors == ["bad: not a value"] and _error_line(app) == ""  # inline, not reported
        probe.compute("bug")
        await settle(pilot)
        assert "probing: KeyError: 'bug'" in _error_line(app)  # a bug: reported
        probe.write("bad")  # no inline handler: reported, titled from the arguments
        await settle(pilot)
        assert _error_line(app) == "write bad: bad: refused"
        assert app.is_running and probe.shown == []


def test_a_route_to_a_missing_handler_fails_when_the_class_is_made():
    with pytest.raises(TypeError, match="done='show_reslut'"):

        class Typo(WorkbenchScreen):
            @background("typo", done="show_reslut")
            def work_it(self) -> int:
                return 1

            def show_result(self, value: int) -> None:
                pass

    with pytest.raises(TypeError, match="names 'sid'"):
        background("typo", what="stop {sid}")(lambda self, server: None)
