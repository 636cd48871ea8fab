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
        await settle(pilot, 0.3)
        no_blink(pilot.app)
        await pilot.pause()

    app = WorkbenchApp(str(workspace), start=screen_id, screen_args={screen_id: ARGS.get(screen_id, {})})
    assert snap_compare(app, terminal_size=size, run_before=run_before)
