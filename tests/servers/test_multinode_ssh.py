"""A lab server on two hosts over SSH (each host a network namespace with its own address, process
table and sshd): one server, its ranks launched, ready from rank 0, every rank in status, measured
through rank 0, stopped rank 0 first with no process left on any host; a killed rank 1 is rank 1's
failure."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.teardown import stop_active_servers
from tests.fixtures.toml_files import write_toml

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


@pytest.fixture(scope="module")
def mn(net_hosts, lab_world, tmp_path_factory):
    from workbench.api import Workbench

    root = tmp_path_factory.mktemp("multinode")
    base = {
        "hosts": ["n1", "n2"],
        "launcher": [sys.executable, "-m", "workbench.lab.serve", "--lab-engine", "sglang==0.5.23"],
        "model": str(lab_world["target"]),
        "draft": str(lab_world["draft"]),
        "port": 30000,  # each host has its own network: the same port on both
        "log": str(root / "logs" / "lab.log"),
        "args": ["--host", "0.0.0.0", "--tp-size", "2", "--enable-return-hidden-states", "--decode-log-interval", "10"],
        "env": {"PYTHONPATH": str(ROOT)},
        "speculative": {"algorithm": "EAGLE3", "eagle_topk": 1, "num_draft_tokens": 4, "num_steps": 3},
        "ready_timeout": 300,
        "stop_grace": 10,
    }
    hosts = {n: net_hosts.host_table(n) for n in ("n1", "n2")}
    vllm = {
        **base,
        "engine": "vllm",
        "vllm_version": "0.32.0",
        "launcher": [sys.executable, "-m", "workbench.lab.serve", "--lab-engine", "vllm==0.32.0"],
        "args": ["--host", "0.0.0.0", "--tensor-parallel-size", "2"],
        "speculative": {"algorithm": "EAGLE3", "num_steps": 3},
        "log": str(root / "logs" / "vllm.log"),
    }
    # a rendezvous given by hand at an address no host has: the nodes never meet (SGLang's hang)
    nowhere = {"extends": "lab2", "args": ["--dist-init-addr", f"{net_hosts.slice.addr(14)}:5000"]}
    watchdog = {"extends": "lab2", "args": ["--watchdog-timeout", "3"]}
    write_toml(
        root / "workbench.toml",
        {
            "hosts": hosts,
            "profiles": {"lab2": base, "lab2-nowhere": nowhere, "lab2-watchdog": watchdog, "vllm2": vllm},
            "live": {"": {"training_data": lab_world["training_data"]}},
        },
    )
    wb = Workbench.open(root)
    try:
        yield wb, root
    finally:
        stop_active_servers(wb, grace=2)
        wb.close()


def _left(net_hosts, token: str) -> dict[str, list[int]]:
    """Processes carrying the server's launch token, per host (as each host numbers them)."""
    return {n: net_hosts[n].processes(f"EAGLE_WORKBENCH_LAUNCH={token}") for n in ("n1", "n2")}


def test_two_node_lab_server_over_ssh_ready_measured_stopped(mn, net_hosts):
    wb, root = mn
    t0 = time.monotonic()
    rec = wb.launch("lab2", confirm=True)
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    ready_s = time.monotonic() - t0
    assert st.state == "ready", st
    rec = wb.server(rec.id)
    token = rec.extra["launch_token"]
    ranks = st.ranks
    assert [(r["rank"], r["host"], r["state"], r["process"]) for r in ranks] == [
        (0, "n1", "ready", "running"),
        (1, "n2", "running", "running"),
    ], ranks
    # each host runs its own rank (each host numbers its own processes)
    left = _left(net_hosts, token)
    assert left["n1"] == [ranks[0]["pid"]] and left["n2"] == [ranks[1]["pid"]]
    # one log per rank of this launch; rank 1's says what SGLang's node rank 1 says
    logs = [r["log"] for r in rec.extra["ranks"]]
    assert logs[0] == rec.log and logs[0].endswith(".rank0.log") and logs[1].endswith(".rank1.log")
    rank1 = Path(logs[1]).read_text()
    assert wb.server_log(rec.id, rank=1) == rank1.encode()  # read on rank 1's host
    assert "[TP1] " not in rank1 and " TP1] Load weight begin" in rank1
    assert "Dummy health check server started in background thread at 0.0.0.0:30000" in rank1
    assert "The server is fired up and ready to roll!" not in rank1
    rendezvous = rec.extra["rendezvous_port"]
    assert f"--dist-init-addr {net_hosts['n1'].addr}:{rendezvous}" in " ".join(rec.extra["ranks"][1]["argv"])

    # status --json carries the ranks, from the CLI (a process of its own over the same workspace)
    cli = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(root), "server", "status", str(rec.id), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert cli.returncode == 0, cli.stderr
    row = json.loads(cli.stdout)[0]
    assert [(r["rank"], r["host"], r["pid"], r["state"]) for r in row["ranks"]] == [
        (r["rank"], r["host"], r["pid"], r["state"]) for r in ranks
    ]

    cli = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(root), "server", "status", str(rec.id)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert " n1+n2 " in cli.stdout and f"rank 1  n2  pid {ranks[1]['pid']}  running" in cli.stdout, cli.stdout
    asyncio.run(_faces(root, wb, rec.id, ranks))

    # the live doctor on the 2-node server: measured through rank 0, the drafter and the alignment run
    # near the data on rank 0's host, the hidden states come through rank 0's routes
    report = wb.doctor_live(rec.id, measure_tokens=16, measure_concurrency=2, eval_samples=8, dump="no")
    assert report.observed.accept_length and report.observed.accept_length >= 1.0, report.observed
    assert report.predicted.accept_length and report.alignment and report.alignment.mode == "payload"
    assert not [f for f in report.findings if f.code.startswith("layer-ids")], report.codes
    assert wb.server_metrics(rec.id)["server_info"]["steps"] == 3

    res = wb.server_stop(rec.id, confirm=True, gpu_wait=0)
    assert res.result == "stopped", res
    assert [a["rank"] for a in res.ranks] == [0, 1]
    assert res.ranks[0]["result"] == "stopped" and res.ranks[0]["signals"] == ["TERM"]
    assert res.ranks[1]["result"] in ("stopped", "already-gone")  # it ends on rank 0's shutdown
    assert wb.server(rec.id).state == "stopped"
    assert _left(net_hosts, token) == {"n1": [], "n2": []}
    # rank 1 ignored nothing it was not told: it ended on rank 0's shutdown broadcast
    assert "terminated with 0" in Path(logs[1]).read_text()
    print(json.dumps({"launch_to_ready_s": round(ready_s, 2), "nodes": 2, "over": "ssh"}))


async def _faces(root, wb, sid: int, ranks: list) -> None:
    """The TUI's dashboard and server screen, and the notebook's widgets, show the ranks."""
    from textual.widgets import DataTable

    from tests.fixtures.tui import until
    from workbench.notebook.servers import LogsWidget, ServersWidget
    from workbench.tui.app import WorkbenchApp

    app = WorkbenchApp(str(root), start="servers")
    async with app.run_test(size=(140, 40)) as pilot:
        table = app.screen.query_one("#servers", DataTable)
        assert await until(pilot, lambda: table.row_count == 1, timeout=30)
        assert str(table.get_row_at(0)[2]) == "n1+n2"
        app.selected_server = sid
        app.switch_mode("server")
        state = lambda: "".join(str(w.render()) for w in app.screen.query("#state"))  # noqa: E731
        assert await until(pilot, lambda: "rank 1  n2" in state(), timeout=30)
        assert f"rank 0  n1  pid {ranks[0]['pid']}  ready" in state()
    assert "n1+n2" in ServersWidget(wb).table.value
    assert f"rank 1  n2  pid {ranks[1]['pid']}  running" in LogsWidget(wb, sid).summary.value


def test_a_killed_rank_1_is_rank_1s_failure(mn, net_hosts):
    wb, _ = mn
    rec = wb.launch("lab2", confirm=True)
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    assert st.state == "ready", st
    token = wb.server(rec.id).extra["launch_token"]
    pid1 = st.ranks[1]["pid"]
    net_hosts["n2"].sh(f"kill -KILL {pid1}")  # on its host, by the pid that host knows it by
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s = wb.server_status([rec.id])[0]
        if s.state in ("failed", "exited") and not wb.server(rec.id).extra.get("leftover"):
            break
        time.sleep(0.3)
    assert s.state == "exited", s  # it had been ready
    f = s.failure
    assert f["rank"] == 1 and f["host"] == "n2" and f["class"] == "process-died", f
    assert f["hint"].startswith("rank 1 on n2:")
    # rank 0 lost its peer, as SGLang's survivors do: its scheduler raised, it took itself down
    assert f["ranks"]["0"] == "scheduler-exception"
    by_rank = {r["rank"]: r for r in s.ranks}
    assert by_rank[1]["state"] == "failed" and by_rank[0]["state"] == "failed"
    assert _left(net_hosts, token) == {"n1": [], "n2": []}
    assert rec.id not in [r.id for r in wb.servers(active=True)]


def test_a_hung_rank_1_is_named_by_rank_0s_watchdog(mn, net_hosts):
    """Rank 1 stops answering (SIGSTOP): rank 0's forward waits on its part of the collective until
    SGLang's scheduler watchdog takes rank 0 down; the failure names rank 1, which still runs until
    the stop ends it by its identity."""
    wb, _ = mn
    rec = wb.launch("lab2-watchdog", confirm=True)
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    assert st.state == "ready", st
    token = wb.server(rec.id).extra["launch_token"]
    net_hosts["n2"].sh(f"kill -STOP {st.ranks[1]['pid']}")
    body = json.dumps({"text": "The", "sampling_params": {"max_new_tokens": 8}}).encode()
    req = urllib.request.Request(f"http://{net_hosts['n1'].addr}:30000/generate", body, method="POST")
    threading.Thread(target=_quietly, args=(lambda: urllib.request.urlopen(req, timeout=60),), daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s = wb.server_status([rec.id])[0]
        if s.state in ("failed", "exited"):
            break
        time.sleep(0.3)
    f = s.failure
    assert s.state == "exited" and f["rank"] == 1 and f["host"] == "n2" and f["class"] == "hang", s
    assert "Scheduler watchdog timeout (self.watchdog_timeout=3.0" in f["text"] and f["ranks"]["1"] == "hang"
    assert f["hint"].startswith("rank 1 on n2: rank 0 waited on it")
    assert _left(net_hosts, token) == {"n1": [], "n2": [st.ranks[1]["pid"]]}  # the hung rank runs on
    res = wb.server_stop(rec.id, confirm=True, grace=1, gpu_wait=0)
    assert res.result == "stopped" and _left(net_hosts, token) == {"n1": [], "n2": []}, res


def _quietly(fn):
    with contextlib.suppress(OSError):  # the server goes down under the request
        fn()


def test_nodes_that_never_meet_time_out_naming_the_rank_that_did_not_join(mn, net_hosts):
    wb, _ = mn
    rec = wb.launch("lab2-nowhere", confirm=True)
    st = wb.server_wait(rec.id, timeout=12, poll=0.5)
    assert st.state == "timeout", st
    assert st.failure["rank"] == 1 and st.failure["host"] == "n2", st.failure
    assert st.failure["hint"].startswith("not ready after 12 s: rank 1 on n2 is at")
    token = wb.server(rec.id).extra["launch_token"]
    assert wb.server_stop(rec.id, confirm=True, grace=2, gpu_wait=0).result == "stopped"
    assert _left(net_hosts, token) == {"n1": [], "n2": []}


def test_a_two_node_vllm_server_workers_headless(mn, net_hosts):
    """vLLM's shape of it: rank 0 the API server, rank 1 a headless worker; ready from rank 0's
    /health, measured on rank 0's counters, stopped with no process left."""
    wb, root = mn
    rec = wb.launch("vllm2", confirm=True)
    argv1 = wb.server(rec.id).extra["ranks"][1]["argv"]
    assert argv1[-1] == "--headless" and "--master-addr" in argv1 and "--distributed-executor-backend" in argv1
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    assert st.state == "ready" and [r["state"] for r in st.ranks] == ["ready", "running"], st
    m = wb.server_measure(rec.id, concurrency=1, max_new_tokens=8)
    assert m.counters and m.counters["drafts"] > 0
    token = wb.server(rec.id).extra["launch_token"]

    # server stop on the command line: the plan names every rank; nothing happens without --yes
    def stop(*flags):
        argv = [sys.executable, "-m", "workbench", "--workspace", str(root), "server", "stop", str(rec.id), *flags]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)

    refused = stop()
    assert refused.returncode == 2 and "not done without --yes" in refused.stderr, refused.stderr
    for r in st.ranks:
        assert f"rank {r['rank']} on {r['host']}: pid {r['pid']}" in refused.stderr
    assert "vLLM's headless workers end on SIGTERM" in refused.stderr
    assert _left(net_hosts, token) == {"n1": [st.ranks[0]["pid"]], "n2": [st.ranks[1]["pid"]]}
    done = stop("--yes", "--grace", "5", "--gpu-wait", "0", "--json")
    assert done.returncode == 0, done.stderr
    res = json.loads(done.stdout)
    assert res["result"] == "stopped" and [a["rank"] for a in res["ranks"]] == [0, 1], res
    assert _left(net_hosts, token) == {"n1": [], "n2": []}
