"""File access behind one small interface, so remote hosts can plug in later.

A location is ``local:/abs/path`` (or ``HOST:/abs/path`` once a host resolver is registered).
``FileAccess`` needs two operations: read the bytes (None when the file is absent) and an atomic
compare-and-swap write that refuses when the file no longer has the content the caller read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Optional, Protocol

from workbench.errors import InputError, WorkbenchError

LOCAL = "local"
_CHUNK = 1 << 20


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ConflictError(WorkbenchError):
    """The file changed between read and write; nothing was written."""


class FileAccess(Protocol):
    host: str

    def read_bytes(self, path: str) -> Optional[bytes]:
        """The file's bytes, or None when it does not exist."""

    def write_cas(self, path: str, data: bytes, expected_sha256: Optional[str]) -> None:
        """Replace the file atomically iff its current sha256 is ``expected_sha256``
        (None: the file must not exist). Raises ConflictError otherwise."""


class LocalFiles:
    """Atomic writes: a temp file in the same directory, fsync, rename, fsync the directory."""

    host = LOCAL

    def read_bytes(self, path: str) -> Optional[bytes]:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory, expected a file") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None

    def _check(self, path: str, expected: Optional[str]) -> None:
        current = self.read_bytes(path)
        found = None if current is None else sha256(current)
        if found != expected:
            raise ConflictError(
                f"{path}: changed on disk since it was read (expected "
                f"{'no file' if expected is None else expected[:12]}, found "
                f"{'no file' if found is None else found[:12]}); nothing written")

    def write_cas(self, path: str, data: bytes, expected_sha256: Optional[str]) -> None:
        target = Path(path)
        directory = target.parent
        if not directory.is_dir():
            raise InputError(f"{path}: directory {directory} does not exist")
        self._check(path, expected_sha256)
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
        _clean_stale_temps(directory, target.name)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                view = memoryview(data)
                for start in range(0, len(view), _CHUNK):
                    fh.write(view[start:start + _CHUNK])
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            self._check(path, expected_sha256)   # narrow the window before the swap
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(directory)


STALE_TEMP_S = 600


def _clean_stale_temps(directory: Path, name: str) -> None:
    """Temp files of writers killed mid-write; old enough that no live writer owns them."""
    import time

    now = time.time()
    for p in directory.glob(f".{name}.*.tmp"):
        try:
            if now - p.stat().st_mtime > STALE_TEMP_S:
                p.unlink()
        except OSError:
            pass


def _fsync_dir(directory: Path) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError as exc:  # some filesystems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(dfd)


# -- locations ----------------------------------------------------------------------------------

HostResolver = Callable[[str], Optional[FileAccess]]
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

    def __init__(self, host):
        self._host = host
        self.host = host.name

    def read_bytes(self, path: str) -> Optional[bytes]:
        if self._host.stat(path) is None:
            return None
        return self._host.read_bytes(path)

    def write_cas(self, path: str, data: bytes, expected_sha256: Optional[str]) -> None:
        from workbench.hosts import CasConflict

        try:
            self._host.write_bytes(path, data, expect=expected_sha256)
        except CasConflict as exc:
            raise ConflictError(f"{exc}; nothing written") from None
