"""Following a running server of any engine: readiness (wait), its log (read, follow by offset), its
HTTP endpoint through a tunnel (health, server facts) and its live metrics: decode log lines and
``/server_info`` (SGLang), and the engine's acceptance counters differenced over a window (vLLM's
``/metrics``, SGLang's with ``--enable-metrics``)."""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError
from workbench.hosts import HostError, Hosts
from workbench.logs.follower import READ_CAP
from workbench.numbers import Range, number
from workbench.progress import Progress
from workbench.servers import host_scripts
from workbench.servers.engines import EngineClient, SpecCounters, engine
from workbench.servers.profiles import TIMEOUT
from workbench.servers.rankstate import RankStatus, behind
from workbench.servers.registry import FINAL, STAGES, Registry, ServerState
from workbench.servers.status import Recorder, ServerStatus, Status

if TYPE_CHECKING:
    from workbench.hosts.base import Tunnel

POLL = Range(0.01, 3600)  # seconds between readiness checks


class Follow:
    def __init__(self, registry: Registry, hosts: Hosts, status: Status, record: Recorder):
        self.registry = registry
        self.hosts = hosts
        self.status = status
        self._record = record
        self._tunnels: dict[int, Tunnel] = {}
        self._counters: dict[int, tuple[float, SpecCounters]] = {}  # the last reading, per server
        self._lock = threading.RLock()

    def wait_ready(
        self,
        sid: int,
        timeout: float | None = None,
        poll: float = 1.0,
        progress: Callable[[Progress], None] | None = None,
        failing_grace: float = 10.0,
        health: bool = True,
    ) -> ServerStatus:
        r = self.registry.get(sid)
        timeout = number(timeout if timeout is not None else r.extra.get("ready_timeout", 1200), "timeout", TIMEOUT)
        poll = number(poll, "poll", POLL)
        deadline = time.monotonic() + timeout
        failing_since = None
        last_stage = None
        while True:
            s = self.status.refresh([sid])[0]
            if progress and s.stage != last_stage:
                progress(Progress("server.start", len(s.progress), len(STAGES), s.stage))
                last_stage = s.stage
            if s.state in FINAL:
                return s
            if s.state == ServerState.FAILING:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > failing_grace:
                    s.state = ServerState.FAILED
                    self.registry.set(sid, state=ServerState.FAILED, extra={"failure": s.failure})
                    self._record("server.failed", f"server:{sid}", {"failure": s.failure, "alive": True})
                    return s
            elif s.state == ServerState.READY and (not health or self.health(sid)):
                return s
            if time.monotonic() > deadline:
                s.state = ServerState.TIMEOUT
                s.failure = {
                    "class": "timeout",
                    "hint": f"not ready after {timeout:g} s (stage: {s.stage})",
                    "text": s.stage,
                }
                stuck = behind([RankStatus.of(x) for x in s.ranks])
                if stuck is not None:  # the rank the others wait on
                    where = stuck.node or stuck.host
                    s.failure.update(
                        rank=stuck.rank,
                        host=where,
                        hint=f"not ready after {timeout:g} s: rank {stuck.rank} on {where} is at "
                        f"{stuck.stage or 'its start'}",
                    )
                self._record("server.timeout", f"server:{sid}", {"stage": s.stage})
                return s
            time.sleep(poll)

    def tunnel(self, sid: int) -> Tunnel:
        with self._lock:
            t = self._tunnels.get(sid)
            if t is None:
                r = self.registry.get(sid)
                if r.port is None:
                    raise WorkbenchError(f"server {sid}: no port recorded; nothing to connect to")
                addr = "127.0.0.1"
                if r.extra.get("slurm"):  # rank 0 runs on a node the login node reaches
                    zero = next((x.get("addr") for x in r.extra.get("ranks") or [] if x.get("rank") == 0), None)
                    if zero is None:
                        raise WorkbenchError(
                            f"server {sid}: its job's rank 0 has not started yet; nothing to connect to"
                        )
                    addr = str(zero)
                t = self._tunnels[sid] = self.hosts.get(r.host).forward(r.port, remote_host=addr)
            return t

    def close_tunnel(self, sid: int) -> None:
        with self._lock:
            t = self._tunnels.pop(sid, None)
        if t is not None:
            t.close()

    def client(self, sid: int, timeout: float = 60.0) -> EngineClient:
        """The server's engine client, through a tunnel to its port."""
        return engine(self.registry.get(sid).extra.get("engine")).client(self.tunnel(sid).url, timeout=timeout)

    def health(self, sid: int, timeout: float = 30.0) -> bool:
        from workbench.servers.client import ServerHTTPError

        try:
            return self.client(sid).ready(timeout=timeout)
        except ServerHTTPError:
            return False

    def server_info(self, sid: int) -> dict[str, Any]:
        """What the server runs, normalised (``EngineClient.facts``), completed from the launch command
        where the engine does not serve a fact (vLLM's speculative settings)."""
        r = self.registry.get(sid)
        eng = engine(r.extra.get("engine"))
        facts = dict(eng.client(self.tunnel(sid).url).facts())
        for k, v in eng.argv_facts(r.argv).items():
            if facts.get(k) is None:
                facts[k] = v
        return facts

    def read_log(self, sid: int, offset: int = 0, length: int | None = None, rank: int = 0) -> bytes:
        """A server's log (of one of its ranks: each rank has its own, on its host; a SLURM job's are
        read on the login node)."""
        r = self.registry.get(sid)
        path, host_name = r.log, r.host
        if rank:
            row = next((x for x in r.extra.get("ranks") or [] if int(x["rank"]) == rank), None)
            if row is None or not row.get("log"):
                raise WorkbenchError(f"server {sid}: no rank {rank} (it runs {len(r.extra.get('ranks') or [1])})")
            path = row["log"]
            host_name = r.host if r.extra.get("slurm") else str(row.get("host") or r.host)
        host = self.hosts.get(host_name)
        st = host.stat(path)
        if st is None:
            raise WorkbenchError(f"server {sid}: log {path} does not exist on {host_name}")
        if length is None:
            length = max(0, st.size - offset)
        return host.read_bytes(path, offset, length) if length else b""

    def follow_log(
        self,
        sid: int,
        offset: int = 0,
        poll: float = 0.5,
        stop: Callable[[], bool] | None = None,
        retry_for: float = 120.0,
    ) -> Iterator[tuple[int, bytes]]:
        """Yield (offset, bytes) as the log grows. Offsets make it resumable: a dropped
        connection is reopened and reading goes on from the last byte received."""
        r = self.registry.get(sid)
        host = self.hosts.get(r.host)
        python = self.hosts.get(r.host).python
        down_since = None
        while stop is None or not stop():
            req = {
                "servers": [{"id": sid, "pid": None, "log": r.log, "offset": offset, "cap": READ_CAP}],
                "gpus": False,
            }
            try:
                res = host.run(
                    [python, "-c", host_scripts.STATUS, host_scripts.as_arg(req)], timeout=30, idempotent=True
                )
                row = json.loads(res.out)["servers"][0]
                down_since = None
            except (HostError, ValueError) as exc:
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since > retry_for:
                    raise WorkbenchError(f"server {sid}: log unreachable for {retry_for:g} s: {exc}") from None
                time.sleep(poll)
                continue
            data = base64.b64decode(row.get("data") or "")
            at = row.get("offset", offset)
            if data:
                yield at, data
                offset = at + len(data)
            elif row.get("log_size") is not None and row["log_size"] < offset:
                offset = 0
            else:
                time.sleep(poll)

    def metrics(self, sid: int, with_server_info: bool = True, window: float | None = None) -> dict[str, Any]:
        """Live metrics. SGLang: the decode lines' series and ``/server_info``. An engine with counters
        (vLLM): their difference over ``window`` seconds (two readings), else since the last call
        (the first call reads once): accept length = 1 + accepted / drafts, per-position rates."""
        s = self.status.refresh([sid], gpus=False)[0]
        f = self.status.follower(sid)
        al = [x for x in f.series["accept_len"] if not math.isnan(x)]
        gt = [x for x in f.series["gen_throughput"] if not math.isnan(x)]
        out: dict[str, Any] = {
            "id": sid,
            "state": s.state,
            "engine": s.engine,
            "decode_lines": f.decode_lines,
            "last": f.last_decode,
            "accept_len_mean": _mean(al[-20:]),
            "gen_throughput_mean": _mean(gt[-20:]),
        }
        live = s.state in (ServerState.READY, ServerState.STARTING, ServerState.FAILING)
        if live:
            try:
                out.update(self._counter_window(sid, window))
            except WorkbenchError as exc:
                out["counters_error"] = str(exc)
        if with_server_info and live:
            try:
                out["server_info"] = self.server_info(sid)
            except WorkbenchError as exc:
                out["server_info_error"] = str(exc)
        return out

    def acceptance_reading(self, sid: int) -> tuple[SpecCounters | None, float | None, float]:
        """The engine's cumulative counters now (None where its ``/metrics`` has none) and, only then,
        its running average since the last flush (SGLang's ``/server_info``: the labelled fallback);
        and the time the reading was asked for (wall clock)."""
        client = self.client(sid)
        asked = time.time()
        total = client.counters()
        if total is not None:
            return total, None, asked
        avg = client.facts().get("avg_spec_accept_length")
        return None, float(avg) if isinstance(avg, (int, float)) else None, asked

    def _counter_window(self, sid: int, window: float | None) -> dict[str, Any]:
        client = self.client(sid)
        now = client.counters()
        if now is None:
            return {}
        t = time.monotonic()
        with self._lock:
            prev = self._counters.get(sid)
        if window is not None:
            time.sleep(number(window, "window", Range(0.0, 3600.0)))
            prev = (t, now)
            now = client.counters()
            if now is None:
                return {}
            t = time.monotonic()
        with self._lock:
            self._counters[sid] = (t, now)
        out: dict[str, Any] = {"counters_total": now.to_dict()}
        if prev is not None:
            d = now - prev[1]
            out.update(
                window_s=round(t - prev[0], 3),
                counters=d.to_dict(),
                accept_length=d.accept_length,
                per_position=d.per_position,
            )
        return out

    def close(self) -> None:
        with self._lock:
            ids = list(self._tunnels)
        for i in ids:
            self.close_tunnel(i)


def _mean(xs: list[Any]) -> float | None:
    return sum(xs) / len(xs) if xs else None
