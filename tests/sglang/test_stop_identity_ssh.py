"""PID reuse over a real sshd: a server is launched and stopped, then a new session leader started on
the host (through SSH) takes over the situation of the recorded identity: it exits and leaves a child
whose group and session are the recorded pid. Status must not claim that child, stop must not signal it."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from workbench.errors import InputError

pytestmark = pytest.mark.ssh

DAEMON = (
    "import os, sys, time\n"
    "os.setsid()\n"  # the stranger's own session
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.close(0); os.close(1); os.close(2); time.sleep(120); os._exit(0)\n"
    "print(os.getpid(), pid, flush=True)\n"
)
# run from a forked child so that setsid is allowed (a session's first process cannot call it)
LAUNCHER = (
    "import subprocess, sys\n"
    "p = subprocess.run([sys.executable, '-c', sys.argv[1]], capture_output=True, text=True)\n"
    "print(p.stdout.strip())\n"
)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_pid_reuse_over_ssh_never_signals_the_new_sessions_child(server_ws):
    wb = server_ws
    rec = wb.launch("standin", confirm=True)
    st = wb.server_wait(rec.id, timeout=60, poll=0.2)
    assert st.state == "ready"
    rec = wb.server(rec.id)
    assert rec.extra.get("launch_token")
    assert wb.server_stop(rec.id, confirm=True, gpu_wait=0).result == "stopped"
    host = wb.host("test")
    tried = wrong = 0
    for _ in range(3):
        r = host.run([host.python, "-c", LAUNCHER, DAEMON], timeout=30).check()
        leader, child = map(int, r.out.split())
        tried += 1
        try:
            assert _alive(child) and not _alive(leader)
            # the record points at the new session; it looks like a failed server whose leader died
            wb.journal.db.execute(
                "UPDATE servers SET pid = ?, pgid = ?, state = 'failed', stopped = NULL WHERE id = ?",
                (leader, leader, rec.id),
            )
            s = wb.server_status([rec.id])[0]
            assert s.process != "leftover" and child not in (wb.server(rec.id).extra.get("leftover") or [])
            wb.journal.db.execute("UPDATE servers SET state = 'failed', stopped = NULL WHERE id = ?", (rec.id,))
            res = wb.server_stop(rec.id, confirm=True, grace=1, gpu_wait=0)
            assert res.result == "already-gone" and res.signals == []
            time.sleep(0.2)
            wrong += not _alive(child)
        finally:
            try:
                os.kill(child, signal.SIGKILL)  # sshd runs on this machine: same pids
            except ProcessLookupError:
                pass
    print(json.dumps({"tried": tried, "signalled_wrongly": wrong}))
    assert wrong == 0


@pytest.mark.parametrize("grace", [float("inf"), float("nan"), -1.0])
def test_stop_refuses_an_unbounded_grace_and_signals_nothing(server_ws, grace):
    wb = server_ws
    rec = wb.launch("standin", confirm=True)
    assert wb.server_wait(rec.id, timeout=60, poll=0.2).state == "ready"
    with pytest.raises(InputError, match="grace"):
        wb.server_stop(rec.id, confirm=True, grace=grace, gpu_wait=0)
    assert wb.server_status([rec.id])[0].process == "running"
    assert wb.server_stop(rec.id, confirm=True, grace=2, gpu_wait=0).result == "stopped"


def test_two_servers_of_one_profile_keep_their_own_logs_and_metrics(server_ws):
    """Each launch writes its own log: a relaunch does not rotate the old server's log away and the
    old server's row never shows the new server's lines."""
    wb = server_ws
    a = wb.launch("standin", confirm=True)
    assert wb.server_wait(a.id, timeout=60, poll=0.2).state == "ready"
    wb.server_measure(a.id, concurrency=2, max_new_tokens=8)
    first = wb.server_metrics(a.id)
    assert wb.server_stop(a.id, confirm=True, gpu_wait=0).result == "stopped"
    b = wb.launch("standin", confirm=True)
    assert wb.server_wait(b.id, timeout=60, poll=0.2).state == "ready"
    ra, rb = wb.server(a.id), wb.server(b.id)
    assert ra.log != rb.log and Path(ra.log).exists() and Path(rb.log).exists()
    assert not Path(ra.log + ".prev").exists() and not Path(rb.log + ".prev").exists()
    wb.server_measure(b.id, concurrency=4, max_new_tokens=24)
    again = wb.server_metrics(a.id)
    assert again["decode_lines"] == first["decode_lines"] and again["last"] == first["last"]
    assert wb.server_metrics(b.id)["decode_lines"] > 0
    assert wb.server_log(a.id) == Path(ra.log).read_bytes()
    assert wb.server_stop(b.id, confirm=True, gpu_wait=0).result == "stopped"
