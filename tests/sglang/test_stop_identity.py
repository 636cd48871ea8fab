"""A signal goes only to a process proven to be the server's: (pid, start time) for the leader, and for
any other process the recorded group and session, a start no earlier than the launch, and the launch
token in its environment. Real processes on this machine, through LocalHost and the host scripts."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest

from workbench.hosts.local import LocalHost
from workbench.servers import host_scripts

# a server whose leader forks one child (like SGLang's scheduler processes); both sleep
SERVER = "import os, time\nif os.fork() == 0:\n    time.sleep(120)\n    os._exit(0)\ntime.sleep(120)\n"

# a stranger: a new session leader that forks a child and exits (any double-forking daemon); the
# child keeps the leader's pid as its group and session id. Prints both pids.
DAEMON = (
    "import os, sys, time\n"
    "r, w = os.pipe()\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.close(r); time.sleep(120); os._exit(0)\n"
    "os.close(w); print(os.getpid(), pid, flush=True)\n"
)


def _stat(pid):
    try:
        r = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return {"state": r[0], "pgid": int(r[2]), "sid": int(r[3]), "starttime": int(r[19])}


def _alive(pid):
    st = _stat(pid)
    return st is not None and st["state"] not in ("Z", "X")


def _run(host, script, req):
    return json.loads(host.python_run(script, [host_scripts.as_arg(req)]).check().out.strip().splitlines()[-1])


def _launch(host, tmp_path, argv, token):
    log = tmp_path / f"server-{secrets.token_hex(3)}.log"
    r = host.run(host_scripts.launch_line(sys.executable, argv, {}, str(log), None, token)).check()
    ident = json.loads(r.out.strip().splitlines()[-1])
    return ident["pid"], ident["stat"]["pgid"], ident["stat"]["starttime"], log


def _children_in_group(pgid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != pgid:
            st = _stat(int(d))
            if st and st["pgid"] == pgid and st["state"] not in ("Z", "X"):
                out.append(int(d))
    return out


def _wait(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _stranger():
    """A new session leader that leaves a child; returns (leader pid, child pid), leader reaped."""
    p = subprocess.Popen([sys.executable, "-c", DAEMON], stdout=subprocess.PIPE, text=True, start_new_session=True)
    leader, child = map(int, p.stdout.readline().split())
    p.wait(10)
    p.stdout.close()
    assert _wait(lambda: _stat(child) is not None and _stat(child)["sid"] == leader)
    return leader, child


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_pid_reuse_by_a_session_leader_that_leaves_a_child_is_never_signalled(tmp_path):
    """The recorded leader is gone and its pid (as group and session id) belongs to a new session
    whose child lives on: status lists no leftover, stop signals nothing, the stranger survives."""
    host = LocalHost()
    token = secrets.token_hex(16)
    pid, pgid, start, _ = _launch(host, tmp_path, [sys.executable, "-c", SERVER], token)
    assert _wait(lambda: len(_children_in_group(pgid)) == 1)
    out = _run(host, host_scripts.STOP, {"pid": pid, "pgid": pgid, "starttime": start, "token": token, "grace": 5})
    assert out["result"] == "stopped" and len(out["signalled"]) == 2
    tried = wrong = 0
    for _ in range(25):
        leader, child = _stranger()
        tried += 1
        # the record now points at the new session: its leader has exited, its child has pgid = sid =
        # the recorded pid and started after the recorded start time
        rec = {"id": 1, "pid": leader, "pgid": leader, "starttime": start, "token": token}
        st = _run(host, host_scripts.STATUS, {"servers": [rec], "gpus": False})["servers"][0]
        assert st["state"] == "gone" and st["leftover"] == []
        out = _run(host, host_scripts.STOP, {**rec, "grace": 1})
        assert out["result"] == "already-gone" and out["signals"] == [] and out["signalled"] == []
        assert out["unproven"] == [child]  # reported, never signalled
        # no token recorded (a launch by an older workbench): nothing can be proven, nothing signalled
        out = _run(host, host_scripts.STOP, {**rec, "token": None, "grace": 1})
        assert out["result"] == "already-gone" and out["signals"] == []
        if not _alive(child):
            wrong += 1
        _kill(child)
    print(json.dumps({"tried": tried, "signalled_wrongly": wrong}))
    assert wrong == 0


def test_children_of_a_dead_leader_are_proven_by_the_launch_token_and_stopped(tmp_path):
    """The positive side: the leader died, its child (token in its environment) lives on: status
    lists it as leftover and stop ends it; a process of the same group without the token is left."""
    host = LocalHost()
    token = secrets.token_hex(16)
    pid, pgid, start, _ = _launch(host, tmp_path, [sys.executable, "-c", SERVER], token)
    assert _wait(lambda: len(_children_in_group(pgid)) == 1)
    child = _children_in_group(pgid)[0]
    os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: not _alive(pid))
    rec = {"id": 1, "pid": pid, "pgid": pgid, "starttime": start, "token": token}
    st = _run(host, host_scripts.STATUS, {"servers": [rec], "gpus": False})["servers"][0]
    assert st["leftover"] == [child]
    wrong_token = _run(host, host_scripts.STATUS, {"servers": [{**rec, "token": "0" * 32}], "gpus": False})
    assert wrong_token["servers"][0]["leftover"] == []
    out = _run(host, host_scripts.STOP, {**rec, "grace": 5})
    assert out["result"] == "stopped" and out["signalled"] == [child] and out["signals"] == ["TERM"]
    assert _wait(lambda: not _alive(child))


def test_a_member_that_ignores_term_is_killed_by_its_identity(tmp_path):
    host = LocalHost()
    token = secrets.token_hex(16)
    stubborn = (
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "if os.fork() == 0:\n    time.sleep(120)\n    os._exit(0)\ntime.sleep(120)\n"
    )
    pid, pgid, start, _ = _launch(host, tmp_path, [sys.executable, "-c", stubborn], token)
    assert _wait(lambda: len(_children_in_group(pgid)) == 1)
    out = _run(host, host_scripts.STOP, {"pid": pid, "pgid": pgid, "starttime": start, "token": token, "grace": 0.5})
    assert out["signals"] == ["TERM", "KILL"] and out["result"] == "stopped"


def test_launched_server_has_default_signal_dispositions_and_the_token(tmp_path):
    """Not through ``sh ... &`` + nohup (SIGINT, SIGQUIT ignored by the shell, SIGHUP by nohup)."""
    host = LocalHost()
    token = secrets.token_hex(16)
    probe = (
        "import os, json\n"
        "st = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "print(json.dumps({'ign': st['SigIgn'].strip(), 'blk': st['SigBlk'].strip(), "
        "'token': os.environ.get('EAGLE_WORKBENCH_LAUNCH'), 'sid': os.getsid(0), 'pid': os.getpid()}))\n"
    )
    _, _, _, log = _launch(host, tmp_path, [sys.executable, "-c", probe], token)
    assert _wait(lambda: log.exists() and log.read_text().strip())
    got = json.loads(log.read_text())
    ign = int(got["ign"], 16)
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        assert not ign & (1 << (sig - 1)), f"{sig.name} is ignored in the launched server ({got['ign']})"
    assert int(got["blk"], 16) == 0
    assert got["token"] == token and got["sid"] == got["pid"]


def test_interrupt_reaches_a_launched_server(tmp_path):
    host = LocalHost()
    pid, pgid, start, log = _launch(
        host,
        tmp_path,
        [
            sys.executable,
            "-c",
            "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n",
        ],
        secrets.token_hex(4),
    )
    time.sleep(0.3)
    os.kill(pid, signal.SIGINT)
    assert _wait(lambda: "interrupted" in log.read_text())


def test_launch_refuses_a_nul_byte_before_anything_starts(tmp_path):
    from workbench.errors import InputError

    with pytest.raises(InputError, match="NUL byte"):
        host_scripts.launch_line(sys.executable, [sys.executable, "a\0b"], {}, str(tmp_path / "x.log"), None)
    with pytest.raises(InputError, match="NUL byte"):
        LocalHost().run(["echo", "a\0b"])
