"""The lab server across nodes, with the engines' rank semantics (``--nnodes N --node-rank R``).

The nodes meet where the engine's ranks meet (torch.distributed's store): SGLang's ``--dist-init-addr``
(without it, each node falls back to ``--host`` or 127.0.0.1 and a port of its own, and the nodes
never meet: ``srt/distributed/bootstrap.py``), vLLM's ``--master-addr``/``--master-port``. Rank 0
listens there and waits for every other rank before it loads anything; the connections stay open
for the server's life, as the process group does.

Rank 0 serves (the lab server itself, ``workbench.lab.serve``). A rank >= 1, as SGLang's
(``srt/entrypoints/engine.py``): its schedulers load their share, then a dummy health server on
``--host``/``--port`` answers ``/ping``, ``/health`` and ``/health_generate`` with 200 whatever its
state (``srt/utils/common.py``); SIGTERM is logged and ignored (it waits for rank 0's shutdown
broadcast); rank 0's shutdown ends it (``Scheduler or DataParallelController ... terminated with 0``).
When a peer dies the survivor's scheduler raises (the lab says what torch's gloo transport says:
``Connection closed by peer [ADDR]:PORT``), logs ``Scheduler hit an exception``, and the process
takes itself down as SGLang's SIGQUIT handler does. vLLM's workers (``--headless``,
``entrypoints/cli/serve.py: run_headless``) log their executor's launch and end on SIGTERM.

Every line is the engine's own wording; a rank >= 1 loads no model (it has nothing to serve).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from workbench.engine.version import Version
    from workbench.lab.serve import LabServer

SHUTDOWN = b"shutdown\n"  # rank 0's ShutdownReq broadcast


def rendezvous(args: argparse.Namespace, vllm: bool) -> tuple[str, int]:
    """Where the ranks meet: the engine's own rule."""
    if vllm:
        return str(args.master_addr), int(args.master_port)
    if args.dist_init_addr:
        host, _, port = str(args.dist_init_addr).rpartition(":")
        return host.strip("[]"), int(port)
    # no address: each node's own host and NCCL port (its own random one when not given)
    return str(args.host or "127.0.0.1"), int(args.nccl_port or _free_port())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _host_port(host: str, port: int) -> str:
    """``NetworkAddress.to_host_port_str``: IPv6 in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Group:
    """Rank 0's process group: every other rank joined, then watched for the server's life.

    Each decode round ends in a collective every rank answers (``step``, as the TP all-reduce of a
    forward): a rank that hangs holds rank 0's forward, and SGLang's scheduler watchdog
    (``srt/utils/watchdog.py``: no forward finished in ``--watchdog-timeout`` s while a batch runs)
    logs ``Scheduler watchdog timeout (...)``, waits 5 s and SIGQUITs its parent, which takes the
    process tree down."""

    def __init__(self, server: LabServer) -> None:
        a = server.args
        self.server = server
        self.nnodes = int(a.nnodes)
        self.peers: dict[int, socket.socket] = {}
        self.closing = False
        self.steps = 0  # collectives begun
        self.acked: dict[int, int] = {}  # per rank: collectives it answered
        self.cond = threading.Condition()
        self.busy_since: float | None = None  # a collective waiting since (the watchdog's "active")
        _, port = rendezvous(a, server.vllm)
        self.listener = socket.create_server(("", port), reuse_port=False)
        self.listener.settimeout(1.0)

    def wait(self) -> None:
        """Block until every rank has joined (torch.distributed's init waits the same way)."""
        while len(self.peers) < self.nnodes - 1:
            try:
                conn = self.listener.accept()[0]
            except TimeoutError:
                continue
            hello = _readline(conn)
            try:
                rank = int(json.loads(hello)["rank"])
            except (ValueError, KeyError, TypeError):
                conn.close()
                continue
            self.peers[rank] = conn
        for conn in self.peers.values():
            conn.sendall(b"go\n")
        for rank, conn in self.peers.items():
            self.acked[rank] = 0
            threading.Thread(target=self._watch, args=(rank, conn), daemon=True).start()
        timeout = self.server.args.watchdog_timeout
        if not self.server.vllm and timeout and timeout > 0:
            threading.Thread(target=self._watchdog, args=(float(timeout),), daemon=True).start()

    def step(self) -> None:
        """One collective: every other rank answers before the forward ends (no timeout of its own:
        the watchdog ends a forward that never does)."""
        with self.cond:
            self.steps += 1
            n = self.steps
            self.busy_since = time.monotonic()
        for conn in self.peers.values():
            with contextlib.suppress(OSError):  # a peer gone: its watcher takes the server down
                conn.sendall(b"step\n")
        with self.cond:
            self.cond.wait_for(lambda: all(v >= n for v in self.acked.values()))
            self.busy_since = None

    def _watchdog(self, timeout: float) -> None:
        while True:
            time.sleep(timeout / 2)
            since = self.busy_since
            if since is not None and time.monotonic() > since + timeout:
                break
        self.server.die_from_watchdog(timeout)

    def _watch(self, rank: int, conn: socket.socket) -> None:
        try:
            peer = conn.getpeername()
        except OSError:
            peer = ("?", 0)
        buf = b""
        while True:
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            if n := buf.count(b"ok\n"):
                buf = buf.rsplit(b"\n", 1)[1]
                with self.cond:
                    self.acked[rank] += n
                    self.cond.notify_all()
        if not self.closing:
            self.server.die_from_scheduler(RuntimeError(f"Connection closed by peer [{peer[0]}]:{peer[1]}"))

    def shutdown(self) -> None:
        """The ShutdownReq broadcast: every other rank stops its schedulers and exits."""
        self.closing = True
        for conn in self.peers.values():
            with contextlib.suppress(OSError):  # a peer already gone needs no shutdown
                conn.sendall(SHUTDOWN)


def _readline(conn: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            break
        buf += chunk
    return buf


def leader_line(server: LabServer) -> str:
    """vLLM's leader: ``DP group leader: ...`` (``v1/executor/multiproc_executor.py``)."""
    a = server.args
    world = int(a.tp_size) * int(a.pp_size) * int(a.dp_size or 1)
    addr = rendezvous(a, True)[0]
    return (
        f"DP group leader: node_rank={a.node_rank}, node_rank_within_dp={a.node_rank}, master_addr={addr}, "
        f"mq_connect_ip={_own_ip(addr)} (local), world_size={world}, local_world_size={world // int(a.nnodes)}"
    )


def _own_ip(toward: str) -> str:
    """The address this node uses toward ``toward`` (vLLM's ``get_ip``)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((toward, 80))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


class Worker:
    """A rank >= 1: joins rank 0, loads its share (logged), holds a dummy health server (SGLang) and
    waits for rank 0's shutdown; a lost rank 0 takes it down as a failed scheduler does."""

    def __init__(self, args: argparse.Namespace, version: Version) -> None:
        from workbench.lab.logfmt import LogFormat

        self.args = args
        self.version = version
        self.vllm = str(args.lab_engine).strip().lower().startswith("vllm")
        per_node = max(1, int(args.tp_size) // int(args.nnodes))
        self.fmt = LogFormat(version, tp_size=args.tp_size, tp_rank=per_node * int(args.node_rank))
        self.conn: socket.socket | None = None

    def log(self, msg: str, scheduler: bool = False) -> None:
        if self.vllm:
            from workbench.lab.vllm_surface import prefix

            pre = prefix("MainProcess", where="serve.py:224")
        else:
            pre = self.fmt.prefix(scheduler)
        sys.stderr.write(pre + msg + "\n")
        sys.stderr.flush()

    def run(self) -> int:
        from workbench.lab import serverargs

        a = self.args
        host, port = rendezvous(a, self.vllm)
        if self.vllm:
            version = str(a.lab_engine).split("==", 1)[1] if "==" in str(a.lab_engine) else "0.32.0"
            self.log(
                f"Launching vLLM (v{version}) headless multiproc executor, with head node address "
                f"{host}:{port} for torch.distributed process group."
            )
        else:
            self.log(self.fmt.server_args(serverargs.server_args_dict(a)))
        self.conn = self._join(host, port)
        if not self.vllm:
            self._load()
            self._health_server()
            signal.signal(signal.SIGTERM, self._on_term)
        else:
            signal.signal(signal.SIGTERM, lambda *_: self._end(0))
        return self._wait()

    def _join(self, host: str, port: int) -> socket.socket:
        """Connect to rank 0's store (retried: torch's store client waits for the server the same way)."""
        while True:
            try:
                conn = socket.create_connection((host, port), timeout=5)
                break
            except OSError:
                time.sleep(0.2)
        conn.settimeout(None)
        conn.sendall(json.dumps({"rank": int(self.args.node_rank)}).encode() + b"\n")
        if _readline(conn) != b"go\n":
            self._peer_lost(conn)
        return conn

    def _load(self) -> None:
        """The node's schedulers load their share of the model (SGLang's milestones, its TP ranks)."""
        from workbench.lab.serve import GPU_GB

        self.log(self.fmt.load_begin(GPU_GB), scheduler=True)
        self.log(self.fmt.load_end("LlamaForCausalLM", "torch.bfloat16", 0.01, GPU_GB - 0.01, 0.01), scheduler=True)
        tokens = int(self.args.max_total_tokens or 0.88 * 600000)
        self.log(self.fmt.kv_cache("torch.bfloat16", tokens, 0.01, 0.01), scheduler=True)

    def _health_server(self) -> None:
        a = self.args
        host, port = str(a.host or "127.0.0.1"), int(a.port)

        class Health(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code = 200 if self.path.split("?")[0] in ("/ping", "/health", "/health_generate") else 404
                self.send_response(code)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, fmt: str, *args: Any) -> None:  # uvicorn's log_level is "warning" there
                pass

        try:
            httpd = ThreadingHTTPServer((host, port), Health)
        except OSError as exc:
            self.log(f"Dummy health check server failed to start: {exc}")
            return
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True, name="health-check-server").start()
        self.log(f"Dummy health check server started in background thread at {_host_port(host, port)}")

    def _on_term(self, *_: object) -> None:
        self.log(
            f"SIGTERM received on node_rank {self.args.node_rank}; waiting for the rank-0 ShutdownReq broadcast "
            "to stop the schedulers."
        )

    def _wait(self) -> int:
        assert self.conn is not None
        data = b""
        while True:
            try:
                chunk = self.conn.recv(4096)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._peer_lost(self.conn)
            data += chunk
            if SHUTDOWN in data:
                return self._end(0)
            if n := data.count(b"step\n"):  # rank 0's collectives: this rank's part of each forward
                self.conn.sendall(b"ok\n" * n)
                data = data.rsplit(b"\n", 1)[1]

    def _end(self, code: int) -> int:
        if not self.vllm:  # (vLLM's worker node ends without a line: run_headless's executor returns)
            self.log(f"Scheduler or DataParallelController {os.getpid()} terminated with {code}")
        sys.stderr.flush()
        os._exit(code)

    def _peer_lost(self, conn: socket.socket) -> None:
        """Rank 0 went away without its shutdown: the scheduler raises, the process tree goes down."""
        from workbench.lab.serve import _fake_traceback

        try:
            peer = conn.getpeername()
        except OSError:
            peer = rendezvous(self.args, self.vllm)
        exc = RuntimeError(f"Connection closed by peer [{peer[0]}]:{peer[1]}")
        if self.vllm:
            from workbench.lab.vllm_surface import prefix

            for line in _fake_traceback("multiproc_executor.py", exc).splitlines():
                sys.stderr.write(prefix("MainProcess", "ERROR", "multiproc_executor.py:700") + line + "\n")
        else:
            self.log("Scheduler hit an exception: " + _fake_traceback("scheduler.py", exc), scheduler=True)
            self.log("Received sigquit from a child process. It usually means the child failed.")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def run_worker(args: argparse.Namespace, version: Version) -> int:
    return Worker(args, version).run()
