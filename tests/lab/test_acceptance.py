"""Acceptance where it breaks, on lab servers launched by the workbench (SGLang 0.5.23's surface with
``--enable-metrics``): per-request figures that sum to SGLang's own counters, a context sweep that falls
past the drafter's trained length with the finding naming it, and over time the alarm: an injected
engine bug (``LAB_FAIL=accept-decay``) raises it within its window, a steady server never does."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from workbench.servers.acceptance import RUN

pytestmark = pytest.mark.slow

WINDOW_S = 2.0
BASELINE_S = 16.0  # eight windows: the first "hour" of these servers
DECAY_AFTER = 24.0  # seconds after ready: past the baseline (the following starts at ready)
RAMP = 2.0  # seconds from the first stale round to all of them


def _profile(name: str, world: dict, port: int, root, env: dict) -> str:
    from workbench.lab.process import free_port
    from workbench.live.demo import _package_root

    env = {"PYTHONPATH": _package_root(), **env}
    env_toml = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
    launcher = [sys.executable, "-m", "workbench.lab.serve", "--lab-engine", "sglang==0.5.23"]
    return f"""
[profiles.{name}]
host = "local"
launcher = {json.dumps(launcher)}
model = {json.dumps(world["target"])}
draft = {json.dumps(world["draft"])}
port = {port or free_port()}
log = {json.dumps(str(root / f"{name}.log"))}
run_dir = {json.dumps(str(root))}
args = ["--host", "127.0.0.1", "--enable-metrics", "--decode-log-interval", "5", "--disable-cuda-graph"]
env = {{ {env_toml} }}
speculative = {{ algorithm = "EAGLE3", num_steps = 3, eagle_topk = 1, num_draft_tokens = 4 }}
ready_timeout = 240
stop_grace = 5
"""


@pytest.fixture(scope="module")
def lab_ws(lab_world, tmp_path_factory):
    """A workspace with two lab profiles, launched together: a steady server and one whose engine
    starts handing its drafter stale states ``DECAY_AFTER`` seconds after it is ready."""
    from tests.fixtures.teardown import stop_active_servers
    from workbench.api import Workbench
    from workbench.lab.prompts import write_prompt_set

    root = tmp_path_factory.mktemp("accept-ws")
    toml = _profile("steady", lab_world, 0, root, {})
    toml += _profile(
        "decay",
        lab_world,
        0,
        root,
        {"LAB_FAIL": "accept-decay", "LAB_FAIL_AFTER": str(DECAY_AFTER), "LAB_DECAY_RAMP": str(RAMP)},
    )
    toml += f"\n[acceptance]\nwindow_s = {WINDOW_S}\nbaseline_s = {BASELINE_S}\n"
    toml += f"\n[live]\ntraining_data = {json.dumps(lab_world['training_data'])}\n"
    toml += f"prompts = {json.dumps(str(root / 'prompts.json'))}\n"
    (root / "workbench.toml").write_text(toml)
    prompts = write_prompt_set(lab_world, root / "prompts.json", "measured", 32)
    wb = Workbench.open(root)
    try:
        yield wb, root, prompts
    finally:
        stop_active_servers(wb, grace=5)
        wb.close()


def _launch(wb, name):
    rec = wb.launch(name, confirm=True)
    st = wb.server_wait(rec.id, timeout=240)
    assert st.state == "ready", st.failure
    return rec.id


@pytest.fixture(scope="module")
def steady(lab_ws):
    return _launch(lab_ws[0], "steady")


def _metrics(wb, sid):
    from workbench.sglang.client import parse_counters

    with urllib.request.urlopen(f"http://127.0.0.1:{wb.server(sid).port}/metrics", timeout=30) as r:
        return parse_counters(r.read().decode())


def test_per_request_figures_sum_to_sglang_counters_and_the_context_sweep(lab_ws, steady, lab_world):
    wb, _root, prompts = lab_ws
    sid = steady
    c0 = _metrics(wb, sid)
    # one at a time: SGLang's meta_info per request, its /metrics counters around the whole workload
    m = wb.server_measure(sid, prompts=str(prompts), concurrency=2, warmup=0)
    d = _metrics(wb, sid) - c0
    assert m.counters["verify_calls"] == d.verify_calls and m.counters["generation_tokens"] == d.generation_tokens
    check = m.counters_check
    assert check["agree"], check
    assert check["rounds"]["requests"] == sum(r["rounds"] for r in m.requests) == d.verify_calls
    assert m.accept_length == pytest.approx(d.generation_tokens / d.verify_calls, rel=1e-12)
    assert m.per_request_source == "meta_info" and len(m.per_request) == 16 and m.distribution["n"] == 16
    assert m.distribution["p10"] <= m.distribution["p50"] <= m.distribution["p90"]
    assert all(x["accept_len"] < m.distribution["low"] for x in m.low_requests)

    # the sweep: the same continuations after more and more of the other prompts before them
    served = wb.lifecycle.follow.server_info(sid)["served_context"]  # (not followed yet: no window kept)
    assert served == 1024  # the target's max_position_embeddings: max_req_input_len + 6
    top = served - 32
    s = wb.server_measure(sid, prompts=str(prompts), concurrency=2, warmup=0, context=[48, 256, top])
    rows = {r["context_tokens"]: r for r in s.by_context}
    trained = lab_world["settings"]["prompt_len"] + lab_world["settings"]["response_len"]
    assert s.context_facts["trained_length"] == trained and "training data" in s.context_facts["trained_from"]
    assert s.context_facts["max_position_embeddings"] == 1024
    assert [rows[n]["past_trained_length"] for n in (48, 256, top)] == [False, True, True]
    assert all(r["requests"] == 16 and r["source"] == "sglang /metrics" for r in rows.values())
    # every row is SGLang's own counters over that context's requests, which sum to the measurement's
    assert sum(r["rounds"] for r in rows.values()) == s.counters["verify_calls"] and s.counters_check["agree"]
    print("\naccept length by context (lab):", {n: round(r["accept_length"], 3) for n, r in rows.items()})
    f = s.findings[0]
    assert f["code"] == "accept-falls-past-trained-length", s.findings
    assert f"{trained} tokens the drafter was trained on" in f["message"] and f["drop"] >= 0.10
    assert rows[top]["accept_length"] < rows[48]["accept_length"] * 0.9

    from workbench.errors import InputError

    with pytest.raises(InputError, match="context length"):
        wb.server_measure(sid, prompts=str(prompts), context=[served])


def test_the_faces_measure_by_context_on_the_lab_server(lab_ws, steady, lab_world):
    """``server measure ID --context ... --json`` (the CLI in its own process) and the notebook's
    ContextWidget, on the same server: ``by_context`` rows, per-request figures, SGLang's counters."""
    from tests.conftest import run_cli
    from workbench.notebook import ContextWidget

    wb, root, prompts = lab_ws
    r = run_cli(
        "--workspace", str(root), "server", "measure", str(steady), "--context", "160,48", "--max-new-tokens", "8",
        "--prompts", str(prompts), "--trained-length", "100", "--json", timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    rows = got["by_context"]
    assert [x["context_tokens"] for x in rows] == [48, 160] and all(x["requests"] == 16 for x in rows)
    assert [x["past_trained_length"] for x in rows] == [False, True]
    assert got["context_facts"]["trained_from"] == "given" and got["context_facts"]["trained_length"] == 100
    assert got["counters"]["source"] == "sglang /metrics" and got["counters_check"]["agree"]
    assert len(got["per_request"]) == 32 and all(isinstance(x, float) for x in got["per_request"])
    assert sum(x["accept_length"] * x["rounds"] for x in rows) == pytest.approx(got["counters"]["generation_tokens"])
    bad = run_cli("--workspace", str(root), "server", "measure", str(steady), "--context", "48,x")
    assert bad.returncode == 2 and "--context" in bad.stderr and "Traceback" not in bad.stderr

    w = ContextWidget(wb, server_id=steady, contexts="48, 160", prompts=str(prompts), max_new_tokens=8)
    m = w.measure()
    assert m is not None and [x["context_tokens"] for x in m.by_context] == [48, 160], w.view.value
    html = w.view.value
    assert "<svg" in html and f"trained length {m.context_facts['trained_length']}" in html
    assert "per request (meta_info)" in html and "agree with the engine's counters" in html
    w.contexts.value = ""  # blank: the prompt set as it is, per request
    assert w.measure().by_context == [] and "per request (meta_info)" in w.view.value
    w.contexts.value, w.trained.value = "48", "ten"  # refused before any request, naming the field
    assert w.measure() is None and "trained_length" in w.view.value


def _load(url: str, prompts: list, stop: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        body = json.dumps(
            {"input_ids": prompts[i % len(prompts)], "sampling_params": {"max_new_tokens": 32, "temperature": 0}}
        )
        req = urllib.request.Request(
            url + "/generate", data=body.encode(), headers={"content-type": "application/json"}
        )
        try:
            urllib.request.urlopen(req, timeout=60).read()
        except OSError:
            return
        i += 1


def test_the_alarm_fires_within_the_decay_window_and_never_on_the_steady_server(lab_ws, steady):
    wb, root, prompts = lab_ws
    rec = wb.launch("decay", confirm=True)
    decay = wb.server_wait(rec.id, timeout=240)
    assert decay.state == "ready", decay.failure
    ready_at = time.time()
    ids = json.loads(prompts.read_text())["prompts"]
    stop = threading.Event()
    urls = {sid: f"http://127.0.0.1:{wb.server(sid).port}" for sid in (steady, rec.id)}
    threads = [threading.Thread(target=_load, args=(u, ids, stop), daemon=True) for u in urls.values()]
    for t in threads:
        t.start()
    # a second follower of the decaying server, the CLI in its own process: both append windows to
    # the same journal, each after the latest row (compare-and-swap), never two after one
    from workbench.live.demo import _package_root

    env = {**os.environ, "PYTHONPATH": _package_root()}
    argv = [sys.executable, "-m", "workbench", "--workspace", str(root), "server", "acceptance", str(rec.id)]
    out_path = root / "follow.jsonl"  # a file, not a pipe: a full pipe would stop the follower
    with out_path.open("wb") as sink:
        follower = subprocess.Popen(
            [*argv, "--follow", "--interval", "0.4", "--json"], stdout=sink, stderr=subprocess.PIPE, env=env
        )
    try:
        # until the alarm has a window after it and the steady server a dozen windows (a loaded machine
        # stretches windows past WINDOW_S), at most twenty windows past the ramp
        deadline = ready_at + DECAY_AFTER + RAMP + 20 * WINDOW_S
        while time.time() < deadline:
            s_steady = wb.server_acceptance(steady)
            s_decay = wb.server_acceptance(rec.id)
            a = s_decay.alarm
            if a.raised and len(s_decay.windows) > a.window + 1 and len(s_steady.windows) >= 12:
                break
            time.sleep(0.3)
        until = time.time() + 30  # the follower has seen it too (its journal is the same)
        while '"raised": true' not in out_path.read_text() and time.time() < until and follower.poll() is None:
            time.sleep(0.2)
    finally:
        stop.set()
        follower.send_signal(signal.SIGINT)  # its own pid: Ctrl+C ends --follow
        _, err = follower.communicate(timeout=60)
        for t in threads:
            t.join(timeout=60)
    assert follower.returncode == 0, err.decode()[-2000:]
    lines = [json.loads(x) for x in out_path.read_text().splitlines()]
    assert {x["server_id"] for x in lines} == {rec.id}
    # each window once, as it was kept (by either follower), and the alarm when it came
    followed = [w["t1"] for x in lines for w in x["windows"]]
    assert followed == sorted(set(followed)) and len(followed) >= 12, followed
    assert followed == [w.t1 for w in s_decay.windows][: len(followed)]
    raised = [x["alarm"] for x in lines if x["alarm"]["raised"]]
    assert raised and raised[0]["window"] == s_decay.alarm.window, [x["alarm"] for x in lines]
    kept = wb.journal.measurement_rows(rec.id, "acceptance")
    t1 = [r["t1"] for r in kept]
    assert all(b - a >= WINDOW_S for a, b in itertools.pairwise(t1)), t1  # never two windows after one row
    print(f"\nsteady windows: {[round(w.accept_length, 2) for w in s_steady.windows if w.accept_length]}")
    print(f"decay windows: {[round(w.accept_length, 2) for w in s_decay.windows if w.accept_length]}")
    assert not s_steady.alarm.raised and len(s_steady.windows) >= 12, s_steady
    assert s_steady.source == "sglang /metrics" and s_steady.baseline["windows"] >= 6
    a = s_decay.alarm
    assert a.raised, s_decay
    after = [w for w in s_decay.windows[a.window :] if w.rounds]
    assert after and all(w.accept_length < 0.9 * a.baseline for w in after), after
    # within its window: never before the decay, and at the latest RUN windows after the one in which its
    # ramp ends (counted in windows: under load a window spans more than WINDOW_S)
    ramp_end = ready_at + DECAY_AFTER + RAMP
    first = next(i for i, w in enumerate(s_decay.windows) if w.t1 > ramp_end)
    assert ready_at + DECAY_AFTER <= a.at and a.window <= first + RUN, (a, first, ready_at)
    assert a.drop >= 0.10 and a.p < 1e-3
    # every window is the counters' difference, never the running average
    w = s_decay.windows[a.window]
    assert w.counters["verify_calls"] == w.rounds and w.counters["generation_tokens"] == w.tokens
    assert wb.events(kind="server.acceptance.alarm")[-1].payload["window"] == a.window

    # the other faces on the same journal: the CLI in its own process, the notebook widget
    from tests.conftest import run_cli
    from workbench.notebook import AcceptanceWidget

    r = run_cli("--workspace", str(root), "server", "acceptance", str(rec.id), "--json", "--no-read")
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["alarm"]["raised"] and got["alarm"]["window"] == a.window and got["source"] == "sglang /metrics"
    r = run_cli("--workspace", str(root), "server", "acceptance", str(steady), "--no-read")
    assert r.returncode == 0 and "no alarm" in r.stdout and "ALARM" not in r.stdout, r.stdout
    view = AcceptanceWidget(wb, server_id=rec.id).view.value
    assert "ALARM" in view and "<svg" in view and "(sglang /metrics)" in view


async def test_the_server_screen_measures_by_context_on_the_lab_server(lab_ws, steady, lab_world):
    """ctrl+e on the Server screen: the workspace's prompt set from 64 tokens to the served limit, the
    bars past the drafter's trained length marked and the finding naming it (last: its polls keep
    windows of the steady server, which the alarm's test reads from its start)."""
    from textual.widgets import Static

    from tests.fixtures.tui import until
    from workbench.tui.app import WorkbenchApp

    wb, root, _prompts = lab_ws
    trained = lab_world["settings"]["prompt_len"] + lab_world["settings"]["response_len"]
    app = WorkbenchApp(str(root), start="server", screen_args={"server": {"server_id": steady}})
    messages: list = []
    async with app.run_test(size=(160, 50), message_hook=messages.append) as pilot:
        # ctrl+g: the measurement, its per-request spread in the note
        await pilot.press("ctrl+g")

        def note():
            found = [m.notification.message for m in messages if type(m).__name__ == "Notify"]
            return next((n for n in found if "per request p10" in n), None)

        assert await until(pilot, lambda: note() is not None, timeout=120), messages
        assert note().startswith(f"server {steady}: accept length ")
        box = app.screen.query_one("#context", Static)
        await pilot.press("ctrl+e")
        done = await until(
            pilot, lambda: "measuring" not in str(box.render()) and "ctrl+e" not in str(box.render()), timeout=300
        )
        text = str(box.render())
        assert done and f"trained length {trained}" in text, text
        bars = [line for line in text.splitlines() if line.strip().split(" ")[0].isdigit()]
        contexts = [64, 128, 256, 512, 992]  # doubling from 64, then the served 1024 less 32 new tokens
        assert [int(b.split()[0]) for b in bars] == contexts, text
        assert [b.rstrip().endswith("past trained") for b in bars] == [n > trained for n in contexts], text
        assert f"past the {trained} tokens the drafter was trained on" in text, text

    # the decaying server's screen: its acceptance panel raises the alarm the journal holds
    decay = [r.id for r in wb.servers() if r.profile == "decay"]
    assert decay, "the decaying server is the alarm test's: run the whole module"
    app = WorkbenchApp(str(root), start="server", screen_args={"server": {"server_id": decay[-1]}})
    async with app.run_test(size=(160, 50)) as pilot:
        panel = app.screen.query_one("#acceptance")
        assert await until(pilot, lambda: panel.series is not None, timeout=60)
        assert panel.series.alarm.raised and "ALARM: accept length" in str(panel.render()), panel.render()
