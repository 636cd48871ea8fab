"""SGLang servers on hosts: preview, launch, follow, readiness, status, metrics, stop.

State is derived from facts, refreshed in one round trip per host: the process (from /proc: a
zombie is dead, a pid with another start time is someone else's), the log (followed by byte
offset, parsed incrementally), and the GPUs (nvidia-smi CSV). The journal's ``servers`` table
holds what was launched (pid, group, start time, boot id, argv, env, log, draft config sha).
"""

from __future__ import annotations

import base64
import json
from collections import deque
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from workbench.errors import InputError, WorkbenchError
from workbench.hosts import Host, HostError, HostKeyError, Hosts
from workbench.hosts.base import sha256
from workbench.journal import Journal
from workbench.progress import Progress
from workbench.results import Result
from workbench.sglang import remote
from workbench.sglang.command import Command, build, diff_argv
from workbench.sglang.logparse import HINTS, LogParser, LogScan, classify
from workbench.sglang.profiles import Profile, load_profile, split_flags
from workbench.sglang.validate import (PROBE_KEYS, Finding, doctor_findings, parse_probe,
                                       parser_findings, rule_findings)

GPU_QUERY_FIELDS = ("index", "memory.used", "memory.total", "utilization.gpu")
READ_CAP = 1 << 22           # log bytes fetched per refresh
SERIES_LEN = 240             # decode samples kept per server for sparklines
TAIL_LINES = 5000            # raw log lines kept per server for log panes

# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class GPU(Result):
    index: int
    used_mib: Optional[float]
    total_mib: Optional[float]
    util: Optional[float]


def parse_gpus(csv: str) -> list[GPU]:
    """``index, memory.used, memory.total, utilization.gpu`` rows (noheader, nounits); fields may
    read ``[N/A]`` or ``[Not Supported]``."""
    out = []
    for line in csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].isdigit():
            continue

        def num(s):
            try:
                return float(s)
            except ValueError:
                return None

        out.append(GPU(int(parts[0]), num(parts[1]), num(parts[2]), num(parts[3])))
    return out


@dataclass
class Preview(Result):
    profile: str
    host: str
    version: Optional[str]
    command: dict
    display: str
    diff: list
    findings: list
    warnings: list
    draft_config_sha256: Optional[str] = None

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["ok"] = self.ok
        return d


@dataclass
class ServerRecord(Result):
    id: int
    profile: str
    host: str
    pid: Optional[int]
    pgid: Optional[int]
    starttime: Optional[int]
    port: Optional[int]
    log: str
    argv: list
    env: dict
    draft_config_sha256: Optional[str]
    state: str
    launched: float
    stopped: Optional[float]
    extra: dict = field(default_factory=dict)


def _failed_alive(r: "ServerRecord") -> bool:
    """Failed or exited while processes of it live on (a hang after an exception, or the children of a
    dead leader, like SGLang's scheduler processes): not finished until they are gone."""
    return r.state in ("failed", "exited") and r.stopped is None and r.pid is not None


@dataclass
class ServerStatus(Result):
    id: int
    profile: str
    host: str
    state: str                    # starting, ready, failed, exited, stopped, unknown
    process: str                  # running, zombie, gone, replaced, leftover (leader gone, children live), unknown
    pid: Optional[int]
    port: Optional[int]
    uptime_s: Optional[float]
    log_size: Optional[int]
    stale: bool = False
    error: Optional[str] = None
    progress: list = field(default_factory=list)     # milestone names reached, in order
    stage: str = ""
    failure: Optional[dict] = None
    metrics: dict = field(default_factory=dict)      # last decode line
    series: dict = field(default_factory=dict)       # accept_len / gen_throughput history
    gpus: list = field(default_factory=list)
    checked: float = 0.0


@dataclass
class StopResult(Result):
    id: int
    result: str
    signals: list
    remaining: list
    elapsed: Optional[float]
    gpus_idle: Optional[bool]
    gpus: list
    message: str = ""


STAGES = [("server_args", "arguments"), ("weights_target", "target weights"),
          ("weights_draft", "draft weights"), ("kv_cache", "KV cache"),
          ("graphs_target", "target CUDA graphs"), ("graphs_draft", "draft CUDA graphs"),
          ("ready", "ready")]


# ---------------------------------------------------------------------------------------------
# Per-server log follower (in memory; the log itself is the source of truth)
# ---------------------------------------------------------------------------------------------
class Follower:
    def __init__(self):
        self.offset = 0
        self.parser = LogParser()
        self.events: list[dict] = []
        self.last_decode: dict = {}
        self.series: dict[str, list] = {"time": [], "accept_len": [], "gen_throughput": []}
        self.decode_lines = 0
        self.tail: deque = deque(maxlen=TAIL_LINES)   # (line number, text) for log panes
        self.total_lines = 0
        self._partial = b""

    def feed(self, data: bytes, offset: int) -> LogScan:
        if offset < self.offset:          # truncated or rotated: start again
            self.__init__()
        self.offset = offset + len(data)
        scan = self.parser.feed(data)
        buf = self._partial + data
        cut = buf.rfind(b"\n") + 1
        self._partial = buf[cut:]
        for line in buf[:cut].decode("utf-8", errors="replace").splitlines():
            self.total_lines += 1
            self.tail.append((self.total_lines, line))
        self.events.extend(scan.events)
        d = scan.decode
        if len(d):
            self.decode_lines += len(d)
            tail = max(0, len(d) - SERIES_LEN)
            times = d.times()[tail:]
            al = d.column("accept_len")[tail:].tolist()
            gt = d.column("gen_throughput")[tail:].tolist()
            for key, vals in (("time", times), ("accept_len", al), ("gen_throughput", gt)):
                self.series[key] = (self.series[key] + vals)[-SERIES_LEN:]
            self.last_decode = d.record(len(d) - 1)
        return scan

    def lines_since(self, seen: int) -> list[tuple[int, str]]:
        """Log lines numbered after ``seen`` that are still in the tail."""
        return [(n, t) for n, t in self.tail if n > seen]

    def progress(self) -> list[str]:
        names = set()
        for e in self.events:
            if e["kind"] != "milestone":
                continue
            n, role = e["name"], e.get("role")
            if n == "server_args":
                names.add("server_args")
            elif n == "weights_end":
                names.add(f"weights_{role}")
            elif n == "kv_cache":
                names.add("kv_cache")
            elif n == "graph_end":
                names.add(f"graphs_{role}")
            elif n == "ready":
                names.add("ready")
        return [k for k, _ in STAGES if k in names]

    def stage(self) -> str:
        """What the server is doing now (the last begin without its end)."""
        last = None
        for e in self.events:
            if e["kind"] == "milestone":
                last = e
        if last is None:
            return "starting"
        role = last.get("role", "")
        return {"server_args": "loading", "weights_begin": f"loading {role} weights",
                "weights_end": f"{role} weights loaded", "kv_cache": "KV cache allocated",
                "graph_begin": f"capturing {role} CUDA graphs", "graph_end": f"{role} CUDA graphs captured",
                "ready": "ready"}.get(last["name"], last["name"])

    @property
    def ready(self) -> bool:
        return any(e.get("name") == "ready" for e in self.events)

    def failures(self) -> list[dict]:
        return [e for e in self.events if e["kind"] == "failure"]


# ---------------------------------------------------------------------------------------------
# The service
# ---------------------------------------------------------------------------------------------
class Lifecycle:
    def __init__(self, journal: Journal, hosts: Hosts, profiles: Callable[[], dict],
                 record: Callable[[str, str, object], int]):
        self.journal = journal
        self.hosts = hosts
        self._profiles = profiles
        self._record = record
        self._followers: dict[int, Follower] = {}
        self._versions: dict[str, Optional[str]] = {}
        self._probes: dict[str, dict] = {}
        self._host_locks: dict[str, threading.Lock] = {}
        self._tunnels: dict[int, object] = {}
        self._last: dict[int, ServerStatus] = {}
        self._gpus: dict[str, list] = {}
        self._lock = threading.RLock()

    # -- profiles and commands ----------------------------------------------------------------------
    def profile(self, name: str) -> Profile:
        return load_profile(self._profiles(), name)

    def host_python(self, host_name: str) -> str:
        """The host's python: [hosts.NAME].python, or python3 (this interpreter for local hosts)."""
        return self.hosts.get(host_name).python

    def detect_version(self, host: Host, python: Optional[str] = None, refresh: bool = False) -> Optional[str]:
        key = f"{host.name}:{python or host.python}"
        if refresh or key not in self._versions:
            r = host.run([python or host.python, "-c", remote.PROBE, remote.as_arg({"argv": None})],
                         timeout=60)
            self._versions[key] = parse_probe(r.out).get("version") if r.rc == 0 else None
        return self._versions[key]

    def command(self, profile: Profile, version: Optional[str] = None, *, offline: bool = False) -> Command:
        """The launch command; the version comes from the caller, the profile, or the host."""
        python = self.host_python(profile.host)
        warnings: list[str] = []
        v = version or profile.sglang_version
        if v is None and not offline:
            try:
                v = self.detect_version(self.hosts.get(profile.host), _python_of(profile, python))
                if v is None:
                    warnings.append(f"SGLang is not installed for the launcher's python on {profile.host}: "
                                    "flags spelled as written")
            except (HostError, InputError) as exc:
                warnings.append(f"version unknown ({exc}); flags spelled as written")
        cmd = build(profile, v, python)
        cmd.warnings = warnings + cmd.warnings
        return cmd

    def last_launch(self, profile: str) -> Optional[ServerRecord]:
        rows = list(self.journal.iter_rows("SELECT * FROM servers WHERE profile = ? ORDER BY id DESC LIMIT 1",
                                           (profile,)))
        return _record_of(rows[0]) if rows else None

    def preview(self, name: str, version: Optional[str] = None) -> Preview:
        """Everything checked before anything starts: command, diff, host parser, rules."""
        profile = self.profile(name)
        host = self.hosts.get(profile.host)
        findings: list[Finding] = []
        python = _python_of(profile, self.host_python(profile.host))
        reachable = True
        v = version or profile.sglang_version
        if v is None:
            try:
                v = self.detect_version(host, python)
            except HostKeyError:
                raise
            except HostError as exc:   # one failed contact is enough: nothing else is tried
                reachable = False
                findings.append(Finding("error", "host-unreachable", str(exc), "check the host", "host"))
        cmd = build(profile, v, python)
        if v is None and reachable:
            cmd.warnings.insert(0, f"SGLang is not installed for {python} on {profile.host}: flags spelled as written")
        probe = {}
        # the parser's verdict does not depend on the port number: one probe serves all ports
        args = list(cmd.sglang_args)
        if "--port" in args:
            args[args.index("--port") + 1] = "0"
        key = json.dumps([profile.host, python, args])
        try:
            probe = self._probes.get(key) or {}
            if not probe and reachable:
                r = host.run([python, "-c", remote.PROBE,
                              remote.as_arg({"argv": cmd.sglang_args, "keys": PROBE_KEYS})], timeout=120)
                probe = parse_probe(r.out) if r.rc == 0 else {"version": None, "error": r.err.strip()[-300:]}
                if r.rc == 0 and probe.get("ok") is not None:
                    self._probes[key] = probe     # the same command gets the same verdict
        except HostKeyError:
            raise
        except HostError as exc:
            findings.append(Finding("error", "host-unreachable", str(exc), "check the host", "host"))
        if probe:
            findings += parser_findings(probe)
        draft_cfg, draft_sha = self._draft_config(host, profile) if reachable else (None, None)
        from workbench.engine.flags import cuda_graph_on

        doctor = doctor_findings(host, profile, cmd.version or probe.get("version"), draft_cfg,
                                 cuda_graph=cuda_graph_on(cmd.argv))
        rules = rule_findings(profile, cmd, draft_cfg)
        if any(f.code == "algorithm-mismatch" for f in doctor):
            rules = [f for f in rules if f.code != "spec-eagle3-under-eagle"]
        findings += rules + doctor
        findings += self._port_findings(profile)
        last = self.last_launch(name)
        return Preview(name, profile.host, cmd.version, cmd.to_dict(), cmd.display,
                       diff_argv(last.argv if last else None, cmd.argv), findings, cmd.warnings, draft_sha)

    def _draft_config(self, host: Host, profile: Profile):
        if not profile.draft or not (profile.draft.startswith(("/", "~", "."))):
            return None, None
        path = profile.draft.rstrip("/") + "/config.json"
        try:
            raw = host.read_bytes(path)
        except HostError:
            return None, None
        try:
            return json.loads(raw), sha256(raw)
        except ValueError:
            return None, sha256(raw)

    def _port_findings(self, profile: Profile) -> list[Finding]:
        busy = [s for s in self.servers(active=True) if s.host == profile.host and s.port == profile.port]
        return [Finding("error", "port-taken", f"server {s.id} ({s.profile}) already uses port {s.port} on "
                        f"{s.host}", "stop it or change the profile's port") for s in busy]

    # -- launch -----------------------------------------------------------------------------------
    def launch(self, name: str, preview: Optional[Preview] = None) -> ServerRecord:
        preview = preview or self.preview(name)
        errors = [f for f in preview.findings if f.severity == "error"]
        if errors:
            raise WorkbenchError(f"profile {name}: not launched: {errors[0].message}"
                                 + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""))
        profile = self.profile(name)
        host = self.hosts.get(profile.host)
        cmd = preview.command
        python = _python_of(profile, self.host_python(profile.host))
        now = time.time()
        with self.journal.transaction() as db:
            cur = db.execute(
                "INSERT INTO servers(profile, host, port, log_path, argv, env, draft_config_sha256, state, "
                "launched, extra) VALUES (?, ?, ?, ?, ?, ?, ?, 'launching', ?, ?)",
                (name, profile.host, profile.port, cmd["log"], json.dumps(cmd["argv"]), json.dumps(cmd["env"]),
                 preview.draft_config_sha256, now,
                 json.dumps({"version": preview.version, "display": preview.display, "gpus": _gpus_of(profile, cmd),
                             "stop_grace": profile.stop_grace, "ready_timeout": profile.ready_timeout})))
            sid = int(cur.lastrowid)
        argv = remote.launch_line(python, cmd["argv"], cmd["env"], cmd["log"], cmd.get("run_dir"))
        try:
            r = host.run(argv, timeout=60)
        except HostError as exc:
            self._set(sid, state="failed", extra={"failure": {"class": "launch", "text": str(exc)}})
            raise
        if r.rc != 0 or not r.out.strip():
            self._set(sid, state="failed", extra={"failure": {"class": "launch", "text": r.err.strip()[-300:]}})
            raise WorkbenchError(f"profile {name}: the launch command failed (exit {r.rc}): "
                                 f"{(r.err.strip() or r.out.strip())[-300:]}")
        ident = json.loads(r.out.strip().splitlines()[-1])
        st = ident.get("stat") or {}
        self.journal.db.execute(
            "UPDATE servers SET pid = ?, pgid = ?, start_time = ?, state = 'starting' WHERE id = ?",
            (ident["pid"], st.get("pgid"), str(st.get("starttime")) if st else None, sid))
        self._set(sid, extra={"boot_id": ident.get("boot_id")})
        if preview.draft_config_sha256:
            self._keep_draft_blob(host, profile, preview.draft_config_sha256)
        return self.get(sid)

    def _keep_draft_blob(self, host: Host, profile: Profile, sha: str) -> None:
        """The launched draft config's bytes, content-addressed like the config history's."""
        try:
            raw = host.read_bytes(profile.draft.rstrip("/") + "/config.json")
        except HostError:
            return
        if sha256(raw) == sha:
            self.journal.db.execute("INSERT OR IGNORE INTO blobs(sha256, content) VALUES (?, ?)", (sha, raw))

    # -- records ----------------------------------------------------------------------------------
    def get(self, sid: int) -> ServerRecord:
        rows = list(self.journal.iter_rows("SELECT * FROM servers WHERE id = ?", (int(sid),)))
        if not rows:
            raise InputError(f"server {sid}: no such server (see `eagle-workbench server status`)")
        return _record_of(rows[0])

    def servers(self, active: bool = False) -> list[ServerRecord]:
        """Every server, or (``active``) those whose processes may still run: the live states, and a
        server that failed or exited while processes of it live on (they still hold its port and
        GPUs): ``_failed_alive``."""
        sql = "SELECT * FROM servers"
        if active:
            sql += (" WHERE state IN ('launching', 'starting', 'ready', 'stopping')"
                    " OR (state IN ('failed', 'exited') AND stopped IS NULL AND pid IS NOT NULL)")
        return [_record_of(r) for r in self.journal.iter_rows(sql + " ORDER BY id")]

    def _set(self, sid: int, state: Optional[str] = None, extra: Optional[dict] = None,
             stopped: Optional[float] = None, expect: Optional[str] = None) -> bool:
        """Update a server row; with ``expect``, only if its state is still that (a stop and a
        refresh may race: the refresh must not call a server the user is stopping "exited")."""
        with self.journal.transaction() as db:
            row = db.execute("SELECT state, extra FROM servers WHERE id = ?", (sid,)).fetchone()
            if row is None or (expect is not None and row["state"] != expect):
                return False
            ex = json.loads(row["extra"] or "{}")
            if extra:
                ex.update(extra)
            db.execute("UPDATE servers SET state = ?, extra = ?, stopped = COALESCE(?, stopped) WHERE id = ?",
                       (state or row["state"], json.dumps(ex), stopped, sid))
        return True

    def follower(self, sid: int) -> Follower:
        with self._lock:
            f = self._followers.get(sid)
            if f is None:
                f = self._followers[sid] = Follower()
            return f

    # -- status: one round trip per host ------------------------------------------------------------
    def refresh(self, ids: Optional[list] = None, gpus: bool = True) -> list[ServerStatus]:
        """Status of servers (default: every server not known to be finished), one remote round
        trip per host: process state, new log bytes, GPUs."""
        recs = [self.get(i) for i in ids] if ids else self.servers(active=True)
        by_host: dict[str, list[ServerRecord]] = {}
        for r in recs:
            by_host.setdefault(r.host, []).append(r)
        out = []
        for host_name, group in by_host.items():
            out += self._refresh_host(host_name, group, gpus)
        return sorted(out, key=lambda s: s.id)

    def _refresh_host(self, host_name: str, recs: list[ServerRecord], gpus: bool) -> list[ServerStatus]:
        # one refresh of a host at a time: followers advance by offset and must not see a chunk twice
        with self._lock:
            lock = self._host_locks.setdefault(host_name, threading.Lock())
        with lock:
            return self._refresh_host_locked(host_name, [self.get(r.id) for r in recs], gpus)

    def _refresh_host_locked(self, host_name: str, recs: list[ServerRecord], gpus: bool) -> list[ServerStatus]:
        req = {"servers": [], "gpus": gpus}
        for r in recs:
            f = self.follower(r.id)
            live = r.state in ("launching", "starting", "ready", "stopping") or _failed_alive(r)
            req["servers"].append({"id": r.id, "pid": r.pid if live else None, "pgid": r.pgid if live else None,
                                   "starttime": r.starttime,
                                   "boot_id": r.extra.get("boot_id"), "log": r.log, "offset": f.offset,
                                   "cap": READ_CAP})
        try:
            host = self.hosts.get(host_name)
            res = host.run([self.host_python(host_name),
                            "-c", remote.STATUS, remote.as_arg(req)], timeout=30, idempotent=True)
            if res.rc != 0:
                raise HostError(f"host {host_name}: status script exit {res.rc}: {res.err.strip()[-200:]}")
            data = json.loads(res.out)
        except (HostError, InputError, ValueError) as exc:
            return [self._stale(r, str(exc)) for r in recs]
        g = data.get("gpus") or {}
        gpu_rows = parse_gpus(g.get("csv", "")) if g.get("rc") == 0 else []
        if g:
            self._gpus[host_name] = gpu_rows
        gpu_error = g.get("err") if g.get("rc") else None
        return [self._derive(r, row, gpu_rows, gpu_error) for r, row in zip(recs, data["servers"])]

    def _stale(self, r: ServerRecord, error: str) -> ServerStatus:
        last = self._last.get(r.id)
        if last is not None:
            s = ServerStatus(**{**last.__dict__, "stale": True, "error": error})
        else:
            s = ServerStatus(r.id, r.profile, r.host, "unknown" if r.state in ("launching", "starting", "ready")
                             else r.state, "unknown", r.pid, r.port, None, None, stale=True, error=error)
        return s

    def _derive(self, r: ServerRecord, row: dict, gpu_rows: list, gpu_error: Optional[str]) -> ServerStatus:
        f = self.follower(r.id)
        if row.get("data"):
            f.feed(base64.b64decode(row["data"]), row.get("offset", 0))
        proc = row["state"] if r.pid else "gone"
        leftover = row.get("leftover") or []
        state = r.state
        failure = r.extra.get("failure")
        fails = f.failures()
        if r.state in ("launching", "starting", "ready"):
            if proc in ("gone", "zombie", "replaced"):
                verdict = classify(f.events, process_alive=False)
                if r.state == "ready" or f.ready:
                    state = "exited"
                else:
                    state = "failed"
                failure = verdict
                # children that outlive the leader keep the server unfinished (and stoppable)
                if self._set(r.id, state=state, extra={"failure": verdict, "leftover": leftover},
                             stopped=None if leftover else time.time(), expect=r.state):
                    self._record("server.exited" if state == "exited" else "server.failed", f"server:{r.id}",
                                 {"failure": verdict, "profile": r.profile})
                else:
                    state, failure = self.get(r.id).state, None
            elif fails:
                failure = classify(f.events)
                state = "failing"
            elif f.ready:
                state = "ready"
                if r.state != "ready" and self._set(r.id, state="ready", extra={"ready_at": time.time()},
                                                    expect=r.state):
                    self._record("server.ready", f"server:{r.id}", {"profile": r.profile})
            else:
                state = "starting"
        elif _failed_alive(r) and proc in ("gone", "zombie", "replaced"):
            if not leftover:
                # the server's last process is gone at last: it no longer holds anything
                if self._set(r.id, stopped=time.time(), extra={"leftover": []}, expect=r.state):
                    self._record("server.gone", f"server:{r.id}", {"profile": r.profile, "process": proc})
            elif leftover != r.extra.get("leftover"):
                self._set(r.id, extra={"leftover": leftover}, expect=r.state)
        if leftover and proc in ("gone", "zombie"):
            proc = "leftover"
        mine = set(r.extra.get("gpus") or [])
        gpus = [g for g in gpu_rows if not mine or g.index in mine]
        s = ServerStatus(
            r.id, r.profile, r.host, state, proc, r.pid, r.port, row.get("age_s"), row.get("log_size"),
            error=gpu_error, progress=f.progress(), stage=f.stage() if state == "starting" else state,
            failure=failure, metrics=f.last_decode, series={k: list(v) for k, v in f.series.items()},
            gpus=gpus, checked=time.time())
        self._last[r.id] = s
        return s

    # -- readiness --------------------------------------------------------------------------------
    def wait_ready(self, sid: int, timeout: Optional[float] = None, poll: float = 1.0,
                   progress: Optional[Callable[[Progress], None]] = None,
                   failing_grace: float = 10.0, health: bool = True) -> ServerStatus:
        r = self.get(sid)
        timeout = timeout if timeout is not None else float(r.extra.get("ready_timeout", 1200))
        deadline = time.monotonic() + timeout
        failing_since = None
        last_stage = None
        while True:
            s = self.refresh([sid])[0]
            if progress and s.stage != last_stage:
                progress(Progress("server.start", len(s.progress), len(STAGES), s.stage))
                last_stage = s.stage
            if s.state in ("failed", "exited", "stopped"):
                return s
            if s.state == "failing":
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > failing_grace:
                    s.state = "failed"
                    self._set(sid, state="failed", extra={"failure": s.failure})
                    self._record("server.failed", f"server:{sid}", {"failure": s.failure, "alive": True})
                    return s
            elif s.state == "ready":
                if not health or self.health(sid):
                    return s
            if time.monotonic() > deadline:
                s.state = "timeout"
                s.failure = {"class": "timeout", "hint": f"not ready after {timeout:g} s (stage: {s.stage})",
                             "text": s.stage}
                self._record("server.timeout", f"server:{sid}", {"stage": s.stage})
                return s
            time.sleep(poll)

    # -- tunnels and HTTP -------------------------------------------------------------------------
    def tunnel(self, sid: int):
        with self._lock:
            t = self._tunnels.get(sid)
            if t is None:
                r = self.get(sid)
                t = self._tunnels[sid] = self.hosts.get(r.host).forward(r.port)
            return t

    def close_tunnel(self, sid: int) -> None:
        with self._lock:
            t = self._tunnels.pop(sid, None)
        if t is not None:
            t.close()

    def client(self, sid: int, timeout: float = 60.0):
        from workbench.sglang.client import SGLangClient

        return SGLangClient(self.tunnel(sid).url, timeout=timeout)

    def health(self, sid: int, timeout: float = 30.0) -> bool:
        from workbench.sglang.client import ServerHTTPError

        try:
            return self.client(sid).health_generate(timeout=timeout)
        except ServerHTTPError:
            return False

    def server_info(self, sid: int) -> dict:
        from workbench.sglang.client import spec_summary

        info = self.client(sid).server_info()
        return {"summary": spec_summary(info), "info": info}

    # -- logs -------------------------------------------------------------------------------------
    def read_log(self, sid: int, offset: int = 0, length: Optional[int] = None) -> bytes:
        r = self.get(sid)
        host = self.hosts.get(r.host)
        st = host.stat(r.log)
        if st is None:
            raise WorkbenchError(f"server {sid}: log {r.log} does not exist on {r.host}")
        if length is None:
            length = max(0, st.size - offset)
        return host.read_bytes(r.log, offset, length) if length else b""

    def follow_log(self, sid: int, offset: int = 0, poll: float = 0.5, stop: Optional[Callable[[], bool]] = None,
                   retry_for: float = 120.0) -> Iterator[tuple[int, bytes]]:
        """Yield (offset, bytes) as the log grows. Offsets make it resumable: a dropped
        connection is reopened and reading goes on from the last byte received."""
        r = self.get(sid)
        host = self.hosts.get(r.host)
        python = self.host_python(r.host)
        down_since = None
        while stop is None or not stop():
            req = {"servers": [{"id": sid, "pid": None, "log": r.log, "offset": offset, "cap": READ_CAP}],
                   "gpus": False}
            try:
                res = host.run([python, "-c", remote.STATUS, remote.as_arg(req)], timeout=30, idempotent=True)
                row = json.loads(res.out)["servers"][0]
                down_since = None
            except (HostError, ValueError) as exc:
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since > retry_for:
                    raise WorkbenchError(f"server {sid}: log unreachable for {retry_for:g} s: {exc}") from None
                time.sleep(poll)
                continue
            data = base64.b64decode(row.get("data") or "")
            at = row.get("offset", offset)
            if data:
                yield at, data
                offset = at + len(data)
            elif row.get("log_size") is not None and row["log_size"] < offset:
                offset = 0
            else:
                time.sleep(poll)

    # -- metrics ----------------------------------------------------------------------------------
    def metrics(self, sid: int, with_server_info: bool = True) -> dict:
        s = self.refresh([sid], gpus=False)[0]
        f = self.follower(sid)
        al = [x for x in f.series["accept_len"] if x == x]
        gt = [x for x in f.series["gen_throughput"] if x == x]
        out = {"id": sid, "state": s.state, "decode_lines": f.decode_lines, "last": f.last_decode,
               "accept_len_mean": _mean(al[-20:]), "gen_throughput_mean": _mean(gt[-20:])}
        if with_server_info and s.state in ("ready", "starting", "failing"):
            try:
                out["server_info"] = self.server_info(sid)["summary"]
            except WorkbenchError as exc:
                out["server_info_error"] = str(exc)
        return out

    # -- stop -------------------------------------------------------------------------------------
    def stop(self, sid: int, grace: Optional[float] = None, gpu_wait: float = 60.0,
             idle_mib: Optional[float] = None) -> StopResult:
        r = self.get(sid)
        if r.pid is None or r.starttime is None:
            raise WorkbenchError(f"server {sid}: no process identity recorded; nothing to stop")
        host = self.hosts.get(r.host)
        python = self.host_python(r.host)
        req = {"pid": r.pid, "pgid": r.pgid or r.pid, "starttime": r.starttime, "boot_id": r.extra.get("boot_id"),
               "grace": grace if grace is not None else float(r.extra.get("stop_grace", 30)), "kill_wait": 10}
        live = r.state in ("launching", "starting", "ready")
        if live:
            self._set(sid, state="stopping")
        try:
            res = host.run([python, "-c", remote.STOP, remote.as_arg(req)], timeout=req["grace"] + 40)
            if res.rc != 0:
                raise WorkbenchError(f"server {sid}: stop script failed (exit {res.rc}): {res.err.strip()[-300:]}")
            out = json.loads(res.out.strip().splitlines()[-1])
        except BaseException:
            if live:
                self._set(sid, state=r.state, expect="stopping")
            raise
        self._record("server.stop", f"server:{sid}", out)
        if out["result"] == "refused":
            if live:
                self._set(sid, state=r.state, expect="stopping")
            raise WorkbenchError(f"server {sid}: refused to signal: {out['reason']}")
        self.close_tunnel(sid)
        state = r.state if r.state in ("failed", "exited") else "stopped"
        self._set(sid, state=state, stopped=time.time())
        idle, gpus = self.gpus_idle(r, wait=gpu_wait, idle_mib=idle_mib)
        msg = {"stopped": "stopped", "already-gone": "the process was already gone",
               "survivors": f"processes survived SIGKILL: {out.get('remaining')}"}[out["result"]]
        if idle is False:
            msg += "; GPUs still hold memory: " + ", ".join(f"GPU{g.index} {g.used_mib:g} MiB" for g in gpus
                                                            if g.used_mib and g.used_mib > (idle_mib or 0))
        return StopResult(sid, out["result"], out.get("signals", []), out.get("remaining", []), out.get("elapsed"),
                          idle, gpus, msg)

    def gpus_idle(self, r: ServerRecord, wait: float = 60.0, idle_mib: Optional[float] = None,
                  poll: float = 1.0) -> tuple[Optional[bool], list]:
        """Poll nvidia-smi until the server's GPUs use at most ``idle_mib`` (the driver frees
        memory a little after the processes exit)."""
        threshold = idle_mib if idle_mib is not None else float(self.hosts.settings(r.host).get("gpu_idle_mib", 500))
        mine = set(r.extra.get("gpus") or [])
        deadline = time.monotonic() + wait
        host = self.hosts.get(r.host)
        python = self.host_python(r.host)
        while True:
            res = host.run([python, "-c", remote.STATUS, remote.as_arg({"servers": [], "gpus": True})],
                           timeout=30, idempotent=True)
            g = json.loads(res.out).get("gpus", {})
            if g.get("rc") != 0:
                return None, []            # no nvidia-smi on this host
            rows = [x for x in parse_gpus(g["csv"]) if not mine or x.index in mine]
            busy = [x for x in rows if x.used_mib is not None and x.used_mib > threshold]
            if not busy:
                return True, rows
            if time.monotonic() > deadline:
                return False, rows
            time.sleep(poll)

    def host_gpus(self, host_name: str) -> list:
        return self._gpus.get(host_name, [])

    def close(self) -> None:
        with self._lock:
            ids = list(self._tunnels)
        for i in ids:
            self.close_tunnel(i)


def _mean(xs: list) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def _python_of(profile: Profile, default: str) -> str:
    """The python that runs SGLang: the launcher's when it is ``PY -m sglang...``, else the host's."""
    if profile.launcher and len(profile.launcher) >= 3 and profile.launcher[1] == "-m" \
            and profile.launcher[0] != "{python}":
        return profile.launcher[0]
    return default


def _gpus_of(profile: Profile, cmd: dict) -> list:
    if profile.gpus is not None:
        return list(profile.gpus)
    vis = cmd.get("env", {}).get("CUDA_VISIBLE_DEVICES")
    if vis:
        try:
            return [int(x) for x in vis.split(",") if x.strip()]
        except ValueError:
            return []
    n = 1
    for flag, vals in split_flags(cmd["argv"][cmd["argv"].index("--model-path"):], "argv"):
        if flag in ("--tp-size", "--tp", "--tensor-parallel-size") and vals:
            try:
                n = int(vals[0])
            except ValueError:
                pass
    return list(range(n))


def _record_of(row) -> ServerRecord:
    st = row["start_time"]
    return ServerRecord(row["id"], row["profile"], row["host"], row["pid"], row["pgid"],
                        int(st) if st not in (None, "", "None") else None, row["port"], row["log_path"],
                        json.loads(row["argv"]), json.loads(row["env"]), row["draft_config_sha256"], row["state"],
                        row["launched"], row["stopped"], json.loads(row["extra"] or "{}"))
