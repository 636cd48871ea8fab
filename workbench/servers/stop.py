"""Stopping a server of any engine: its recorded identity checked on the host before any signal (the
stop script), SIGTERM to every process proven its own (the launched process, and the children that
carry its launch token: SGLang's schedulers, vLLM's ``VLLM::EngineCore`` and ``VLLM::Worker``), the
grace, SIGKILL, then its GPUs polled until idle."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import WorkbenchError
from workbench.hosts import Hosts
from workbench.numbers import number
from workbench.results import Result
from workbench.servers import host_scripts
from workbench.servers.follow import Follow
from workbench.servers.profiles import GRACE
from workbench.servers.registry import ENDED, LIVE, Registry, ServerRecord, ServerState
from workbench.servers.status import GPU, Recorder, parse_gpus


@dataclass
class StopResult(Result):
    id: int
    result: str
    signals: list[Any]
    remaining: list[Any]
    elapsed: float | None
    gpus_idle: bool | None
    gpus: list[Any]
    message: str = ""
    ranks: list[Any] = field(default_factory=list)  # a server across nodes: each rank's stop, rank 0 first


class Stopper:
    def __init__(self, registry: Registry, hosts: Hosts, follow: Follow, record: Recorder):
        self.registry = registry
        self.hosts = hosts
        self.follow = follow
        self._record = record

    def stop(
        self, sid: int, grace: float | None = None, gpu_wait: float = 60.0, idle_mib: float | None = None
    ) -> StopResult:
        r = self.registry.get(sid)
        if r.extra.get("slurm"):
            from workbench.servers import slurm

            done = slurm.stop(self.registry, self.hosts, r, self.stop_grace(r, grace), self._record)
            self.follow.close_tunnel(sid)
            return done
        if r.extra.get("ranks"):
            return self._stop_ranks(r, self.stop_grace(r, grace), gpu_wait, idle_mib)
        if r.pid is None or r.starttime is None:
            raise WorkbenchError(f"server {sid}: no process identity recorded; nothing to stop")
        grace = self.stop_grace(r, grace)
        host = self.hosts.get(r.host)
        python = self.hosts.get(r.host).python
        kill_wait = 10
        req = {
            "pid": r.pid,
            "pgid": r.pgid or r.pid,
            "starttime": r.starttime,
            "boot_id": r.extra.get("boot_id"),
            "token": r.extra.get("launch_token"),
            "grace": grace,
            "kill_wait": kill_wait,
        }
        live = r.state in LIVE
        if live:
            self.registry.set(sid, state=ServerState.STOPPING)
        try:
            res = host.run([python, "-c", host_scripts.STOP, host_scripts.as_arg(req)], timeout=grace + kill_wait + 40)
            if res.rc != 0:
                raise WorkbenchError(f"server {sid}: stop script failed (exit {res.rc}): {res.err.strip()[-300:]}")
            out = json.loads(res.out.strip().splitlines()[-1])
        except BaseException:
            if live:
                self.registry.set(sid, state=r.state, expect=ServerState.STOPPING)
            raise
        self._record("server.stop", f"server:{sid}", out)
        if out["result"] == "refused":
            if live:
                self.registry.set(sid, state=r.state, expect=ServerState.STOPPING)
            raise WorkbenchError(f"server {sid}: refused to signal: {out['reason']}")
        self.follow.close_tunnel(sid)
        state = r.state if r.state in ENDED else ServerState.STOPPED
        self.registry.set(sid, state=state, stopped=time.time())
        idle, gpus = self.gpus_idle(r, wait=gpu_wait, idle_mib=idle_mib)
        msg = {
            "stopped": "stopped",
            "already-gone": "the process was already gone",
            "survivors": f"processes survived SIGKILL: {out.get('remaining')}",
        }[out["result"]]
        if idle is False:
            msg += "; GPUs still hold memory: " + ", ".join(
                f"GPU{g.index} {g.used_mib:g} MiB" for g in gpus if g.used_mib and g.used_mib > (idle_mib or 0)
            )
        return StopResult(
            sid, out["result"], out.get("signals", []), out.get("remaining", []), out.get("elapsed"), idle, gpus, msg
        )

    def _stop_ranks(self, r: ServerRecord, grace: float, gpu_wait: float, idle_mib: float | None) -> StopResult:
        """A server across SSH hosts: every rank by its recorded identity, rank 0 first."""
        from workbench.servers.multinode import rank_identities, stop_ranks

        rows = rank_identities(r)
        if not rows:
            raise WorkbenchError(f"server {r.id}: no process identity recorded; nothing to stop")
        live = r.state in LIVE
        if live:
            self.registry.set(r.id, state=ServerState.STOPPING)
        try:
            answers = stop_ranks(self.hosts, rows, grace)
        except BaseException:
            if live:
                self.registry.set(r.id, state=r.state, expect=ServerState.STOPPING)
            raise
        self._record("server.stop", f"server:{r.id}", {"ranks": answers})
        results = {a["rank"]: a.get("result") for a in answers}
        if all(v in ("refused", "error") for v in results.values()):
            if live:
                self.registry.set(r.id, state=r.state, expect=ServerState.STOPPING)
            reasons = "; ".join(f"rank {a['rank']} on {a['host']}: {a.get('reason')}" for a in answers)
            raise WorkbenchError(f"server {r.id}: refused to signal: {reasons}")
        self.follow.close_tunnel(r.id)
        left = [a for a in answers if a.get("result") in ("survivors", "error")]
        state = r.state if r.state in ENDED else ServerState.STOPPED
        self.registry.set(r.id, state=state, stopped=None if left else time.time())
        idle: bool | None = None
        gpus: list[GPU] = []
        for h in dict.fromkeys(a["host"] for a in answers):
            ok, rows_h = self.gpus_idle(r, wait=gpu_wait, idle_mib=idle_mib, host_name=h)
            gpus += rows_h
            if ok is not None:
                idle = ok if idle is None else (idle and ok)
        if left:
            result = "survivors"
        elif all(v == "already-gone" for v in results.values()):
            result = "already-gone"
        else:
            result = "stopped"
        parts = [f"rank {a['rank']} on {a['host']}: {_said(a)}" for a in sorted(answers, key=lambda a: a["rank"])]
        signals = sorted({s for a in answers for s in a.get("signals", [])}, key=["TERM", "KILL"].index)
        remaining = [p for a in answers for p in a.get("remaining", [])]
        elapsed = max((a.get("elapsed") or 0.0 for a in answers), default=None)
        msg = "; ".join(parts)
        if idle is False:
            msg += "; GPUs still hold memory"
        return StopResult(r.id, result, signals, remaining, elapsed, idle, gpus, msg, ranks=answers)

    @staticmethod
    def stop_grace(r: ServerRecord, grace: float | None = None) -> float:
        """The seconds between SIGTERM and SIGKILL: the caller's, else the profile's at launch; finite."""
        return number(grace if grace is not None else r.extra.get("stop_grace", 30), "grace", GRACE)

    def gpus_idle(
        self,
        r: ServerRecord,
        wait: float = 60.0,
        idle_mib: float | None = None,
        poll: float = 1.0,
        host_name: str | None = None,
    ) -> tuple[bool | None, list[GPU]]:
        """Poll nvidia-smi until the server's GPUs (on ``host_name``, default its host) use at most
        ``idle_mib`` (the driver frees memory a little after the processes exit)."""
        host_name = host_name or r.host
        threshold = idle_mib if idle_mib is not None else float(self.hosts.settings(host_name).get("gpu_idle_mib", 500))
        mine = set(r.extra.get("gpus") or [])
        deadline = time.monotonic() + wait
        host = self.hosts.get(host_name)
        python = host.python
        while True:
            res = host.run(
                [python, "-c", host_scripts.STATUS, host_scripts.as_arg({"servers": [], "gpus": True})],
                timeout=30,
                idempotent=True,
            )
            g = json.loads(res.out).get("gpus", {})
            if g.get("rc") != 0:
                return None, []  # no nvidia-smi on this host
            rows = [x for x in parse_gpus(g["csv"]) if not mine or x.index in mine]
            busy = [x for x in rows if x.used_mib is not None and x.used_mib > threshold]
            if not busy:
                return True, rows
            if time.monotonic() > deadline:
                return False, rows
            time.sleep(poll)


def _said(answer: dict[str, Any]) -> str:
    """One rank's stop in words."""
    res = answer.get("result")
    if res == "stopped":
        return "stopped (" + "+".join(answer.get("signals") or []) + ")"
    if res == "already-gone":
        return "already gone"
    if res == "survivors":
        return f"processes survived SIGKILL: {answer.get('remaining')}"
    return f"{res}: {answer.get('reason', '')}".rstrip(": ")
