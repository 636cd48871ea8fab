"""The TUI shell: screen discovery, bindings with ids, keymap, help, palette, confirm modal, notices."""

from textual.widgets import DataTable

from tests.fixtures.tui import settle
from workbench.confirm import Plan
from workbench.errors import InputError
from workbench.tui.app import SCREENS, WorkbenchApp
from workbench.tui.screens.help import HelpScreen
from workbench.tui.widgets.confirm import ConfirmModal

SIZE = (120, 40)


def _notes(messages):
    return [m.notification for m in messages if type(m).__name__ == "Notify"]


def test_every_screen_gets_a_binding_with_an_id():
    ids = {b.id: b for b in WorkbenchApp.BINDINGS}
    assert SCREENS and all(f"screen.{s.id}" in ids for s in SCREENS)
    assert {"app.help", "app.quit"} <= set(ids)
    assert ids["screen.predictor"].key == "f2"


async def test_help_lists_every_key_of_every_screen(tui_app):
    """F1 on any screen lists the keys that work everywhere, then the screen in front's, then every
    other screen's, the tables', the log's and the dialogs': every binding with an id."""
    from workbench.tui.keymap import screen_bindings_of

    app = tui_app(start="configs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        by_id = {r[3]: r for r in rows}
        assert by_id["screen.predictor"][0] == "f2" and list(by_id["predictor.reset"][:3]) == [
            "^r",
            "Example",
            "Predictor",
        ]
        assert by_id["job.cancel"][2] == "everywhere" and by_id["table.filter"][0] == "/"
        ids = {b.id for _s, _t, bs in screen_bindings_of(app, None) for b in bs if b.id}
        assert ids <= set(by_id)  # every binding of every screen, not only the one in front
        wheres = [r[2] for r in rows]
        assert wheres[: wheres.index("Configs")].count("everywhere") == wheres.index("Configs")
        assert "cursor_left" not in by_id  # editing keys of inputs are not the app's keys
        await pilot.press("slash")
        await pilot.press(*"revert")
        await pilot.pause()
        assert [table.get_row_at(i)[3] for i in range(table.row_count)] == ["configs.revert"]
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_keymap_file_remaps_by_binding_id(tui_app, workspace):
    (workspace / "keymap.toml").write_text('"app.help" = "f19"\n"predictor.reset" = "ctrl+o"\n')
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f19")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one(DataTable)
        rows = {table.get_row_at(i)[3]: table.get_row_at(i)[0] for i in range(table.row_count)}
        assert rows["app.help"] == "f19" and rows["predictor.reset"] == "^o"


async def test_bad_keymap_is_a_warning_not_a_crash(tui_app, workspace):
    (workspace / "keymap.toml").write_text("not toml [")
    messages = []
    app = tui_app()
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.pause()
        notes = _notes(messages)
        assert any("keymap.toml: ignored" in n.message and n.severity == "warning" for n in notes)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_confirm_modal_yes_no(tui_app):
    done = []
    messages = []
    plan = Plan(
        "stop",
        "server 3",
        "Stop server 3 (pid 4242): TERM its process group, then KILL after 10 s",
        ["kill -TERM -4242", "kill -KILL -4242"],
    )
    app = tui_app()
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        app.confirm(plan, lambda: done.append("yes"))
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert "Stop server 3" in str(app.screen.query_one("#confirm-summary").render())
        await pilot.press("n")
        await pilot.pause()
        assert done == [] and not isinstance(app.screen, ConfirmModal)
        assert any("cancelled: stop server 3" in n.message for n in _notes(messages))
        app.confirm(plan, lambda: done.append("yes"))
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert done == ["yes"]
        app.confirm(plan, lambda: done.append("clicked"))
        await pilot.pause()
        await pilot.click("#yes")
        await pilot.pause()
        assert done == ["yes", "clicked"]


async def test_report_turns_errors_into_one_line_notifications(tui_app):
    messages = []
    app = tui_app()
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        app.report(InputError("config.json: expected a JSON object\nsecond line"), what="configs")
        app.report(RuntimeError("boom"))
        await pilot.pause()
        notes = _notes(messages)
        # a WorkbenchError is one line of its own (workbench.errors): a break in it shows as a space
        assert any(
            n.message == "config.json: expected a JSON object second line" and n.severity == "error" for n in notes
        )
        assert any(n.message == "RuntimeError: boom" and n.title == "internal error" for n in notes)


async def test_palette_offers_screens_and_screen_actions(tui_app):
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        screen.query_one("#rates").value = "0.5"
        await settle(pilot)
        assert screen.result.accept_length < 2
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Example")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert round(app.screen.result.accept_length, 3) == 3.288


def test_without_a_terminal_the_tui_says_so(cli, workspace):
    r = cli()
    assert r.returncode == 2 and "needs a terminal" in r.stderr


def test_first_frame_does_not_import_torch(workspace):
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from workbench.tui.app import WorkbenchApp\n"
        "async def main():\n"
        f"    app = WorkbenchApp({str(workspace)!r})\n"
        "    async with app.run_test() as pilot:\n"
        "        await pilot.pause(0.3); await app.workers.wait_for_complete(); await pilot.pause()\n"
        "        assert app.screen.result is not None\n"
        "    print(sorted(m for m in ('torch', 'transformers', 'sglang') if m in sys.modules))\n"
        "asyncio.run(main())\n"
    )
    from tests.conftest import ROOT

    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_screen_has_its_own_key():
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens import discover

    specs = discover()
    keys = [s.key for s in specs]
    assert len(keys) == len(set(keys)), sorted(keys)
    app_keys = {k for b in WorkbenchApp.BINDINGS if not b.id.startswith("screen.") for k in b.key.split(",")}
    assert not app_keys & set(keys)
