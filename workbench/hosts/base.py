"""The Host interface: run argv, read/write files (atomic, compare-and-swap), stat, tunnel, ping.

``local`` (subprocess) and SSH (paramiko) implement it. Everything that reaches a remote shell is
built from argv with ``shlex.quote``; nothing user-supplied is pasted into a command unquoted.
"""

from __future__ import annotations

import enum
import hashlib
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from workbench.errors import InputError, WorkbenchError
from workbench.results import Result

if TYPE_CHECKING:
    from typing_extensions import Self


class HostError(WorkbenchError):
    """A host could not do what was asked (unreachable, timed out, a file operation failed)."""


class HostUnreachableError(HostError):
    pass


class HostTimeoutError(HostError):
    pass


class HostKeyError(HostError):
    """Host key verification failed; nothing was sent to the host."""


class UnknownHostKeyError(HostKeyError):
    def __init__(self, host: str, where: str, key_type: str, fingerprint: str, known_hosts: str):
        self.host, self.where, self.key_type, self.fingerprint = host, where, key_type, fingerprint
        self.known_hosts = known_hosts
        super().__init__(
            f"host {host} ({where}): unknown host key {key_type} {fingerprint}; not in {known_hosts}. "
            f"If this is the right machine, trust it: eagle-workbench host trust {host} --fingerprint {fingerprint}"
        )


class ChangedHostKeyError(HostKeyError):
    def __init__(self, host: str, where: str, key_type: str, fingerprint: str, expected: str, known_hosts: str):
        self.host, self.where, self.key_type, self.fingerprint = host, where, key_type, fingerprint
        self.expected, self.known_hosts = expected, known_hosts
        super().__init__(
            f"HOST KEY CHANGED for {host} ({where}): it now presents {key_type} {fingerprint}, "
            f"{known_hosts} has {expected}. Someone may be intercepting the connection, or the host was "
            f"reinstalled. Refusing to connect; verify the new key out of band, then remove the old entry "
            f"(ssh-keygen -R '{where}' -f {known_hosts})."
        )


class RevokedHostKeyError(ChangedHostKeyError):
    """The host presents a key that known_hosts marks ``@revoked``: never accepted, never trusted."""

    def __init__(self, host: str, where: str, key_type: str, fingerprint: str, known_hosts: str):
        self.host, self.where, self.key_type, self.fingerprint = host, where, key_type, fingerprint
        self.expected, self.known_hosts = "", known_hosts
        HostKeyError.__init__(
            self,
            f"REVOKED HOST KEY for {host} ({where}): it presents {key_type} {fingerprint}, which "
            f"{known_hosts} marks @revoked. Refusing to connect; it cannot be trusted.",
        )


class CasConflictError(HostError):
    """A compare-and-swap write found content other than the expected version."""

    def __init__(self, location: str, expected: str | None, actual: str | None):
        self.location, self.expected, self.actual = location, expected, actual
        exp = "absent" if expected is None else expected[:12]
        act = "absent" if actual is None else actual[:12]
        super().__init__(f"{location}: changed since it was read (expected {exp}, found {act}); not written")


class _AnyVersion(enum.Enum):
    """The type of ``ANY`` (a one-member enum, so that ``expect is ANY`` narrows the type)."""

    ANY = "ANY"


ANY: Final = _AnyVersion.ANY  # write_bytes(expect=ANY): no compare-and-swap
Expect = str | None | _AnyVersion  # write_bytes(expect=): a sha256, None (must not exist), or ANY


@dataclass
class RunResult(Result):
    argv: list[Any]
    rc: int
    stdout: bytes = field(default=b"", repr=False)
    stderr: bytes = field(default=b"", repr=False)
    elapsed: float = 0.0

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    def check(self, what: str = "") -> RunResult:
        if self.rc != 0:
            tail = (self.err.strip() or self.out.strip()).splitlines()[-1:] or [""]
            raise HostError(f"{what or shlex.join(self.argv)[:80]}: exit {self.rc}: {tail[0][:300]}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"argv": self.argv, "rc": self.rc, "stdout": self.out, "stderr": self.err, "elapsed": self.elapsed}


@dataclass
class FileStat(Result):
    size: int
    mtime: float
    mode: int


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_argv(argv: Sequence[str], env: Mapping[str, str] | None = None, what: str = "command") -> None:
    """Refuse what no exec can carry: a NUL byte in an argument or a variable, a bad variable name
    (before anything is recorded or started, so nothing is left half-launched)."""
    for i, a in enumerate(argv):
        if "\0" in str(a):
            raise InputError(f"{what}: argument {i} ({str(a)[:40]!r}) contains a NUL byte; no program can receive it")
    for k, v in (env or {}).items():
        if not _ENV_NAME.match(str(k)):
            raise InputError(f"env: {k!r} is not a valid variable name")
        if "\0" in str(v):
            raise InputError(f"env.{k}: the value contains a NUL byte; no program can receive it")


def env_argv(env: Mapping[str, str] | None) -> list[str]:
    """``["env", "K=V", ...]`` so variables reach the command without sshd's AcceptEnv."""
    if not env:
        return []
    check_argv([], env)
    return ["env"] + [f"{k}={v}" for k, v in env.items()]


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """One shell command line for argv: every argument quoted."""
    if not argv:
        raise InputError("command: empty argv")
    check_argv(argv, env)
    parts = [str(a) for a in argv]
    line = " ".join(quote_arg(a) for a in env_argv(env) + parts)
    if cwd:
        line = f"cd {quote_arg(cwd)} && exec {line}"
    return line


def quote_arg(arg: str) -> str:
    """shlex.quote, except that a leading ``~/`` stays the remote user's home (``"$HOME"/...``)."""
    if arg.startswith("~/"):
        return '"$HOME"/' + shlex.quote(arg[2:])
    return shlex.quote(arg)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Host:
    """What the workbench needs from a machine. Subclasses: LocalHost, SSHHost."""

    name: str = ""
    python: str = "python3"
    round_trips: int = 0  # remote requests made (exec, SFTP calls); a status refresh costs one

    # -- commands ---------------------------------------------------------------------------------
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
        """``idempotent``: safe to repeat after a dropped connection (SSH retries it once)."""
        raise NotImplementedError

    def python_run(
        self,
        script: str,
        args: Sequence[str] = (),
        *,
        timeout: float = 60.0,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run a Python snippet with the host's python: ``python -c SCRIPT ARGS...``."""
        return self.run([self.python, "-c", script, *args], timeout=timeout, input=input, env=env)

    # -- files ------------------------------------------------------------------------------------
    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        raise NotImplementedError

    def write_bytes(self, path: str, data: bytes, *, expect: Expect = ANY, mode: int | None = None) -> str:
        """Atomic write (temp file + rename). ``expect``: the sha256 the current content must have,
        or None for "must not exist"; raises CasConflictError otherwise. Returns the new sha256."""
        raise NotImplementedError

    def stat(self, path: str) -> FileStat | None:
        raise NotImplementedError

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def location(self, path: str) -> str:
        """How the journal names a file on this host: ``local:/abs`` or ``HOST:/abs``."""
        return f"{self.name}:{path}"

    # -- network ----------------------------------------------------------------------------------
    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> Tunnel:
        raise NotImplementedError

    def ping(self, timeout: float = 10.0) -> float:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False


class Tunnel:
    """A local port that reaches a port on the host. ``url`` is http://127.0.0.1:LOCAL."""

    def __init__(self, local_port: int, closer: Callable[[], object] | None = None):
        self.local_port = local_port
        self._closer = closer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def close(self) -> None:
        if self._closer:
            self._closer()
            self._closer = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False
