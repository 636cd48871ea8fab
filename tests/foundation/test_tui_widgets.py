"""Shared TUI widgets: findings, verdicts and diffs take their colours from tcss (one place)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from textual.app import App

from workbench.confirm import Plan
from workbench.tui.widgets.confirm import ConfirmModal
from workbench.tui.widgets.diff import DiffView
from workbench.tui.widgets.findings import FindingDetail, FindingItem, FindingsView, VerdictTable

THEMED = """
FindingsView > .findings--error { color: #ff00ff; }
FindingDetail > .finding--edit { color: #00ffff; }
VerdictTable > .verdict--bad { color: #ffff00; }
DiffView > .diff--add { color: #123456; }
"""


def _finding(code, severity, applicable=True):
    edit = SimpleNamespace(text=lambda: "eagle_config.ids=[1, 5, 8]")
    fix = SimpleNamespace(summary="set the ids", edits=[edit], launch=[], applicable=applicable)
    return SimpleNamespace(code=code, severity=severity, message=f"{code} happened", evidence={"k": [1, 2]}, fix=fix)


def fg(style) -> str:
    """The foreground of a rich Style or a Textual content Style, as #RRGGBB."""
    if getattr(style, "foreground", None) is not None:
        return style.foreground.hex.upper()[:7]
    color = getattr(style, "color", None)
    return color.get_truecolor().hex.upper() if color is not None else ""


def spans(content) -> dict:
    return {content.plain[s.start : s.end]: s.style for s in content.spans}


class Host(App):
    CSS = THEMED

    def compose(self):
        yield FindingsView(["code"], detail="detail", id="findings")
        yield FindingDetail("", id="detail")
        yield VerdictTable(id="verdicts")
        yield DiffView("", id="diff")


async def test_severity_verdict_and_diff_colours_come_from_the_stylesheet():
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.query_one(FindingsView)
        view.show(
            [
                FindingItem(_finding("a-code", "error"), ("a-code",)),
                FindingItem(_finding("b-code", "warning"), ("b-code",)),
            ],
            hint=lambda item: "press f" if item.finding.fix.applicable else None,
        )
        await pilot.pause()
        cell = view.get_row_at(0)[0]
        assert str(cell) == "error" and fg(cell.style) == "#FF00FF"
        detail = app.query_one(FindingDetail)
        text = detail.render()
        assert fg(spans(text)["  eagle_config.ids=[1, 5, 8]\n"]) == "#00FFFF" and "press f" in text.plain
        # moving the cursor shows the other finding
        view.move_cursor(row=1)
        await pilot.pause()
        assert "b-code happened" in str(detail.render())
        v = app.query_one(VerdictTable)
        assert fg(v.mark("MISMATCH").style) == "#FFFF00" and v.mark("-").style == ""
        d = app.query_one(DiffView)
        d.show_diff("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new\n")
        assert fg(spans(d.render())["+new\n"]) == "#123456"


async def test_a_fix_in_the_confirm_dialog_is_a_coloured_diff(workspace):
    from workbench.tui.app import WorkbenchApp

    plan = Plan(
        "overwrite",
        "local:/x/config.json",
        "apply fix",
        ["--- current", "+++ fixed", "@@ -1,3 +1,3 @@", '-  "ids": [-1, 1, 5]', '+  "ids": [1, 5, 8]'],
    )
    app = WorkbenchApp(str(workspace), start="doctor")
    async with app.run_test(size=(80, 24)) as pilot:
        app.confirm(plan, lambda: None)
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConfirmModal)
        styles = {
            k.strip(): fg(v) for k, v in spans(app.screen.query_one("#confirm-details", DiffView).render()).items()
        }
        assert styles['+  "ids": [1, 5, 8]'] and styles['+  "ids": [1, 5, 8]'] != styles['-  "ids": [-1, 1, 5]']


async def test_server_log_keeps_a_decode_lines_numbers_at_80_columns(workspace):
    """SGLang's decode line puts accept len past column 100: the pane wraps instead of cutting it."""
    from textual.widgets import RichLog

    from workbench.tui.app import WorkbenchApp

    line = (
        "[2026-12-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 98, token usage: 0.00, "
        "cuda graph: True, accept len: 2.55, gen throughput (token/s): 123.45, #queue-req: 0,"
    )
    status = SimpleNamespace(
        id=1,
        profile="lab",
        host="local",
        state="ready",
        stale=False,
        pid=42,
        port=30123,
        process="alive",
        error=None,
        log_size=len(line),
        progress=["ready"],
        stage="ready",
        metrics={"accept_len": 2.55},
        series={},
        gpus=[],
        failure=None,
    )
    rec = SimpleNamespace(log="/tmp/lab.log")
    app = WorkbenchApp(str(workspace), start="server", screen_args={"server": {"poll_interval": 3600.0}})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        app.screen.render_poll((status, [(1, line)], {}, rec, None))  # no acceptance reading
        await pilot.pause(0.2)
        log = app.screen.query_one("#log", RichLog)
        region = log.content_region
        rows = [
            "".join(seg.text for seg in strip)[region.x : region.right]
            for strip in app.screen._compositor.render_strips()[region.y : region.bottom]
        ]
        shown = " ".join(" ".join(rows).split())  # what is on screen, wrapped lines joined
        assert "accept len: 2.55" in shown and "2026-12-01" not in shown


def test_relaunch_plan_does_not_call_its_own_port_taken():
    """The plan stops server 1 before it launches again: server 1's port is not a conflict then."""
    from workbench.live.fix import relaunch_plan
    from workbench.servers.launch import Preview
    from workbench.servers.validate import Finding

    class Ops:  # the two facade calls relaunch_plan makes, with the lifecycle's real result types
        def server(self, sid):
            return SimpleNamespace(id=sid, state="ready", profile="lab", host="local", port=30123, pgid=4242, pid=4242)

        def launch_preview(self, name):
            return Preview(
                name,
                "local",
                "0.5.23",
                {},
                "python -m sglang.launch_server ...",
                [],
                [
                    Finding(
                        "error",
                        "port-taken",
                        "server 1 (lab) already uses port 30123 on local",
                        "stop it or change the profile's port",
                    ),
                    Finding("error", "port-taken", "server 7 (other) already uses port 30123 on local", ""),
                ],
                [],
            )

    plan = relaunch_plan(Ops(), 1)
    text = "\n".join(plan.details)
    assert "server 1 (lab) already uses port" not in text and "freed when server 1 stops" in text
    assert "server 7 (other) already uses port" in text  # another server's is still a conflict


@pytest.mark.parametrize("cls", ["DataTable", "Table"])
async def test_a_header_drawn_before_its_rows_were_measured_follows_their_widths(cls):
    """A header line drawn between ``add_row`` and the table's next idle moment (when the rows are
    measured) must not keep the old widths: Textual's own DataTable keeps that line in its caches,
    so the columns after a widened one sit left of their values; the TUI's Table draws it again."""
    from textual.geometry import Region
    from textual.widgets import DataTable

    from workbench.tui.widgets.table import Table

    table_cls = {"DataTable": DataTable, "Table": Table}[cls]

    class One(App):
        def compose(self):
            t = table_cls(id="t", cursor_type="row")
            t.add_columns("host", "kind")
            yield t

    app = One()
    async with app.run_test(size=(60, 8)) as pilot:
        await pilot.pause()
        t = app.query_one("#t", DataTable)
        t.clear()
        t.add_row("local", "local")  # "local" is wider than "host": the first column widens
        t.render_lines(Region(0, 0, t.size.width, t.size.height))  # a repaint before the measure
        await pilot.pause()
        await pilot.pause()
        header, row = ("".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()[:2])
        aligned = header.index("kind") == row.index("local", 2)
    if cls == "DataTable" and aligned:
        pytest.skip("this Textual draws the header again itself: the scenario no longer shows the fault")
    assert aligned == (cls == "Table"), (header, row)


def test_every_table_of_the_tui_is_a_table_that_redraws_its_header():
    import re
    from pathlib import Path

    tui = Path(__file__).resolve().parents[2] / "workbench" / "tui"
    bare = [
        str(p.relative_to(tui))
        for p in tui.rglob("*.py")
        if p.name != "table.py" and re.search(r"DataTable\(|\(DataTable\)", p.read_text())
    ]
    assert bare == []
