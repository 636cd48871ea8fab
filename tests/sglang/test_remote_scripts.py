"""The programs run on hosts (status, stop), exercised on this machine through LocalHost."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time

from workbench.hosts.local import LocalHost
from workbench.servers import host_scripts


def _stat(pid):
    r = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return {"state": r[0], "pgid": int(r[2]), "starttime": int(r[19])}


def _status(host, servers, gpus=False):
    r = host.python_run(host_scripts.STATUS, [host_scripts.as_arg({"servers": servers, "gpus": gpus})]).check()
    return json.loads(r.out)


def test_a_zombie_is_dead_and_a_reused_pid_is_someone_else():
    host = LocalHost()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = None
    for _ in range(100):  # not reaped: it stays a zombie until wait()
        st = _stat(child.pid)
        start = st["starttime"]
        if st["state"] == "Z":
            break
        time.sleep(0.02)
    out = _status(
        host,
        [
            {"id": 1, "pid": child.pid, "starttime": start},
            {"id": 2, "pid": child.pid, "starttime": start + 1},
            {"id": 3, "pid": 2**22 + 7},
        ],
    )
    assert [s["state"] for s in out["servers"]] == ["zombie", "replaced", "gone"]
    child.wait()


def test_log_bytes_from_offset_and_truncation(tmp_path):
    host = LocalHost()
    log = tmp_path / "x.log"
    log.write_bytes(b"0123456789")
    s = _status(host, [{"id": 1, "log": str(log), "offset": 4, "cap": 3}])["servers"][0]
    assert s["log_size"] == 10 and s["offset"] == 4 and base64.b64decode(s["data"]) == b"456"
    log.write_bytes(b"ab")  # rotated: smaller than the offset
    s = _status(host, [{"id": 1, "log": str(log), "offset": 4}])["servers"][0]
    assert s["offset"] == 0 and base64.b64decode(s["data"]) == b"ab"


def test_nvidia_smi_missing_is_reported_not_fatal(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    host = LocalHost()
    out = _status(host, [], gpus=True)
    assert out["gpus"]["rc"] == 127 and "not found" in out["gpus"]["err"]


def test_stop_signals_the_whole_group_and_refuses_a_stranger(tmp_path):
    host = LocalHost()
    script = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    time.sleep(0.3)
    st = _stat(proc.pid)
    assert st["pgid"] == proc.pid
    members = [int(d) for d in os.listdir("/proc") if d.isdigit() and _safe_pgid(int(d)) == proc.pid]
    assert len(members) == 2
    req = {"pid": proc.pid, "pgid": proc.pid, "starttime": st["starttime"] + 5, "grace": 2}
    out = json.loads(host.python_run(host_scripts.STOP, [host_scripts.as_arg(req)]).check().out)
    assert out["result"] == "refused" and "another process" in out["reason"] and out["signals"] == []
    assert proc.poll() is None
    req["starttime"] = st["starttime"]
    out = json.loads(host.python_run(host_scripts.STOP, [host_scripts.as_arg(req)]).check().out)
    assert out["result"] == "stopped" and out["signals"] == ["TERM"]
    assert proc.wait(5) == -signal.SIGTERM
    for pid in members:
        assert _safe_pgid(pid) in (None, -1)  # gone (or a zombie awaiting its reaper)
    out = json.loads(host.python_run(host_scripts.STOP, [host_scripts.as_arg(req)]).check().out)
    assert out["result"] == "already-gone"


def _safe_pgid(pid):
    try:
        r = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return -1 if r[0] in ("Z", "X") else int(r[2])


def test_launch_line_quotes_everything(tmp_path):
    host = LocalHost()
    log = tmp_path / "dir with space" / "s;erver.log"
    marker = tmp_path / "pwned"
    argv = [
        sys.executable,
        "-c",
        "import sys, json, os; print(json.dumps(sys.argv[1:] + [os.environ['WB_X']]))",
        "a b",
        f"$(touch {marker})",
        "x'y\"z",
        "l1\nl2",
    ]
    r = host.run(host_scripts.launch_line(sys.executable, argv, {"WB_X": "v; $(id)"}, str(log), None)).check()
    ident = json.loads(r.out.strip().splitlines()[-1])
    assert ident["pid"] > 0 and ident["boot_id"]
    for _ in range(100):
        if log.exists() and log.read_text().strip():
            break
        time.sleep(0.05)
    assert json.loads(log.read_text()) == ["a b", f"$(touch {marker})", "x'y\"z", "l1\nl2", "v; $(id)"]
    assert not marker.exists()
