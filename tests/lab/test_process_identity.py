"""The lab server's stop signals only processes proven its own: the leader by its recorded (pid,
start time), its children by group, session, start time and launch token (the server stop's readers)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from workbench.errors import WorkbenchError
from workbench.lab.process import LabProcess, stop_server
from workbench.servers.host_scripts import local_procfs

# a leader that starts a child in its group, then both sleep; TERM is caught and ignored by the child
# only when asked, to exercise the KILL after the grace
LEADER = r"""
import os, signal, subprocess, sys, time
stubborn = sys.argv[1] == "1"
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN) if %r else None; print(1, flush=True); "
    "time.sleep(120)" % stubborn], stdout=subprocess.PIPE)
child.stdout.readline()          # its handler is set
print(child.pid, flush=True)
time.sleep(120)
"""


def _start(stubborn: bool = False) -> tuple[subprocess.Popen, LabProcess, int]:
    token = "t" * 32
    env = {**os.environ, "EAGLE_WORKBENCH_LAUNCH": token}
    p = subprocess.Popen(
        [sys.executable, "-c", LEADER, "1" if stubborn else "0"],
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
        text=True,
    )
    child = int(p.stdout.readline())
    st = local_procfs()["stat"](p.pid)
    return p, LabProcess(p.pid, p.pid, "127.0.0.1", 0, "", starttime=st["starttime"], token=token), child


def _alive(pid: int) -> bool:
    st = local_procfs()["stat"](pid)
    return st is not None and st["state"] not in ("Z", "X")


def _cleanup(p: subprocess.Popen, child: int) -> None:
    for pid in (child, p.pid):
        st = local_procfs()["stat"](pid)
        if st is not None and st["state"] not in ("Z", "X"):
            os.kill(pid, 9)
    p.wait(10)


def test_a_start_time_that_differs_is_another_process_and_gets_no_signal():
    p, lp, child = _start()
    try:
        lp.starttime = lp.starttime - 1
        assert stop_server(lp) == "not running"
        time.sleep(0.3)
        assert _alive(p.pid) and _alive(child)
    finally:
        _cleanup(p, child)


def test_a_live_pid_without_a_recorded_start_time_is_refused():
    p, lp, child = _start()
    try:
        with pytest.raises(WorkbenchError, match="no start time recorded"):
            stop_server(lp.pid, lp.pgid)
        assert _alive(p.pid) and _alive(child)
    finally:
        _cleanup(p, child)


def test_the_recorded_identity_stops_the_leader_and_its_children():
    p, lp, child = _start()
    try:
        assert stop_server(lp) == "stopped (TERM)"
        assert not _alive(p.pid) and not _alive(child)
        assert stop_server(lp) == "not running"  # a second stop sends nothing
    finally:
        _cleanup(p, child)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace():
    p, lp, child = _start(stubborn=True)
    try:
        t = time.monotonic()
        assert stop_server(lp, grace=0.5) == "killed (KILL after grace)"
        assert time.monotonic() - t >= 0.5
        assert not _alive(child)
    finally:
        _cleanup(p, child)


def test_a_signalled_process_counts_until_it_has_exited_even_unproven():
    """A process on its way out can no longer show its launch token (its memory goes first), so
    the stops wait on what they signalled by its own identity (pid and start time), not only on
    what can still be proven theirs: gone once it exits, and a pid with another start time is
    another process."""
    fs = local_procfs()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        start = fs["stat"](sleeper.pid)["starttime"]
        no_leader = (2**22 + 1, 2**22 + 1, 0, "t" * 32)  # a group nobody is in: no members
        assert fs["members"](*no_leader) == {}
        assert fs["remaining"](*no_leader, {sleeper.pid: start}) == {sleeper.pid: start}
        assert fs["remaining"](*no_leader, {sleeper.pid: start + 1}) == {}
        sleeper.kill()
        sleeper.wait(10)
        assert fs["remaining"](*no_leader, {sleeper.pid: start}) == {}
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait(10)
