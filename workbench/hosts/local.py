"""The machine the workbench runs on: subprocess without a shell, files through the OS."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from workbench.hosts.base import (
    ANY,
    CasConflictError,
    Expect,
    FileStat,
    Host,
    HostError,
    HostTimeoutError,
    RunResult,
    Tunnel,
    check_argv,
    sha256,
)


class LocalHost(Host):
    def __init__(self, name: str = "local", python: str | None = None):
        self.name = name
        self.python = python or sys.executable
        self.round_trips = 0

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        input: bytes | None = None,
        cwd: str | None = None,
        idempotent: bool = False,
    ) -> RunResult:
        argv = [os.path.expanduser(a) if a.startswith("~/") else a for a in map(str, argv)]
        check_argv(argv, env)  # NUL bytes, variable names
        full_env = {**os.environ, **{k: str(v) for k, v in (env or {}).items()}}
        t0 = time.monotonic()
        self.round_trips += 1
        try:
            p = subprocess.run(
                argv,
                input=input,
                capture_output=True,
                timeout=timeout,
                env=full_env,
                cwd=cwd,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise HostTimeoutError(f"{self.name}: {argv[0]} did not finish within {timeout:g} s") from None
        except FileNotFoundError:
            return RunResult(argv, 127, b"", f"{argv[0]}: not found".encode(), time.monotonic() - t0)
        except OSError as exc:
            raise HostError(f"{self.name}: cannot run {argv[0]}: {exc.strerror}") from None
        return RunResult(argv, p.returncode, p.stdout, p.stderr, time.monotonic() - t0)

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        self.round_trips += 1
        try:
            with open(path, "rb") as fh:
                if offset:
                    fh.seek(offset)
                return fh.read() if length is None else fh.read(length)
        except FileNotFoundError:
            raise HostError(f"{self.location(path)}: no such file") from None
        except OSError as exc:
            raise HostError(f"{self.location(path)}: cannot read: {exc.strerror}") from None

    def write_bytes(self, path: str, data: bytes, *, expect: Expect = ANY, mode: int | None = None) -> str:
        """The one write discipline (``workbench.hosts.casfile``): flock, check, exchange."""
        from workbench.hosts import casfile

        self.round_trips += 1
        path = os.path.abspath(path)
        try:
            casfile.cas_write(path, data, casfile.ANY if expect is ANY else expect, mode)
        except casfile.ConflictError as c:
            raise CasConflictError(self.location(path), c.expected, c.actual) from None
        except casfile.BusyError as b:
            raise HostError(f"{self.location(path)}: {b}") from None
        except OSError as exc:
            raise HostError(f"{self.location(path)}: cannot write: {exc.strerror}") from None
        return sha256(data)

    def stat(self, path: str) -> FileStat | None:
        self.round_trips += 1
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileStat(st.st_size, st.st_mtime, st.st_mode)

    def location(self, path: str) -> str:
        return f"local:{os.path.abspath(path)}"

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> Tunnel:
        return Tunnel(int(remote_port))  # the port is already here

    def ping(self, timeout: float = 10.0) -> float:
        return 0.0
