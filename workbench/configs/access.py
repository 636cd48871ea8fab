"""File access behind one small interface, so remote hosts can plug in later.

A location is ``local:/abs/path`` (or ``HOST:/abs/path`` once a host resolver is registered).
``FileAccess`` needs two operations: read the bytes (None when the file is absent) and an atomic
compare-and-swap write that refuses when the file no longer has the content the caller read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from workbench.errors import InputError, WorkbenchError

if TYPE_CHECKING:
    from workbench.hosts.base import Host

LOCAL = "local"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ConflictError(WorkbenchError):
    """The file changed between read and write; nothing was written."""


class FileAccess(Protocol):
    host: str

    def read_bytes(self, path: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""

    def write_cas(self, path: str, data: bytes, expected_sha256: str | None) -> None:
        """Replace the file atomically iff its current sha256 is ``expected_sha256``
        (None: the file must not exist). Raises ConflictError otherwise."""


class LocalFiles:
    """Compare-and-swap writes through the one write discipline of every path
    (``workbench.hosts.casfile``): the same flock as ``LocalHost`` and SSH hosts take, the check
    made under it, the swap an exchange that hands back what it replaced (a hand edit saved between
    the check and the swap is put back and reported as a conflict, never overwritten)."""

    host = LOCAL

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory, expected a file") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None

    def write_cas(self, path: str, data: bytes, expected_sha256: str | None) -> None:
        from workbench.hosts import casfile

        directory = Path(path).parent
        if not directory.is_dir():
            raise InputError(f"{path}: directory {directory} does not exist")
        try:
            casfile.cas_write(path, data, expected_sha256)
        except casfile.ConflictError as c:
            raise ConflictError(
                f"{path}: changed on disk since it was read (expected "
                f"{'no file' if c.expected is None else c.expected[:12]}, found "
                f"{'no file' if c.actual is None else c.actual[:12]}); nothing written"
                + (f" ({c.note})" if c.note else "")
            ) from None
        except casfile.BusyError as b:
            raise WorkbenchError(f"{path}: {b}; nothing written") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot write: {exc.strerror}") from None


# -- locations ----------------------------------------------------------------------------------

HostResolver = Callable[[str], FileAccess | None]
_resolvers: list[HostResolver] = []


def register_host_access(resolver: HostResolver) -> None:
    """Plug in remote hosts: ``resolver(host)`` returns a FileAccess for that host, or None."""
    if resolver not in _resolvers:
        _resolvers.append(resolver)


def parse_location(text: str) -> tuple[str, str]:
    """'local:/a/b', 'HOST:/a/b' or a plain local path -> (host, absolute path)."""
    s = str(text)
    if ":" in s and not s.startswith(("/", ".", "~")):
        host, _, path = s.partition(":")
        if host and path.startswith("/") and "/" not in host:
            return host, path
    return LOCAL, str(Path(s).expanduser().resolve())


def location_of(text: str) -> str:
    host, path = parse_location(text)
    return f"{host}:{path}"


def access_for(host: str) -> FileAccess:
    if host == LOCAL:
        return LocalFiles()
    for resolver in _resolvers:
        acc = resolver(host)
        if acc is not None:
            return acc
    raise InputError(f"host {host!r}: no file access configured for it (only local paths are supported here)")


class HostFiles:
    """FileAccess over a ``workbench.hosts`` Host (SSH or local), for ``HOST:/abs/path`` locations."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self.host = host.name

    def read_bytes(self, path: str) -> bytes | None:
        if self._host.stat(path) is None:
            return None
        return self._host.read_bytes(path)

    def write_cas(self, path: str, data: bytes, expected_sha256: str | None) -> None:
        from workbench.hosts import CasConflictError

        try:
            self._host.write_bytes(path, data, expect=expected_sha256)
        except CasConflictError as exc:
            raise ConflictError(f"{exc}; nothing written") from None
