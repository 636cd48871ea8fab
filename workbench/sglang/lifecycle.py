"""SGLang servers on hosts, one object for the facade: it composes the parts that each do one job.

- ``registry``: the journal's ``servers`` table and the server states (``registry.py``)
- ``launcher``: profile, command, preview, launch (``launch.py``)
- ``status``: one round trip per host: process, new log bytes, GPUs (``status.py``, ``workbench/logs/follower.py``)
- ``follow``: readiness, logs, tunnels and HTTP, metrics (``follow.py``)
- ``stopper``: identity-checked stop and GPU idle (``stop.py``)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from workbench.hosts import Host, Hosts
from workbench.journal import Journal
from workbench.logs.follower import Follower
from workbench.progress import Progress
from workbench.sglang.command import Command
from workbench.sglang.follow import Follow
from workbench.sglang.launch import Launcher, Preview
from workbench.sglang.profiles import Profile
from workbench.sglang.registry import Registry, ServerRecord
from workbench.sglang.status import GPU, Recorder, ServerStatus, Status
from workbench.sglang.stop import Stopper, StopResult

if TYPE_CHECKING:
    from workbench.hosts.base import Tunnel
    from workbench.sglang.client import SGLangClient

__all__ = ["GPU", "Follower", "Lifecycle", "Preview", "ServerRecord", "ServerStatus", "StopResult"]


class Lifecycle:
    def __init__(self, journal: Journal, hosts: Hosts, profiles: Callable[[], dict[str, Any]], record: Recorder):
        self.journal = journal
        self.hosts = hosts
        self.registry = Registry(journal)
        self.launcher = Launcher(self.registry, hosts, profiles)
        self.status = Status(self.registry, hosts, record)
        self.follow = Follow(self.registry, hosts, self.status, record)
        self.stopper = Stopper(self.registry, hosts, self.follow, record)

    # -- profiles, commands, launch ----------------------------------------------------------------
    def profile(self, name: str) -> Profile:
        return self.launcher.profile(name)

    def host_python(self, host_name: str) -> str:
        return self.launcher.host_python(host_name)

    def detect_version(self, host: Host, python: str | None = None, refresh: bool = False) -> str | None:
        return self.launcher.detect_version(host, python, refresh)

    def command(self, profile: Profile, version: str | None = None, *, offline: bool = False) -> Command:
        return self.launcher.command(profile, version, offline=offline)

    def preview(self, name: str, version: str | None = None) -> Preview:
        return self.launcher.preview(name, version)

    def launch(self, name: str, preview: Preview | None = None) -> ServerRecord:
        return self.launcher.launch(name, preview)

    # -- records ------------------------------------------------------------------------------------
    def get(self, sid: int) -> ServerRecord:
        return self.registry.get(sid)

    def servers(self, active: bool = False) -> list[ServerRecord]:
        return self.registry.all(active=active)

    def last_launch(self, profile: str) -> ServerRecord | None:
        return self.registry.last_launch(profile)

    # -- status -------------------------------------------------------------------------------------
    def follower(self, sid: int) -> Follower:
        return self.status.follower(sid)

    def refresh(self, ids: list[int] | None = None, gpus: bool = True) -> list[ServerStatus]:
        return self.status.refresh(ids, gpus)

    def host_gpus(self, host_name: str) -> list[GPU]:
        return self.status.host_gpus(host_name)

    # -- following ----------------------------------------------------------------------------------
    def wait_ready(
        self,
        sid: int,
        timeout: float | None = None,
        poll: float = 1.0,
        progress: Callable[[Progress], None] | None = None,
        failing_grace: float = 10.0,
        health: bool = True,
    ) -> ServerStatus:
        return self.follow.wait_ready(sid, timeout, poll, progress, failing_grace, health)

    def tunnel(self, sid: int) -> Tunnel:
        return self.follow.tunnel(sid)

    def close_tunnel(self, sid: int) -> None:
        self.follow.close_tunnel(sid)

    def client(self, sid: int, timeout: float = 60.0) -> SGLangClient:
        return self.follow.client(sid, timeout)

    def health(self, sid: int, timeout: float = 30.0) -> bool:
        return self.follow.health(sid, timeout)

    def server_info(self, sid: int) -> dict[str, Any]:
        return self.follow.server_info(sid)

    def read_log(self, sid: int, offset: int = 0, length: int | None = None) -> bytes:
        return self.follow.read_log(sid, offset, length)

    def follow_log(
        self,
        sid: int,
        offset: int = 0,
        poll: float = 0.5,
        stop: Callable[[], bool] | None = None,
        retry_for: float = 120.0,
    ) -> Iterator[tuple[int, bytes]]:
        return self.follow.follow_log(sid, offset, poll, stop, retry_for)

    def metrics(self, sid: int, with_server_info: bool = True) -> dict[str, Any]:
        return self.follow.metrics(sid, with_server_info)

    # -- stop ---------------------------------------------------------------------------------------
    def stop(
        self, sid: int, grace: float | None = None, gpu_wait: float = 60.0, idle_mib: float | None = None
    ) -> StopResult:
        return self.stopper.stop(sid, grace, gpu_wait, idle_mib)

    @staticmethod
    def stop_grace(r: ServerRecord, grace: float | None = None) -> float:
        return Stopper.stop_grace(r, grace)

    def gpus_idle(
        self, r: ServerRecord, wait: float = 60.0, idle_mib: float | None = None, poll: float = 1.0
    ) -> tuple[bool | None, list[GPU]]:
        return self.stopper.gpus_idle(r, wait, idle_mib, poll)

    def close(self) -> None:
        self.follow.close()
