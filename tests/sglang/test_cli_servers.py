"""The host/server CLI end to end over the real sshd, and a resumable sweep."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.toml_files import write_toml

pytestmark = pytest.mark.ssh


def test_host_list_check_trust(cli, ssh_workspace, sshd, tmp_path):
    r = cli("host", "list", "--json")
    assert {h["name"] for h in json.loads(r.stdout)} == {"local", "test"}
    r = cli("host", "check", "test", "--json")
    assert r.returncode == 0, r.stderr
    chk = json.loads(r.stdout)
    assert chk["reachable"] and chk["sglang_version"] == "0.5.23"
    assert chk["gpus"][0] == {"index": 0, "used_mib": 0.0, "total_mib": 143771.0, "util": 0.0}
    # an unknown key: check says so with the fingerprint; trust without --yes refuses; with it adds
    sshd.known_hosts.write_text("")
    r = cli("host", "check", "test", "--json")
    chk = json.loads(r.stdout)
    assert r.returncode == 1 and chk["host_key"] == "unknown" and chk["fingerprint"].startswith("SHA256:")
    r = cli("host", "trust", "test")
    assert r.returncode == 2 and "without --yes" in r.stderr and sshd.known_hosts.read_text() == ""
    r = cli("host", "trust", "test", "--fingerprint", chk["fingerprint"], "--yes", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["added"]
    assert cli("host", "check", "test", "--json").returncode == 0


def test_server_launch_status_logs_stop(cli, ssh_workspace):
    r = r_launch = cli("server", "launch", "standin", "--yes", "--wait", "--json", timeout=180)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["state"] == "ready" and "--speculative-algorithm EAGLE3" in r.stderr  # the plan was shown
    sid = st["id"]
    r = cli("server", "status", "--json")
    rows = json.loads(r.stdout)
    assert rows[0]["id"] == sid and rows[0]["state"] == "ready" and rows[0]["process"] == "running"
    assert rows[0]["log_unrecognised"] == 0
    log = r_launch.stderr.split(", log ", 1)[1].split()[0]  # sshd is on this machine: the same file
    with open(log, "ab") as fh:
        fh.write(b"a line no engine writes\n")
    r = cli("server", "status")
    assert "log: 1 lines not recognised, the first (line " in r.stdout and "a line no engine writes" in r.stdout
    r = cli("server", "logs", str(sid))
    assert "The server is fired up and ready to roll!" in r.stdout
    r = cli("server", "stop", str(sid))
    assert r.returncode == 2 and "without --yes" in r.stderr
    r = cli("server", "stop", str(sid), "--yes", "--gpu-wait", "5", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["result"] == "stopped"
    r = cli("server", "status", "--all", "--json")
    assert json.loads(r.stdout)[0]["state"] == "stopped"


def test_launch_refuses_a_profile_with_problems(cli, ssh_workspace):
    import tomllib

    data = tomllib.loads((ssh_workspace / "workbench.toml").read_text())
    data["profiles"]["bad"] = {"extends": "standin", "speculative": {"num_draft_tokens": 9}}
    write_toml(ssh_workspace / "workbench.toml", data)
    r = cli("server", "launch", "bad", "--yes")
    assert r.returncode == 1 and "spec" in r.stderr and "not launched" in r.stderr
    assert "num_draft_tokens" in r.stderr


def test_sweep_ranks_fits_and_resumes(server_ws):
    from workbench.api import SweepRun

    wb = server_ws
    kw = dict(
        steps=[1, 2, 3],
        topks=[1],
        baseline=True,
        envs=[{"NCCL_PROTO": "LL"}],
        run=SweepRun(concurrency=4, max_new_tokens=48, ready_timeout=60, poll=0.2, stop_grace=2, gpu_wait=5),
    )
    res = wb.server_sweep("standin", confirm=True, **kw)
    assert [p.state for p in res.points] == ["measured"] * 4, [p.error for p in res.points]
    assert res.points[0].tokens_per_s >= res.points[-1].tokens_per_s  # ranked
    keys = {p.key for p in res.points}
    assert keys == {
        "baseline|NCCL_PROTO=LL",
        "s1-k1-n2|NCCL_PROTO=LL",
        "s2-k1-n3|NCCL_PROTO=LL",
        "s3-k1-n4|NCCL_PROTO=LL",
    }
    by = {p.num_steps: p for p in res.points}
    assert by[1].accept_len == pytest.approx(2.0) and by[2].accept_len == pytest.approx(3.0)
    assert res.best and res.best["num_steps"] > 0 and res.baseline_tokens_per_s
    assert res.model and res.model["points"] == 3 and "predicted_best" in res.model, res.model
    assert 0 < res.model["t_draft_s"] < 0.02 and res.model["r2"] > 0.5
    assert not wb.servers(active=True)  # every point was stopped
    again = wb.server_sweep("standin", confirm=True, **kw)
    assert again.sweep_id == res.sweep_id and again.resumed == 4
    assert len(wb.servers()) == len({r.id for r in wb.servers()})
