"""The Diagnose screen through Textual's pilot on a recorded run of the demo (tests/live/data/
story.json, recorded by tests/live/record_story.py: the live doctor's report and the before/after
comparison of the small lab), so the rendering is exact and needs no server; the snapshot is the
README's screenshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from tests.fixtures.tui import wait_workers
from workbench.live.report import Comparison, LiveReport
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.diagnose import DiagnoseScreen
from workbench.tui.widgets.confirm import ConfirmModal

DATA = Path(__file__).with_name("data") / "story.json"
SIZE = (160, 48)


def story():
    d = json.loads(DATA.read_text())
    return LiveReport.from_dict(d["report"]), Comparison(**d["comparison"])


async def settle(pilot):
    await pilot.pause()
    await wait_workers(pilot.app)
    await pilot.pause()


def text(screen, sel) -> str:
    return str(screen.query_one(sel, Static).render())


async def test_guided_keys_on_a_recorded_report(workspace, tmp_path):
    report, _ = story()
    cfg = tmp_path / "config.json"
    ids = report.draft.ids
    cfg.write_text(
        json.dumps(
            {"architectures": ["LlamaForCausalLMEagle3"], "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}},
            indent=2,
        )
        + "\n"
    )
    report.fix.file = str(cfg)
    app = WorkbenchApp(str(workspace), start="diagnose", screen_args={"diagnose": {"guided": True}})
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, DiagnoseScreen) and "next: press m" in text(screen, "#guide")
        await pilot.press("c")
        assert "nothing to compare yet" in text(screen, "#status")
        screen.show_report(report)
        await pilot.pause()
        assert "next: press a" in text(screen, "#guide")
        table = screen.query_one("#findings", DataTable)
        assert [str(table.get_row_at(i)[2]) for i in range(table.row_count)] == [f.code for f in report.findings]
        numbers = text(screen, "#numbers")
        assert f"observed {report.observed.accept_length:.2f}" in numbers
        assert f"predicted {report.predicted.accept_length:.2f}" in numbers
        await pilot.press("a")
        assert "next: press f" in text(screen, "#guide")
        assert screen.query_one("#alignment", DataTable).row_count == 3
        await pilot.press("f")
        await pilot.pause()
        new_last = report.fix.edits[0].value[-1]
        assert isinstance(app.screen, ConfirmModal) and any(f"+      {new_last}" in d for d in app.screen.plan.details)
        await pilot.press("n")
        await settle(pilot)
        assert json.loads(cfg.read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == ids
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
        fixed = json.loads(cfg.read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        assert fixed == report.fix.edits[0].value
        versions = app.wb.config_history(str(cfg)).versions
        assert [v.reason.split(":")[0] for v in versions] == ["tracked", "doctor fix"]
        assert "live.fix" in [e.kind for e in app.wb.events()]
        # the recorded server does not exist here: the relaunch offer fails as one line, no traceback
        assert "next: press r" in text(screen, "#guide")
        # the panes say the fix is written, not "press f" / "(the server runs ...)" as before it
        detail = text(screen, "#detail")
        assert "press f" not in detail and f"is v{versions[-1].number}" in detail
        title = str(screen.query_one("#alignment-title").render())
        assert f"written as v{versions[-1].number}" in title and "until relaunched" in title


async def test_doctor_screen_shows_a_live_report(workspace):
    from workbench.tui.screens.doctor import DoctorScreen

    report, _ = story()
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        from textual.widgets import Input

        screen.query_one("#server", Input).value = "7"
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert screen.error and "server 7: no such server" in screen.error and "\n" not in screen.error
        screen._show_live(report)
        await pilot.pause()
        table = screen.query_one("#findings", DataTable)
        # columns: severity, evidence (what the finding rests on), code, fix
        assert [str(table.get_row_at(i)[2]) for i in range(table.row_count)] == [f.code for f in report.findings]
        cap = screen.query_one("#capture", DataTable)
        rows = [[str(c) for c in cap.get_row_at(i)] for i in range(cap.row_count)]
        ids = report.draft.ids
        assert [r[1] for r in rows] == [str(i) for i in ids]
        assert [r[4] for r in rows] == [b.physical for b in report.alignment.best]
        assert all(r[5] == "MISMATCH" for r in rows)
        notes = str(screen.query_one("#capture-notes", Static).render())
        assert f"observed {report.observed.accept_length:.2f}" in notes and "costs" in notes


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_loop_at_both_sizes(snap_compare, workspace, tmp_path, size):
    """The demo's loop on the recorded run, by its keys: the doctor's report, a (alignment), f and
    the diff, y; the fixed finding says so instead of staying red; the relaunch's result and the
    before/after are above the fold at 80x24 too. The 200x60 picture is the README's."""
    from types import SimpleNamespace

    from tests.fixtures.tui import still

    report, cmp = story()
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": report.draft.ids}}, indent=2))
    report.fix.file = str(cfg)

    async def flow(pilot):
        app = pilot.app
        screen = app.screen
        screen.show_report(report)
        await pilot.pause()
        await pilot.press("a")
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await settle(pilot)  # the relaunch offered next fails here (the recorded server is not in this journal)
        view = screen.query_one("#findings", DataTable)
        fixed = [i for i, item in enumerate(view.items) if item.status == "fix written"]
        assert fixed and all(view.items[i].finding.fix.applicable for i in fixed)
        rec = SimpleNamespace(id=report.server_id + 1, profile=report.profile, host="local", state="ready")
        screen._relaunched(report.server_id, rec, cmp)
        screen.show_comparison(cmp)
        await pilot.pause()
        assert {view.items[i].status for i in fixed} == {"fixed"}
        table = screen.query_one("#compare", DataTable)
        assert table.region.height >= table.row_count + 1 and table.region.bottom <= size[1] - 1
        screen.query_one("#findings", DataTable).move_cursor(row=0)
        await still(pilot)

    app = WorkbenchApp(str(workspace), start="diagnose", screen_args={"diagnose": {"guided": True}})
    assert snap_compare(app, terminal_size=size, run_before=flow)


async def test_a_fix_from_a_live_report_says_written_and_runs_nothing_long(workspace, tmp_path):
    """On the Doctor's live report, f writes the fix; the finding says "fix written" (the server
    runs the old config until it is relaunched) instead of staying red, and the 45-90 s live
    doctor is not run again."""
    from workbench.tui.screens.doctor import DoctorScreen

    report, _ = story()
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": report.draft.ids}}, indent=2))
    for r in report.findings:
        if r.finding.fix is not None and r.finding.fix.applicable:
            r.finding.fix.file = str(cfg)
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, DoctorScreen)
        screen._show_live(report)
        await pilot.pause()
        view = screen.query_one("#findings", DataTable)
        view.focus()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await settle(pilot)
        statuses = {item.finding.code: item.status for item in view.items}
        assert statuses[view.items[0].finding.code] == "fix written"
        assert not any(w.group == "doctor" for w in app.workers)  # the live doctor was not started again
        assert "fix written (was error)" in str(screen.query_one("#detail", Static).render())
