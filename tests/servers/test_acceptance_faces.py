"""Acceptance in every face, from a journal that holds a finished server's windows (two hours of
one-minute windows, acceptance falling from the 90th) and a context sweep: the TUI's Server screen
(pilot at 80x24 and 200x60, snapshots), the notebook widgets and the CLI's ``server acceptance``."""

from __future__ import annotations

import json
import time

import pytest

from tests.fixtures.tui import settle, until
from workbench.servers import acceptance as A
from workbench.servers.engines import SpecCounters

T0 = 1_800_000_000.0  # fixed times: the panel prints them (in UTC here)


def _seed(wb, tmp_path, falls_at: int | None = 90) -> int:
    from workbench.servers.registry import ServerState

    reg = wb.lifecycle.registry
    log = "/nonexistent/eagle-workbench/lab.log"  # on a host the workspace no longer has: nothing read
    sid, _ = reg.insert(
        "lab",
        "gone",
        30000,
        log,
        argv=["python", "-m", "workbench.lab.serve", "--model-path", "/models/lab"],
        env={},
        draft_config_sha256=None,
        launched=T0 - 60,
        extra={"engine": "sglang"},
        log_of=lambda i: log,
    )
    reg.set(sid, state=ServerState.STOPPED, stopped=T0 + 7300)
    total = SpecCounters(source="sglang /metrics")
    last = A.next_row(None, total, T0, 60.0)
    wb.journal.add_measurement(sid, A.KIND, last, ts=T0)
    for i in range(120):
        al = 2.9 + (0.06 if i % 3 == 0 else -0.04 if i % 3 == 1 else 0.0)
        if falls_at is not None and i >= falls_at:
            al = 1.8
        n = 400 + 10 * (i % 5)
        now = SpecCounters(
            verify_calls=total.verify_calls + n,
            generation_tokens=total.generation_tokens + round(al * n),
            requests=total.requests + 8,
            source="sglang /metrics",
        )
        row = A.next_row(last, now, T0 + 60.0 * (i + 1), 60.0)
        wb.journal.add_measurement(sid, A.KIND, row, ts=row["t1"])
        total, last = now, row
    return sid


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_api_keeps_the_windows_and_says_the_alarm(wb, tmp_path, utc):
    sid = _seed(wb, tmp_path)
    s = wb.server_acceptance(sid)  # a finished server: nothing read, the journal's windows
    assert len(s.windows) == 120 and s.baseline["windows"] == 60 and s.baseline["complete"]
    assert s.alarm.raised and s.alarm.window == 91 and s.alarm.current and s.source == "sglang /metrics"
    assert s.alarm.accept_length == pytest.approx(1.8, abs=0.01) and "still low" in s.alarm.message
    steady = _seed(wb, tmp_path, falls_at=None)
    assert not wb.server_acceptance(steady).alarm.raised


def test_cli_acceptance_text_and_json(workspace, tmp_path, utc):
    from tests.conftest import run_cli
    from workbench.api import Workbench

    with Workbench.open(workspace) as wb:
        sid = _seed(wb, tmp_path)
    r = run_cli("server", "acceptance", str(sid), "--json", env={"TZ": "UTC"})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["alarm"]["raised"] and got["alarm"]["window"] == 91 and len(got["windows"]) == 120
    assert got["windows"][0]["counters"]["verify_calls"] == got["windows"][0]["rounds"]
    r = run_cli("server", "acceptance", str(sid), env={"TZ": "UTC"})
    assert r.returncode == 0 and "ALARM: accept length 1.80 over 2 windows in a row" in r.stdout, r.stdout
    assert "baseline 2.9" in r.stdout and "LOW" in r.stdout
    bad = run_cli("server", "acceptance", str(sid), "--window", "nan")
    assert bad.returncode == 2 and "acceptance.window_s" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli("server", "acceptance", str(sid), "--follow", "--interval", "-1")
    assert bad.returncode == 2 and "--interval" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_follow_shows_the_series_once_then_only_what_changes(workspace, tmp_path, utc):
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT
    from workbench.api import Workbench

    with Workbench.open(workspace) as wb:
        sid = _seed(wb, tmp_path)
    out = tmp_path / "follow.txt"
    env = {**os.environ, "TZ": "UTC", "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "workbench", "server", "acceptance", str(sid), "--follow", "--interval", "0.1"]
    with out.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, env=env)
        try:
            deadline = time.monotonic() + 60
            while "ALARM" not in out.read_text() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            time.sleep(0.5)  # five more polls of a finished server: nothing new to say
        finally:
            proc.send_signal(signal.SIGINT)  # its own pid: Ctrl+C ends --follow
            _, err = proc.communicate(timeout=30)
    text = out.read_text()
    assert proc.returncode == 0, err.decode()
    assert text.count("ALARM") == 1 and text.count(" rounds") == 120 and text.startswith(f"server {sid}:"), text


def _measurement():
    from workbench.servers.measure import Measurement

    rows = [
        {
            "context_tokens": 64,
            "accept_length": 2.9,
            "requests": 16,
            "source": "sglang /metrics",
            "past_trained_length": False,
        },
        {
            "context_tokens": 512,
            "accept_length": 2.3,
            "requests": 16,
            "source": "sglang /metrics",
            "past_trained_length": True,
        },
        {
            "context_tokens": 976,
            "accept_length": 1.6,
            "requests": 16,
            "source": "sglang /metrics",
            "past_trained_length": True,
        },
    ]
    m = Measurement(1, 16, 4, 48, 1, 100, 3.0, 33.0, {"mean": 2.0}, {"mean": 2.3, "stdev": 0.1}, 2.3)
    m.by_context = rows
    m.context_facts = {"trained_length": 80, "max_position_embeddings": 1024, "trained_from": "training data rows"}
    m.findings = [
        {
            "code": "accept-falls-past-trained-length",
            "severity": "warning",
            "message": "accept length falls from 2.90 at 64 tokens of context to 1.60 at 976 (45% lower): past the "
            "80 tokens the drafter was trained on",
        }
    ]
    return m


def test_notebook_widgets(wb, tmp_path, utc):
    from workbench.notebook import AcceptanceWidget, ContextWidget
    from workbench.notebook.acceptance import context_html

    sid = _seed(wb, tmp_path)
    a = AcceptanceWidget(wb, server_id=sid)
    assert "<svg" in a.view.value and "ALARM" in a.view.value and "first 3600 s: 2.9" in a.view.value
    assert a.view.value.count("fill='#c62828'") >= 30  # the low windows in red
    html = context_html(_measurement())
    assert "trained 80" in html and "max_position_embeddings 1024" in html and "past the 80 tokens" in html
    c = ContextWidget(wb, server_id=sid, contexts="12,x")
    assert c.measure() is None and "--context" in c.view.value  # a finished server: refused, one line


SIZES = [(80, 24), (200, 60)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_server_screen_shows_the_alarm_and_the_context_curve(snap_compare, workspace, tmp_path, utc, size):
    from workbench.api import Workbench
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens.server import ServerScreen

    with Workbench.open(workspace) as wb:
        sid = _seed(wb, tmp_path)

    async def run_before(pilot):
        screen = pilot.app.screen
        assert isinstance(screen, ServerScreen)
        panel = screen.query_one("#acceptance")
        await until(pilot, lambda: panel.series is not None, timeout=30)
        assert panel.series.alarm.raised and "ALARM" in str(panel.render())
        screen._context_done(_measurement())
        text = str(screen.query_one("#context").render())
        assert "past trained" in text and "80 tokens the drafter was trained on" in text
        panel.scroll_visible(animate=False)
        await settle(pilot)

    app = WorkbenchApp(str(workspace), start="server", screen_args={"server": {"server_id": sid}})
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_measure_text_and_html_show_the_curve_and_the_requests_far_below():
    from workbench.cli.cmd_server import _context_text, _per_request_text
    from workbench.notebook.acceptance import per_request_html

    m = _measurement()
    m.per_request_source = "meta_info"
    m.distribution = {"n": 48, "p10": 1.9, "p50": 2.4, "p90": 2.9, "min": 1.1, "max": 3.2, "low": 1.5}
    m.low_requests = [{"prompt": 7, "accept_len": 1.1, "context_tokens": 976, "prompt_start": "the ledger of"}]
    m.counters_check = {"rounds": {"requests": 900, "counters": 900}, "tokens": {"requests": 2100, "counters": 2100}}
    m.counters_check["agree"] = True
    text = _per_request_text(m) + _context_text(m)
    assert "per request (meta_info): p10 1.90  median 2.40  p90 2.90" in text
    assert "sums agree with the counters: 900 rounds (900), 2100 tokens (2100)" in text
    assert "far below (< 1.50): 1.10  prompt 7 at 976 tokens: the ledger of" in text
    assert "trained length 80 from training data rows; max_position_embeddings 1024" in text
    curve = [line for line in text.splitlines() if " tok " in line]
    assert [line.endswith("past trained") for line in curve] == [False, True, True], curve
    assert "warning: accept length falls from 2.90" in text
    html = per_request_html(m)
    assert "far below the rest (under 1.50)" in html and "the ledger of" in html and "DIFFER" not in html
    m.counters_check["agree"] = False
    assert "DIFFER from the engine's counters" in per_request_html(m)
