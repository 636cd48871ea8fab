"""Compare-and-swap file writes: the one write discipline of every path (local files, ``LocalHost``, and
SSH hosts, where this same file runs under the host's python with the bytes on stdin).

- One lock per file, ``.NAME.wblock`` beside it, taken with ``flock``: the kernel releases it when
  its holder dies, so a killed writer never blocks the next one, and a live one is waited for.
- Temp files are created only under the lock, so any found by the next holder belong to a writer
  that died: they are removed then.
- The check is made under the lock, and the swap is ``renameat2(RENAME_EXCHANGE)``: whatever was at
  the path at the instant of the swap comes back to us and is hashed. If a hand edit (an editor does
  not take our lock) landed between the check and the swap, it is swapped back into place and the
  write is refused as a conflict, so the edit is never overwritten and the caller stores it. Where
  the filesystem has no exchange, a hard link to the checked file is re-hashed just before the
  rename (the window shrinks to that one rename).
- "Must not exist" is ``link(tmp, path)``, which never replaces a file that appeared meanwhile.

Standard library only: the file is sent as it is to a host's python (``python -c SOURCE JSON``),
which may be as old as 3.8: annotations evaluated where a function is defined are written as
strings, so a newer spelling is never run there.
"""

import contextlib
import errno
import hashlib
import json
import os
import secrets
import sys
import time
from typing import Any

ANY = "*"  # expect: write whatever is there now (no compare)
LOCK_WAIT = 30.0  # seconds to wait for a live writer to finish
RENAME_EXCHANGE = 2
AT_FDCWD = -100  # renameat2's "relative to the working directory"
PAUSE_AT = "EAGLE_WORKBENCH_PAUSE_AT"  # test hook: point[,point] where a writer pauses
PAUSE_DIR = "EAGLE_WORKBENCH_PAUSE_DIR"  # ... announcing itself as DIR/POINT.PID until DIR/POINT.go
PAUSE_MAX = "EAGLE_WORKBENCH_PAUSE_MAX"  # ... for at most this many seconds (default 60)


class ConflictError(Exception):
    def __init__(self, expected: "str | None", actual: "str | None", note: str = "") -> None:
        super().__init__(expected, actual)
        self.expected, self.actual, self.note = expected, actual, note


class BusyError(Exception):
    """A live writer held the lock for the whole wait."""


def pause(point: str) -> None:
    """Stop at ``point`` when the environment asks (tests kill a writer exactly there)."""
    at = os.environ.get(PAUSE_AT, "")
    folder = os.environ.get(PAUSE_DIR)
    if not folder or point not in at.split(","):
        return
    # Written aside then renamed: a watcher that sees the name always reads the whole pid.
    name = f"{point}.{os.getpid()}"
    aside = os.path.join(folder, "." + name)
    with open(aside, "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(aside, os.path.join(folder, name))
    parent, deadline = os.getppid(), time.time() + float(os.environ.get(PAUSE_MAX) or 60)
    go = os.path.join(folder, point + ".go")
    while not os.path.exists(go) and time.time() < deadline and os.getppid() == parent:
        time.sleep(0.01)


HOOK = pause


def hook(point: str) -> None:
    HOOK(point)


def sha256_of(path: str) -> "str | None":
    """The file's sha256, or None when there is none."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        return None
    return h.hexdigest()


def lock_path(path: str) -> str:
    folder, base = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{base}.wblock")


def _lock(path: str, wait: float) -> "tuple[int, str]":
    """The file's lock, held by this process until ``_unlock``. The lock file is removed on release
    (nothing is left beside the file): a waiter that then locks the removed file sees that it is no
    longer the one at the path and tries again."""
    import fcntl

    lp = lock_path(path)
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(lp, os.O_RDWR | os.O_CREAT, 0o600)
        except IsADirectoryError:  # a lock directory left by an older workbench
            try:
                os.rmdir(lp)
                continue
            except OSError:
                raise BusyError(f"{lp}: a lock directory of an older writer is in the way") from None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise BusyError(f"{lp}: another writer (alive) held the lock for {wait:g} s") from None
                time.sleep(0.005)
        mine = os.fstat(fd)
        try:
            now = os.stat(lp)
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
            return fd, lp
        os.close(fd)  # its holder removed it as we waited: take the new one


def _unlock(lock: "tuple[int, str]") -> None:
    fd, lp = lock
    with contextlib.suppress(OSError):
        os.unlink(lp)
    os.close(fd)


def _exchange(a: str, b: str) -> bool:
    """Swap two paths atomically; False when the system or filesystem cannot."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), b)


def clean_temps(folder: str, base: str) -> int:
    """Temp files of writers that died (only a lock holder creates them, and we hold the lock)."""
    removed = 0
    prefix = f".{base}."
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for n in names:
        if n.startswith(prefix) and (n.endswith(".tmp") or n.endswith(".tmp.old")):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, n))
                removed += 1
    return removed


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def cas_write(
    path: str, data: bytes, expect: "str | None", mode: "int | None" = None, wait: float = LOCK_WAIT
) -> "dict[str, Any]":
    """Replace ``path`` with ``data`` iff its sha256 is ``expect`` (None: it must not exist; ANY: no
    check). Raises ConflictError (nothing written), BusyError, or OSError. Returns what happened."""
    path = os.path.abspath(path)
    folder, base = os.path.split(path)
    new_sha = hashlib.sha256(data).hexdigest()
    lock = _lock(path, wait)
    try:
        removed = clean_temps(folder, base)
        hook("locked")
        current = sha256_of(path)
        if expect not in (ANY, current):
            raise ConflictError(expect, current)
        if mode is None:
            try:
                mode = os.stat(path).st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o644
        tmp = os.path.join(folder, f".{base}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            _write_temp(tmp, data, mode)
            hook("window")  # checked; not swapped yet
            _swap(tmp, path, expect, current, new_sha)
        finally:
            if os.path.exists(tmp):
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        _fsync_dir(folder)
        return {"sha256": new_sha, "previous": current, "removed_temps": removed}
    finally:
        _unlock(lock)


def _write_temp(tmp: str, data: bytes, mode: int) -> None:
    """``data`` into a new file ``tmp``, on disk before it is swapped in."""
    with open(tmp, "xb") as fh:
        view = memoryview(data)
        for i in range(0, len(view), 1 << 20):
            fh.write(view[i : i + (1 << 20)])
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, mode)


def _swap(tmp: str, path: str, expect: "str | None", current: "str | None", new_sha: str) -> None:
    """``tmp`` into ``path``, which held ``current`` when checked: replaced (ANY), linked where
    nothing may exist, exchanged (a hand edit that came in between is put back), or, where the
    filesystem cannot exchange, renamed after a last check through a hard link."""
    folder, base = os.path.split(path)
    if expect == ANY:
        os.replace(tmp, path)
    elif current is None:
        try:
            os.link(tmp, path)  # never replaces a file that appeared meanwhile
        except FileExistsError:
            raise ConflictError(expect, sha256_of(path)) from None
        os.unlink(tmp)
    elif _exchange(tmp, path):
        was = sha256_of(tmp)  # what the path held at the instant of the swap
        if was != current:
            _exchange(tmp, path)  # a hand edit came in between: put it back
            note = ""
            if sha256_of(tmp) != new_sha:
                keep = os.path.join(folder, f"{base}.conflict-{int(time.time())}")
                os.replace(tmp, keep)
                note = "a further edit was kept in " + keep
            raise ConflictError(expect, was, note)
        os.unlink(tmp)
    else:
        aside = tmp + ".old"
        try:
            os.link(path, aside)
        except FileNotFoundError:
            raise ConflictError(expect, None) from None
        try:
            if sha256_of(aside) != current:
                raise ConflictError(expect, sha256_of(aside))
            os.rename(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(aside)


def main() -> None:
    """``python -c SOURCE JSON`` on a host, the bytes on stdin; prints one JSON object."""
    req = json.loads(sys.argv[1])
    for k, v in (req.get("pause") or {}).items():
        os.environ[k] = v
    data = sys.stdin.buffer.read()
    out: dict[str, Any] = {}  # a local annotation: never evaluated, whatever the host python
    if len(data) != req["size"] or hashlib.sha256(data).hexdigest() != req["sha256"]:
        out = {"error": "truncated", "got": len(data)}  # the sender died mid-transfer: nothing written
    else:
        try:
            out = {"ok": cas_write(req["path"], data, req["expect"], req.get("mode"), req.get("wait", LOCK_WAIT))}
        except ConflictError as c:
            out = {"conflict": True, "expected": c.expected, "actual": c.actual, "note": c.note}
        except BusyError as b:
            out = {"busy": str(b)}
        except OSError as e:
            out = {"oserror": e.errno, "strerror": e.strerror, "filename": e.filename}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
