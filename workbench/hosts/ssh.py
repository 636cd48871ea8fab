"""SSH hosts through paramiko: verified host keys, ~/.ssh/config, one reused transport per host.

Host keys: a key missing from known_hosts is refused with its fingerprint (``trust`` adds it after
the user says so); a key that differs from known_hosts is refused loudly, never replaced silently.
Every call has a timeout; a dead transport is reconnected on the next call (idempotent calls are
retried once). Commands are argv joined with ``shlex`` quoting; env goes through ``env K=V``.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import json
import os
import posixpath
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from workbench.errors import InputError
from workbench.hosts import known_hosts
from workbench.hosts.base import (
    ANY,
    CasConflictError,
    ChangedHostKeyError,
    Expect,
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
    command_line,
    sha256,
)

if TYPE_CHECKING:
    import paramiko

T = TypeVar("T")


@dataclass
class SSHSettings:
    name: str
    address: str  # hostname, IP or an alias from ~/.ssh/config
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    python: str = "python3"
    known_hosts: str | None = None
    ssh_config: str | None = None
    proxy_jump: str | None = None
    connect_timeout: float = 10.0
    command_timeout: float = 60.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Resolved:
    """Where to connect, after ~/.ssh/config: the values a connection actually uses."""

    hostname: str
    port: int
    user: str
    identity_files: list[Any]
    known_hosts: str
    proxy_jump: str | None
    connect_timeout: float

    @property
    def known_hosts_name(self) -> str:
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _ssh_config_path(s: SSHSettings) -> str | None:
    path = s.ssh_config or os.environ.get("EAGLE_WORKBENCH_SSH_CONFIG") or "~/.ssh/config"
    path = os.path.expanduser(path)
    return path if os.path.exists(path) else None


def resolve(s: SSHSettings) -> Resolved:
    """Explicit workbench.toml values win; ~/.ssh/config fills the rest (HostName, User, Port,
    IdentityFile, ProxyJump, UserKnownHostsFile, ConnectTimeout)."""
    import getpass

    import paramiko

    cfg: dict[str, Any] = {}
    path = _ssh_config_path(s)
    if path:
        try:
            cfg = paramiko.SSHConfig.from_path(path).lookup(s.address)
        except Exception as exc:  # a broken ssh config is the user's to fix; say where
            raise InputError(f"{path}: cannot parse ssh config: {exc}") from None
    hostname = cfg.get("hostname") or s.address
    port = s.port or int(cfg.get("port") or 22)
    user = s.user or cfg.get("user") or getpass.getuser()
    ids = [s.identity_file] if s.identity_file else list(cfg.get("identityfile") or [])
    ids = [os.path.expanduser(p) for p in ids]
    kh = s.known_hosts or cfg.get("userknownhostsfile") or "~/.ssh/known_hosts"
    if isinstance(kh, (list, tuple)):
        kh = kh[0]
    kh = os.path.expanduser(str(kh).split()[0])
    jump = s.proxy_jump or cfg.get("proxyjump")
    if jump and jump.lower() == "none":
        jump = None
    timeout = float(cfg.get("connecttimeout") or s.connect_timeout)
    return Resolved(hostname, port, user, ids, kh, jump, timeout)


class SSHHost(Host):
    def __init__(self, settings: SSHSettings):
        self.settings = settings
        self.name = settings.name
        self.python = settings.python or "python3"
        self.round_trips = 0
        self.connects = 0  # transports opened (reuse keeps this at 1)
        self.bytes_sent = 0  # bytes written to / read from the SSH connection (encrypted,
        self.bytes_received = 0  # framing included): what really crossed the network
        self._lock = threading.RLock()
        self._client: paramiko.SSHClient | None = None
        self._jump: SSHHost | None = None
        self._sftp_client: paramiko.SFTPClient | None = None
        self._resolved: Resolved | None = None

    # -- connection -------------------------------------------------------------------------------
    @property
    def resolved(self) -> Resolved:
        if self._resolved is None:
            self._resolved = resolve(self.settings)
        return self._resolved

    def _open_sock(self, r: Resolved) -> _Counted:
        if r.proxy_jump:
            hop = r.proxy_jump.split(",")[0].strip()
            user, _, rest = hop.rpartition("@")
            address, _, port = rest.partition(":")
            jump_settings = SSHSettings(
                name=f"{self.name}-jump",
                address=address,
                user=user or None,
                port=int(port) if port else None,
                known_hosts=r.known_hosts,
                ssh_config=self.settings.ssh_config,
                connect_timeout=self.settings.connect_timeout,
            )
            self._jump = SSHHost(jump_settings)
            jt = self._jump._transport()
            try:
                return _Counted(
                    jt.open_channel("direct-tcpip", (r.hostname, r.port), ("127.0.0.1", 0), timeout=r.connect_timeout),
                    self,
                )
            except Exception as exc:
                raise HostUnreachableError(
                    f"host {self.name}: jump host {hop} cannot reach {r.hostname}:{r.port}: {exc}"
                ) from None
        try:
            return _Counted(socket.create_connection((r.hostname, r.port), timeout=r.connect_timeout), self)
        except socket.gaierror:
            raise HostUnreachableError(f"host {self.name}: cannot resolve {r.hostname}") from None
        except TimeoutError:
            raise HostUnreachableError(
                f"host {self.name}: {r.hostname}:{r.port} did not answer within {r.connect_timeout:g} s"
            ) from None
        except OSError as exc:
            raise HostUnreachableError(f"host {self.name}: {r.hostname}:{r.port}: {exc.strerror or exc}") from None

    def _connect(self) -> paramiko.SSHClient:
        import paramiko

        r = self.resolved
        client = paramiko.SSHClient()
        kh = known_hosts.load(r.known_hosts)
        for name, kind, key in kh.entries:  # paramiko's own reader stops at marker lines
            if not kh.is_revoked(key):
                client.get_host_keys().add(name, kind, key)
        host = self

        # paramiko ships no type information (no py.typed, no stubs), so its classes are Any here
        class Refuse(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
            def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
                _refuse_unless_trusted(host.name, r, kh, key)

        client.set_missing_host_key_policy(Refuse())
        sock = self._open_sock(r)
        ids = [p for p in r.identity_files if os.path.exists(p)]
        try:
            client.connect(
                r.hostname,
                port=r.port,
                username=r.user,
                key_filename=ids or None,
                look_for_keys=not ids,
                allow_agent=True,
                timeout=r.connect_timeout,
                banner_timeout=r.connect_timeout,
                auth_timeout=r.connect_timeout,
                sock=sock,
            )
        except HostKeyError:  # refused by the policy: unknown, changed type, revoked
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            if kh.is_revoked(exc.key):
                raise RevokedHostKeyError(
                    self.name, r.known_hosts_name, exc.key.get_name(), fingerprint(exc.key), r.known_hosts
                ) from None
            raise ChangedHostKeyError(
                self.name,
                r.known_hosts_name,
                exc.key.get_name(),
                fingerprint(exc.key),
                fingerprint(exc.expected_key),
                r.known_hosts,
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise HostError(
                f"host {self.name}: authentication as {r.user} failed ({exc}); "
                f"identity files tried: {', '.join(ids) or 'default keys and agent'}"
            ) from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            client.close()
            raise HostUnreachableError(f"host {self.name}: {r.hostname}:{r.port}: {exc}") from None
        transport = client.get_transport()
        transport.set_keepalive(15)
        self._client = client
        self._sftp_client = None
        self.connects += 1
        return client

    def _transport(self) -> paramiko.Transport:
        with self._lock:
            t = self._client.get_transport() if self._client else None
            if t is None or not t.is_active():
                self._drop()
                t = self._connect().get_transport()
            return t

    def _drop(self) -> None:
        for obj in (self._sftp_client, self._client):
            try:
                if obj is not None:
                    obj.close()
            except Exception:
                pass
        self._sftp_client = None
        self._client = None
        if self._jump is not None:
            self._jump.close()
            self._jump = None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _retrying(self, fn: Callable[[], T], idempotent: bool = True) -> T:
        """Run fn; a broken transport is reopened and fn retried once when it is safe to repeat."""
        import paramiko

        try:
            return fn()
        except (OSError, paramiko.SSHException, EOFError, ConnectionError) as exc:
            if isinstance(exc, socket.timeout):
                raise HostTimeoutError(f"host {self.name}: timed out") from None
            with self._lock:
                self._drop()
            if not idempotent:
                raise HostUnreachableError(f"host {self.name}: connection lost ({exc}); not retried") from None
            try:
                return fn()
            except (OSError, paramiko.SSHException, EOFError, ConnectionError) as exc2:
                with self._lock:
                    self._drop()
                raise HostUnreachableError(f"host {self.name}: connection lost: {exc2}") from None

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
        line = command_line(argv, env, cwd)
        argv = [str(a) for a in argv]

        def go() -> RunResult:
            t0 = time.monotonic()
            chan = self._transport().open_session(timeout=self.resolved.connect_timeout)
            self.round_trips += 1
            try:
                chan.exec_command(line)
                if input:
                    chan.sendall(input)
                chan.shutdown_write()
                out, err = bytearray(), bytearray()
                deadline = t0 + timeout
                while True:
                    got = False
                    while chan.recv_ready():
                        out += chan.recv(1 << 16)
                        got = True
                    while chan.recv_stderr_ready():
                        err += chan.recv_stderr(1 << 16)
                        got = True
                    if (
                        chan.exit_status_ready()
                        and chan.eof_received
                        and not chan.recv_ready()
                        and not chan.recv_stderr_ready()
                    ):
                        break
                    if chan.closed and not chan.recv_ready() and not chan.recv_stderr_ready():
                        break
                    if got:
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise HostTimeoutError(f"host {self.name}: {argv[0]} did not finish within {timeout:g} s")
                    select.select([chan], [], [], min(remaining, 0.05))
                rc = chan.recv_exit_status()
                return RunResult(argv, rc, bytes(out), bytes(err), time.monotonic() - t0)
            finally:
                chan.close()

        return self._retrying(go, idempotent=idempotent)

    # -- files ------------------------------------------------------------------------------------
    def _sftp(self) -> paramiko.SFTPClient:
        with self._lock:
            t = self._transport()
            if self._sftp_client is None or self._sftp_client.sock.closed:
                import paramiko

                self._sftp_client = paramiko.SFTPClient.from_transport(t)
                self._sftp_client.get_channel().settimeout(self.settings.command_timeout)
                self.round_trips += 1
            return self._sftp_client

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        def go() -> bytes:
            sftp = self._sftp()
            self.round_trips += 1
            try:
                with sftp.open(path, "rb") as fh:
                    if offset:
                        fh.seek(offset)
                    if length is None:
                        fh.prefetch()
                    data: bytes = fh.read() if length is None else fh.read(length)
                    return data
            except FileNotFoundError:
                raise HostError(f"{self.location(path)}: no such file") from None
            except PermissionError:
                raise HostError(f"{self.location(path)}: permission denied") from None

        return self._retrying(go)

    def stat(self, path: str) -> FileStat | None:
        def go() -> FileStat | None:
            sftp = self._sftp()
            self.round_trips += 1
            try:
                st = sftp.stat(path)
            except FileNotFoundError:
                return None
            return FileStat(int(st.st_size or 0), float(st.st_mtime or 0), int(st.st_mode or 0))

        return self._retrying(go)

    def write_bytes(self, path: str, data: bytes, *, expect: Expect = ANY, mode: int | None = None) -> str:
        """One round trip: the host's python runs the same compare-and-swap as local writes
        (``workbench.hosts.casfile``: flock that dies with its holder, check, exchange), the bytes on
        stdin with their sha256 so a transfer cut short writes nothing."""
        from workbench.hosts import casfile

        req = {
            "path": path,
            "expect": casfile.ANY if expect is ANY else expect,
            "mode": mode,
            "size": len(data),
            "sha256": sha256(data),
            "pause": {
                k: os.environ[k] for k in (casfile.PAUSE_AT, casfile.PAUSE_DIR, casfile.PAUSE_MAX) if k in os.environ
            },
        }
        r = self.run(
            [self.python, "-c", _casfile_source(), json.dumps(req)],
            input=data,
            timeout=max(self.settings.command_timeout, casfile.LOCK_WAIT + 30),
        )
        try:
            out = json.loads(r.out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise HostError(f"{self.location(path)}: write failed (exit {r.rc}): {r.err.strip()[-300:]}") from None
        if "ok" in out:
            return sha256(data)
        if out.get("conflict"):
            raise CasConflictError(self.location(path), out.get("expected"), out.get("actual"))
        if "busy" in out:
            raise HostError(f"{self.location(path)}: {out['busy']}")
        if out.get("oserror") == errno.ENOENT:
            raise HostError(f"{self.location(path)}: folder {posixpath.dirname(path)} does not exist")
        if out.get("oserror") in (errno.EACCES, errno.EPERM):
            raise HostError(f"{self.location(path)}: permission denied")
        raise HostError(f"{self.location(path)}: cannot write: {out.get('strerror') or out.get('error')}")

    # -- network ----------------------------------------------------------------------------------
    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> Tunnel:
        return _Forwarder(self, remote_host, int(remote_port)).start()

    def ping(self, timeout: float = 10.0) -> float:
        r = self.run(["true"], timeout=timeout, idempotent=True)
        if r.rc != 0:
            raise HostError(f"host {self.name}: `true` exited {r.rc}")
        return r.elapsed

    # -- trust ------------------------------------------------------------------------------------
    def scan_key(self) -> paramiko.PKey:
        """Fetch the host's key without authenticating (for ``trust``)."""
        import paramiko

        r = self.resolved
        sock = self._open_sock(r)
        t = paramiko.Transport(sock)
        try:
            t.start_client(timeout=r.connect_timeout)
            return t.get_remote_server_key()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise HostUnreachableError(f"host {self.name}: {r.hostname}:{r.port}: {exc}") from None
        finally:
            t.close()
            if self._jump is not None:
                self._jump.close()
                self._jump = None


class _Counted:
    """A socket (or jump channel) that adds the bytes it moves to its host's counters."""

    def __init__(self, sock: socket.socket | paramiko.Channel, host: SSHHost):
        self._sock, self._host = sock, host

    def send(self, data: bytes) -> int:
        n = self._sock.send(data)
        self._host.bytes_sent += n
        return n

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)
        self._host.bytes_sent += len(data)

    def recv(self, n: int) -> bytes:
        data = self._sock.recv(n)
        self._host.bytes_received += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _Forwarder:
    """127.0.0.1:LOCAL -> (through the SSH transport) remote_host:remote_port on the host."""

    def __init__(self, host: SSHHost, remote_host: str, remote_port: int):
        self.host, self.remote = host, (remote_host, remote_port)
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.stopped = threading.Event()

    def start(self) -> Tunnel:
        threading.Thread(target=self._accept, name=f"tunnel-{self.host.name}", daemon=True).start()
        return Tunnel(self.server.getsockname()[1], self.stop)

    def stop(self) -> None:
        self.stopped.set()
        with contextlib.suppress(OSError):
            self.server.close()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client,), daemon=True).start()

    def _pump(self, client: socket.socket) -> None:
        chan = None
        try:
            transport = self.host._transport()
            chan = transport.open_channel(
                "direct-tcpip", self.remote, client.getpeername(), timeout=self.host.resolved.connect_timeout
            )
            self.host.round_trips += 1
            while not self.stopped.is_set():
                r, _, _ = select.select([client, chan], [], [], 0.5)
                if client in r:
                    data = client.recv(1 << 16)
                    if not data:
                        break
                    chan.sendall(data)
                if chan in r:
                    data = chan.recv(1 << 16)
                    if not data:
                        break
                    client.sendall(data)
        except Exception:
            pass  # the HTTP client sees a closed connection and reports it
        finally:
            for s in (chan, client):
                try:
                    if s is not None:
                        s.close()
                except Exception:
                    pass


def _casfile_source() -> str:
    from workbench.hosts import casfile

    with open(casfile.__file__, encoding="utf-8") as fh:
        return fh.read()


def _refuse_unless_trusted(name: str, r: Resolved, kh: known_hosts.KnownHosts, key: paramiko.PKey) -> None:
    """A key known_hosts does not list for the host is refused: revoked, changed (the host is known
    with keys of another type: a changed key type is a changed key), or unknown (trust it explicitly)."""
    fp = fingerprint(key)
    if kh.is_revoked(key):
        raise RevokedHostKeyError(name, r.known_hosts_name, key.get_name(), fp, r.known_hosts)
    have = kh.lookup(r.known_hosts_name)
    if have and all(k != key for k in have.values()):
        expected = ", ".join(f"{t} {fingerprint(k)}" for t, k in sorted(have.items()))
        raise ChangedHostKeyError(name, r.known_hosts_name, key.get_name(), fp, expected, r.known_hosts)
    if not have:
        raise UnknownHostKeyError(name, r.known_hosts_name, key.get_name(), fp, r.known_hosts)


def trust_key(host: SSHHost, expected_fingerprint: str | None = None) -> dict[str, Any]:
    """Add the host's current key to its known_hosts, only when the host has no key there at all
    (of any type) and the key is not revoked. With ``expected_fingerprint`` the key must be the one
    the user saw (no swap between look and trust). A known host's key is never replaced or joined by
    another: that is a changed key, removed by hand (ssh-keygen -R) after checking it out of band."""
    from workbench.hosts.local import LocalHost

    r = host.resolved
    key = host.scan_key()
    fp = fingerprint(key)
    if expected_fingerprint and expected_fingerprint != fp:
        raise HostError(f"host {host.name}: presents {fp}, not the {expected_fingerprint} you approved; not trusted")
    kh = known_hosts.load(r.known_hosts)
    have = kh.lookup(r.known_hosts_name)
    if not kh.is_revoked(key) and any(k == key for k in have.values()):
        return {
            "host": host.name,
            "entry": r.known_hosts_name,
            "fingerprint": fp,
            "added": False,
            "known_hosts": r.known_hosts,
        }
    with contextlib.suppress(UnknownHostKeyError):  # the one case trust is for
        _refuse_unless_trusted(host.name, r, kh, key)
    os.makedirs(os.path.dirname(os.path.abspath(r.known_hosts)), exist_ok=True)
    local = LocalHost()
    exists = os.path.exists(r.known_hosts)
    raw = Path(r.known_hosts).read_bytes() if exists else b""
    sep = b"\n" if raw and not raw.endswith(b"\n") else b""
    line = f"{r.known_hosts_name} {key.get_name()} {key.get_base64()}\n".encode()
    local.write_bytes(
        r.known_hosts, raw + sep + line, expect=sha256(raw) if exists else None, mode=None if exists else 0o600
    )
    return {
        "host": host.name,
        "entry": r.known_hosts_name,
        "fingerprint": fp,
        "added": True,
        "known_hosts": r.known_hosts,
    }
