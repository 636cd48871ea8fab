"""Ship the job bundle to a host once per version, run jobs there, bring back only the result.

On the host the bundle lives in ``~/.cache/eagle-workbench/remote/wb-<sha256[:16]>/`` (the content
hash in the name: another workbench version gets its own folder, a folder is never changed after
it is complete). A warm run is one round trip: ``python -B -c BOOT ROOT NAME`` with the job on
stdin. A cold one learns the folder is missing, uploads the tar.gz over SFTP (atomic), unpacks it
into a temporary folder and renames it into place (a concurrent installer loses the rename and
cleans up), then runs the job.

The local host runs jobs in this process: the data is already here.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError, WorkbenchError
from workbench.results import Result, jsonable

if TYPE_CHECKING:
    from workbench.hosts.base import Host, RunResult
    from workbench.remote.bundle import Bundle

CACHE_ROOT = "~/.cache/eagle-workbench/remote"
MISSING = "@@wb-missing@@"

BOOT = r"""
import json, os, sys
root = os.path.expanduser(sys.argv[1]); name = sys.argv[2]
d = os.path.join(root, name)
if not os.path.isfile(os.path.join(d, ".complete")):
    os.makedirs(root, exist_ok=True)
    sys.stdout.write("@@wb-missing@@" + json.dumps({"root": os.path.abspath(root)}) + "\n")
    sys.exit(0)
sys.path.insert(0, d)
from workbench.remote.runner import main
sys.exit(main())
"""

INSTALL = r"""
import json, os, shutil, sys, tarfile, tempfile
root, name, tarpath, digest = sys.argv[1:5]
d = os.path.join(root, name)
try:
    if os.path.isfile(os.path.join(d, ".complete")):
        print(json.dumps({"installed": False}))
        sys.exit(0)
    tmp = tempfile.mkdtemp(prefix="." + name + ".", dir=root)
    with open(tarpath, "rb") as fh:
        xz = fh.read(6) == b"\xfd7zXZ\x00"
    if xz:
        try:
            import lzma  # noqa: F401
        except ImportError:         # a python built without lzma: the bundle is resent gzip'd
            print(json.dumps({"installed": False, "no_lzma": True}))
            sys.exit(3)
    with tarfile.open(tarpath, "r:*") as tar:
        members = tar.getmembers()
        for m in members:
            if not m.isfile() or m.name.startswith("/") or ".." in m.name.split("/"):
                raise SystemExit("refusing tar member " + repr(m.name))
        for m in members:
            dest = os.path.join(tmp, m.name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with tar.extractfile(m) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
    with open(os.path.join(tmp, ".complete"), "w") as fh:
        fh.write(digest)
    try:
        os.rename(tmp, d)
        print(json.dumps({"installed": True}))
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)      # another installer finished first
        print(json.dumps({"installed": False}))
finally:
    if os.path.exists(tarpath):
        os.remove(tarpath)
"""


class RemoteJobError(WorkbenchError):
    """A job failed on the host for a reason that is not the user's input (a bug, a crash)."""


@dataclass
class Transfer(Result):
    """What crossed the network for one job, next to the tensor bytes the job compared there."""

    host: str
    job: str
    shipped_bytes: int = 0  # the code bundle, uploaded this time (0: cached on the host)
    request_bytes: int = 0  # command line + job arguments
    response_bytes: int = 0  # everything the job printed (the result and any warnings)
    wire_sent: int | None = None  # bytes on the SSH connection during the job
    wire_received: int | None = None
    tensor_bytes: int = 0
    round_trips: int = 0
    seconds: float = 0.0
    bundle: str = ""

    @property
    def moved_bytes(self) -> int:
        """Bytes moved: the SSH connection's count when there is one, else the payloads."""
        if self.wire_sent is not None and self.wire_received is not None:
            return self.wire_sent + self.wire_received
        return self.shipped_bytes + self.request_bytes + self.response_bytes

    @property
    def ratio(self) -> float | None:
        return self.moved_bytes / self.tensor_bytes if self.tensor_bytes else None

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["moved_bytes"] = self.moved_bytes
        d["ratio"] = self.ratio
        return d

    def text(self) -> str:
        r = self.ratio
        return (
            f"{_size(self.moved_bytes)} moved for {_size(self.tensor_bytes)} of tensors compared on "
            f"{self.host}"
            + (f" ({100 * r:.2f}%)" if r is not None else "")
            + (f", code shipped {_size(self.shipped_bytes)}" if self.shipped_bytes else "")
        )


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


class NearCompute:
    """Runs ``workbench.remote.jobs`` on ``host`` (a ``workbench.hosts.Host``)."""

    def __init__(
        self, host: Host, python: str | None = None, cache_root: str = CACHE_ROOT, in_process: bool | None = None
    ):
        from workbench.hosts.local import LocalHost

        self.host = host
        self.python = python or host.python
        self.cache_root = cache_root
        self.in_process = isinstance(host, LocalHost) if in_process is None else in_process

    def run(
        self, job: str, args: dict[str, Any] | None = None, timeout: float = 1800.0
    ) -> tuple[dict[str, Any], Transfer]:
        t0 = time.perf_counter()
        if self.in_process:
            from workbench.remote.jobs import JOBS

            if job not in JOBS:
                raise InputError(f"job {job!r}: not one of {', '.join(sorted(JOBS))}")
            fn: Any = JOBS[job]
            result = jsonable(fn(**(args or {})))
            tr = Transfer(
                self.host.name,
                job,
                tensor_bytes=int(result.get("tensor_bytes") or 0),
                seconds=time.perf_counter() - t0,
                bundle="in-process",
            )
            return result, tr

        from workbench.remote.bundle import current

        bundle = current()
        payload = json.dumps({"job": job, "args": jsonable(args or {})}).encode()
        tr = Transfer(self.host.name, job, bundle=bundle.name)
        w0 = self._wire()
        rt0 = getattr(self.host, "round_trips", 0)
        argv = [self.python, "-B", "-c", BOOT, self.cache_root, bundle.name]
        res = self._exec(argv, payload, timeout, tr)
        if res.out.startswith(MISSING):
            root = json.loads(res.out[len(MISSING) :].splitlines()[0])["root"]
            self._ship(bundle, root, tr)
            res = self._exec(argv, payload, timeout, tr)
        out = self._parse(res, job)
        w1 = self._wire()
        if w0 is not None and w1 is not None:
            tr.wire_sent, tr.wire_received = w1[0] - w0[0], w1[1] - w0[1]
        tr.round_trips = getattr(self.host, "round_trips", 0) - rt0
        tr.seconds = time.perf_counter() - t0
        result = out["result"]
        tr.tensor_bytes = int(result.get("tensor_bytes") or 0) if isinstance(result, dict) else 0
        return result, tr

    # -- parts ------------------------------------------------------------------------------------
    def _wire(self) -> tuple[int, int] | None:
        if not hasattr(self.host, "bytes_sent") or not hasattr(self.host, "bytes_received"):  # an SSHHost's counts
            return None
        return self.host.bytes_sent, self.host.bytes_received

    def _exec(self, argv: Sequence[str], payload: bytes, timeout: float, tr: Transfer) -> RunResult:
        from workbench.hosts.base import command_line

        tr.request_bytes += len(command_line(argv)) + len(payload)
        res = self.host.run(argv, input=payload, timeout=timeout)
        tr.response_bytes += len(res.stdout) + len(res.stderr)
        return res

    def _ship(self, bundle: Bundle, root: str, tr: Transfer) -> None:
        for fmt in ("xz", "gz"):
            data = bundle.tarball(fmt)
            tarpath = f"{root}/.{bundle.name}.{secrets.token_hex(4)}.tar.{fmt}"
            self.host.write_bytes(tarpath, data, mode=0o600)
            tr.shipped_bytes += len(data)
            argv = [self.python, "-B", "-c", INSTALL, root, bundle.name, tarpath, bundle.digest]
            res = self._exec(argv, b"", 120, tr)
            if not (res.rc == 3 and '"no_lzma": true' in res.out):
                break  # a host python without lzma takes the gzip'd copy
        if res.rc != 0:
            raise RemoteJobError(
                f"host {self.host.name}: installing the job bundle in {root} failed: "
                f"{(res.err.strip() or res.out.strip())[-300:]}"
            )

    def _parse(self, res: RunResult, job: str) -> dict[str, Any]:
        from workbench.remote.runner import MARK

        line = next((l for l in reversed(res.out.splitlines()) if l.startswith(MARK)), None)
        if line is None:
            tail = (res.err.strip() or res.out.strip())[-400:]
            raise RemoteJobError(
                f"host {self.host.name}: job {job} ended without a result (exit {res.rc}): "
                f"{tail.splitlines()[-1] if tail else 'no output'}"
            )
        out: dict[str, Any] = json.loads(line[len(MARK) :])
        if out.get("ok"):
            return out
        msg = f"host {self.host.name}: {out.get('error')}"
        if out.get("kind") == "input":
            raise InputError(msg)
        if out.get("kind") == "workbench":
            raise WorkbenchError(msg)
        raise RemoteJobError(
            msg
            + (
                f" [{out['trace'].strip().splitlines()[-2].strip()}]"
                if out.get("trace") and len(out["trace"].strip().splitlines()) > 1
                else ""
            )
        )

    def probe(self) -> dict[str, Any]:
        return self.run("probe")[0]
