"""What runs on a SLURM cluster for the workbench, as plain source (the host's python runs it, one
JSON object out): on the login node the checks, the status and the stop of jobs; inside a job, the
batch step (on the job's first node) and each rank's task.

Nothing here imitates SLURM: every question goes to its client commands (``scontrol``, ``sinfo``,
``squeue``'s controller), every signal through ``scancel``, every rank is a task ``srun`` starts.
"""

from __future__ import annotations

# Shared by the login-node scripts: run a client command with the cluster's environment, parse
# ``scontrol -o`` records (KEY=VALUE words; a value may hold spaces only in the last fields).
_CLIENT = r"""
def client(*argv, timeout=30):
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=ENV)
    except FileNotFoundError:
        return 127, "", "%s: not found" % argv[0]
    except subprocess.TimeoutExpired:
        return 124, "", "%s did not answer within %d s" % (argv[0], timeout)
    return p.returncode, p.stdout, p.stderr
def record(line):
    out, key = {}, None
    for word in line.split():
        k, eq, v = word.partition("=")
        if eq and k and k[0].isalpha() and "/" not in k[:1]:
            out[k] = v; key = k
        elif key is not None:
            out[key] += " " + word
    return out
def job(job_id):
    rc, out, err = client("scontrol", "show", "job", "-o", str(job_id))
    if rc != 0:
        return {"missing": True, "error": (err or out).strip()[-300:]}
    line = out.strip().splitlines()[0] if out.strip() else ""
    return record(line)
"""

# -- checks before a launch: the client commands, the controller, the partition's nodes -----------
CHECK = (
    r"""
import json, os, shutil, subprocess, sys, time
req = json.loads(sys.argv[1])
ENV = dict(os.environ); ENV.update(req.get("env") or {})
"""
    + _CLIENT
    + r"""
res = {"missing": [c for c in req["commands"] if shutil.which(c, path=ENV.get("PATH")) is None]}
if not res["missing"]:
    rc, out, err = client("scontrol", "ping", timeout=20)
    res["ping"] = {"rc": rc, "text": (out + err).strip()[-300:]}
    rc, out, err = client("sinfo", "-h", "-o", "%P|%D|%a", timeout=20)
    res["partitions"] = {"rc": rc, "rows": out.split(), "err": err.strip()[-300:]}
print(json.dumps(res))
"""
)

# -- status of jobs on the login node: the job, its nodes, its output and each rank's log and identity
STATUS = (
    r"""
import base64, json, os, shutil, subprocess, sys, time
req = json.loads(sys.argv[1])
ENV = dict(os.environ); ENV.update(req.get("env") or {})
"""
    + _CLIENT
    + r"""
def home(p):
    return os.path.expanduser(p) if p.startswith("~/") else p
def chunk(path, off, cap):
    path = home(path)
    try:
        size = os.path.getsize(path)
    except OSError:
        return {"size": None}
    if size < off:
        off = 0
    with open(path, "rb") as fh:
        fh.seek(off)
        data = fh.read(min(size - off, cap))
    return {"size": size, "offset": off, "data": base64.b64encode(data).decode()}
out = {"jobs": []}
for s in req["jobs"]:
    row = {"id": s["id"], "job": job(s["job_id"]) if s.get("job_id") else {"missing": True}}
    nodes = row["job"].get("NodeList")
    if nodes and nodes != "(null)":
        rc, names, _ = client("scontrol", "show", "hostnames", nodes)
        row["nodes"] = names.split() if rc == 0 else []
        rc, info, _ = client("sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%t|%E")
        row["node_states"] = [l.split("|", 2) for l in info.splitlines() if l.count("|") == 2] if rc == 0 else []
    row["out"] = chunk(s["out"], int(s.get("out_offset", 0)), int(s.get("cap", 1 << 20)))
    row["ranks"] = []
    for r in s["ranks"]:
        rr = {"rank": r["rank"], "log": chunk(r["log"], int(r.get("offset", 0)), int(r.get("cap", 1 << 22)))}
        try:
            with open(home(r["ident"])) as fh:
                rr["ident"] = json.load(fh)
        except (OSError, ValueError):
            rr["ident"] = None
        if r.get("health") and rr["ident"] and rr["ident"].get("addr"):
            import urllib.error, urllib.request
            try:
                with urllib.request.urlopen("http://%s:%d%s" % (rr["ident"]["addr"], r["port"], r["health"]),
                                            timeout=3) as h:
                    rr["health"] = h.status
            except urllib.error.HTTPError as e:
                rr["health"] = e.code
            except Exception:
                rr["health"] = None
        row["ranks"].append(rr)
    out["jobs"].append(row)
print(json.dumps(out))
"""
)

# -- stop a job: its identity (the launch token in its comment) checked, then SIGTERM to its steps
# (the ranks), the grace, then scancel (SLURM's SIGTERM and, KillWait later, SIGKILL), until it ends
STOP = (
    r"""
import json, os, shutil, subprocess, sys, time
req = json.loads(sys.argv[1])
ENV = dict(os.environ); ENV.update(req.get("env") or {})
"""
    + _CLIENT
    + r"""
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
         "OUT_OF_MEMORY")
def state(j):
    return (j.get("JobState") or "").split()[0] if not j.get("missing") else None
jid = str(req["job_id"])
res = {"job_id": jid, "signals": [], "remaining": []}
j = job(jid)
t0 = time.time()
if j.get("missing"):
    res.update(result="already-gone", reason=j.get("error"))
elif j.get("Comment") != req["token"]:
    res.update(result="refused", reason="job %s is not this server's (its comment is %r)" % (jid, j.get("Comment")))
elif state(j) in FINAL:
    res.update(result="already-gone", job_state=state(j))
else:
    def wait(seconds):
        deadline = time.time() + seconds
        while True:
            s = state(job(jid))
            if s in FINAL or s is None or time.time() > deadline:
                return s
            time.sleep(0.2)
    s = state(j)
    if s not in ("PENDING", "CONFIGURING", "SUSPENDED") and req["grace"] > 0:
        rc, out, err = client("scancel", "--signal=TERM", jid)
        res["signals"].append("TERM")
        s = wait(req["grace"])
    if s not in FINAL and s is not None:
        rc, out, err = client("scancel", jid)
        res["signals"].append("KILL")
        if rc != 0:
            res["scancel"] = (err or out).strip()[-300:]
        s = wait(req["kill_wait"])
    res["job_state"] = s
    res["result"] = "stopped" if s in FINAL or s is None else "survivors"
    if res["result"] == "survivors":
        res["remaining"] = [jid]
res["elapsed"] = round(time.time() - t0, 3)
print(json.dumps(res))
"""
)

# -- the batch step, on the job's first node: rank 0's address (SLURM's NodeAddr of the node) and a
# port free there, then srun starts one task per node and this step becomes it (its exit status is
# the job's: a failed rank fails the job)
BATCH = r"""
import json, os, socket, subprocess, sys
req = json.loads(sys.argv[1])
names = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]],
                       capture_output=True, text=True, check=True).stdout.split()
node = subprocess.run(["scontrol", "show", "node", "-o", names[0]], capture_output=True, text=True,
                      check=True).stdout
addr = next((w.split("=", 1)[1] for w in node.split() if w.startswith("NodeAddr=")), names[0])
with socket.socket() as s:
    s.bind(("", 0))
    port = s.getsockname()[1]
req.update(addr=addr, port=port)
print("eagle-workbench: rank 0 on %s (%s), rendezvous port %d" % (names[0], addr, port), flush=True)
n = str(len(req["ranks"]))
os.execvp("srun", ["srun", "--kill-on-bad-exit=1", "--nodes", n, "--ntasks", n, "--ntasks-per-node=1",
                   req["python"], "-c", req["rank_script"], json.dumps(req)])
"""

# -- one rank, a task of the step: its command with the rendezvous filled in, its identity written
# where the login node reads it, then it becomes the engine (same process: SLURM tracks and signals
# it), its output in the rank's own log
RANK = r"""
import json, os, signal, sys
req = json.loads(sys.argv[1])
rank = int(os.environ["SLURM_NODEID"])
rc = req["ranks"][rank]
argv = list(rc["argv"])
for i in rc["subst"]:
    argv[i] = argv[i].replace(req["addr_mark"], req["addr"]).replace(req["port_mark"], str(req["port"]))
def home(p):
    return os.path.expanduser(p) if p.startswith("~/") else p
argv = [home(a) for a in argv]
log = home(rc["log"])
os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
def stat(pid):
    s = open("/proc/%d/stat" % pid).read()
    r = s.rsplit(")", 1)[1].split()
    return {"state": r[0], "ppid": int(r[1]), "pgid": int(r[2]), "sid": int(r[3]), "starttime": int(r[19])}
ident = {"rank": rank, "pid": os.getpid(), "stat": stat(os.getpid()), "node": os.environ.get("SLURMD_NODENAME"),
         "addr": req["addr"] if rank == 0 else None, "port": req["port"],
         "boot_id": open("/proc/sys/kernel/random/boot_id").read().strip(), "argv": argv}
tmp = home(rc["ident"]) + ".tmp"
with open(tmp, "w") as fh:
    json.dump(ident, fh)
os.replace(tmp, home(rc["ident"]))
env = dict(os.environ)
env.update(req.get("env") or {})
env["EAGLE_WORKBENCH_LAUNCH"] = req["token"]
if req.get("run_dir"):
    os.chdir(home(req["run_dir"]))
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.dup2(fd, 1); os.dup2(fd, 2); os.close(fd)
for name in ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGPIPE"):
    signal.signal(getattr(signal, name), signal.SIG_DFL)
try:
    os.execvpe(argv[0], argv, env)
except OSError as e:
    sys.stderr.write("cannot start %s: %s\n" % (argv[0], e.strerror or e)); sys.exit(127)
"""
