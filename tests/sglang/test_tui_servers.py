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


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_launch_screen_at_both_sizes(snap_compare, workspace, size):
    """The story's debug profile: its exact command, the 0.5.23 warnings, the unreachable host."""
    shutil.copy(SAMPLE, workspace / "workbench.toml")

    async def run_before(pilot):
        from textual.widgets import DataTable, Select

        from tests.fixtures.tui import still

        # the profiles are read off the UI thread (and again when workbench.toml is seen to change)
        await until(
            pilot, lambda: "kimi-debug" in [v for _, v in pilot.app.screen.query_one("#profile", Select)._options]
        )
        pilot.app.screen.query_one("#profile", Select).value = "kimi-debug"
        table = pilot.app.screen.query_one("#findings", DataTable)
        await until(
            pilot, lambda: getattr(pilot.app.screen.preview, "profile", None) == "kimi-debug" and table.row_count > 0
        )
        # the columns are sized on a later refresh: wait for it (a loaded machine renders late)
        await until(
            pilot, lambda: all(c.content_width >= len("host-unreachable") for c in list(table.columns.values())[1:2])
        )
        await still(pilot)

    assert snap_compare(WorkbenchApp(str(workspace), start="launch"), terminal_size=size, run_before=run_before)


DECODE = (
    "[2026-12-01 10:00:{s:02d} TP0] Decode batch. #running-req: 1, #token: 98, token usage: 0.00, "
    "cuda graph: True, accept len: {al:.2f}, gen throughput (token/s): {gt:.2f}, #queue-req: 0,"
)


def _recorded_workbench():
    """A Workbench whose hosts answer from a recording (the journal and the screens are real): two
    servers, one ready with its decode log, one failing at start; no host is asked."""
    from types import SimpleNamespace as NS

    from workbench.api import Workbench

    gpus = [NS(index=0, used_mib=71000, total_mib=143360, util=88.0)]
    lines = [(1, "[2026-12-01 09:59:50] INFO: server_args=ServerArgs(model_path='/shared/target')")]
    lines += [(n, DECODE.format(s=n, al=1.5 + 0.1 * n, gt=300.0 + n)) for n in range(2, 12)]
    lines.append((12, "[2026-12-01 10:00:12] The server is fired up and ready to roll!"))

    def status(sid, profile, state, **kw):
        base = dict(
            id=sid,
            profile=profile,
            host="local",
            state=state,
            process="running",
            pid=4200 + sid,
            port=30000 + sid,
            uptime_s=3723.0,
            log_size=8190,
            stale=False,
            error=None,
            progress=["server_args", "weights_target", "ready"],
            stage="ready",
            failure=None,
            metrics={
                "accept_len": 2.6,
                "gen_throughput": 311.0,
                "accept_rate": 0.4,
                "running_req": 1,
                "queue_req": 0,
                "token_usage": 0.0,
            },
            series={"accept_len": [1.6, 1.9, 2.2, 2.6], "gen_throughput": [301.0, 305.0, 311.0]},
            gpus=gpus,
        )
        return NS(**{**base, **kw})

    statuses = [
        status(7, "lab-story", "ready"),
        status(
            8,
            "lab-debug",
            "failing",
            stage="weights_draft",
            metrics={},
            series={},
            failure={
                "class": "draft-weights-missing",
                "text": "no model.safetensors in /data/draft",
                "hint": "point --speculative-draft-model-path at the checkpoint folder",
            },
        ),
    ]

    class Recorded(Workbench):
        def server_status(self, ids=None, gpus=True):
            return [s for s in statuses if ids is None or s.id in ids]

        def servers(self, active=False):
            return [self.server(s.id) for s in statuses]

        def server(self, server_id):
            s = next(s for s in statuses if s.id == int(server_id))
            return NS(id=s.id, profile=s.profile, host=s.host, state=s.state, log=f"/var/log/{s.profile}.log")

        def server_lines(self, server_id, since=0):
            return [(n, t) for n, t in lines if n > since] if int(server_id) == 7 else []

        def server_events(self, server_id):
            return [{"line": 12, "kind": "milestone"}] if int(server_id) == 7 else []

        def host_gpus(self, name):
            return gpus

        def server_acceptance(self, server_id, *, record=True, **kw):
            return super().server_acceptance(server_id, record=False, **kw)  # no engine to read: the journal's

        @property
        def lifecycle(self):
            return NS(host_gpus=lambda name: gpus)

    return Recorded


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_dashboard_to_server_flow_at_both_sizes(snap_compare, workspace, size):
    """The README's servers tour on recorded hosts: the Dashboard (state, accept length, tok/s with
    sparklines; the narrow one keeps the numbers), the highlighted server is the context line's,
    / finds the failing one; ctrl+o opens the ready one's log, every line whole at 80 columns, and
    / searches it (n/N walk the matches)."""
    from textual.widgets import DataTable

    from tests.fixtures.tui import still
    from workbench.tui.widgets.context_line import ContextLine
    from workbench.tui.widgets.logview import LogView

    wb = _recorded_workbench().open(workspace)

    async def flow(pilot):
        app = pilot.app
        await settle(pilot)
        table = app.screen.query_one("#servers", DataTable)
        assert table.row_count == 2
        await pilot.press("down")
        await settle(pilot)
        assert app.selected_server == 8 and "lab-debug" in str(app.screen.query_one(ContextLine).render())
        await pilot.press("slash", *"weights", "enter")
        assert table.row_count == 1 and str(table.get_row_at(0)[0]) == "8"
        await pilot.press("escape", "up", "ctrl+o")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ServerScreen) and screen.server_id == 7
        log = screen.query_one("#log", LogView)
        assert len(log.entries) == 12
        region = log.content_region
        rows = [
            "".join(seg.text for seg in strip)[region.x : region.right]
            for strip in screen._compositor.render_strips()[region.y : region.bottom]
        ]
        assert all(len(r.rstrip()) <= region.width for r in rows)
        await pilot.press("slash", *"accept len: 2.5", "enter")
        assert "1 matching line" in str(screen.query_one("#filter-count").render())
        await still(pilot)

    app = WorkbenchApp(
        str(workspace),
        start="servers",
        wb=wb,
        screen_args={"servers": {"poll_interval": 3600.0}, "server": {"poll_interval": 3600.0}},
    )
    assert snap_compare(app, terminal_size=size, run_before=flow)
