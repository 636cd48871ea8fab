"""Stopping a server of any engine: its recorded identity checked on the host before any signal (the
stop script), SIGTERM to every process proven its own (the launched process, and the children that
carry its launch token: SGLang's schedulers, vLLM's ``VLLM::EngineCore`` and ``VLLM::Worker``), the
grace, SIGKILL, then its GPUs polled until idle."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
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

    @staticmethod
    def stop_grace(r: ServerRecord, grace: float | None = None) -> float:
        """The seconds between SIGTERM and SIGKILL: the caller's, else the profile's at launch; finite."""
        return number(grace if grace is not None else r.extra.get("stop_grace", 30), "grace", GRACE)

    def gpus_idle(
        self, r: ServerRecord, wait: float = 60.0, idle_mib: float | None = None, poll: float = 1.0
    ) -> tuple[bool | None, list[GPU]]:
        """Poll nvidia-smi until the server's GPUs use at most ``idle_mib`` (the driver frees
        memory a little after the processes exit)."""
        threshold = idle_mib if idle_mib is not None else float(self.hosts.settings(r.host).get("gpu_idle_mib", 500))
        mine = set(r.extra.get("gpus") or [])
        deadline = time.monotonic() + wait
        host = self.hosts.get(r.host)
        python = self.hosts.get(r.host).python
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
