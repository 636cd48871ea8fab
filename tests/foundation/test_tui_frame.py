"""The frame every screen shares: a failing worker is reported (never a crash), screens' styles do
not depend on what was visited before, the screen keys and title are always on screen, the
confirm dialog fits, core progress reaches the busy bar, the keymap is checked."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from tests.fixtures.tui import settle, until
from workbench.confirm import Plan
from workbench.progress import Progress
from workbench.tui.app import SCREENS, WorkbenchApp
from workbench.tui.base import BusyBar, ErrorLine
from workbench.tui.widgets.confirm import ConfirmModal
from workbench.tui.widgets.screen_bar import ScreenBar, lay_out

SCREENS_DIR = Path(__file__).resolve().parents[2] / "workbench" / "tui"

#: What makes each screen start work on open (its own inputs, as a user would type them).
TRIGGERS = {
    "doctor": {"draft": "/nowhere/draft"},
    "alignment": {"train": "/nowhere/train.ckpt", "infer": "/nowhere/dump"},
    "drafter": {"draft": "/nowhere/d", "data": "/nowhere/rows", "target": "/nowhere/t"},
    "diagnose": {"server_id": 1},
    "servers": {"poll_interval": 30.0},
    "server": {"poll_interval": 30.0},
}


class Exploding:
    """A Workbench whose every call raises a bug-like error (not a WorkbenchError)."""

    progress = staticmethod(lambda _p: None)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Member(name)

    def close(self) -> None:
        pass


class _Member:
    def __init__(self, name: str):
        self.name = name

    def __call__(self, *_a, **_k):
        raise KeyError(f"boom in {self.name}")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Member(f"{self.name}.{name}")


def _error_line(app) -> str:
    return str(app.screen.query_one(ErrorLine).render())


@pytest.mark.parametrize("screen_id", [s.id for s in SCREENS])
async def test_a_worker_that_raises_is_reported_and_the_app_lives(workspace, screen_id):
    app = WorkbenchApp(
        str(workspace), start=screen_id, wb=Exploding(), screen_args={screen_id: TRIGGERS.get(screen_id, {})}
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.is_running and app.current_mode == screen_id
        assert "KeyError" in _error_line(app) and "boom in" in _error_line(app)
        # still usable: the keys work, another screen opens
        await pilot.press("f1")
        await pilot.pause()
        assert type(app.screen).__name__ == "HelpScreen"
    assert app.return_code in (None, 0)


def test_every_worker_goes_through_background():
    """``@work`` directly would default to exit_on_error=True: one bug would end the app."""
    offenders = [
        str(p.relative_to(SCREENS_DIR))
        for p in SCREENS_DIR.rglob("*.py")
        if p.name != "workers.py" and re.search(r"@work\b|run_worker\(", p.read_text())
    ]
    assert offenders == []


def test_screen_styles_are_scoped_to_their_screen():
    for spec in SCREENS:
        cls = spec.factory
        css = (Path(__import__(cls.__module__, fromlist=["x"]).__file__).parent / cls.CSS_PATH).read_text()
        css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
        for rule in re.findall(r"([^{}]+)\{", css):
            for selector in rule.split(","):
                head = re.match(r"[\w-]+", selector.split()[0]).group(0)  # DiagnoseScreen.-narrow too
                assert head == cls.__name__, f"{cls.CSS_PATH}: {selector.strip()!r} is not scoped"


def _styles(screen) -> dict:
    """Every node's computed styles, by its place in the tree (what the CSS decides)."""
    out = {}
    for node in screen.walk_children(with_self=False):
        path = "/".join(
            f"{type(n).__name__}#{n.id or ''}" for n in reversed(list(node.ancestors_with_self)) if n is not screen.app
        )
        out[path] = node.styles.css
    return out


async def test_every_screen_looks_the_same_whatever_was_visited_before(workspace):
    """Each screen's computed styles as in an app that opened only it, both when it opens after
    every other screen's sheet was loaded and when it is shown again after a visit to all others."""
    args = {s.id: {"poll_interval": 30.0} for s in SCREENS if s.id in ("servers", "server")}
    alone = {}
    for spec in SCREENS:
        fresh = WorkbenchApp(str(workspace), start=spec.id, screen_args=args)
        async with fresh.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            alone[spec.id] = _styles(fresh.screen)
    app = WorkbenchApp(str(workspace), start=SCREENS[-1].id, screen_args=args)
    differ = []
    async with app.run_test(size=(120, 40)) as pilot:
        for when in ("opened after the others", "shown again after all others"):
            for spec in SCREENS:
                app.show_screen(spec.id)
                await settle(pilot)
                got = _styles(app.screen)
                if got != alone[spec.id]:
                    paths = sorted(k for k in set(got) | set(alone[spec.id]) if got.get(k) != alone[spec.id].get(k))
                    differ.append(f"{spec.id} ({when}): {paths[:3]}")
    assert differ == []


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_screen_name_is_on_screen_whole(workspace, size):
    """No screen name is cut: at 80 columns the bar takes a second line instead, at 200 one."""
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        bar = app.screen.query_one(ScreenBar)
        lines = str(bar.render()).splitlines()
        assert len(lines) == (2 if size[0] == 80 else 1) and all(len(line) <= size[0] - 2 for line in lines)
        text = " ".join(lines)
        for spec in SCREENS:
            assert f"{spec.key.upper()} {spec.title}" in text
        assert app.screen.sub_title == "Doctor"
        # a click on a name opens that screen
        row = next(i for i, line in enumerate(lines) if "F4 Configs" in line)
        x = lines[row].index("F4 Configs") + 1
        await pilot.click(ScreenBar, offset=(x + 3, row))
        await pilot.pause()
        assert app.current_mode == "configs"


def test_the_bar_wraps_between_names_never_inside_one():
    entries = [("a", "F2", "Predictor"), ("b", "F3", "Doctor"), ("c", "F10", "Timeline")]
    assert [[label for *_x, label in line] for line in lay_out(entries, 200)] == [
        ["F2 Predictor", "F3 Doctor", "F10 Timeline"]
    ]
    lines = lay_out(entries, 24)
    assert [[label for *_x, label in line] for line in lines] == [["F2 Predictor", "F3 Doctor"], ["F10 Timeline"]]


async def test_the_bar_follows_the_keymap(workspace):
    (workspace / "keymap.toml").write_text('"screen.timeline" = "f11"\n')
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        line = str(app.screen.query_one(ScreenBar).render())
        assert "F11 Timeline" in line and "F10" not in line


async def test_help_lists_screens_by_key_first(workspace):
    app = WorkbenchApp(str(workspace))
    async with app.run_test(size=(120, 40)):
        rows = app.help_rows()
        screens = [r for r in rows if r[3].startswith("screen.")]
        assert rows[: len(screens)] == screens
        keys = [int(r[0].split()[0][1:]) for r in screens]
        assert keys == sorted(keys)


async def test_confirm_dialog_shows_yes_and_no_at_80x24(workspace):
    plan = Plan(
        "relaunch",
        "server 1",
        "Relaunch server 1: stop it, then start the same profile " * 3,
        [f"step {i}: something that happens" for i in range(40)],
    )
    done = []
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=(80, 24)) as pilot:
        app.confirm(plan, lambda: done.append(1))
        await settle(pilot)
        modal = app.screen
        assert isinstance(modal, ConfirmModal)
        for button in ("#yes", "#no"):
            region = modal.query_one(button).region
            assert region.height >= 1 and region.bottom <= 24 and region.right <= 80
        await pilot.click("#yes")
        await pilot.pause()
        assert done == [1]


async def test_an_unanswered_confirmation_cancels_itself(workspace):
    from workbench.tui.widgets.live import ask_from_thread

    plan = Plan("relaunch", "server 1", "Relaunch server 1", [])
    answers = []
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=(80, 24)) as pilot:
        import threading

        t = threading.Thread(target=lambda: answers.append(ask_from_thread(app, plan, timeout=0.5)))
        t.start()
        assert await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        asked = time.monotonic()
        assert await until(pilot, lambda: answers != [] and not isinstance(app.screen, ConfirmModal))
        assert answers == [False] and time.monotonic() - asked >= 0.4  # it waited for its timeout
        t.join(5)


async def test_core_progress_reaches_the_busy_bar(workspace):
    """The core's progress, from a screen's worker thread, shows on the busy bar while the worker runs;
    an event that arrives once no work runs (a finished worker's last, late) leaves the bar hidden."""
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        import threading

        wb = app.wb
        emitted, release = threading.Event(), threading.Event()

        def job() -> None:
            wb.progress(Progress("server.measure", 2, 5, "round 2/5"))
            emitted.set()
            release.wait(10)

        app.screen.run_worker(job, thread=True, group="measure", name="measure")
        assert await asyncio.to_thread(emitted.wait, 10)
        for _ in range(20):
            await pilot.pause()
        bar = app.screen.query_one(BusyBar)
        assert bar.has_class("-busy") and "round 2/5" in str(bar.query_one("#busy-label").render())
        release.set()
        await settle(pilot)
        assert not bar.has_class("-busy")
        late = threading.Thread(target=lambda: wb.progress(Progress("server.measure", 5, 5, "round 5/5")))
        late.start()
        late.join()
        await settle(pilot)
        assert not bar.has_class("-busy")


async def test_the_busy_bar_pulses_only_while_something_runs(workspace):
    """An indeterminate bar redraws itself 15 times a second even while hidden: the idle bar is a
    still one, and pulses from a start to the stop."""
    from textual.widgets._progress_bar import Bar

    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        busy = app.screen.query_one(BusyBar)
        bar = busy.query_one(Bar)
        assert not busy.has_class("-busy") and bar.auto_refresh is None
        busy.start("measuring")
        await pilot.pause()
        assert bar.auto_refresh is not None
        busy.stop()
        await pilot.pause()
        assert not busy.has_class("-busy") and bar.auto_refresh is None


async def test_keymap_names_unknown_ids_and_taken_keys(workspace):
    (workspace / "keymap.toml").write_text('"screen.predicter" = "f19"\n"screen.predictor" = "f5"\n')
    messages = []
    app = WorkbenchApp(str(workspace))
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await pilot.pause()
        notes = [m.notification.message for m in messages if type(m).__name__ == "Notify"]
    assert any("'screen.predicter'" in n and "did you mean 'screen.predictor'" in n for n in notes)
    assert any("f5" in n and "'screen.servers'" in n for n in notes)


@pytest.mark.parametrize("screen_id", [s.id for s in SCREENS])
async def test_the_footer_is_not_cut_at_80_columns(workspace, screen_id):
    """The app's own keys come last in the footer: when "Help" shows, nothing before it was cut."""
    app = WorkbenchApp(
        str(workspace),
        start=screen_id,
        screen_args={screen_id: {"poll_interval": 30.0}} if screen_id in ("servers", "server") else {},
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        last = "".join(seg.text for seg in app.screen._compositor.render_strips()[-1])
        assert "f1 Help" in last, last


async def test_ctrl_c_cancels_a_long_job_at_its_next_step(workspace):
    """A 45-90 s job (here a drafter evaluation that reports a step every 20 ms) stops at the step
    after ctrl+c: the core is told through its progress callback, the screen says it was
    cancelled, and nothing else runs on. With nothing running, ctrl+c is no cancel at all."""
    from workbench.api import Workbench

    steps = []

    class Slow(Workbench):
        def drafter_eval(self, *a, **k):
            for i in range(500):
                steps.append(i)
                self.progress(Progress("drafter-eval", i + 1, 500, f"data_{i}.ckpt"))
                time.sleep(0.02)
            raise AssertionError("never cancelled")

    messages = []
    app = WorkbenchApp(str(workspace), start="drafter", wb=Slow.open(workspace))
    async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
        await settle(pilot)
        screen = app.screen
        assert not screen.check_action("cancel_job", ())  # nothing runs: no cancel key
        for name in ("draft", "data", "target"):
            screen.query_one(f"#{name}").value = f"/{name}"
        await pilot.press("ctrl+r")
        assert await until(pilot, lambda: len(steps) > 3)
        bar = screen.query_one(BusyBar)
        assert bar.has_class("-busy") and "ctrl+c cancel" in str(bar.query_one("#busy-cancel").render())
        await pilot.press("ctrl+c")
        assert await until(pilot, lambda: not any(w.is_running for w in app.workers if w.node is screen))
        await settle(pilot)
        ran = len(steps)
        assert ran < 500 and not bar.has_class("-busy")
        notes = [m.notification.message for m in messages if type(m).__name__ == "Notify"]
        assert any(n.startswith("cancelled: drafter") for n in notes), notes
        time.sleep(0.1)
        assert len(steps) == ran  # the job's thread ended there


async def test_a_broken_workbench_toml_blanks_nothing_that_needs_no_hosts(workspace):
    """The Predictor predicts, the context line names the problem, and the Dashboard (which needs
    the hosts) says it in one line."""
    (workspace / "workbench.toml").write_text("[hosts\n")
    from workbench.tui.widgets.context_line import ContextLine

    app = WorkbenchApp(str(workspace), screen_args={"servers": {"poll_interval": 3600.0}})
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert round(app.screen.result.accept_length, 3) == 3.288
        assert await until(pilot, lambda: app.context.problem is not None)
        await pilot.pause()
        assert "workbench.toml: invalid TOML" in str(app.screen.query_one(ContextLine).render())
        await pilot.press("f5")
        await settle(pilot)
        assert "invalid TOML" in _error_line(app) and "\n" not in _error_line(app).strip()
        (workspace / "workbench.toml").write_text('[hosts.gpu]\naddress = "gpu"\n')  # mended: read again
        app.look_at_journal()
        assert await until(pilot, lambda: app.context.problem is None)
