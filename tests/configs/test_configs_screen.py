"""The Configs screen through Textual's pilot: history, external edits, diff, revert with a confirm."""

import json
import shutil
import time

import pytest
from textual.widgets import DataTable, Input, Label, Static

from tests.fixtures.drafts import KIMI_DRAFT
from tests.fixtures.tui import still, wait_workers
from workbench.api import Workbench
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.configs import ConfigsScreen
from workbench.tui.widgets.confirm import ConfirmModal

SIZE = (140, 40)
IDS = "eagle_config.eagle_aux_hidden_state_layer_ids"


async def settle(pilot):
    for _ in range(3):
        await pilot.pause()
        await wait_workers(pilot.app)
    await pilot.pause()


@pytest.fixture
def story(tmp_path, workspace, monkeypatch):
    """The story's history: tracked [2,30,58], "fixed" to [-1,2,30]; fixed clock, UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    d = tmp_path / "snap" / "drafts" / "kimi-k2.5-eagle3"
    shutil.copytree(KIMI_DRAFT, d)
    cfg = d / "config.json"
    with Workbench.open(workspace) as wb:
        wb.config_track(str(cfg), "kimi")
        wb.config_set(str(cfg), {IDS: [-1, 2, 30]}, reason="slot 0 is the embedding (wrong)")
        wb.journal.db.execute("UPDATE config_versions SET ts = 1795000000 + 3600 * id")
    yield cfg
    time.tzset()


async def test_history_and_revert_with_one_key(workspace, story):
    original_ids = [2, 30, 58]
    app = WorkbenchApp(str(workspace), start="configs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ConfigsScreen)
        assert screen.query_one("#files", DataTable).row_count == 1
        versions = screen.query_one("#versions", DataTable)
        assert versions.row_count == 2 and str(versions.get_row_at(0)[1]) == "v2"
        assert "+      -1," in str(screen.query_one("#diff", Static).render())
        versions.focus()
        await pilot.press("down")  # select v1
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert "to v1" in app.screen.plan.summary
        await pilot.press("escape")  # no: nothing written
        await settle(pilot)
        assert json.loads(story.read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [-1, 2, 30]
        screen.query_one("#versions", DataTable).focus()
        await pilot.press("down", "r")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
        assert json.loads(story.read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == original_ids
        assert screen.query_one("#versions", DataTable).row_count == 3
        assert str(screen.query_one("#versions", DataTable).get_row_at(0)[3]) == "revert to v1"


async def test_external_edit_noticed_on_refresh_and_mark_diff(workspace, story):
    app = WorkbenchApp(str(workspace), start="configs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        story.write_text(story.read_text().replace('"draft_vocab_size": 32000', '"draft_vocab_size": 16000'))
        await pilot.press("ctrl+r")
        await settle(pilot)
        table = app.screen.query_one("#versions", DataTable)
        assert table.row_count == 3 and str(table.get_row_at(0)[3]) == "external edit"
        table.focus()
        await pilot.press("down", "down", "m", "up", "up")  # base v1, look at v3
        await pilot.pause()
        title = str(app.screen.query_one("#diff-title", Label).render())
        assert "v1 -> v3" in title and "marked" in title
        diff = str(app.screen.query_one("#diff", Static).render())
        assert '+  "draft_vocab_size": 16000,' in diff and "+      -1," in diff


async def test_track_from_the_path_box(workspace, tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"a": 1}\n')
    app = WorkbenchApp(str(workspace), start="configs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+t")
        box = app.screen.query_one("#track-path", Input)
        assert box.has_focus
        await pilot.press("m", "i")  # typed into the box: the key went where ctrl+t put it
        assert box.value == "mi"
        box.value = str(tmp_path / "missing.json")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.query_one("#files", DataTable).row_count == 0
        box.value = str(p)
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.query_one("#files", DataTable).row_count == 1


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_revert_flow_at_both_sizes(snap_compare, journal_clock, workspace, story, size):
    """The README's revert: the history (the narrow one leaves the hashes to the diff's title),
    / to find a version by its reason, r on it, the diff in the dialog, y: reverted byte for byte."""

    async def flow(pilot):
        app = pilot.app
        await settle(pilot)
        screen = app.screen
        versions = screen.query_one("#versions", DataTable)
        assert versions.has_focus and versions.row_count == 2
        await pilot.press("slash", *"tracked", "enter")
        assert versions.row_count == 1 and str(versions.get_row_at(0)[1]) == "v1"
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal) and "to v1" in app.screen.plan.summary
        await pilot.press("y")
        await settle(pilot)
        assert json.loads(story.read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 30, 58]
        assert versions.row_count == 1 and versions.total_rows == 3  # the filter stays until esc
        await pilot.press("escape")  # the filter goes: every version again
        await settle(pilot)
        assert versions.row_count == 3 and str(versions.get_row_at(0)[3]) == "revert to v1"
        await still(pilot)

    assert snap_compare(WorkbenchApp(str(workspace), start="configs"), terminal_size=size, run_before=flow)
