"""Small programs the workbench runs on a host, each in one round trip.

They run under the host's own python (``python -c SCRIPT JSON``) so they need nothing installed
but the python that runs SGLang, and they print one JSON object. They are kept as plain source
here (not imported by the workbench itself).
"""

from __future__ import annotations

import json
import shlex
from typing import Optional

# -- SGLang version and argument validation with the host's own parser ------------------------------
PROBE = r'''
import contextlib, importlib.util, io, json, os, sys
req = json.loads(sys.argv[1])
out = {"python": sys.executable, "python_version": sys.version.split()[0]}
try:
    import importlib.metadata as md
    out["version"] = md.version("sglang")
except Exception:
    out["version"] = None
if req.get("argv") is not None and out["version"]:
    if importlib.util.find_spec("triton") is None:
        # SGLang imports triton at top level; without it, use SGLang's own stub, loaded by path
        # (importing sglang._platform_stubs would run sglang/__init__ first).
        spec = importlib.util.find_spec("sglang")
        path = os.path.join(os.path.dirname(spec.origin), "_platform_stubs.py")
        if os.path.exists(path):
            s = importlib.util.spec_from_file_location("_wb_sgl_stubs", path)
            m = importlib.util.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m)
            sys.meta_path.insert(0, m._TritonFinder()); m._make_mock("triton")
            out["triton"] = "stub"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            from sglang.srt.server_args import prepare_server_args
            sa = prepare_server_args(req["argv"])
        out["ok"] = True
        keys = req.get("keys") or []
        out["args"] = {k: getattr(sa, k, None) for k in keys}
    except SystemExit:
        lines = [l for l in err.getvalue().strip().splitlines() if l.strip()]
        out["ok"] = False
        out["error"] = lines[-1] if lines else "the parser rejected the arguments"
    except BaseException as e:
        out["ok"] = False
        out["error"] = (type(e).__name__ + ": " + str(e)).strip()
print(json.dumps(out, default=str))
'''

# -- identity of a process: pid, group, session, start time (clock ticks since boot), boot id -----
IDENTITY = r'''
import json, os, sys, time
pid = int(sys.argv[1]); deadline = time.time() + 3
def stat(pid):
    try:
        s = open("/proc/%d/stat" % pid).read()
    except OSError:
        return None
    r = s.rsplit(")", 1)[1].split()
    return {"state": r[0], "ppid": int(r[1]), "pgid": int(r[2]), "sid": int(r[3]), "starttime": int(r[19])}
st = stat(pid)
while st and st["pgid"] != pid and st["state"] != "Z" and time.time() < deadline:
    time.sleep(0.02); st = stat(pid)   # setsid has not run yet
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
print(json.dumps({"pid": pid, "stat": st, "boot_id": boot, "clk_tck": os.sysconf("SC_CLK_TCK")}))
'''

# /proc readers shared by the status and stop scripts: a process's state and identity, and the live
# members of a server's group (same group and session, started no earlier than the server)
_PROCFS = r'''
def stat(pid):
    try:
        s = open("/proc/%d/stat" % pid).read()
    except OSError:
        return None
    r = s.rsplit(")", 1)[1].split()
    return {"state": r[0], "pgid": int(r[2]), "sid": int(r[3]), "starttime": int(r[19])}
def members(pgid, start):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = stat(int(d))
            if st and st["pgid"] == pgid and st["sid"] == pgid and st["starttime"] >= start \
                    and st["state"] not in ("Z", "X"):
                out.append(int(d))
    return out
'''

# -- status of all servers on a host + GPUs, in one round trip -------------------------------------
STATUS = r'''
import base64, json, os, subprocess, sys
req = json.loads(sys.argv[1])
''' + _PROCFS + r'''
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
    if state in ("gone", "zombie") and s.get("pgid") and s.get("starttime") is not None \
            and s.get("boot_id") in (None, boot):
        # the leader is dead; its children (same group and session, started no earlier) may live on
        row["leftover"] = members(s["pgid"], s["starttime"])
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
'''

# -- stop: identity re-check, TERM the group, grace, KILL, confirm all gone ---------------------------
STOP = r'''
import json, os, signal, sys, time
req = json.loads(sys.argv[1])
pid, pgid, start = req["pid"], req["pgid"], req["starttime"]
''' + _PROCFS + r'''
boot = open("/proc/sys/kernel/random/boot_id").read().strip()
lead = stat(pid)
res = {"pid": pid, "pgid": pgid, "signals": []}
if req.get("boot_id") and req["boot_id"] != boot:
    res.update(result="already-gone", reason="the host rebooted since the launch")
    print(json.dumps(res)); sys.exit(0)
if lead is not None and lead["starttime"] != start:
    res.update(result="refused", reason="pid %d now belongs to another process (start time %d, recorded %d)"
               % (pid, lead["starttime"], start))
    print(json.dumps(res)); sys.exit(0)
if lead is not None and lead["state"] not in ("Z", "X") and (lead["pgid"] != pgid or lead["sid"] != pgid):
    res.update(result="refused", reason="pid %d is no longer the leader of group %d" % (pid, pgid))
    print(json.dumps(res)); sys.exit(0)
if not members(pgid, start):
    res.update(result="already-gone"); print(json.dumps(res)); sys.exit(0)
t0 = time.time()
def signal_group(sig):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
signal_group(signal.SIGTERM); res["signals"].append("TERM")
while members(pgid, start) and time.time() - t0 < req.get("grace", 30):
    time.sleep(0.1)
if members(pgid, start):
    signal_group(signal.SIGKILL); res["signals"].append("KILL")
    t1 = time.time()
    while members(pgid, start) and time.time() - t1 < req.get("kill_wait", 10):
        time.sleep(0.1)
left = members(pgid, start)
res.update(result="stopped" if not left else "survivors", remaining=left, elapsed=round(time.time() - t0, 3))
print(json.dumps(res))
'''


def launch_line(python: str, argv: list, env: dict, log: str, run_dir: Optional[str]) -> list:
    """argv for the host: a shell that starts the server detached (new session, no terminal, all
    output in the log, the previous log kept as .prev) and prints its identity."""
    from workbench.hosts.base import command_line, quote_arg

    log_dir = log.rsplit("/", 1)[0] if "/" in log else "."
    server = command_line(argv, env)
    q = quote_arg
    script = (f"mkdir -p {q(log_dir)} || exit 97; "
              + (f"cd {q(run_dir)} || exit 98; " if run_dir else "")
              + f"if [ -f {q(log)} ]; then mv -f {q(log)} {q(log + '.prev')}; fi; "
              + f"setsid nohup {server} > {q(log)} 2>&1 < /dev/null & "
              + f"exec {q(python)} -c {shlex.quote(IDENTITY)} $!")
    return ["sh", "-c", script]


def as_arg(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))
