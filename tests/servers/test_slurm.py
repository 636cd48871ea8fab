"""Servers on a real SLURM cluster (Debian's slurm: a controller on the bridge, one slurmd in each of two
namespace hosts, the login node a third host reached over SSH): a 2-node lab server submitted as one
job, ready from rank 0, measured through rank 0's address, stopped with scancel and no process left;
a job cancelled from outside, a lost node, sweeps as parallel jobs, and the bad input refused in one
line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.teardown import stop_active_servers
from tests.fixtures.toml_files import write_toml
from workbench.api import SweepRun
from workbench.errors import InputError

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


@pytest.fixture(scope="module")
def sl(net_hosts, slurm_cluster, lab_world, tmp_path_factory):
    from workbench.api import Workbench

    root = tmp_path_factory.mktemp("slurm-ws")
    env = slurm_cluster.env
    lab = {
        "launcher": [sys.executable, "-m", "workbench.lab.serve"],
        "model": str(lab_world["target"]),
        "draft": str(lab_world["draft"]),
        "port": 30000,
        "args": ["--host", "0.0.0.0"],
        "env": {"PYTHONPATH": str(ROOT)},
        "speculative": {"algorithm": "EAGLE3", "eagle_topk": 1, "num_draft_tokens": 4, "num_steps": 3},
        "ready_timeout": 300,
        "stop_grace": 10,
    }
    broken = root / "slurm-dead.conf"
    conf = slurm_cluster.conf.read_text()
    port = next(line.split("=")[1] for line in conf.splitlines() if line.startswith("SlurmctldPort="))
    broken.write_text(conf.replace(f"SlurmctldPort={port}", "SlurmctldPort=1"))
    hosts = {
        "cluster": {
            "kind": "slurm",
            **net_hosts.host_table("login"),
            "partition": "batch",
            "sbatch_args": ["--time=45"],
            "env": env,
        },
        "here": {"kind": "slurm", "address": "local", "env": env},
        "nobin": {"kind": "slurm", "address": "local", "env": {**env, "PATH": str(root / "empty")}},
        "dead": {"kind": "slurm", "address": "local", "env": {"SLURM_CONF": str(broken)}},
        "nopart": {"kind": "slurm", "address": "local", "partition": "gpu", "env": env},
    }
    profiles = {
        "lab2": {**lab, "host": "cluster", "nodes": 2, "args": ["--host", "0.0.0.0", "--tp-size", "2"]},
        "lab1": {**lab, "host": "here", "nodes": 1},
        "three": {**lab, "host": "cluster", "nodes": 3, "args": ["--tp-size", "3"]},
        "nobin": {**lab, "host": "nobin"},
        "dead": {**lab, "host": "dead"},
        "nopart": {**lab, "host": "nopart"},
    }
    for name in profiles:
        profiles[name]["log"] = str(root / "logs" / f"{name}.log")
    write_toml(root / "workbench.toml", {"hosts": hosts, "profiles": profiles})
    wb = Workbench.open(root)
    try:
        yield wb, root
    finally:
        stop_active_servers(wb, grace=2)
        wb.close()


def _left(net_hosts, token: str) -> dict[str, list[int]]:
    return {n: net_hosts[n].processes(f"EAGLE_WORKBENCH_LAUNCH={token}") for n in ("n1", "n2") if net_hosts[n].alive}


def _job(slurm_cluster, job_id: str) -> dict[str, str]:
    out = slurm_cluster.client("scontrol", "show", "job", "-o", job_id).stdout
    return dict(w.split("=", 1) for w in out.split() if "=" in w)


def _settled(slurm_cluster, job_id: str, timeout: float = 60.0) -> dict[str, str]:
    """The job once SLURM has finished ending it (COMPLETING: its epilog and its processes' clean-up still run)."""
    got = _until(lambda: (lambda j: j if j["JobState"] != "COMPLETING" else None)(_job(slurm_cluster, job_id)), timeout)
    return got or _job(slurm_cluster, job_id)


def _until(fn, timeout: float = 120.0, poll: float = 0.3):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(poll)


@pytest.mark.parametrize(
    "profile, needle",
    [
        ("three", "[profiles.three].nodes: 3 nodes, but partition batch of cluster has 2"),
        ("nobin", "SLURM's client commands are missing: sbatch, srun, squeue, scontrol, scancel, sinfo"),
        ("dead", "the SLURM controller does not answer"),
        ("nopart", "no partition 'gpu' (partitions: batch)"),
    ],
)
def test_a_cluster_that_cannot_take_the_job_is_refused_in_one_line(sl, profile, needle):
    wb, root = sl
    (root / "empty").mkdir(exist_ok=True)
    with pytest.raises(InputError) as err:
        wb.launch_preview(profile)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert not wb.servers()  # nothing recorded, nothing submitted


def test_two_node_lab_server_through_slurm(sl, net_hosts, slurm_cluster):
    wb, root = sl
    t0 = time.monotonic()
    rec = wb.launch("lab2", confirm=True)
    t_submitted = time.monotonic()
    job_id = rec.extra["slurm"]["job_id"]
    assert job_id and _job(slurm_cluster, job_id)["Comment"] == rec.extra["launch_token"]
    job = _job(slurm_cluster, job_id)
    assert job["Requeue"] == "0" and job["NumNodes"] in ("2", "2-2") and job["Partition"] == "batch"
    assert job["TimeLimit"] == "00:45:00"  # the host's sbatch_args
    running = _until(lambda: _job(slurm_cluster, job_id)["JobState"] == "RUNNING", 60, 0.05)
    job_start_s = time.monotonic() - t_submitted
    assert running
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    ready_s = time.monotonic() - t0
    assert st.state == "ready", st
    assert st.job["state"] == "RUNNING" and st.job["nodes"] == ["n1", "n2"]
    assert [(r["rank"], r["node"], r["state"], r["process"]) for r in st.ranks] == [
        (0, "n1", "ready", "running"),
        (1, "n2", "running", "running"),
    ], st.ranks
    assert st.ranks[0]["addr"] == net_hosts["n1"].addr
    token = rec.extra["launch_token"]
    left = _left(net_hosts, token)
    assert left == {"n1": [st.ranks[0]["pid"]], "n2": [st.ranks[1]["pid"]]}  # each node's own numbering
    rec = wb.server(rec.id)
    assert rec.pid == st.ranks[0]["pid"]  # rank 0's identity, learnt from its node
    rank1 = Path(rec.extra["ranks"][1]["log"]).read_text()
    assert "Dummy health check server started" in rank1 and " TP1] Load weight begin" in rank1
    assert wb.server_log(rec.id, rank=1).startswith(rank1.encode())  # read through the login node

    # the command line: the job and each rank in status, the cluster in host check
    def cli(*argv):
        r = subprocess.run(
            [sys.executable, "-m", "workbench", "--workspace", str(root), *argv],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    out = cli("server", "status", str(rec.id))
    assert f"cluster#{job_id}" in out and f"job {job_id} RUNNING" in out, out
    assert f"rank 1  n2  pid {st.ranks[1]['pid']}  running" in out
    js = json.loads(cli("server", "status", str(rec.id), "--json"))[0]
    assert [(r["rank"], r["node"], r["pid"]) for r in js["ranks"]] == [
        (0, "n1", st.ranks[0]["pid"]),
        (1, "n2", st.ranks[1]["pid"]),
    ]
    assert "partitions: batch* (2 nodes)" in cli("host", "check", "cluster")

    # measured through rank 0's address, reached from the login node
    m = wb.server_measure(rec.id, concurrency=2, max_new_tokens=16)
    assert m.completion_tokens == m.prompts * 16 and m.accept_len["mean"] >= 1.0

    plan = wb.stop_plan(rec.id).text()
    assert f"SLURM job {job_id} on cluster: scancel --signal=TERM" in plan and "ranks >= 1 ignore SIGTERM" in plan
    res = wb.server_stop(rec.id, confirm=True, gpu_wait=0)
    assert res.result == "stopped" and res.signals[0] == "TERM", res
    assert _settled(slurm_cluster, job_id)["JobState"] in ("COMPLETED", "CANCELLED")
    assert wb.server(rec.id).state == "stopped"
    assert _left(net_hosts, token) == {"n1": [], "n2": []}
    print(
        json.dumps(
            {
                "cluster_start_s": round(slurm_cluster.start_s, 2),
                "job_start_s": round(job_start_s, 2),
                "launch_to_ready_s": round(ready_s, 2),
                "nodes": 2,
                "over": "slurm",
            }
        )
    )


def test_a_job_cancelled_outside_the_workbench(sl, net_hosts, slurm_cluster):
    wb, _ = sl
    rec = wb.launch("lab2", confirm=True)
    job_id = rec.extra["slurm"]["job_id"]
    assert _until(lambda: any(r.get("pid") for r in wb.server_status([rec.id])[0].ranks), 120)
    slurm_cluster.client("scancel", job_id)
    s = _until(lambda: (lambda s: s if s.state in ("failed", "exited") else None)(wb.server_status([rec.id])[0]), 60)
    assert s and s.failure["class"] == "cancelled", s
    assert f"job {job_id}" in s.failure["hint"] and "outside the workbench" in s.failure["hint"]
    assert _until(lambda: _left(net_hosts, rec.extra["launch_token"]) == {"n1": [], "n2": []}, 30)
    assert rec.id not in [r.id for r in wb.servers(active=True)]


def test_a_killed_rank_1_on_a_node_is_rank_1s_failure(sl, net_hosts, slurm_cluster):
    wb, _ = sl
    rec = wb.launch("lab2", confirm=True)
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    assert st.state == "ready", st
    net_hosts["n2"].sh(f"kill -KILL {st.ranks[1]['pid']}")  # the rank's process, on its node
    s = _until(lambda: (lambda s: s if s.state in ("failed", "exited") else None)(wb.server_status([rec.id])[0]), 60)
    assert s and s.state == "exited", wb.server_status([rec.id])[0]
    assert s.failure["rank"] == 1 and s.failure["host"] == "n2", s.failure
    assert s.failure["hint"].startswith("rank 1 on n2 (cluster):") and s.failure["class"] == "process-died"
    assert s.failure["ranks"] == {"0": "scheduler-exception", "1": "process-died"}  # rank 0 lost its peer
    assert _until(lambda: _left(net_hosts, rec.extra["launch_token"]) == {"n1": [], "n2": []}, 30)
    job = _settled(slurm_cluster, rec.extra["slurm"]["job_id"])
    assert job["JobState"] == "FAILED" and job["Restarts"] == "0", job


def test_a_sweep_on_a_cluster_runs_its_points_as_parallel_jobs(sl, slurm_cluster):
    wb, _ = sl
    res = wb.server_sweep("lab1", steps=[1, 2], confirm=True, run=SweepRun(concurrency=1, max_new_tokens=8, rounds=1))
    assert [p.state for p in res.points] == ["measured", "measured"], res.points
    jobs = [_job(slurm_cluster, wb.server(p.server_id).extra["slurm"]["job_id"]) for p in res.points]
    # both jobs ran at once (one node each): each started before the other ended
    a, b = jobs
    assert a["StartTime"] <= b["EndTime"] and b["StartTime"] <= a["EndTime"], jobs
    assert not wb.servers(active=True)


def test_a_lost_node_fails_the_server_naming_its_rank(sl, net_hosts, slurm_cluster):
    """Last in the module: the node does not come back."""
    wb, _ = sl
    rec = wb.launch("lab2", confirm=True)
    assert _until(lambda: len([r for r in wb.server_status([rec.id])[0].ranks if r.get("pid")]) == 2, 120)
    net_hosts["n2"].kill()  # the node and everything on it gone at once
    t0 = time.monotonic()
    s = _until(
        lambda: (lambda s: s if s.failure and s.failure.get("class") == "node-lost" else None)(
            wb.server_status([rec.id])[0]
        ),
        120,
        1.0,
    )
    assert s and s.state in ("failed", "exited"), wb.server_status([rec.id])[0]
    seen_s = time.monotonic() - t0
    assert s.failure["rank"] == 1 and s.failure["host"] == "n2", s.failure
    assert "SLURM lost node n2" in s.failure["hint"]
    # SLURM ends the job once it calls the node down; --no-requeue: it is not run again
    job_id = rec.extra["slurm"]["job_id"]
    end = _until(
        lambda: (lambda j: j if j["JobState"] not in ("RUNNING", "COMPLETING") else None)(_job(slurm_cluster, job_id)),
        120,
        1.0,
    )
    assert end and end["JobState"] in ("NODE_FAIL", "FAILED") and end["Restarts"] == "0", end
    assert _until(lambda: _left(net_hosts, rec.extra["launch_token"]) == {"n1": []}, 60)
    assert rec.id not in [r.id for r in wb.servers(active=True)]
    print(json.dumps({"node_lost_seen_s": round(seen_s, 1), "job_state": end["JobState"]}))
