"""Small programs the workbench runs on a host, each in one round trip, for servers of any engine.

They run under the host's own python (``python -c SCRIPT JSON``) so they need nothing installed
but the python that runs the engine, and they print one JSON object. They are kept as plain source
here (not imported by the workbench itself). Each engine's own probe (its version and argument
parser) is in its package (``workbench.sglang.probe``, ``workbench.vllm.probe``).
"""

from __future__ import annotations

import functools
import json
import os
import signal
from typing import Any

# One /proc/PID/stat reader, spliced into every host script that reads a process's identity.
_STAT = r"""
def stat(pid):
    try:
        s = open("/proc/%d/stat" % pid).read()
    except OSError:
        return None
    r = s.rsplit(")", 1)[1].split()
    return {"state": r[0], "ppid": int(r[1]), "pgid": int(r[2]), "sid": int(r[3]), "starttime": int(r[19])}
"""

# -- identity of a process: pid, group, session, start time (clock ticks since boot), boot id -----
IDENTITY = (
    r"""
import json, os, sys, time
pid = int(sys.argv[1]); deadline = time.time() + 3
"""
    + _STAT
    + r"""
st = stat(pid)
while st and st["pgid"] != pid and st["state"] != "Z" and time.time() < deadline:
    time.sleep(0.02); st = stat(pid)   # setsid has not run yet
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
print(json.dumps({"pid": pid, "stat": st, "boot_id": boot, "clk_tck": os.sysconf("SC_CLK_TCK")}))
"""
)

# /proc readers shared by the status and stop scripts. A process is the server's only when it is
# proven so: the leader by (pid, start time); any other process by being in the server's group and
# session, started no earlier than the leader, AND carrying the launch token the workbench put in the
# server's environment (/proc/PID/environ). Group and session ids alone prove nothing once the leader
# is gone: its pid (and so that group id) can belong to a new session leader whose children live on.
# Signals go through a pidfd opened before the identity is checked again, so a pid that is reused
# between the check and the signal is never hit.
_PROCFS = (
    r"""
"""
    + _STAT
    + r"""
TOKEN_VAR = b"EAGLE_WORKBENCH_LAUNCH="
def has_token(pid, token):
    if not token:
        return False
    try:
        env = open("/proc/%d/environ" % pid, "rb").read()
    except OSError:
        return False
    return (TOKEN_VAR + token.encode()) in env.split(b"\0")
def leader_alive(pid, start):
    st = stat(pid)
    return st is not None and st["starttime"] == start and st["state"] not in ("Z", "X")
def members(pid, pgid, start, token):
    # {pid: starttime} of the live processes proven to be the server's
    alive = leader_alive(pid, start)
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        p = int(d)
        st = stat(p)
        if st is None or st["state"] in ("Z", "X"):
            continue
        if p == pid:
            if st["starttime"] == start:
                out[p] = st["starttime"]
            continue
        if st["pgid"] != pgid or st["sid"] != pgid or st["starttime"] < start:
            continue
        # while the leader lives its group cannot be anybody else's (a pid in use as a group id is
        # never handed out again); once it is gone only the launch token proves a process ours
        if alive or has_token(p, token):
            out[p] = st["starttime"]
    return out
def remaining(pid, pgid, start, token, signalled):
    # the members, and the processes signalled ({pid: starttime}) that have not exited yet: one on
    # its way out can no longer show its launch token (its memory goes first), but is ours till gone
    out = members(pid, pgid, start, token)
    for p, t in signalled.items():
        st = stat(p)
        if st is not None and st["starttime"] == t and st["state"] not in ("Z", "X"):
            out[p] = t
    return out
def unproven(pid, pgid, start, token):
    # processes in the recorded group and session that are NOT proven ours (reported, never signalled)
    mine = members(pid, pgid, start, token)
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) not in mine:
            st = stat(int(d))
            if st and st["pgid"] == pgid and st["sid"] == pgid and st["state"] not in ("Z", "X"):
                out.append(int(d))
    return out
def send(p, starttime, sig):
    # signal p only if it is still the process whose start time we checked
    fd = None
    try:
        fd = os.pidfd_open(p)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):
        fd = None                       # no pidfd (old kernel): re-check, then kill
    try:
        st = stat(p)
        if st is None or st["starttime"] != starttime:
            return False
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(p, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd is not None:
            os.close(fd)
"""
)

# -- status of all servers on a host + GPUs, in one round trip -------------------------------------
STATUS = (
    r"""
import base64, json, os, signal, subprocess, sys
req = json.loads(sys.argv[1])
"""
    + _PROCFS
    + r"""
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
uptime = float(open("/proc/uptime").read().split()[0])
tck = os.sysconf("SC_CLK_TCK")
out = {"boot_id": boot, "uptime": uptime, "servers": []}
for s in req.get("servers", []):
    st = stat(s["pid"]) if s.get("pid") else None
    if st is None or s.get("boot_id") not in (None, boot):
        state = "gone"
    elif s.get("starttime") is not None and st["starttime"] != s["starttime"]:
        state = "replaced"          # the pid now belongs to another process
    elif st["state"] in ("Z", "X"):
        state = "zombie"            # dead, not yet reaped: kill -0 would lie
    else:
        state = "running"
    row = {"id": s["id"], "state": state, "proc_state": st and st["state"],
           "age_s": (uptime - st["starttime"] / tck) if st and state == "running" else None}
    if s.get("health") and state == "running":
        # the engine's health route, asked on the host itself (readiness for engines read by it)
        import urllib.error, urllib.request
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (s["port"], s["health"]), timeout=3) as r:
                row["health"] = r.status
        except urllib.error.HTTPError as e:
            row["health"] = e.code
        except Exception:
            row["health"] = None    # not listening yet
    if state in ("gone", "zombie") and s.get("pgid") and s.get("starttime") is not None \
            and s.get("boot_id") in (None, boot):
        # the leader is dead; its children (proven by the launch token) may live on
        row["leftover"] = sorted(members(s["pid"], s["pgid"], s["starttime"], s.get("token")))
    log = s.get("log")
    if log:
        try:
            size = os.path.getsize(log)
        except OSError:
            size = None
        row["log_size"] = size
        off = int(s.get("offset", 0))
        if size is not None:
            if size < off:
                off = 0             # truncated or rotated: start again
            n = min(size - off, int(s.get("cap", 1 << 22)))
            with open(log, "rb") as fh:
                fh.seek(off)
                data = fh.read(n)
            row["offset"] = off
            row["data"] = base64.b64encode(data).decode()
    out["servers"].append(row)
if req.get("gpus", True):
    q = ["nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu",
         "--format=csv,noheader,nounits"]
    try:
        p = subprocess.run(q, capture_output=True, text=True, timeout=15)
        out["gpus"] = {"rc": p.returncode, "csv": p.stdout, "err": p.stderr.strip()[-300:]}
    except FileNotFoundError:
        out["gpus"] = {"rc": 127, "csv": "", "err": "nvidia-smi not found"}
    except subprocess.TimeoutExpired:
        out["gpus"] = {"rc": 124, "csv": "", "err": "nvidia-smi timed out"}
print(json.dumps(out))
"""
)

# -- stop: identity re-check, TERM the proven members, grace, KILL, confirm all gone -----------------
STOP = (
    r"""
import json, os, signal, sys, time
req = json.loads(sys.argv[1])
pid, pgid, start, token = req["pid"], req["pgid"], req["starttime"], req.get("token")
"""
    + _PROCFS
    + r"""
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
lead = stat(pid)
res = {"pid": pid, "pgid": pgid, "signals": [], "signalled": []}
if req.get("boot_id") and req["boot_id"] != boot:
    res.update(result="already-gone", reason="the host rebooted since the launch")
    print(json.dumps(res)); sys.exit(0)
if lead is not None and lead["starttime"] != start and lead["state"] not in ("Z", "X"):
    res.update(result="refused", reason="pid %d now belongs to another process (start time %d, recorded %d)"
               % (pid, lead["starttime"], start))
    res["unproven"] = unproven(pid, pgid, start, token)
    print(json.dumps(res)); sys.exit(0)
if lead is not None and lead["starttime"] == start and lead["state"] not in ("Z", "X") \
        and (lead["pgid"] != pgid or lead["sid"] != pgid):
    res.update(result="refused", reason="pid %d is no longer the leader of group %d" % (pid, pgid))
    print(json.dumps(res)); sys.exit(0)
grace, kill_wait = float(req.get("grace", 30)), float(req.get("kill_wait", 10))
mine = members(pid, pgid, start, token)
res["unproven"] = unproven(pid, pgid, start, token)
if not mine:
    res.update(result="already-gone"); print(json.dumps(res)); sys.exit(0)
t0 = time.time()
known = {}
def left_now():
    return remaining(pid, pgid, start, token, known)
def signal_all(sig):
    # each proven member by its own identity; a member found later (a child forked meanwhile) too
    for p, st in left_now().items():
        if send(p, st, sig):
            known[p] = st
            if p not in res["signalled"]:
                res["signalled"].append(p)
signal_all(signal.SIGTERM); res["signals"].append("TERM")
while left_now() and time.time() - t0 < grace:
    time.sleep(0.1)
if left_now():
    signal_all(signal.SIGKILL); res["signals"].append("KILL")
    t1 = time.time()
    while left_now() and time.time() - t1 < kill_wait:
        time.sleep(0.1)
left = sorted(left_now())
res.update(result="stopped" if not left else "survivors", remaining=left, elapsed=round(time.time() - t0, 3))
print(json.dumps(res))
"""
)


# -- launch: the server detached (own session, no terminal, default signal dispositions) -------------
# Started by python rather than ``sh -c '... nohup ... &'``: a non-interactive shell starts background
# jobs with SIGINT and SIGQUIT ignored and nohup ignores SIGHUP, and ignored signals survive exec, so
# SGLang could not be interrupted. Here the child gets every disposition back to default and an empty
# signal mask, a new session (setsid), stdin from /dev/null and its output in the log; the launch
# token in its environment is what later proves its children ours.
LAUNCH = (
    r"""
import json, os, signal, subprocess, sys, time
req = json.loads(sys.argv[1])
def home(a):
    return os.path.expanduser(a) if a.startswith("~/") else a
argv = [home(a) for a in req["argv"]]
log = home(req["log"])
try:
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
except OSError as e:
    sys.stderr.write("cannot create the log folder of %s: %s\n" % (log, e.strerror)); sys.exit(97)
if req.get("run_dir"):
    try:
        os.chdir(home(req["run_dir"]))
    except OSError as e:
        sys.stderr.write("cannot enter %s: %s\n" % (req["run_dir"], e.strerror)); sys.exit(98)
if os.path.exists(log):
    os.replace(log, log + ".prev")
env = dict(os.environ)
env.update(req.get("env") or {})
if req.get("token"):
    env["EAGLE_WORKBENCH_LAUNCH"] = req["token"]
def defaults():
    for name in ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGPIPE", "SIGXFSZ", "SIGTSTP", "SIGTTIN",
                 "SIGTTOU", "SIGUSR1", "SIGUSR2", "SIGCHLD"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
out = open(log, "ab")
try:
    child = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True, preexec_fn=defaults, close_fds=True)
except OSError as e:
    msg = "cannot start %s: %s\n" % (argv[0], e.strerror or e)
    out.write(msg.encode()); out.close()
    sys.stderr.write(msg); sys.exit(96)
out.close()
pid = child.pid
"""
    + _STAT
    + r"""
st = stat(pid)
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
child.returncode = 0        # not ours to reap: the server outlives this launcher
print(json.dumps({"pid": pid, "stat": st, "boot_id": boot, "clk_tck": os.sysconf("SC_CLK_TCK")}))
"""
)


def launch_line(
    python: str, argv: list[Any], env: dict[str, Any], log: str, run_dir: str | None, token: str | None = None
) -> list[Any]:
    """argv for the host: the host's python starts the server detached (new session, no terminal,
    default signal dispositions, all output in the log, the previous log kept as .prev) and prints its
    identity. Arguments travel as JSON: nothing passes through a shell."""
    from workbench.hosts.base import check_argv

    check_argv(argv, env, "launch")
    return [
        python,
        "-c",
        LAUNCH,
        as_arg(
            {
                "argv": [str(a) for a in argv],
                "env": {k: str(v) for k, v in env.items()},
                "log": log,
                "run_dir": run_dir,
                "token": token,
            }
        ),
    ]


@functools.cache
def local_procfs() -> dict[str, Any]:
    """The /proc readers of the status and stop scripts (``stat``, ``members``, ``send``, ...),
    for processes on this machine: the lab server's stop proves its processes the same way."""
    ns: dict[str, Any] = {"os": os, "signal": signal}
    exec(_PROCFS, ns)  # our own source above, so both stops share one implementation
    return ns


def as_arg(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
