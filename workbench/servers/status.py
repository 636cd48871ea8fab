"""Servers' status, derived from facts in one round trip per host: the process (from /proc: a
zombie is dead, a pid with another start time is someone else's), the log (followed by byte
offset, parsed incrementally), the engine's health route where the engine's readiness is read
from it (asked on the host) and the GPUs (nvidia-smi CSV). A state the facts settle is written
back to the registry, compare-and-swap on the state it was read in."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError
from workbench.hosts import HostError, Hosts
from workbench.logs import classify
from workbench.logs.follower import READ_CAP, Follower
from workbench.results import Result
from workbench.servers import host_scripts
from workbench.servers.engines import engine
from workbench.servers.rankstate import DEAD, RankStatus, server_failure
from workbench.servers.registry import ENDED, LIVE, RUNNING, Registry, ServerRecord, ServerState, failed_alive

#: failures that are SLURM's verdict on a job (its ranks' logs cannot say them)
SLURM_CLASSES = ("node-lost", "cancelled", "time-limit", "preempted")
GPU_QUERY_FIELDS = ("index", "memory.used", "memory.total", "utilization.gpu")
# failure classes that say a process or an engine died, not why
_GENERIC = ("exception", "process-died", "engine-dead")
Recorder = Callable[[str, str, Any], int]


@dataclass
class GPU(Result):
    index: int
    used_mib: float | None
    total_mib: float | None
    util: float | None


def parse_gpus(csv: str) -> list[GPU]:
    """``index, memory.used, memory.total, utilization.gpu`` rows (noheader, nounits); fields may
    read ``[N/A]`` or ``[Not Supported]``."""
    out = []
    for line in csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].isdigit():
            continue

        def num(s: str) -> float | None:
            try:
                return float(s)
            except ValueError:
                return None

        out.append(GPU(int(parts[0]), num(parts[1]), num(parts[2]), num(parts[3])))
    return out


@dataclass
class ServerStatus(Result):
    id: int
    profile: str
    host: str
    state: str  # starting, ready, failed, exited, stopped, unknown
    process: str  # running, zombie, gone, replaced, leftover (leader gone, children live), unknown
    pid: int | None
    port: int | None
    uptime_s: float | None
    log_size: int | None
    stale: bool = False
    error: str | None = None
    progress: list[Any] = field(default_factory=list)  # milestone names reached, in order
    stage: str = ""
    failure: dict[str, Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)  # last decode line
    series: dict[str, Any] = field(default_factory=dict)  # accept_len / gen_throughput history
    gpus: list[Any] = field(default_factory=list)
    checked: float = 0.0
    engine: str = "sglang"
    health: int | None = None  # the engine's health route's status code, where readiness is read from it
    #: a server across nodes: each rank (``rankstate.RankStatus``: rank, host or node, pid, process, state)
    ranks: list[Any] = field(default_factory=list)
    job: dict[str, Any] | None = None  # a SLURM job: its id, state, reason, nodes
    log_unrecognised: int = 0  # log lines no rule, engine statement or known form read
    log_unrecognised_lines: list[Any] = field(default_factory=list)  # (line, text) of the first few


class Status:
    """Followers of every server's log, the last status of each, the last GPUs of each host."""

    def __init__(self, registry: Registry, hosts: Hosts, record: Recorder):
        self.registry = registry
        self.hosts = hosts
        self._record = record
        self._followers: dict[int, Follower] = {}
        self._host_locks: dict[str, threading.Lock] = {}
        self._last: dict[int, ServerStatus] = {}
        self._gpus: dict[str, list[GPU]] = {}
        self._lock = threading.RLock()
        #: a SLURM job's output read so far (its tail) and the offset read to, per server
        self.slurm_out: dict[int, tuple[str, int]] = {}
        self._rank_up: set[tuple[int, int]] = set()

    def follower(self, sid: int, rank: int = 0) -> Follower:
        """The log follower of a server (of one of its ranks: rank 0's is the server's)."""
        key: Any = sid if not rank else (sid, rank)
        with self._lock:
            f = self._followers.get(key)
            if f is None:
                f = self._followers[key] = Follower()
            return f

    def refresh(self, ids: list[Any] | None = None, gpus: bool = True) -> list[ServerStatus]:
        """Status of servers (default: every server not known to be finished), one remote round
        trip per host (a server across nodes is asked on each of its hosts; a SLURM cluster once,
        on its login node): process state, new log bytes, GPUs."""
        recs = [self.registry.get(i) for i in ids] if ids else self.registry.all(active=True)
        by_host: dict[str, list[tuple[int, int]]] = {}
        clusters: dict[str, list[int]] = {}
        for r in recs:
            if r.extra.get("slurm"):
                clusters.setdefault(r.host, []).append(r.id)
                continue
            for rank, host_name in placements(r):
                by_host.setdefault(host_name, []).append((r.id, rank))
        rows: dict[int, dict[int, dict[str, Any]]] = {}
        errors: dict[str, str] = {}
        gpu_of: dict[str, tuple[list[GPU], str | None]] = {}
        for host_name, entries in by_host.items():
            try:
                got, gpu_of[host_name] = self._ask_host(host_name, entries, gpus)
            except (HostError, InputError, ValueError) as exc:
                errors[host_name] = str(exc)
                continue
            for (sid, rank), row in got.items():
                rows.setdefault(sid, {})[rank] = row
        jobs: dict[int, dict[str, Any]] = {}
        for host_name, sids in clusters.items():
            from workbench.servers import slurm

            try:
                got_jobs = slurm.ask(self, host_name, sids)
            except (HostError, InputError, ValueError) as exc:
                errors[host_name] = str(exc)
                continue
            for sid, (job, rank_rows) in got_jobs.items():
                jobs[sid] = job
                rows[sid] = rank_rows
        out = []
        for r in recs:
            r = self.registry.get(r.id)
            if r.host in errors and 0 not in rows.get(r.id, {}):
                out.append(self._stale(r, errors[r.host]))
                continue
            mine = rows.get(r.id, {})
            for rank, host_name in placements(r) if not r.extra.get("slurm") else []:
                if rank not in mine:  # its host did not answer
                    mine[rank] = {"state": "unknown", "error": errors.get(host_name, "")}
            g, gerr = gpu_of.get(r.host, ([], None))
            out.append(self._derive(r, mine, g, gerr, jobs.get(r.id)))
        return sorted(out, key=lambda s: s.id)

    def _ask_host(
        self, host_name: str, entries: list[tuple[int, int]], gpus: bool
    ) -> tuple[dict[tuple[int, int], dict[str, Any]], tuple[list[GPU], str | None]]:
        """One status round trip to a host for the (server, rank) pairs on it; each rank's new log
        bytes fed to its follower. One refresh of a host at a time: followers advance by offset and
        must not see a chunk twice."""
        with self._lock:
            lock = self._host_locks.setdefault(host_name, threading.Lock())
        with lock:
            req: dict[str, Any] = {"servers": [], "gpus": gpus}
            for sid, rank in entries:
                r = self.registry.get(sid)
                ident = rank_identity(r, rank)
                f = self.follower(sid, rank)
                live = r.state in RUNNING or failed_alive(r)
                eng = engine(r.extra.get("engine"))
                health = eng.health_path and r.port and live and rank == 0
                req["servers"].append(
                    {
                        "id": sid,
                        "rank": rank,
                        "pid": ident.get("pid") if live else None,
                        "pgid": ident.get("pgid") if live else None,
                        "starttime": ident.get("starttime"),
                        "token": r.extra.get("launch_token"),
                        "boot_id": ident.get("boot_id"),
                        "log": ident.get("log"),
                        "offset": f.offset,
                        "cap": READ_CAP,
                        **({"health": eng.health_path, "port": r.port} if health else {}),
                    }
                )
            host = self.hosts.get(host_name)
            res = host.run(
                [host.python, "-c", host_scripts.STATUS, host_scripts.as_arg(req)], timeout=30, idempotent=True
            )
            if res.rc != 0:
                raise HostError(f"host {host_name}: status script exit {res.rc}: {res.err.strip()[-200:]}")
            data = json.loads(res.out)
            got: dict[tuple[int, int], dict[str, Any]] = {}
            for row in data["servers"]:
                key = (int(row["id"]), int(row.get("rank") or 0))
                if row.get("data"):
                    self.follower(*key).feed(base64.b64decode(row["data"]), row.get("offset", 0))
                row["host"] = host_name
                got[key] = row
        g = data.get("gpus") or {}
        gpu_rows = parse_gpus(g.get("csv", "")) if g.get("rc") == 0 else []
        if g:
            self._gpus[host_name] = gpu_rows
        return got, (gpu_rows, g.get("err") if g.get("rc") else None)

    def _stale(self, r: ServerRecord, error: str) -> ServerStatus:
        last = self._last.get(r.id)
        if last is not None:
            s = ServerStatus(**{**last.__dict__, "stale": True, "error": error})
        else:
            s = ServerStatus(
                r.id,
                r.profile,
                r.host,
                ServerState.UNKNOWN if r.state in LIVE else r.state,
                "unknown",
                r.pid,
                r.port,
                None,
                None,
                stale=True,
                error=error,
            )
        return s

    def _derive(
        self,
        r: ServerRecord,
        rows: dict[int, dict[str, Any]],
        gpu_rows: list[Any],
        gpu_error: str | None,
        job: dict[str, Any] | None = None,
    ) -> ServerStatus:
        row = rows.get(0) or {"state": "unknown"}
        f = self.follower(r.id)
        eng = engine(r.extra.get("engine"))
        by_health = eng.readiness == "health"
        health = row.get("health")
        # a SLURM job or a server across nodes records rank 0's pid once it runs: pending until then;
        # a server of one process records its pid at launch, so none recorded means none runs
        waits = job is not None or bool(r.extra.get("ranks"))
        proc = row["state"] if rank_identity(r, 0).get("pid") else ("pending" if waits and r.state in LIVE else "gone")
        leftover = list(row.get("leftover") or [])
        state = r.state
        failure = r.extra.get("failure")
        if by_health:
            # read from the engine's health route while the process runs: 200 ready, 503 a dead engine
            ready_now = health == 200
            failing = health is not None and health >= 500 and (r.state == ServerState.READY or f.ready)
        else:
            ready_now = f.ready
            failing = bool(f.failures())
        ranked = len(rows) > 1 or bool(r.extra.get("ranks"))
        rank_rows = self._ranks(r, rows, job, ready_now or r.state == ServerState.READY) if ranked else []
        if ranked:
            proc = rank_rows[0].process if rank_rows else proc
            dead = any(x.process in DEAD for x in rank_rows) or bool(job and job.get("final"))
            failing = failing or any(x.state == "failing" for x in rank_rows)
            leftover += [p for x in rank_rows[1:] if x.process in ("running", "leftover") for p in [x.pid] if p]
            if job and job.get("final"):
                leftover = []  # SLURM ended the job's processes
        else:
            dead = proc in ("gone", "zombie", "replaced")

        def verdict(alive: bool) -> dict[str, Any] | None:
            if job is not None:
                return job_failure(job, rank_rows)
            if ranked:
                return server_failure(rank_rows)
            logged = classify(f.events, process_alive=alive)
            if not by_health:
                return logged
            seen = eng.classify([t for _, t in f.tail], alive, health)
            if f.failures() and logged is not None and logged["class"] not in _GENERIC:
                # the log's failure lines name the cause (the draft's fc width, a context too long, ...): its
                # class and hint, beside what the process and the health route say
                seen = {**(seen or {}), **{k: logged[k] for k in ("class", "what", "hint", "exception") if k in logged}}
            return seen

        if r.state in LIVE:
            ready = r.state == ServerState.READY or (not by_health and f.ready)
            state, failure = self._transition(r, dead, failing, ready_now, ready, by_health, verdict, leftover)
        elif failed_alive(r) and (not leftover if ranked else dead):
            self._finished(r, proc, leftover)
        elif failed_alive(r) and ranked and leftover != r.extra.get("leftover"):
            self.registry.set(r.id, extra={"leftover": leftover}, expect=r.state)
        if job is not None and r.state in ENDED:
            failure = self._slurm_verdict(r, job, rank_rows) or failure
        if leftover and proc in ("gone", "zombie"):
            proc = "leftover"
        mine = set(r.extra.get("gpus") or [])
        gpus = [g for g in gpu_rows if not mine or g.index in mine]
        progress, stage = _stages(f, eng, state)
        if state == ServerState.STARTING and job and job.get("state") in ("PENDING", "CONFIGURING"):
            stage = f"job {job.get('job_id')} {job['state'].lower()} ({job.get('reason') or 'queued'})"
        s = ServerStatus(
            r.id,
            r.profile,
            r.host,
            state,
            proc,
            rank_identity(r, 0).get("pid") or r.pid,
            r.port,
            row.get("age_s"),
            row.get("log_size"),
            error=gpu_error,
            progress=progress,
            stage=stage,
            failure=failure,
            metrics=f.last_decode,
            series={k: list(v) for k, v in f.series.items()},
            gpus=gpus,
            checked=time.time(),
            engine=eng.name,
            health=health,
            ranks=[x.to_dict() for x in rank_rows],
            job=job,
            log_unrecognised=f.unrecognised,
            log_unrecognised_lines=f.samples,
        )
        self._last[r.id] = s
        return s

    def _transition(
        self,
        r: ServerRecord,
        dead: bool,
        failing: bool,
        ready_now: bool,
        was_ready: bool,
        by_health: bool,
        verdict: Callable[[bool], dict[str, Any] | None],
        leftover: list[Any],
    ) -> tuple[str, dict[str, Any] | None]:
        """A live server's next state from the facts, written back compare-and-swap."""
        if dead:
            v = verdict(False)
            state = ServerState.EXITED if was_ready else ServerState.FAILED
            # processes that outlive the leader (its children, other ranks) keep the server
            # unfinished (and stoppable)
            if self.registry.set(
                r.id,
                state=state,
                extra={"failure": v, "leftover": leftover},
                stopped=None if leftover else time.time(),
                expect=r.state,
            ):
                self._record(
                    "server.exited" if state == ServerState.EXITED else "server.failed",
                    f"server:{r.id}",
                    {"failure": v, "profile": r.profile},
                )
                return state, v
            return self.registry.get(r.id).state, None
        if failing:
            return ServerState.FAILING, verdict(True)
        if ready_now or (r.state == ServerState.READY and by_health):
            if r.state != ServerState.READY and self.registry.set(
                r.id, state=ServerState.READY, extra={"ready_at": time.time()}, expect=r.state
            ):
                self._record("server.ready", f"server:{r.id}", {"profile": r.profile})
            return ServerState.READY, r.extra.get("failure")
        return ServerState.STARTING, r.extra.get("failure")

    def _slurm_verdict(
        self, r: ServerRecord, job: dict[str, Any], rank_rows: list[RankStatus]
    ) -> dict[str, Any] | None:
        """SLURM's own verdict can come after the ranks' ends were seen (a node is called lost only
        once it stopped answering for the controller's timeout): the failure takes it then."""
        v = job_failure(job, rank_rows)
        old = r.extra.get("failure") or {}
        if v is None or v.get("class") not in SLURM_CLASSES or v.get("class") == old.get("class"):
            return None
        if self.registry.set(r.id, extra={"failure": v}, expect=r.state):
            self._record("server.failed", f"server:{r.id}", {"failure": v, "profile": r.profile, "slurm": True})
            return v
        return None

    def _finished(self, r: ServerRecord, proc: str, leftover: list[Any]) -> None:
        """A failed server whose processes may have lived on: finished once the last is gone."""
        if not leftover:
            # the server's last process is gone at last: it no longer holds anything
            if self.registry.set(r.id, stopped=time.time(), extra={"leftover": []}, expect=r.state):
                self._record("server.gone", f"server:{r.id}", {"profile": r.profile, "process": proc})
        elif leftover != r.extra.get("leftover"):
            self.registry.set(r.id, extra={"leftover": leftover}, expect=r.state)

    def _ranks(
        self, r: ServerRecord, rows: dict[int, dict[str, Any]], job: dict[str, Any] | None, ready: bool
    ) -> list[RankStatus]:
        """Each rank's state from its process (or SLURM's word on its task) and its own log; rank 0 is
        ready when the server is (``ready``: its log or its health route said so)."""
        out = []
        live = r.state in RUNNING
        planned = {int(x["rank"]): x for x in r.extra.get("ranks") or []}
        for rank in sorted(set(planned) | set(rows)):
            row = rows.get(rank) or {"state": "unknown"}
            ident = rank_identity(r, rank)
            f = self.follower(r.id, rank)
            proc = row.get("state", "unknown")
            if ident.get("pid") is None and proc != "unknown":
                proc = row.get("process") or ("pending" if live else "gone")
            if proc in ("gone", "zombie") and row.get("leftover"):
                proc = "leftover"
            alive = proc not in DEAD
            fail = classify(f.events, process_alive=alive)
            wd = watchdog_fired(f)
            if wd is not None:  # this rank's forward waited on its peers past the watchdog
                base = fail or {"class": "process-died", "hint": "the rank's scheduler watchdog fired"}
                fail = {**base, "waited": True, "line": wd[0], "text": wd[1]}
            if row.get("slurm_failure"):
                fail = {**(fail or {}), **row["slurm_failure"]} if fail is None or fail.get("line") is None else fail
            if not alive:
                st = "failed" if fail else "exited"
            elif fail:
                st = "failing"
            elif rank == 0:
                st = "ready" if ready else "starting"
            else:
                if (r.id, rank) not in self._rank_up and rank_ready(f):
                    self._rank_up.add((r.id, rank))
                st = "running" if (r.id, rank) in self._rank_up else "starting"
            if r.state in (ServerState.STOPPED, ServerState.STOPPING) and not alive:
                st = "stopped"
            x = RankStatus(
                rank,
                ident.get("host") or r.host,
                node=ident.get("node") or row.get("node"),
                pid=ident.get("pid") or row.get("pid"),
                process=proc,
                state=st,
                stage=f.stage(),
                failure=fail,
                log=ident.get("log"),
                addr=ident.get("addr") or row.get("addr"),
                detail=row.get("detail") or row.get("error") or "",
                progress=f.progress(),
            )
            x.extra["order"] = row.get("order")
            out.append(x)
        return out

    def host_gpus(self, host_name: str) -> list[Any]:
        return self._gpus.get(host_name, [])


def placements(r: ServerRecord) -> list[tuple[int, str]]:
    """(rank, host) of each rank of a server over SSH hosts (one on its host where it has no ranks)."""
    rows = r.extra.get("ranks")
    if not rows:
        return [(0, r.host)]
    return [(int(x["rank"]), str(x.get("host") or r.host)) for x in rows]


def rank_identity(r: ServerRecord, rank: int) -> dict[str, Any]:
    """A rank's recorded identity and log (pid None: not started, or not known yet)."""
    for x in r.extra.get("ranks") or []:
        if int(x["rank"]) == rank:
            return dict(x)
    if rank == 0:
        return {
            "pid": r.pid,
            "pgid": r.pgid,
            "starttime": r.starttime,
            "boot_id": r.extra.get("boot_id"),
            "log": r.log,
            "host": r.host,
        }
    return {}


def rank_ready(f: Follower) -> bool:
    """A rank >= 1 is up once its log says its schedulers are: SGLang's dummy health server starts only
    after them (``srt/entrypoints/engine.py``); vLLM's headless worker has launched its executor."""
    marks = ("Dummy health check server started", "headless multiproc executor")
    return any(m in text for _, text in f.tail for m in marks)


def watchdog_fired(f: Follower) -> tuple[int, str] | None:
    """(line, text) of the rank's scheduler watchdog timeout (``srt/utils/watchdog.py``: no forward
    finished within ``--watchdog-timeout`` while a batch ran), if its log has one."""
    for n, text in f.tail:
        if "Scheduler watchdog timeout (" in text:
            return int(n), str(text)
    return None


def job_failure(job: dict[str, Any], rank_rows: list[RankStatus]) -> dict[str, Any] | None:
    """A SLURM server's failure: SLURM's verdict where the job ended for a reason of its own
    (cancelled, a lost node, a time limit), naming the rank on a lost node; else the ranks' own."""
    from workbench.servers.slurm import slurm_failure

    j = slurm_failure(job)
    if j is not None and j["class"] != "process-died":
        lost = [x for x in rank_rows if x.process == "lost"]
        if lost:
            x = min(lost, key=lambda x: x.rank)
            j.update(
                rank=x.rank,
                host=x.node,
                hint=f"rank {x.rank} on {x.node}: {(x.failure or {}).get('hint') or j['hint']}",
            )
        return j
    return server_failure(rank_rows) or j


def _stages(f: Follower, eng: Any, state: str) -> tuple[list[str], str]:
    """(the startup stages the log tells, for either engine; what the server does now). Where the engine's
    readiness is its health route's, ready is what the route said."""
    progress = f.progress()
    stage = state
    by_health = eng.readiness == "health"
    if state == ServerState.STARTING:
        stage = f.stage()
        if by_health and stage in ("starting", "ready"):
            stage = "waiting for " + str(eng.health_path)
    if by_health:
        progress = [p for p in progress if p != "ready"] + (["ready"] if state == ServerState.READY else [])
    return progress, stage
