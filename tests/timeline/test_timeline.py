"""The timeline answers "which config was live when accept length was 1.12?" from the journal."""

import json
import time

import pytest

from tests.fixtures.tui import settle, still

BROKEN = b'{\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [-1, 2, 30]\n  }\n}\n'


@pytest.fixture
def story(wb, tmp_path):
    """A config v1 (good), an edit to v2 (broken), a server launched on v2 measuring 1.12, then a
    revert to v1 made while the server still runs (the server keeps what it loaded)."""
    cfg = tmp_path / "draft" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text('{\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [2, 30, 58]\n  }\n}\n')
    wb.config_track(str(cfg))
    change = wb.config_set(
        str(cfg), {"eagle_config.eagle_aux_hidden_state_layer_ids": [-1, 2, 30]}, reason="data holds the embedding"
    )
    broken_sha = change.version.sha256
    cur = wb.journal.db.execute(
        "INSERT INTO servers(profile, host, pid, port, draft_config_sha256, state, launched) "
        "VALUES ('kimi-debug', 'gpu1', 4242, 8000, ?, 'ready', ?)",
        (broken_sha, time.time()),
    )
    sid = cur.lastrowid
    wb._record("server.launch", f"server:{sid}", {"server_id": sid, "profile": "kimi-debug"})
    time.sleep(0.01)
    wb.config_revert(str(cfg), 1, confirm=True)
    mid = wb._record("server.measure", f"server:{sid}", {"server_id": sid, "accept_length": 1.12, "tokens_per_s": 50.0})
    return {"cfg": cfg, "sid": sid, "measure": mid, "broken_sha": broken_sha}


def test_order_categories_and_filters(wb, story):
    tl = wb.timeline()
    kinds = [e.kind for e in tl.entries]
    assert kinds == ["config.track", "config.set", "server.launch", "config.revert", "server.measure"]
    assert [e.ts for e in tl.entries] == sorted(e.ts for e in tl.entries)
    assert [e.category for e in tl.entries] == ["config", "config", "launch", "config", "measurement"]
    assert [e.kind for e in wb.timeline(server=story["sid"]).entries] == ["server.launch", "server.measure"]
    assert [e.kind for e in wb.timeline(profile="kimi-debug").entries] == ["server.launch", "server.measure"]
    assert [e.kind for e in wb.timeline(category="measurement").entries] == ["server.measure"]
    assert len(wb.timeline(config="config.json").entries) == 3
    assert wb.timeline(server=999).entries == []
    m = wb.timeline(category="measurement").entries[0]
    assert m.summary == "accept length 1.12, 50.0 tok/s"


def test_measurement_shows_the_config_its_server_loaded(wb, story):
    live = wb.timeline_live_config(story["measure"])
    # the file was reverted before the measurement, but the server runs what it loaded at launch
    assert live.sha256 == story["broken_sha"]
    assert live.version == 2 and "server" in live.basis
    assert "[-1, 2, 30]" in live.content
    revert = wb.timeline(category="config").entries[-1]
    live_now = wb.timeline_live_config(revert.id)
    assert live_now.version == 3 and "[2, 30, 58]" in live_now.content


def test_unknown_entry_is_one_line(wb):
    from workbench.errors import InputError

    with pytest.raises(InputError, match="timeline entry 77: no such entry"):
        wb.timeline_live_config(77)


def test_cli_json(story, workspace, cli):
    r = cli("--workspace", str(workspace), "timeline", "--category", "measurement", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [e["kind"] for e in data["entries"]] == ["server.measure"]
    r = cli("--workspace", str(workspace), "timeline", "--live-config", str(story["measure"]), "--json")
    assert json.loads(r.stdout)["sha256"] == story["broken_sha"]
    r = cli("--workspace", str(workspace), "timeline", "--live-config", "999")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


async def test_screen_select_shows_live_config(story, tui_app):
    from textual.widgets import DataTable, Static

    app = tui_app(start="timeline")
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#entries", DataTable)
        assert table.row_count == 5
        await settle(pilot)
        live = str(app.screen.query_one("#live", Static).render())
        assert "v2" in live and "[-1, 2, 30]" in live  # last entry (the measurement) is selected
        app.screen.query_one("#server").value = str(story["sid"])
        await settle(pilot)
        assert table.row_count == 2


def test_widget(story, wb):
    from workbench.notebook import TimelineWidget

    widget = TimelineWidget(wb)
    assert len(widget.entries) == 5
    widget.select.value = story["measure"]
    assert "[-1, 2, 30]" in widget.detail.value
    widget.category.value = "launch"
    assert [e.kind for e in widget.entries] == ["server.launch"]
    widget.server.value = "x"
    assert "not a server id" in widget.error_line.value


async def test_screen_collapses_repeats_rounds_numbers_and_keeps_config_calm(workspace, tui_app):
    from textual.widgets import DataTable, Static

    from workbench.api import Workbench

    with Workbench.open(workspace) as wb:
        for _ in range(3):
            wb._record("server.preview", "lab", {"profile": "lab", "ok": True})
        wb._record("server.measure", "server 1", {"tokens_per_s": 491.683412345, "accept_len": {"mean": 2.5512345}})
    app = tui_app(start="timeline")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#entries", DataTable)
        kinds = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
        assert kinds == ["server.preview x3", "server.measure"]
        detail = " ".join(str(app.screen.query_one("#detail", Static).render()).split())
        # a view, not the payload: labels with their unit once, numbers rounded, parts under a heading
        assert "tokens/s 491.7" in detail and "accept len mean 2.551" in detail and "491.683" not in detail
        assert "{" not in detail and '"' not in detail
        cfg = app.screen.query_one("#entries").category("config")
        err = app.screen.query_one("#entries").category("finding")
        assert cfg.style.color is not None and cfg.style.color != err.style.color
        assert "red" not in str(cfg.style)


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_flow_at_both_sizes(snap_compare, story, wb, workspace, size, monkeypatch):
    """The README's question, "which config was live when accept length was 1.12?": the entries
    (every kind whole), / to find the measurement, its view (labelled numbers, not a payload) and
    the config its server loaded; an entry recorded meanwhile shows without a refresh."""
    from textual.widgets import DataTable, Static

    from workbench.tui.app import WorkbenchApp

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    wb.journal.db.execute("UPDATE events SET ts = 1795000000 + 60 * id")  # a fixed clock for the snapshot
    wb.journal.db.execute("UPDATE config_versions SET ts = 1795000000 + 60 * id")

    async def flow(pilot):
        app = pilot.app
        await settle(pilot)
        screen = app.screen
        table = screen.query_one("#entries", DataTable)
        assert table.row_count == 5
        await pilot.press("slash", *"measure", "enter")
        await settle(pilot)
        assert table.row_count == 1
        detail = " ".join(str(screen.query_one("#detail", Static).render()).split())
        assert "accept length 1.12" in detail and "tokens/s 50" in detail and "{" not in detail
        live = str(screen.query_one("#live", Static).render())
        assert "v2" in live and "[-1, 2, 30]" in live
        app.wb.journal.record(
            "server.measure", f"server:{story['sid']}", {"server_id": story["sid"], "accept_length": 2.4}, ts=1795000600
        )
        app.look_at_journal()
        await settle(pilot)
        assert table.row_count == 2 and table.total_rows == 6  # followed the journal; the filter kept
        # the times of the story are the test's own: the snapshot shows them as they were recorded
        await still(pilot)

    try:
        assert snap_compare(WorkbenchApp(str(workspace), start="timeline"), terminal_size=size, run_before=flow)
    finally:
        monkeypatch.undo()
        time.tzset()
