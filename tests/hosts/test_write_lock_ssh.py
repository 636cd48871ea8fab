"""SSH writes take the same lock as local ones (the host's python runs the same compare-and-swap):
a killed SSH writer leaves no lock behind, local and SSH writers of one file exclude each other, and a
transfer cut short writes nothing."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.configs import writers
from workbench.hosts import CasConflictError, casfile
from workbench.hosts.base import sha256

pytestmark = pytest.mark.ssh
ROOT = Path(__file__).resolve().parents[2]

CLIENT = textwrap.dedent("""
    import json, sys
    from workbench.hosts import make_host
    table, path, expect = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    make_host("test", table).write_bytes(path, b'{"from": "killed client"}', expect=expect)
""")


def test_a_killed_ssh_writer_leaves_no_lock(ssh_host, sshd, tmp_path):
    """The writer is killed while the host's side of it holds the lock (paused there by its hook).
    Killing the client: the host's side finishes its write (its pause ends, as a real write would)
    and the lock goes with it. Killing the host's side: the kernel drops its lock at once. Either way
    the next writer goes on at once (a lock that outlives its writer would make it wait out a timeout)."""
    path = tmp_path / "conf.json"
    path.write_bytes(b"{}")
    pause = tmp_path / "pause"
    pause.mkdir()
    tried = blocked = 0
    for k in range(6):
        for f in pause.iterdir():
            f.unlink()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            casfile.PAUSE_AT: "locked",
            casfile.PAUSE_DIR: str(pause),
            casfile.PAUSE_MAX: "1.5",
        }
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, json.dumps(sshd.host_table()), str(path), sha256(path.read_bytes())],
            env=env,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while not (marks := [f for f in pause.iterdir() if f.name.startswith("locked.")]):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.01)
        if k % 2:
            os.kill(int(marks[0].read_text()), signal.SIGKILL)  # the host's side (sshd is on this machine)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stderr.close()
        tried += 1
        t0 = time.monotonic()
        ssh_host.write_bytes(str(path), f'{{"next": {k}}}'.encode())
        elapsed = time.monotonic() - t0
        blocked += elapsed > (1.0 if k % 2 else 5.0)
        assert path.read_bytes() == f'{{"next": {k}}}'.encode()
    print(json.dumps({"kills": tried, "next_writer_blocked": blocked}))
    assert blocked == 0 and tried == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf.json", "pause"]


def test_local_and_ssh_writers_share_one_lock(sshd, tmp_path):
    sshd.write_known_hosts()
    p = tmp_path / "f.json"
    p.write_bytes(b"{}")
    rounds = 40
    ctx = multiprocessing.get_context("spawn")
    results, start = ctx.Queue(), ctx.Barrier(2)
    procs = [
        ctx.Process(target=writers.file_writer, args=("local", str(p), rounds, start, results, None, 0.4, 0.25)),
        ctx.Process(target=writers.file_writer, args=("ssh", str(p), rounds, start, results, sshd.host_table())),
    ]
    for x in procs:
        x.start()
    rows = [results.get(timeout=120) for _ in range(2 * rounds)]
    for x in procs:
        x.join(30)
    by = {}
    for i, name, res, data in rows:
        by.setdefault(i, []).append((name, res, data))
    assert all(r[1] in ("ok", "conflict") for rs in by.values() for r in rs), rows[:4]
    assert all(sum(r[1] == "ok" for r in rs) == 1 for rs in by.values())
    assert p.read_text() == next(r[2] for r in by[rounds - 1] if r[1] == "ok")
    wins = {name: sum(r[1] == "ok" and r[0] == name for rs in by.values() for r in rs) for name in ("local", "ssh")}
    print(json.dumps({"rounds": rounds, "wins": wins}))
    assert wins["ssh"] > 0 and wins["local"] > 0  # each arrived first in some rounds
    assert sorted(x.name for x in tmp_path.iterdir()) == ["f.json"]


def test_a_transfer_cut_short_writes_nothing(ssh_host, tmp_path):
    from workbench.hosts.ssh import _casfile_source

    p = tmp_path / "f.json"
    p.write_bytes(b"{}")
    full = b'{"a": 1}'
    req = {"path": str(p), "expect": sha256(b"{}"), "size": len(full), "sha256": sha256(full)}
    r = ssh_host.run([ssh_host.python, "-c", _casfile_source(), json.dumps(req)], input=full[:3])
    assert json.loads(r.out)["error"] == "truncated" and p.read_bytes() == b"{}"
    with pytest.raises(CasConflictError):
        ssh_host.write_bytes(str(p), full, expect=sha256(b"other"))
    assert ssh_host.write_bytes(str(p), full, expect=sha256(b"{}")) == sha256(full) and p.read_bytes() == full


@pytest.mark.parametrize("style", ["in place", "rename"])
def test_a_hand_edit_inside_the_hosts_window_is_put_back(sshd, tmp_path, style):
    """The host's writer pauses between its check and its swap (its hook); a hand edit is saved on the
    host right then; the swap hands the edit back, it is put in place again and the write refused."""
    import threading

    from workbench.hosts import make_host

    p = tmp_path / "conf.json"
    p.write_bytes(b'{"a": 1}\n')
    pause = tmp_path / "pause"
    pause.mkdir()
    hand = b'{"a": "by hand"}\n'
    os.environ.update({casfile.PAUSE_AT: "window", casfile.PAUSE_DIR: str(pause)})
    host = make_host("test", {"kind": "ssh", **sshd.host_table()})
    box = {}
    try:
        t = threading.Thread(target=lambda: box.setdefault("r", _try(host, p)))
        t.start()
        deadline = time.monotonic() + 30
        while not any(f.name.startswith("window.") for f in pause.iterdir()):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        for k in (casfile.PAUSE_AT, casfile.PAUSE_DIR):
            os.environ.pop(k, None)
    if style == "in place":
        with open(p, "r+b") as fh:
            fh.truncate(0)
            fh.write(hand)
    else:
        (tmp_path / "conf.json.swp").write_bytes(hand)
        os.replace(tmp_path / "conf.json.swp", p)
    (pause / "window.go").write_text("")
    t.join(30)
    host.close()
    assert isinstance(box["r"], CasConflictError) and box["r"].actual == sha256(hand)
    assert p.read_bytes() == hand
    assert sorted(x.name for x in tmp_path.iterdir()) == ["conf.json", "pause"]


def _try(host, p):
    try:
        return host.write_bytes(str(p), b'{"a": 2}\n', expect=sha256(b'{"a": 1}\n'))
    except CasConflictError as exc:
        return exc
