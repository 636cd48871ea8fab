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
from workbench.servers.registry import LIVE, RUNNING, Registry, ServerRecord, ServerState, failed_alive

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

    def follower(self, sid: int) -> Follower:
        with self._lock:
            f = self._followers.get(sid)
            if f is None:
                f = self._followers[sid] = Follower()
            return f

    def refresh(self, ids: list[Any] | None = None, gpus: bool = True) -> list[ServerStatus]:
        """Status of servers (default: every server not known to be finished), one remote round
        trip per host: process state, new log bytes, GPUs."""
        recs = [self.registry.get(i) for i in ids] if ids else self.registry.all(active=True)
        by_host: dict[str, list[ServerRecord]] = {}
        for r in recs:
            by_host.setdefault(r.host, []).append(r)
        out = []
        for host_name, group in by_host.items():
            out += self._refresh_host(host_name, group, gpus)
        return sorted(out, key=lambda s: s.id)

    def _refresh_host(self, host_name: str, recs: list[ServerRecord], gpus: bool) -> list[ServerStatus]:
        # one refresh of a host at a time: followers advance by offset and must not see a chunk twice
        with self._lock:
            lock = self._host_locks.setdefault(host_name, threading.Lock())
        with lock:
            return self._refresh_host_locked(host_name, [self.registry.get(r.id) for r in recs], gpus)

    def _refresh_host_locked(self, host_name: str, recs: list[ServerRecord], gpus: bool) -> list[ServerStatus]:
        req: dict[str, Any] = {"servers": [], "gpus": gpus}
        for r in recs:
            f = self.follower(r.id)
            live = r.state in RUNNING or failed_alive(r)
            eng = engine(r.extra.get("engine"))
            req["servers"].append(
                {
                    "id": r.id,
                    "pid": r.pid if live else None,
                    "pgid": r.pgid if live else None,
                    "starttime": r.starttime,
                    "token": r.extra.get("launch_token"),
                    "boot_id": r.extra.get("boot_id"),
                    "log": r.log,
                    "offset": f.offset,
                    "cap": READ_CAP,
                    **({"health": eng.health_path, "port": r.port} if eng.health_path and r.port and live else {}),
                }
            )
        try:
            host = self.hosts.get(host_name)
            res = host.run(
                [self.hosts.get(host_name).python, "-c", host_scripts.STATUS, host_scripts.as_arg(req)],
                timeout=30,
                idempotent=True,
            )
            if res.rc != 0:
                raise HostError(f"host {host_name}: status script exit {res.rc}: {res.err.strip()[-200:]}")
            data = json.loads(res.out)
        except (HostError, InputError, ValueError) as exc:
            return [self._stale(r, str(exc)) for r in recs]
        g = data.get("gpus") or {}
        gpu_rows = parse_gpus(g.get("csv", "")) if g.get("rc") == 0 else []
        if g:
            self._gpus[host_name] = gpu_rows
        gpu_error = g.get("err") if g.get("rc") else None
        return [self._derive(r, row, gpu_rows, gpu_error) for r, row in zip(recs, data["servers"])]

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

    def _derive(self, r: ServerRecord, row: dict[str, Any], gpu_rows: list[Any], gpu_error: str | None) -> ServerStatus:
        f = self.follower(r.id)
        if row.get("data"):
            f.feed(base64.b64decode(row["data"]), row.get("offset", 0))
        eng = engine(r.extra.get("engine"))
        by_health = eng.readiness == "health"
        health = row.get("health")
        proc = row["state"] if r.pid else "gone"
        leftover = row.get("leftover") or []
        state = r.state
        failure = r.extra.get("failure")
        if by_health:
            # read from the engine's health route while the process runs: 200 ready, 503 a dead engine
            ready_now = health == 200
            failing = health is not None and health >= 500 and (r.state == ServerState.READY or f.ready)
        else:
            ready_now = f.ready
            failing = bool(f.failures())

        def verdict(alive: bool) -> dict[str, Any] | None:
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
            if proc in ("gone", "zombie", "replaced"):
                v = verdict(False)
                if r.state == ServerState.READY or (not by_health and f.ready):
                    state = ServerState.EXITED
                else:
                    state = ServerState.FAILED
                failure = v
                # children that outlive the leader keep the server unfinished (and stoppable)
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
                else:
                    state, failure = self.registry.get(r.id).state, None
            elif failing:
                failure = verdict(True)
                state = ServerState.FAILING
            elif ready_now or (r.state == ServerState.READY and by_health):
                state = ServerState.READY
                if r.state != ServerState.READY and self.registry.set(
                    r.id, state=ServerState.READY, extra={"ready_at": time.time()}, expect=r.state
                ):
                    self._record("server.ready", f"server:{r.id}", {"profile": r.profile})
            else:
                state = ServerState.STARTING
        elif failed_alive(r) and proc in ("gone", "zombie", "replaced"):
            if not leftover:
                # the server's last process is gone at last: it no longer holds anything
                if self.registry.set(r.id, stopped=time.time(), extra={"leftover": []}, expect=r.state):
                    self._record("server.gone", f"server:{r.id}", {"profile": r.profile, "process": proc})
            elif leftover != r.extra.get("leftover"):
                self.registry.set(r.id, extra={"leftover": leftover}, expect=r.state)
        if leftover and proc in ("gone", "zombie"):
            proc = "leftover"
        mine = set(r.extra.get("gpus") or [])
        gpus = [g for g in gpu_rows if not mine or g.index in mine]
        progress, stage = _stages(f, eng, state)
        s = ServerStatus(
            r.id,
            r.profile,
            r.host,
            state,
            proc,
            r.pid,
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
            log_unrecognised=f.unrecognised,
            log_unrecognised_lines=f.samples,
        )
        self._last[r.id] = s
        return s

    def host_gpus(self, host_name: str) -> list[Any]:
        return self._gpus.get(host_name, [])


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
