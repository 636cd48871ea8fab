"""The Doctor screen through Textual's pilot: run, read findings and capture, apply a fix with a confirm."""

import json
import shutil

import pytest
from textual.widgets import DataTable, Input, Select, Static

from tests.fixtures.drafts import KIMI_BROKEN, ROOT
from tests.fixtures.tui import no_blink, still, wait_workers
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.doctor import DoctorScreen
from workbench.tui.widgets.confirm import ConfirmModal

SIZE = (140, 44)
TARGET = "sample_configs/targets/kimi-k2.5"


async def settle(pilot):
    await pilot.pause()
    await wait_workers(pilot.app)
    await pilot.pause()


async def fill(pilot, draft, trained="2,30,58", engine="sglang==0.5.12.post1"):
    screen = pilot.app.screen
    screen.query_one("#draft", Input).value = str(draft)
    screen.query_one("#target", Input).value = TARGET
    screen.query_one("#trained", Input).value = trained
    screen.query_one("#engine", Select).value = engine
    for node in screen.query(Input):
        node.cursor_blink = False
    await pilot.press("ctrl+r")
    await settle(pilot)


@pytest.fixture
def broken(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    d = tmp_path / "draft"
    shutil.copytree(KIMI_BROKEN, d)
    return d


async def test_findings_capture_and_detail(workspace, broken):
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, DoctorScreen)
        await fill(pilot, broken)
        screen = app.screen
        codes = [f.code for f in screen.report.findings]
        assert codes[:2] == ["layer-ids-embedding", "layer-ids-engine-mismatch"]
        table = screen.query_one("#findings", DataTable)
        assert table.row_count == len(codes)
        cap = screen.query_one("#capture", DataTable)
        assert [str(c) for c in cap.get_row_at(2)[:5]] == ["2", "-1", "0", "missing", "out(58)"]
        detail = str(screen.query_one("#detail", Static).render())
        assert "layer-ids-embedding" in detail and "press f on the findings to apply" in detail
        draft = screen.query_one("#draft", Input)
        assert app.focused is draft  # the run left the keys in the form: a path typed on is typed
        await pilot.press("end", "/", "f")
        assert draft.value.endswith("/f") and not isinstance(app.screen, ConfirmModal)
        draft.value = str(broken)
        table.focus()
        await pilot.press("down")
        assert "layer-ids-engine-mismatch" in str(screen.query_one("#detail", Static).render())


async def test_apply_fix_confirms_then_writes_through_history(workspace, broken):
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=SIZE) as pilot:
        await fill(pilot, broken)
        app.screen.query_one("#findings", DataTable).focus()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert any("+      58" in line for line in app.screen.plan.details)
        await pilot.press("n")  # cancelled: nothing written
        await settle(pilot)
        assert json.loads((broken / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [
            -1,
            2,
            30,
        ]
        await pilot.press("f")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
        await settle(pilot)
        ids = json.loads((broken / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        assert ids == [2, 30, 58]
        assert not [f for f in app.screen.report.findings if f.severity == "error"]  # re-run after the fix
        versions = app.wb.config_history(str(broken / "config.json")).versions
        assert [v.reason.split(":")[0] for v in versions] == ["tracked", "doctor fix"]


async def test_bad_input_is_one_inline_line(workspace, tmp_path):
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=SIZE) as pilot:
        await fill(pilot, tmp_path / "nowhere")
        err = app.screen.error
        assert err and "no such directory" in err and "\n" not in err
        await fill(pilot, tmp_path, trained="2,x")
        assert "trained layers" in app.screen.error


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_fix_flow_at_both_sizes(snap_compare, journal_clock, workspace, broken, size):
    """The README's doctor tour: the form typed as a user does, ctrl+r, the findings (the keys stay
    in the form: a letter typed on is text), tab to the findings, f, the diff, y; the fixed finding
    goes, and the Configs screen shows the new version without a refresh (it follows the journal)."""

    async def flow(pilot):
        app = pilot.app
        screen = app.screen
        no_blink(app)
        screen.query_one("#draft", Input).value = str(broken)  # a pasted path (key by key is slow to drive)
        screen.query_one("#target", Input).value = TARGET
        screen.query_one("#engine", Select).value = "sglang==0.5.12.post1"
        trained = screen.query_one("#trained", Input)
        trained.focus()
        await pilot.press(*"2,30,58", "enter")
        await settle(pilot)
        assert screen.report is not None and app.focused is trained
        assert screen.query_one("#findings").region.y < size[1] - 3  # the findings are on screen
        await pilot.press("f")  # typed, not "apply fix"
        assert trained.value == "2,30,58f" and not isinstance(app.screen, ConfirmModal)
        await pilot.press("backspace")
        screen.query_one("#findings", DataTable).focus()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal) and any("+      58" in d for d in app.screen.plan.details)
        await pilot.press("y")
        await settle(pilot)
        await settle(pilot)
        assert not [f for f in screen.report.findings if f.severity == "error"]
        await pilot.press("f4")
        await settle(pilot)
        configs = app.screen
        versions = configs.query_one("#versions", DataTable)
        assert versions.row_count == 2 and "doctor fix" in str(versions.get_row_at(0)[3])
        await still(pilot)

    assert snap_compare(WorkbenchApp(str(workspace), start="doctor"), terminal_size=size, run_before=flow)


async def test_the_evidence_class_is_a_column_and_in_the_detail(workspace, broken):
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=SIZE) as pilot:
        await fill(pilot, broken, trained="", engine="sglang==0.5.23")
        screen = app.screen
        table = screen.query_one("#findings", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        by_code = {r[2]: r[1] for r in rows}
        assert by_code["layer-ids-embedding"] == "engine code"
        assert by_code["training-capture-impossible"] == "unsettled"
        assert by_code["layer-ids-nondefault"] == "static file"
        assert "rests on: engine code" in str(screen.query_one("#detail", Static).render())


async def test_a_fix_written_elsewhere_reruns_the_checks(workspace, broken):
    """The Doctor follows the journal: a fix applied from another face (here the API, as the CLI or
    the Alignment screen would) runs the checks on the files again: the fixed finding goes."""
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=SIZE) as pilot:
        await fill(pilot, broken)
        screen = app.screen
        fix = next(f for f in screen.report.findings if f.code == "layer-ids-embedding").fix
        app.wb.config_apply_fix(fix, confirm=True)
        app.look_at_journal()
        await settle(pilot)
        await settle(pilot)
        assert not [f for f in screen.report.findings if f.severity == "error"]
