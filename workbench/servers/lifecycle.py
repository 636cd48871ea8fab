"""Servers on hosts, one object for the facade: it composes the parts that each do one job, and the
facade calls the parts themselves.

- ``registry``: the journal's ``servers`` table and the server states (``registry.py``)
- ``launcher``: profile, command, preview, launch (``launch.py``)
- ``status``: one round trip per host: process, new log bytes, health, GPUs (``status.py``)
- ``follow``: readiness, logs, tunnels and HTTP, metrics (``follow.py``)
- ``stopper``: identity-checked stop and GPU idle (``stop.py``)

Each server's engine (``extra["engine"]``) picks its adapter (``engines.py``) wherever the parts differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.hosts import Hosts
from workbench.journal import Journal
from workbench.servers.follow import Follow
from workbench.servers.launch import Launcher
from workbench.servers.registry import Registry
from workbench.servers.status import Recorder, Status
from workbench.servers.stop import Stopper


class Lifecycle:
    def __init__(self, journal: Journal, hosts: Hosts, profiles: Callable[[], dict[str, Any]], record: Recorder):
        self.journal = journal
        self.hosts = hosts
        self.registry = Registry(journal)
        self.launcher = Launcher(self.registry, hosts, profiles)
        self.status = Status(self.registry, hosts, record)
        self.follow = Follow(self.registry, hosts, self.status, record)
        self.stopper = Stopper(self.registry, hosts, self.follow, record)

    def close(self) -> None:
        self.follow.close()
