"""Every screen at the smallest terminal we support (80x24) and a large one (200x60), on a fresh
workspace: the frame (title, screen keys, footer) and each screen's form stay usable at both."""

from __future__ import annotations

import pytest

from tests.fixtures.tui import no_blink, settle
from workbench.tui.app import SCREENS, WorkbenchApp

SIZES = [(80, 24), (200, 60)]
ARGS = {"servers": {"poll_interval": 3600.0}, "server": {"poll_interval": 3600.0}}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen_id", [s.id for s in SCREENS])
def test_every_screen_at_both_sizes(snap_compare, workspace, screen_id, size):
    async def run_before(pilot):
        await settle(pilot)
        no_blink(pilot.app)
        await pilot.pause()

    app = WorkbenchApp(str(workspace), start=screen_id, screen_args={screen_id: ARGS.get(screen_id, {})})
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_confirm_dialog_at_both_sizes(snap_compare, workspace, size):
    from workbench.confirm import Plan

    plan = Plan(
        "overwrite",
        "local:/data/draft/config.json",
        "apply fix to /data/draft/config.json: set eagle_config.eagle_aux_hidden_state_layer_ids to "
        "[1, 5, 8] so sglang==0.5.23 captures out(1), out(5), out(8)",
        [
            "--- current",
            "+++ fixed",
            "@@ -1,8 +1,8 @@",
            *[f'   "key_{i}": {i},' for i in range(12)],
            '-    "eagle_aux_hidden_state_layer_ids": [-1, 1, 5]',
            '+    "eagle_aux_hidden_state_layer_ids": [1, 5, 8]',
            *[f'   "tail_{i}": {i},' for i in range(12)],
        ],
    )

    async def run_before(pilot):
        app = pilot.app
        # the demo's note is a line of the frame, and a toast that comes meanwhile waits under the
        # dialog: nothing covers Yes and No
        app.banner = "Demo: server 1 shows accept length 1.54 with the story's draft config. Press F8 (Diagnose)."
        app.notify("a toast that would have covered the buttons", timeout=60)
        app.confirm(plan, lambda: None)
        await settle(pilot)
        modal = app.screen
        assert not modal.query("ToastRack")
        for button, label in (("#yes", "Yes [y]"), ("#no", "No [n]")):
            region = modal.query_one(button).region
            assert region.bottom <= size[1] and region.right <= size[0]
            assert str(modal.query_one(button).label) == label  # the key shown, not eaten as markup

    app = WorkbenchApp(str(workspace), start="doctor")
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help_lists_every_key_and_filters_at_both_sizes(snap_compare, workspace, size):
    """F1 on the Configs screen: the keys that work everywhere, Configs' own, then every other
    screen's; / finds "fix" among them."""

    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        table = pilot.app.screen.query_one("DataTable")
        everything = table.row_count
        await pilot.press("slash", *"fix")
        await pilot.pause()
        assert 0 < table.row_count < everything
        no_blink(pilot.app)
        await pilot.pause()

    app = WorkbenchApp(str(workspace), start="configs")
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_palette_opens_on_the_workbench_s_commands(snap_compare, workspace, size):
    """ctrl+p on the Predictor: its own commands first, then every screen, then the other screens'
    commands; Textual's stock entries (theme, quit) come last."""

    async def run_before(pilot):
        from textual.command import CommandPalette

        await settle(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        palette = pilot.app.screen
        assert isinstance(palette, CommandPalette)
        options = palette.query_one("CommandList")
        shown = [str(options.get_option_at_index(i).prompt).splitlines()[0] for i in range(options.option_count)]
        assert shown[:2] == ["Example", "Copy CLI"] and shown[2] == "Go to Predictor"
        assert "Doctor: Run checks" in shown and "Configs: Revert" in shown and shown[-1] == "Quit"
        no_blink(pilot.app)
        await pilot.pause()

    app = WorkbenchApp(str(workspace), start="predictor")
    assert snap_compare(app, terminal_size=size, run_before=run_before)
