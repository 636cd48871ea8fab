"""Hosts: ``local`` and SSH machines behind one interface (see ``workbench.hosts.base.Host``).

``[hosts.NAME]`` in workbench.toml: ``address`` (hostname or ~/.ssh/config alias), ``user``,
``port``, ``identity_file``, ``python`` (the host's python, with SGLang), ``known_hosts``,
``proxy_jump``, ``ssh_config``, ``connect_timeout``, ``command_timeout``; ``kind = "local"`` for
this machine. The name ``local`` always means this machine unless the file defines it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from workbench.errors import InputError
from workbench.hosts.base import (
    ANY,
    CasConflictError,
    ChangedHostKeyError,
    FileStat,
    Host,
    HostError,
    HostKeyError,
    HostTimeoutError,
    HostUnreachableError,
    RevokedHostKeyError,
    RunResult,
    Tunnel,
    UnknownHostKeyError,
)
from workbench.numbers import Range, number

__all__ = [
    "ANY",
    "CasConflictError",
    "ChangedHostKeyError",
    "FileStat",
    "Host",
    "HostError",
    "HostKeyError",
    "HostTimeoutError",
    "HostUnreachableError",
    "Hosts",
    "RevokedHostKeyError",
    "RunResult",
    "Tunnel",
    "UnknownHostKeyError",
    "host_settings",
]

_KEYS = {
    "address",
    "user",
    "port",
    "identity_file",
    "python",
    "known_hosts",
    "proxy_jump",
    "ssh_config",
    "connect_timeout",
    "command_timeout",
    "kind",
    "gpu_idle_mib",
    "description",
}


_SECONDS = Range(0, 86400, lo_open=True)  # finite: a call with an infinite timeout never ends
_MIB = Range(0, 10**7, lo_open=True)


def host_settings(hosts: dict[str, Any], name: str, source: str = "workbench.toml") -> dict[str, Any]:
    """The validated ``[hosts.NAME]`` table (``local`` is implicit)."""
    if name not in hosts:
        if name == "local":
            return {"kind": "local"}
        known = ", ".join(sorted({*hosts, "local"}))
        raise InputError(f"{source}: no host {name!r} (known: {known})")
    table = hosts[name]
    where = f"{source}/[hosts.{name}]"
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table")
    unknown = set(table) - _KEYS
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r} (expected {', '.join(sorted(_KEYS))})")
    kind = table.get("kind", "ssh")
    if kind not in ("ssh", "local"):
        raise InputError(f"{where}.kind: expected 'ssh' or 'local', got {kind!r}")
    if kind == "ssh" and not isinstance(table.get("address"), str):
        raise InputError(f"{where}.address: expected a hostname or ssh alias")
    for key in ("port",):
        if key in table and (not isinstance(table[key], int) or not 0 < table[key] < 65536):
            raise InputError(f"{where}.{key}: expected a port number, got {table[key]!r}")
    for key, bounds in (("connect_timeout", _SECONDS), ("command_timeout", _SECONDS), ("gpu_idle_mib", _MIB)):
        if key in table:
            number(table[key], f"{where}.{key}", bounds, allow_str=False)
    for key in ("address", "user", "identity_file", "python", "known_hosts", "proxy_jump", "ssh_config"):
        if key in table and not isinstance(table[key], str):
            raise InputError(f"{where}.{key}: expected a string, got {table[key]!r}")
    return dict(table, kind=kind)


def make_host(name: str, table: dict[str, Any]) -> Host:
    if table.get("kind") == "local":
        from workbench.hosts.local import LocalHost

        return LocalHost(name, python=table.get("python"))
    from workbench.hosts.ssh import SSHHost, SSHSettings

    return SSHHost(
        SSHSettings(
            name=name,
            address=table["address"],
            user=table.get("user"),
            port=table.get("port"),
            identity_file=table.get("identity_file"),
            python=table.get("python", "python3"),
            known_hosts=table.get("known_hosts"),
            ssh_config=table.get("ssh_config"),
            proxy_jump=table.get("proxy_jump"),
            connect_timeout=float(table.get("connect_timeout", 10)),
            command_timeout=float(table.get("command_timeout", 60)),
        )
    )


class Hosts:
    """One Host object per name for the life of a Workbench: one SSH transport per host, reused."""

    def __init__(self, settings_of: Callable[[], dict[str, Any]]) -> None:
        self._settings_of = settings_of  # () -> the [hosts] tables (re-read on reload)
        self._hosts: dict[str, Host] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted({*self._settings_of(), "local"})

    def settings(self, name: str) -> dict[str, Any]:
        return host_settings(self._settings_of(), name)

    def get(self, name: str) -> Host:
        with self._lock:
            host = self._hosts.get(name)
            if host is None:
                host = self._hosts[name] = make_host(name, self.settings(name))
            return host

    def forget(self, name: str) -> None:
        with self._lock:
            host = self._hosts.pop(name, None)
        if host is not None:
            host.close()

    def close(self) -> None:
        with self._lock:
            hosts, self._hosts = list(self._hosts.values()), {}
        for h in hosts:
            h.close()
