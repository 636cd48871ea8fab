"""The lab server as N ranks, with the engines' rank semantics and their own log lines: ranks meet at
the rendezvous before rank 0 loads anything; SGLang's rank >= 1 answers its dummy health routes with
200, logs and ignores SIGTERM, and dies as a failed scheduler when rank 0 is lost; vLLM's worker runs
headless and ends on SIGTERM. Two ranks on this machine: rank 0 on 127.0.0.1, rank 1 on 127.0.0.2 (the
same port, as on two hosts)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workbench.lab.process import free_port
from workbench.servers.host_scripts import local_procfs

pytestmark = pytest.mark.slow


def _rank(world, tmp: Path, rank: int, port: int, extra: list[str]) -> tuple[subprocess.Popen, Path]:
    log = tmp / f"rank{rank}.log"
    argv = [
        sys.executable,
        "-m",
        "workbench.lab.serve",
        "--model-path",
        str(world["target"]),
        "--host",
        f"127.0.0.{rank + 1}",
        "--port",
        str(port),
        "--tp-size",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        str(rank),
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, log


def _until(fn, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.1)
    return False


def _code(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _alive(p: subprocess.Popen) -> bool:
    st = local_procfs()["stat"](p.pid)
    return p.poll() is None and st is not None and st["state"] not in ("Z", "X")


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_sglang_ranks_meet_and_rank_1_follows_rank_0(lab_world, tmp_path):
    port, store = free_port(), free_port()
    rdv = ["--dist-init-addr", f"127.0.0.1:{store}"]
    r1, log1 = _rank(lab_world, tmp_path, 1, port, rdv)  # the worker first: it waits for rank 0's store
    r0, log0 = _rank(lab_world, tmp_path, 0, port, rdv)
    try:
        assert _until(lambda: "The server is fired up and ready to roll!" in log0.read_text()), log0.read_text()
        text = log1.read_text()
        # SGLang's own lines (srt/entrypoints/engine.py, srt/utils/common.py), its TP rank on node 1
        assert f"Dummy health check server started in background thread at 127.0.0.2:{port}\n" in text
        assert " TP1] Load weight begin." in text and "server_args=" in text
        assert "fired up" not in text
        for route, code in (("/health", 200), ("/ping", 200), ("/health_generate", 200), ("/generate", 404)):
            assert _code(f"http://127.0.0.2:{port}{route}") == code, route
        # only rank 0 serves
        assert _code(f"http://127.0.0.1:{port}/health_generate") == 200
        r1.send_signal(signal.SIGTERM)
        assert _until(lambda: "SIGTERM received on node_rank 1;" in log1.read_text(), 10)
        assert (
            "SIGTERM received on node_rank 1; waiting for the rank-0 ShutdownReq broadcast to stop the schedulers.\n"
            in log1.read_text()
        )
        time.sleep(0.5)
        assert _alive(r1)  # ignored
        r0.send_signal(signal.SIGKILL)  # rank 0 lost without its shutdown
        assert _until(lambda: not _alive(r1), 30)
        tail = log1.read_text()
        assert " TP1] Scheduler hit an exception: Traceback" in tail
        assert "RuntimeError: Connection closed by peer [127.0.0.1]:" in tail
        assert tail.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")
        assert r1.wait(10) == -signal.SIGKILL
    finally:
        _stop(r0, r1)


def test_vllm_worker_runs_headless(lab_world, tmp_path):
    port, store = free_port(), free_port()
    flags = ["--lab-engine", "vllm==0.32.0", "--master-addr", "127.0.0.1", "--master-port", str(store)]
    r0, log0 = _rank(lab_world, tmp_path, 0, port, flags)
    r1, log1 = _rank(lab_world, tmp_path, 1, port, [*flags, "--headless"])
    try:
        assert _until(lambda: _code_or_0(f"http://127.0.0.1:{port}/health") == 200), log0.read_text()
        assert (
            "Launching vLLM (v0.32.0) headless multiproc executor, with head node address "
            f"127.0.0.1:{store} for torch.distributed process group.\n"
        ) in log1.read_text()
        assert "DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=127.0.0.1, mq_connect_ip=" in (
            log0.read_text()
        )
        assert "world_size=2, local_world_size=1" in log0.read_text()
        r1.send_signal(signal.SIGTERM)  # vLLM's worker ends on SIGTERM
        assert r1.wait(20) == 0
    finally:
        _stop(r0, r1)


def _code_or_0(url: str) -> int:
    try:
        return _code(url)
    except OSError:
        return 0
