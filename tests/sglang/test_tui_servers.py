"""Servers, Server and Launch screens: pilot tests over the real sshd, and snapshots offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fixtures.tui import settle, until
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.server import ServerScreen
from workbench.tui.screens.servers import ServersScreen

SIZE = (140, 40)
SAMPLE = Path(__file__).resolve().parents[2] / "sample_configs" / "workbench.toml"


def cells(table):
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.ssh
async def test_dashboard_polls_pause_under_the_stop_dialog(ssh_workspace, monkeypatch):
    from textual.widgets import DataTable

    from workbench.api import Workbench

    monkeypatch.setattr(ServersScreen, "poll_interval", 0.2)
    with Workbench.open(ssh_workspace) as wb:
        rec = wb.launch("standin", confirm=True)
        assert wb.server_wait(rec.id, timeout=60, poll=0.2).state == "ready"
    app = WorkbenchApp(str(ssh_workspace), start="servers")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        table = screen.query_one("#servers", DataTable)
        assert await until(pilot, lambda: table.row_count == 1 and "ready" in cells(table)[0][3])
        row = cells(table)[0]
        assert row[0] == str(rec.id) and row[1] == "standin" and row[5] == "-"  # no decode line yet
        assert "0:69/140G" in row[9]
        hosts = cells(screen.query_one("#hosts", DataTable))
        assert any(r[0] == "test" and "0:69/140G" in r[3] for r in hosts)
        await pilot.press("ctrl+k")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "ConfirmModal"
        before = screen.polls
        await pilot.pause(1.0)
        assert screen.polls == before  # no refresh while the dialog is open
        await pilot.press("y")
        assert await until(pilot, lambda: table.row_count == 0)
        assert screen.polls > before
    with Workbench.open(ssh_workspace) as wb:
        assert wb.server(rec.id).state == "stopped"


@pytest.mark.ssh
async def test_launch_screen_then_server_screen_log(ssh_workspace, monkeypatch):
    from textual.widgets import DataTable, RichLog, Select

    monkeypatch.setattr(ServerScreen, "poll_interval", 0.2)
    app = WorkbenchApp(str(ssh_workspace), start="launch")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(app.screen.query_one("#profile", Select)._options) > 1)
        app.screen.query_one("#profile", Select).value = "standin"
        findings = app.screen.query_one("#findings", DataTable)
        assert await until(pilot, lambda: findings.row_count > 0, timeout=60)
        codes = [r[1] for r in cells(findings)]
        assert "parser-ok" in codes
        assert "--speculative-algorithm EAGLE3" in str(app.screen.query_one("#command").render())
        await pilot.press("ctrl+l")
        await pilot.pause()
        await pilot.press("y")
        assert await until(pilot, lambda: isinstance(app.screen, ServerScreen) and app.screen.query("#log"), timeout=30)
        screen = app.screen
        log = screen.query_one("#log", RichLog)
        assert await until(
            pilot, lambda: any("fired up" in "".join(s.text for s in line) for line in log.lines), timeout=60
        )
        assert "✔ ready" in str(screen.query_one("#progress").render())
        sid = screen.server_id
        await pilot.press("ctrl+k")
        await pilot.pause()
        await pilot.press("y")
        assert await until(
            pilot,
            lambda: (
                (screen.status is not None and screen.status.state == "stopped")
                or app.wb.server(sid).state == "stopped"
            ),
            timeout=30,
        )


def test_launch_screen_snapshot(snap_compare, workspace):
    """The story's debug profile: its exact command, the 0.5.23 warnings, the unreachable host."""
    shutil.copy(SAMPLE, workspace / "workbench.toml")

    async def run_before(pilot):
        from textual.widgets import DataTable, Select

        await until(pilot, lambda: len(pilot.app.screen.query_one("#profile", Select)._options) > 1)
        pilot.app.screen.query_one("#profile", Select).value = "kimi-debug"
        table = pilot.app.screen.query_one("#findings", DataTable)
        await until(
            pilot, lambda: getattr(pilot.app.screen.preview, "profile", None) == "kimi-debug" and table.row_count > 0
        )
        # the columns are sized on a later refresh: wait for it (a loaded machine renders late)
        await until(
            pilot, lambda: all(c.content_width >= len("host-unreachable") for c in list(table.columns.values())[1:2])
        )
        await settle(pilot)

    assert snap_compare(WorkbenchApp(str(workspace), start="launch"), terminal_size=SIZE, run_before=run_before)


def test_servers_screen_snapshot_empty(snap_compare, workspace):
    shutil.copy(SAMPLE, workspace / "workbench.toml")

    async def run_before(pilot):
        await settle(pilot)

    assert snap_compare(WorkbenchApp(str(workspace), start="servers"), terminal_size=SIZE, run_before=run_before)
