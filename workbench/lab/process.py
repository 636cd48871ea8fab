"""Start and stop the lab server as a local process (for the demo, tests and the facade).

``start_server(target, draft=None, port=None, ...) -> LabProcess`` launches
``python -m workbench.lab.serve`` in its own session (so its group can be signalled), logging to a
file, and waits for the ready line; it records the process's identity (pid, start time) and puts a
launch token in its environment. ``stop_server(proc)`` signals only processes proven to be that
server's, the way a server's stop does (``workbench.servers.host_scripts``): SIGTERM, a grace, then
SIGKILL. ``free_port()`` picks an unused loopback port, never one this process picked before.
"""

from __future__ import annotations

import itertools
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.results import Result
from workbench.servers.host_scripts import local_procfs

READY = "The server is fired up and ready to roll!"
VLLM_READY = "Application startup complete."  # vLLM's surface: uvicorn's line once the API server is up


@dataclass
class LabProcess(Result):
    pid: int
    pgid: int
    host: str
    port: int
    log_path: str
    argv: list[str] = field(default_factory=list)
    ready: bool = False
    returncode: int | None = None
    starttime: int | None = None  # clock ticks since boot (/proc/PID/stat): the pid's identity
    token: str | None = None  # in its environment: proves its children its own

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


# Ports this process has handed out. The kernel may offer a port again as soon as the probing
# socket closes, before the server it was meant for has bound it: two servers started back to back
# would then share a port (and a log named after it).
_HANDED_OUT: set[int] = set()
_HANDED_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1", attempts: int = 64) -> int:
    """A port free on ``host`` now that this process has not handed out before."""
    with _HANDED_LOCK:
        for _ in range(attempts):
            with socket.socket() as s:
                s.bind((host, 0))
                port: int = s.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
    raise WorkbenchError(f"no free port on {host} after {attempts} tries that this process had not used")


def server_argv(
    target: str | os.PathLike[str],
    draft: str | os.PathLike[str] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 30000,
    steps: int = 3,
    topk: int = 1,
    draft_tokens: int | None = None,
    extra: Iterable[object] = (),
) -> list[str]:
    argv = ["--model-path", str(target), "--host", host, "--port", str(port)]
    if draft is not None:
        argv += [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            str(draft),
            "--speculative-num-steps",
            str(steps),
            "--speculative-eagle-topk",
            str(topk),
            "--speculative-num-draft-tokens",
            str(draft_tokens or steps + 1),
        ]
    return argv + [str(x) for x in extra]


def new_log_path(stem: str, folder: str | os.PathLike[str] | None = None) -> Path:
    """A log file of its own (created empty): ``{folder or $TMPDIR}/{stem}-XXXXXXXX.log``. Named only
    after the port, a later server given the same port would overwrite a log still being read."""
    d = Path(folder or tempfile.gettempdir())
    d.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix=f"{stem}-", suffix=".log", dir=d)
    os.close(fd)
    return Path(path)


def start_server(
    target: str | os.PathLike[str],
    draft: str | os.PathLike[str] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    log_path: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    extra: Iterable[object] = (),
    steps: int = 3,
    wait: bool = True,
    timeout: float = 120.0,
    python: str | None = None,
) -> LabProcess:
    port = port or free_port(host)
    argv = server_argv(target, draft, host=host, port=port, steps=steps, extra=extra)
    log_path = Path(log_path) if log_path else new_log_path(f"lab-server-{port}")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    full_env["PYTHONPATH"] = root + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
    full_env.update(env or {})
    token = secrets.token_hex(16)
    full_env[local_procfs()["TOKEN_VAR"].decode().rstrip("=")] = token
    cmd = [python or sys.executable, "-m", "workbench.lab.serve", *argv]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
    st = local_procfs()["stat"](proc.pid)  # our child: its pid cannot be reused before we reap it
    lp = LabProcess(
        proc.pid, proc.pid, host, port, str(log_path), cmd, starttime=st["starttime"] if st else None, token=token
    )
    lp._popen = proc  # type: ignore[attr-defined]
    if wait:
        wait_ready(lp, timeout)
    return lp


def wait_ready(lp: LabProcess, timeout: float = 120.0) -> LabProcess:
    """Poll the log for the ready line; stop early if the process exits."""
    deadline = time.time() + timeout
    proc = getattr(lp, "_popen", None)
    argv = [str(a) for a in lp.argv]
    vllm = any(a == "--lab-engine" and b.startswith("vllm") for a, b in itertools.pairwise(argv))
    ready = VLLM_READY if vllm else READY
    while time.time() < deadline:
        text = Path(lp.log_path).read_text(errors="replace") if Path(lp.log_path).exists() else ""
        if ready in text:
            lp.ready = True
            return lp
        rc = proc.poll() if proc is not None else (None if _alive(lp.pid) else -1)
        if rc is not None:
            lp.returncode = rc
            return lp
        time.sleep(0.2)
    raise WorkbenchError(f"lab server on port {lp.port} not ready after {timeout:.0f} s (log {lp.log_path})")


def wait_exit(lp: LabProcess, timeout: float = 60.0) -> int | None:
    proc = getattr(lp, "_popen", None)
    deadline = time.time() + timeout
    while time.time() < deadline:
        rc = proc.poll() if proc is not None else (None if _alive(lp.pid) else -1)
        if rc is not None:
            lp.returncode = rc
            return rc
        time.sleep(0.1)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> bool:
    """Reap ``pid`` if it is our exited child; True when it was."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return False


def stop_server(
    proc: LabProcess | int,
    pgid: int | None = None,
    grace: float = 5.0,
    *,
    starttime: int | None = None,
    token: str | None = None,
) -> str:
    """SIGTERM the server's processes, wait ``grace`` seconds, then SIGKILL. Returns what it did.

    Only processes proven to be the server's are signalled: the leader by its recorded (pid, start
    time), the others by being in its group and session, started after it, while it lives or with its
    launch token (``host_scripts._PROCFS``, the server stop's own readers). A pid whose start time
    differs is another process now: nothing is sent. A live pid without a recorded start time is refused.
    """
    if isinstance(proc, LabProcess):
        pid, pgid, starttime, token = proc.pid, proc.pgid, proc.starttime, proc.token
    else:
        pid = int(proc)
    pgid = pgid or pid
    fs = local_procfs()
    st = fs["stat"](pid)
    if st is None or st["state"] in ("Z", "X"):
        _reap(pid)
        return "not running"
    if starttime is None:
        raise WorkbenchError(f"pid {pid}: no start time recorded for it; not signalled")
    if st["starttime"] != starttime:
        return "not running"  # the pid belongs to another process now
    signalled = {
        p: t for p, t in fs["members"](pid, pgid, starttime, token).items() if fs["send"](p, t, signal.SIGTERM)
    }
    if not signalled:
        return "not running"
    # stopped once every process signalled has exited, not merely once none can be proven ours:
    # one on its way out no longer shows its launch token
    deadline = time.time() + grace
    while time.time() < deadline:
        _reap(pid)
        mine = fs["remaining"](pid, pgid, starttime, token, signalled)
        if not mine:
            return "stopped (TERM)"
        time.sleep(0.1)
    for p, t in mine.items():
        if fs["send"](p, t, signal.SIGKILL):
            signalled[p] = t
    until = time.time() + 10
    while time.time() < until:
        _reap(pid)
        if not fs["remaining"](pid, pgid, starttime, token, signalled):
            break
        time.sleep(0.05)
    return "killed (KILL after grace)"
