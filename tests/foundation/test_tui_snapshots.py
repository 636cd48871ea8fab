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
        pilot.app.confirm(plan, lambda: None)
        await settle(pilot)

    app = WorkbenchApp(str(workspace), start="doctor")
    assert snap_compare(app, terminal_size=size, run_before=run_before)
