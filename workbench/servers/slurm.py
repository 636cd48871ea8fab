"""Servers on a SLURM cluster (``[hosts.NAME] kind = "slurm"``): SLURM is driven through its client
commands on the login node (this machine or one reached over SSH), never imitated.

A launch submits one job, ``sbatch --no-requeue`` (a lost node fails the job instead of running it
again), N nodes, one task per node (``srun``: one rank each), the launch token as the job's comment
(its identity: the stop checks it before any signal). Its batch step finds rank 0's address (the
first node's ``NodeAddr``) and a free port there, and each rank records its identity (node, pid,
start time) beside its log, one log per rank per launch, on a filesystem the login node shares with
the nodes (as SLURM's own output files are).

Status: one round trip to the login node for all of a cluster's servers: ``scontrol show job``
(state, reason, nodes), ``sinfo`` on the job's nodes (a lost one), the job's output (``srun``'s own
word on each task: ``task 1: Killed``) and each rank's log and identity. The server is measured
through rank 0's address, reached from the login node. Stop: ``scancel --signal=TERM`` (the ranks:
SGLang's ranks >= 1 ignore it and wait for rank 0's shutdown), the grace, then ``scancel``.
"""

from __future__ import annotations

import base64
import json
import re
import time
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError, WorkbenchError
from workbench.hosts import HostError
from workbench.servers import ranks, slurm_scripts
from workbench.servers.host_scripts import as_arg
from workbench.servers.registry import ServerState

if TYPE_CHECKING:
    from workbench.hosts import Hosts
    from workbench.servers.profiles import Profile
    from workbench.servers.registry import Registry, ServerRecord
    from workbench.servers.status import Recorder, Status
    from workbench.servers.stop import StopResult

COMMANDS = ("sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")
FINAL = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
)
#: srun's word on a task that ended (``srun: error: NODE: task N: Killed`` / ``Exited with exit code C``)
_TASK = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.+)$")
OUT_CAP = 1 << 20
#: job states that are SLURM's verdict on the whole job (the ranks' logs then say nothing of the cause)
_JOB_FAILURES = {
    "CANCELLED": ("cancelled", "the job was cancelled outside the workbench (scancel)"),
    "NODE_FAIL": ("node-lost", "SLURM lost a node of the job"),
    "BOOT_FAIL": ("node-lost", "a node of the job failed to boot"),
    "TIMEOUT": ("time-limit", "the job reached its time limit"),
    "DEADLINE": ("time-limit", "the job reached its deadline"),
    "PREEMPTED": ("preempted", "SLURM preempted the job"),
    "OUT_OF_MEMORY": ("oom", "a node ran out of host memory (SLURM's OOM kill)"),
}


def settings(hosts: Hosts, name: str) -> dict[str, Any]:
    t = hosts.settings(name)
    return {"partition": t.get("partition"), "sbatch_args": list(t.get("sbatch_args") or []), "env": t.get("env") or {}}


def _login_run(hosts: Hosts, name: str, script: str, req: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One of the scripts on the cluster's login node, its JSON answer."""
    login = hosts.get(name)
    res = login.run([login.python, "-c", script, as_arg(req)], timeout=timeout)
    if res.rc != 0:
        raise HostError(f"host {name}: exit {res.rc}: {(res.err.strip() or res.out.strip())[-300:]}")
    return dict(json.loads(res.out.strip().splitlines()[-1]))


def describe(hosts: Hosts, name: str) -> dict[str, Any]:
    """What the cluster's login node says (one round trip): ``missing`` client commands, the
    controller's ``ping`` (rc, text), the ``partitions`` ({name: nodes}) and the ``default`` one."""
    cfg = settings(hosts, name)
    got = _login_run(hosts, name, slurm_scripts.CHECK, {"env": cfg["env"], "commands": list(COMMANDS)}, 60)
    sizes: dict[str, int] = {}
    default = None
    parts = got.get("partitions") or {}
    for row in parts.get("rows") or []:
        pname, count, _avail = row.split("|")
        if pname.endswith("*"):
            pname = pname[:-1]
            default = pname
        sizes[pname] = sizes.get(pname, 0) + int(count)
    return {
        "missing": got.get("missing") or [],
        "ping": got.get("ping") or {},
        "sinfo": {"rc": parts.get("rc"), "err": parts.get("err")},
        "partitions": sizes,
        "default": default,
    }


def check(hosts: Hosts, profile: Profile) -> None:
    """The cluster can take the job: its client commands are there, its controller answers and the
    partition has the nodes. Each failure is one line (``InputError``)."""
    name = profile.host
    cfg = settings(hosts, name)
    got = describe(hosts, name)
    where = f"host {name} ({hosts.settings(name).get('address')})"
    if got["missing"]:
        raise InputError(f"{where}: SLURM's client commands are missing: {', '.join(got['missing'])}")
    ping = got["ping"]
    if ping.get("rc") != 0 or "DOWN" in ping.get("text", ""):
        raise InputError(f"{where}: the SLURM controller does not answer: {ping.get('text') or 'scontrol ping failed'}")
    if got["sinfo"].get("rc") != 0:
        raise InputError(f"{where}: sinfo failed: {got['sinfo'].get('err')}")
    sizes, default = got["partitions"], got["default"]
    part = cfg["partition"] or default
    if part is None or part not in sizes:
        raise InputError(
            f"{where}: no partition {cfg['partition']!r} (partitions: {', '.join(sorted(sizes)) or 'none'})"
            if cfg["partition"]
            else f"{where}: the cluster has no default partition; set partition in [hosts.{name}]"
        )
    n = profile.node_count
    if n > sizes[part]:
        where = f"workbench.toml/[profiles.{profile.name}].nodes"
        raise InputError(f"{where}: {n} nodes, but partition {part} of {name} has {sizes[part]}")


def submit(
    registry: Registry, hosts: Hosts, sid: int, profile: Profile, cmd: dict[str, Any], python: str, token: str
) -> None:
    """``sbatch`` the server's job; its id recorded, the server starting (the job may wait in the queue)."""
    from workbench.servers.launch import rank_log

    r = registry.get(sid)
    cfg = settings(hosts, profile.host)
    n = profile.node_count
    rank_rows = [
        {
            "rank": rc["rank"],
            "argv": rc["argv"],
            "subst": rc["subst"],
            "log": rank_log(_base(r.log), rc["rank"]),
            "ident": rank_ident(rank_log(_base(r.log), rc["rank"])),
        }
        for rc in cmd["ranks"]
    ]
    out = job_output(r.log)
    req = {
        "ranks": rank_rows,
        "env": {k: str(v) for k, v in cmd["env"].items()},
        "token": token,
        "run_dir": cmd.get("run_dir"),
        "python": python,
        "rank_script": slurm_scripts.RANK,
        "addr_mark": ranks.ADDR,
        "port_mark": ranks.PORT,
    }
    script = (
        "#!/bin/sh\n"
        f"# eagle-workbench server {sid} (profile {profile.name}): {n} node(s), one rank on each\n"
        f"exec {_q(python)} -c {_q(slurm_scripts.BATCH)} {_q(json.dumps(req))}\n"
    )
    argv = [
        "sbatch",
        "--parsable",
        "--no-requeue",
        f"--nodes={n}",
        "--ntasks-per-node=1",
        f"--job-name=eagle-workbench-{profile.name}",
        f"--comment={token}",
        f"--output={out}",
    ]
    if cfg["partition"]:
        argv.append(f"--partition={cfg['partition']}")
    if cmd.get("run_dir"):
        argv.append(f"--chdir={cmd['run_dir']}")
    argv += cfg["sbatch_args"]
    login = hosts.get(profile.host)
    registry.set(
        sid,
        extra={
            "slurm": {"job_id": None, "output": out, "partition": cfg["partition"]},
            "ranks": [
                {"rank": x["rank"], "host": profile.host, "log": x["log"], "ident": x["ident"]} for x in rank_rows
            ],
        },
    )
    try:
        folder = out.rsplit("/", 1)[0] if "/" in out else "."
        mk = login.run(["mkdir", "-p", folder], timeout=30)
        if mk.rc != 0:
            raise WorkbenchError(f"cannot create the log folder {folder}: {mk.err.strip()[-200:]}")
        res = login.run(argv, env=cfg["env"], input=script.encode(), timeout=60)
        if res.rc != 0:
            raise WorkbenchError(f"sbatch exit {res.rc}: {(res.err.strip() or res.out.strip())[-300:]}")
        job_id = res.out.strip().split(";")[0]
        if not job_id.isdigit():
            raise WorkbenchError(f"sbatch printed no job id: {res.out.strip()[-200:]!r}")
    except (WorkbenchError, HostError) as exc:
        registry.set(
            sid, state=ServerState.FAILED, extra={"failure": {"class": "launch", "text": str(exc)}}, stopped=time.time()
        )
        raise WorkbenchError(f"profile {profile.name}: not submitted to {profile.host}: {exc}") from None
    registry.set(
        sid,
        state=ServerState.STARTING,
        extra={"slurm": {"job_id": job_id, "output": out, "partition": cfg["partition"], "submitted": time.time()}},
    )


def _q(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _base(rank0_log: str) -> str:
    """The launch's log name before the rank (``x.7-ab.rank0.log`` -> ``x.7-ab.log``)."""
    return re.sub(r"\.rank0(\.[^./]*)?$", lambda m: m.group(1) or "", rank0_log)


def rank_ident(log: str) -> str:
    """Where a rank records its identity: beside its log."""
    return log + ".json"


def job_output(rank0_log: str) -> str:
    """The job's own output (the batch step and srun's messages), beside the ranks' logs."""
    import os

    stem, _ = os.path.splitext(_base(rank0_log))
    return stem + ".job.out"


def ask(status: Status, host_name: str, sids: list[int]) -> dict[int, tuple[dict[str, Any], dict[int, dict[str, Any]]]]:
    """One status round trip to a cluster's login node for its servers: per server the job and a row
    per rank (process, node, SLURM's word on its task), each rank's new log bytes fed to its
    follower, rank identities recorded once they appear."""
    from workbench.logs.follower import READ_CAP
    from workbench.servers.engines import engine
    from workbench.servers.registry import RUNNING, failed_alive

    cfg = settings(status.hosts, host_name)
    jobs_req = []
    recs = {}
    for sid in sids:
        r = status.registry.get(sid)
        recs[sid] = r
        sl = r.extra.get("slurm") or {}
        eng = engine(r.extra.get("engine"))
        live = r.state in RUNNING or failed_alive(r)
        jobs_req.append(
            {
                "id": sid,
                "job_id": sl.get("job_id"),
                "out": sl.get("output") or job_output(r.log),
                "out_offset": status.slurm_out.get(sid, ("", 0))[1],
                "cap": OUT_CAP,
                "ranks": [
                    {
                        "rank": x["rank"],
                        "log": x["log"],
                        "ident": x.get("ident") or rank_ident(x["log"]),
                        "offset": status.follower(sid, int(x["rank"])).offset,
                        "cap": READ_CAP,
                        **(
                            {"health": eng.health_path, "port": r.port}
                            if eng.health_path and live and int(x["rank"]) == 0
                            else {}
                        ),
                    }
                    for x in r.extra.get("ranks") or []
                ],
            }
        )
    got = _login_run(status.hosts, host_name, slurm_scripts.STATUS, {"env": cfg["env"], "jobs": jobs_req}, 60)
    out: dict[int, tuple[dict[str, Any], dict[int, dict[str, Any]]]] = {}
    for row in got["jobs"]:
        sid = int(row["id"])
        out[sid] = _job_rows(status, recs[sid], row)
    return out


def _job_rows(status: Status, r: ServerRecord, row: dict[str, Any]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    sid = r.id
    text, _ = status.slurm_out.get(sid, ("", 0))
    o = row.get("out") or {}
    if o.get("data") is not None:
        if o.get("offset", 0) == 0:
            text = ""
        text = (text + base64.b64decode(o["data"]).decode("utf-8", errors="replace"))[-OUT_CAP:]
        status.slurm_out[sid] = (text, o.get("offset", 0) + len(base64.b64decode(o["data"])))
    j = row.get("job") or {}
    state = (j.get("JobState") or "").split()[0] if not j.get("missing") else None
    sl = r.extra.get("slurm") or {}
    nodes: list[str] = list(row.get("nodes") or [])
    job = {
        "job_id": sl.get("job_id"),
        "state": state or ("UNKNOWN" if sl.get("job_id") else "UNSUBMITTED"),
        "reason": j.get("Reason") if j.get("Reason") not in (None, "None") else None,
        "nodes": nodes,
        "exit_code": j.get("ExitCode"),
        "final": state in FINAL,
        "output": text[-2000:],
    }
    down = {
        n: (st, why)
        for n, st, why in row.get("node_states") or []
        if st.rstrip("*~#!%$@^-") in ("down", "fail", "failing", "drain") or st.endswith("*")
    }
    told = _task_lines(text)
    rows: dict[int, dict[str, Any]] = {}
    updates = []
    for k, rr in enumerate(row.get("ranks") or []):
        rank = int(rr["rank"])
        lg = rr.get("log") or {}
        if lg.get("data"):
            status.follower(sid, rank).feed(base64.b64decode(lg["data"]), lg.get("offset", 0))
        ident = rr.get("ident") or {}
        node = ident.get("node") or (nodes[rank] if rank < len(nodes) else None)
        out_row: dict[str, Any] = {"node": node, "log_size": lg.get("size"), "health": rr.get("health")}
        if ident:
            out_row.update(pid=ident.get("pid"), addr=ident.get("addr"))
            updates.append((k, ident))
        if state in (None, "PENDING", "CONFIGURING", "UNSUBMITTED"):
            process = "pending" if state != "UNKNOWN" else "unknown"
        elif node in down:
            process = "lost"
            st, why = down[node]
            out_row["slurm_failure"] = {
                "class": "node-lost",
                "hint": f"SLURM lost node {node} ({st}{': ' + why if why else ''})",
                "text": f"node {node} {st}",
                "line": None,
                "slurm": True,
            }
        elif rank in told:
            order, word = told[rank]
            process = "killed" if word.startswith("Killed") else "exited"
            out_row["detail"] = f"srun: task {rank}: {word}"
            out_row["order"] = order
        elif state in FINAL:
            process = "exited"
        elif state in ("RUNNING", "COMPLETING"):
            process = "running" if ident else "pending"
        else:
            process = "unknown"
        out_row["state"] = process
        out_row["process"] = process
        rows[rank] = out_row
    if updates:
        _record_identities(status, r, updates)
    return job, rows


def _task_lines(text: str) -> dict[int, tuple[int, str]]:
    """srun's lines on ended tasks, in the order it printed them: {task: (order, what it said)}."""
    told: dict[int, tuple[int, str]] = {}
    for line in text.splitlines():
        m = _TASK.search(line)
        if not m:
            continue
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            for t in range(int(lo), int(hi or lo) + 1):
                told.setdefault(t, (len(told), m.group(3).strip()))
    return told


def _record_identities(status: Status, r: ServerRecord, updates: list[tuple[int, dict[str, Any]]]) -> None:
    """Each rank's identity as it wrote it on its node, kept in the server's record."""
    rows = [dict(x) for x in r.extra.get("ranks") or []]
    changed = False
    for k, ident in updates:
        if k < len(rows) and rows[k].get("pid") != ident.get("pid"):
            st = ident.get("stat") or {}
            rows[k].update(
                pid=ident.get("pid"),
                pgid=st.get("pgid"),
                starttime=st.get("starttime"),
                boot_id=ident.get("boot_id"),
                node=ident.get("node"),
                addr=ident.get("addr"),
            )
            changed = True
    if changed:
        status.registry.set(r.id, extra={"ranks": rows})
        zero = rows[0] if rows else {}
        if zero.get("pid") is not None:
            status.registry.identify(r.id, zero["pid"], zero.get("pgid"), zero.get("starttime"))


def slurm_failure(job: dict[str, Any]) -> dict[str, Any] | None:
    """SLURM's verdict on a job that ended, as a failure (None while it runs)."""
    if not job.get("final"):
        return None
    cls, hint = _JOB_FAILURES.get(job["state"], ("process-died", f"the job ended {job['state']}"))
    return {
        "class": cls,
        "hint": f"job {job.get('job_id')}: {hint}" + (f" ({job['reason']})" if job.get("reason") else ""),
        "text": f"JobState={job['state']} ExitCode={job.get('exit_code')}",
        "line": None,
        "slurm": True,
    }


def stop(registry: Registry, hosts: Hosts, r: ServerRecord, grace: float, record: Recorder) -> StopResult:
    """Stop a server's job: its comment must hold the launch token; SIGTERM to its ranks, the grace,
    then ``scancel``; the job ended before this returns (else ``survivors``)."""
    from workbench.servers.registry import ENDED, LIVE
    from workbench.servers.stop import StopResult

    sl = r.extra.get("slurm") or {}
    if not sl.get("job_id"):
        raise WorkbenchError(f"server {r.id}: no SLURM job recorded; nothing to stop")
    cfg = settings(hosts, r.host)
    live = r.state in LIVE
    if live:
        registry.set(r.id, state=ServerState.STOPPING)
    kill_wait = 40.0  # scancel's SIGTERM, KillWait, SIGKILL, and the job's end reported
    try:
        ans = _login_run(
            hosts,
            r.host,
            slurm_scripts.STOP,
            {
                "env": cfg["env"],
                "job_id": sl["job_id"],
                "token": r.extra.get("launch_token"),
                "grace": grace,
                "kill_wait": kill_wait,
            },
            grace + kill_wait + 60,
        )
    except BaseException:
        if live:
            registry.set(r.id, state=r.state, expect=ServerState.STOPPING)
        raise
    record("server.stop", f"server:{r.id}", ans)
    if ans["result"] == "refused":
        if live:
            registry.set(r.id, state=r.state, expect=ServerState.STOPPING)
        raise WorkbenchError(f"server {r.id}: refused to cancel: {ans.get('reason')}")
    state = r.state if r.state in ENDED else ServerState.STOPPED
    registry.set(r.id, state=state, stopped=time.time() if ans["result"] != "survivors" else None)
    msg = {
        "stopped": f"job {sl['job_id']} ended ({ans.get('job_state')})",
        "already-gone": f"job {sl['job_id']} had already ended"
        + (f" ({ans['job_state']})" if ans.get("job_state") else ""),
        "survivors": f"job {sl['job_id']} still runs after scancel",
    }[ans["result"]]
    return StopResult(
        r.id, ans["result"], ans.get("signals", []), ans.get("remaining", []), ans.get("elapsed"), None, [], msg
    )
