"""Workbench methods for hosts, profiles and the server lifecycle (SGLang and vLLM servers)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from workbench.confirm import Plan, require
from workbench.errors import InputError, WorkbenchError
from workbench.facade.configs import ConfigsAPI
from workbench.progress import Progress
from workbench.results import Result

if TYPE_CHECKING:
    from workbench.drafter.context import DraftContext
    from workbench.hosts import Host
    from workbench.servers.command import Command
    from workbench.servers.launch import Preview
    from workbench.servers.lifecycle import Lifecycle
    from workbench.servers.measure import Measurement
    from workbench.servers.profiles import Profile
    from workbench.servers.registry import ServerRecord
    from workbench.servers.status import GPU, ServerStatus
    from workbench.servers.stop import StopResult
    from workbench.servers.sweep import PointRun, SweepPoint, SweepResult


@dataclass
class HostInfo(Result):
    name: str
    kind: str
    address: str | None
    python: str | None
    description: str = ""


@dataclass
class HostCheck(Result):
    name: str
    reachable: bool
    latency_s: float | None = None
    python: str | None = None
    python_version: str | None = None
    sglang_version: str | None = None
    vllm_version: str | None = None
    gpus: list[GPU] = field(default_factory=list)
    gpu_error: str | None = None
    error: str | None = None
    host_key: str | None = None  # "unknown" / "changed" when refused
    fingerprint: str | None = None
    slurm: dict[str, Any] | None = None  # a SLURM host: client commands, controller, partitions


@dataclass
class ProfileInfo(Result):
    name: str
    host: str
    extends: str | None
    description: str


class ServersAPI(ConfigsAPI):
    """Hosts, profiles and servers. Every operation is journaled; stop needs confirm=True."""

    # -- plumbing ---------------------------------------------------------------------------------
    @property
    def lifecycle(self) -> Lifecycle:
        """The server lifecycle (launch, follow, status, stop) the operations below compose; the
        live loop and the sweep take it as one of their operations (``workbench.live.ops``)."""
        lc = self.__dict__.get("_lifecycle")
        if lc is None:
            from workbench.servers.lifecycle import Lifecycle

            overlay = self.__dict__.setdefault("_profile_overlay", {})
            lc = self.__dict__["_lifecycle"] = Lifecycle(
                self.journal,
                self._hosts,
                lambda: {**self.workspace.section("profiles"), **overlay},
                self._record,
            )
        return lc

    def close(self) -> None:
        """Close the lifecycle's followers and the hosts' connections, then the journal."""
        lc = self.__dict__.pop("_lifecycle", None)
        if lc is not None:
            lc.close()
        super().close()

    # -- hosts ------------------------------------------------------------------------------------
    def hosts(self) -> list[HostInfo]:
        """The workspace's hosts (``[hosts.NAME]`` of workbench.toml, and ``local``); no round trip."""
        out = []
        for name in self._hosts.names():
            t = self._hosts.settings(name)
            out.append(
                HostInfo(name, t.get("kind", "ssh"), t.get("address"), t.get("python"), t.get("description", ""))
            )
        return out

    def host(self, name: str) -> Host:
        """The host ``name`` (connected on first use; host keys verified, never replaced)."""
        return self._hosts.get(name)

    def is_slurm_host(self, name: str) -> bool:
        """Whether ``name`` is a SLURM cluster (``kind = "slurm"``): its servers are jobs."""
        return self.lifecycle.launcher.slurm(name)

    def host_gpus(self, name: str) -> list[GPU]:
        """The host's GPUs as the last status round trip saw them (no round trip)."""
        return self.lifecycle.status.host_gpus(name)

    def host_check(self, name: str) -> HostCheck:
        """Connect to ``name`` and read its python, SGLang version and GPUs: what a launch there
        needs. An unreachable host or an unknown or changed host key is an answer (``reachable``
        False, ``host_key``, ``fingerprint``), not an exception."""
        from workbench.hosts import ChangedHostKeyError, HostError, UnknownHostKeyError
        from workbench.servers.engines import engine
        from workbench.servers.status import parse_gpus
        from workbench.servers.validate import parse_probe

        host = self.host(name)
        out = HostCheck(name, False)
        try:
            out.latency_s = host.ping()
            out.reachable = True
            python = self.lifecycle.launcher.host_python(name)
            r = host.run(engine("sglang").probe_argv(python, None), timeout=60)
            probe = parse_probe(r.out) if r.rc == 0 else {}
            out.python = probe.get("python") or python
            out.python_version = probe.get("python_version")
            out.sglang_version = probe.get("version")
            if r.rc != 0:
                out.error = f"{python}: exit {r.rc}: {r.err.strip()[-200:]}"
            else:
                out.vllm_version = engine("vllm").host_version(host, python)
            if self.is_slurm_host(name):
                from workbench.servers import slurm

                out.slurm = slurm.describe(self._hosts, name)
            g = host.run(
                [
                    "nvidia-smi",
                    "--query-gpu=index,memory.used,memory.total,utilization.gpu",
                    "--format=csv,noheader,nounits",
                ],
                timeout=20,
            )
            if g.rc == 0:
                out.gpus = parse_gpus(g.out)
            else:
                out.gpu_error = (g.err.strip() or f"nvidia-smi exit {g.rc}")[-200:]
        except UnknownHostKeyError as exc:
            out.error, out.host_key, out.fingerprint = str(exc), "unknown", exc.fingerprint
        except ChangedHostKeyError as exc:
            out.error, out.fingerprint = str(exc), exc.fingerprint
            out.host_key = "revoked" if type(exc).__name__ == "RevokedHostKeyError" else "changed"
        except HostError as exc:
            out.error = str(exc)
        self._record("host.check", name, out)
        return out

    def host_trust(self, name: str, fingerprint: str | None = None, *, confirm: bool = False) -> dict[str, Any]:
        """Add an unknown host key to known_hosts (never replaces a changed one). ``fingerprint``
        (``SHA256:`` and 43 base64 characters, as ``ssh-keygen -lf`` prints it; checked before any
        connection) is the key the user verified: any other is refused. Without ``confirm`` it
        raises ``ConfirmationRequired`` with the plan; returns ``{"host", "entry", "fingerprint",
        "added", "known_hosts"}``."""
        from workbench.hosts.ssh import SSHHost, trust_key
        from workbench.hosts.ssh import fingerprint as fp_of
        from workbench.parsing import parse_fingerprint

        if fingerprint is not None:
            fingerprint = parse_fingerprint(fingerprint)
        host = self.host(name)
        if not isinstance(host, SSHHost):
            raise InputError(f"host {name}: not an SSH host; nothing to trust")
        if fingerprint is None:
            fingerprint = fp_of(host.scan_key())
        r = host.resolved
        require(
            Plan(
                "trust",
                name,
                f"add {name}'s host key {fingerprint} to {r.known_hosts} as {r.known_hosts_name}",
                ["only do this if the fingerprint matches the one the machine's owner gives you"],
            ),
            confirm,
        )
        out = trust_key(host, expected_fingerprint=fingerprint)
        self._hosts.forget(name)
        self._record("host.trust", name, out)
        return out

    # -- profiles ---------------------------------------------------------------------------------
    def profiles(self) -> list[ProfileInfo]:
        """The launch profiles of workbench.toml; one that does not resolve is listed with why."""
        tables = self.workspace.section("profiles")
        out = []
        for n, t in sorted(tables.items()):
            try:
                p = self.profile(n)
                host, desc = p.host, p.description
            except InputError as exc:  # listed anyway, with what is wrong
                host, desc = "?", str(exc)
            out.append(ProfileInfo(n, host, t.get("extends") if isinstance(t, dict) else None, desc))
        return out

    def profile(self, name: str) -> Profile:
        """One profile resolved (``extends`` applied): host, model, draft, port, args, env, log."""
        return self.lifecycle.launcher.profile(name)

    def profile_command(self, name: str, sglang_version: str | None = None, *, offline: bool = False) -> Command:
        """The exact launch command (argv, env, warnings). With a version, no host is contacted."""
        if sglang_version is not None:
            from workbench.engine.version import Version

            Version.parse(sglang_version, what="sglang version")
        cmd = self.lifecycle.launcher.command(self.profile(name), sglang_version, offline=offline)
        self._record("profile.show", name, {"version": cmd.version, "argv": cmd.argv})
        return cmd

    # -- launch -----------------------------------------------------------------------------------
    def launch_preview(self, name: str, sglang_version: str | None = None) -> Preview:
        """Everything ``launch`` would do, checked before anything starts: the exact command for the
        host's engine (``sglang_version`` to pin an SGLang release), its diff against the profile's
        last launch, and the findings of the engine's own argument parser, the speculative-triple
        rules and the doctor. Journaled as ``server.preview``."""
        preview = self.lifecycle.launcher.preview(name, sglang_version)
        self._record(
            "server.preview", name, {"ok": preview.ok, "findings": preview.findings, "version": preview.version}
        )
        return preview

    def launch_plan(self, preview: Preview) -> Plan:
        """What ``launch`` asks to confirm: the command, its diff and every problem found."""
        details = [
            preview.display,
            *[f"diff: {d}" for d in preview.diff],
            *[f"{f.severity}: {f.message}" for f in preview.findings if f.severity != "info"],
            *[f"warning: {w}" for w in preview.warnings],
        ]
        ranks = preview.command.get("ranks") or []
        if len(ranks) > 1 and not self.is_slurm_host(preview.host):
            where = ", ".join(str(r["host"]) for r in ranks)
        elif self.is_slurm_host(preview.host):
            where = f"{preview.host} (a SLURM job of {len(ranks)} node(s))"
        else:
            where = preview.host
        return Plan("launch", preview.profile, f"start {preview.profile} on {where}", details)

    @overload
    def launch(
        self,
        name: str,
        *,
        confirm: bool = False,
        wait: Literal[False] = False,
        timeout: float | None = None,
        preview: Preview | None = None,
        poll: float = 1.0,
    ) -> ServerRecord: ...

    @overload
    def launch(
        self,
        name: str,
        *,
        confirm: bool = False,
        wait: Literal[True],
        timeout: float | None = None,
        preview: Preview | None = None,
        poll: float = 1.0,
    ) -> ServerStatus: ...

    def launch(
        self,
        name: str,
        *,
        confirm: bool = False,
        wait: bool = False,
        timeout: float | None = None,
        preview: Preview | None = None,
        poll: float = 1.0,
    ) -> ServerRecord | ServerStatus:
        """Start the profile's server detached (after its preview's checks; an error among them
        refuses), record its identity (pid, start time, process group), and track its draft's
        config.json. Without ``confirm=True`` it raises ``ConfirmationRequired`` with the plan.
        With ``wait``: its status once ready, failed or ``timeout`` (seconds) passed. Journaled as
        ``server.launch``."""
        preview = preview or self.launch_preview(name)
        require(self.launch_plan(preview), confirm)
        self._track_draft_config(name, preview)
        rec = self.lifecycle.launcher.launch(name, preview)
        self._record(
            "server.launch",
            f"server:{rec.id}",
            {
                "profile": name,
                "host": rec.host,
                "pid": rec.pid,
                "argv": rec.argv,
                "env": rec.env,
                "log": rec.log,
                "draft_config_sha256": rec.draft_config_sha256,
            },
        )
        if wait:
            return self.server_wait(rec.id, timeout=timeout, poll=poll)
        return rec

    def _track_draft_config(self, name: str, preview: Preview) -> None:
        """Keep the draft's config.json in the config history, so the server's record points at a
        stored version (the timeline then knows which config each server loaded)."""
        prof = preview.resolved or self.profile(name)
        if not preview.draft_config_sha256 or not prof.draft or not prof.draft.startswith("/"):
            return
        path = prof.draft.rstrip("/") + "/config.json"
        location = (
            path if prof.host == "local" and "local" not in self.workspace.section("hosts") else f"{prof.host}:{path}"
        )
        try:
            tracked = self.config_track(location, label=f"draft of {name}")
        except WorkbenchError:
            return  # the launch does not depend on the history
        if getattr(tracked, "current_sha256", None):
            preview.draft_config_sha256 = tracked.current_sha256

    def server_wait(
        self, server_id: int, timeout: float | None = None, poll: float = 1.0, health: bool = True
    ) -> ServerStatus:
        """Follow a launched server's log to readiness (``/health_generate`` answering with
        ``health``), its failure (classified, with the fix) or ``timeout``; progress events on the
        way."""
        return self.lifecycle.follow.wait_ready(
            int(server_id), timeout=timeout, poll=poll, progress=self.progress, health=health
        )

    # -- status, logs, metrics --------------------------------------------------------------------
    def servers(self, active: bool = False) -> list[ServerRecord]:
        """Every server this workspace launched (``active``: those not stopped or gone), as the
        journal last recorded them; no round trip."""
        return self.lifecycle.registry.all(active=active)

    def server(self, server_id: int) -> ServerRecord:
        """One server's record (profile, host, identity, command, the draft config it loaded)."""
        return self.lifecycle.registry.get(int(server_id))

    def server_status(self, ids: Sequence[int] | None = None, gpus: bool = True) -> list[ServerStatus]:
        """One remote round trip per host."""
        return self.lifecycle.status.refresh([int(i) for i in ids] if ids else None, gpus=gpus)

    def server_log(self, server_id: int, offset: int = 0, length: int | None = None, rank: int = 0) -> bytes:
        """The server's log bytes from ``offset`` (``length`` of them; None: to the end); ``rank``: the
        log of that rank of a server across nodes."""
        return self.lifecycle.follow.read_log(int(server_id), offset, length, rank=rank)

    def server_follow(
        self, server_id: int, offset: int = 0, poll: float = 0.5, stop: Callable[[], bool] | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """(offset, new bytes) as the log grows, read by offset every ``poll`` seconds, until
        ``stop()`` says so (or the caller stops iterating)."""
        return self.lifecycle.follow.follow_log(int(server_id), offset, poll=poll, stop=stop)

    def server_lines(self, server_id: int, since: int = 0) -> list[tuple[int, str]]:
        """Log lines fetched by status refreshes, numbered, after line ``since`` (no round trip)."""
        return self.lifecycle.status.follower(int(server_id)).lines_since(since)

    def server_events(self, server_id: int) -> list[dict[str, Any]]:
        """Milestones and failures parsed from the log so far (no round trip)."""
        return list(self.lifecycle.status.follower(int(server_id)).events)

    def server_metrics(self, server_id: int, window: float | None = None) -> dict[str, Any]:
        """Live metrics: SGLang's decode lines and /server_info; an engine's acceptance counters
        differenced over ``window`` seconds (else since the last call), with per-position rates. The
        counters' reading is kept in the journal's acceptance windows too (``server_acceptance``)."""
        sid = int(server_id)
        out = self.lifecycle.follow.metrics(sid, window=window)
        total = out.get("counters_total")
        if total is not None or (out.get("server_info") or {}).get("avg_spec_accept_length") is not None:
            from workbench.servers.acceptance import counters_of

            avg = None if total is not None else out["server_info"]["avg_spec_accept_length"]
            self._keep_acceptance(sid, counters_of(total) if total is not None else None, avg)
        self._record("server.metrics", f"server:{server_id}", out)
        return out

    def _acceptance_settings(self, window_s: float | None, baseline_s: float | None) -> tuple[float, float]:
        from workbench.numbers import Range, number
        from workbench.servers import acceptance as A

        cfg = self.workspace.section("acceptance")
        w = number(
            window_s if window_s is not None else cfg.get("window_s", A.WINDOW_S),
            "acceptance.window_s",
            Range(0.0, 86400.0),
        )
        b = number(
            baseline_s if baseline_s is not None else cfg.get("baseline_s", A.BASELINE_S),
            "acceptance.baseline_s",
            Range(0.0, 30 * 86400.0),
        )
        return w, b

    def _keep_acceptance(
        self,
        sid: int,
        total: Any,
        running_average: float | None,
        window_s: float | None = None,
        at: float | None = None,
    ) -> dict[str, Any] | None:
        """Append the window a reading (asked for ``at``, default now) closes (compare-and-swap on the
        server's latest row)."""
        import time

        from workbench.servers import acceptance as A

        w, _ = self._acceptance_settings(window_s, None)
        now = time.time() if at is None else at
        added = self.journal.add_measurement_after(
            sid, A.KIND, lambda last: A.next_row(last, total, now, w, running_average)
        )
        return added[1] if added is not None else None

    def server_acceptance(
        self,
        server_id: int,
        *,
        record: bool = True,
        window_s: float | None = None,
        baseline_s: float | None = None,
    ) -> Any:
        """A followed server's acceptance over time (``workbench.servers.acceptance``): with ``record``,
        the engine's counters are read now and a window is kept once ``window_s`` have passed since the
        last (workspace ``[acceptance] window_s``, default ``WINDOW_S``); then every kept window, the
        baseline of the server's first ``baseline_s`` (default an hour) and the alarm."""
        from workbench.servers import acceptance as A
        from workbench.servers.registry import LIVE

        sid = int(server_id)
        w, b = self._acceptance_settings(window_s, baseline_s)
        rec = self.server(sid)
        notes: list[str] = []
        added = None
        if record and rec.state in LIVE:
            try:
                total, avg, at = self.lifecycle.follow.acceptance_reading(sid)
                added = self._keep_acceptance(sid, total, avg, w, at)
            except WorkbenchError as exc:
                notes.append(f"counters not read now: {exc}")
        series = A.analyse(sid, self.journal.measurement_rows(sid, A.KIND), baseline_s=b, window_s=w)
        series.notes[:0] = notes
        alarm = series.alarm
        if added is not None and alarm.raised and alarm.window == len(series.windows) - 1:
            self._record("server.acceptance.alarm", f"server:{sid}", {**alarm.to_dict(), "profile": rec.profile})
        return series

    # -- stop -------------------------------------------------------------------------------------
    def stop_plan(self, server_id: int, grace: float | None = None) -> Plan:
        """What ``server_stop`` would signal, and how (identity check, grace, GPUs idle)."""
        r = self.server(server_id)
        from workbench.servers.engines import engine
        from workbench.servers.stop import Stopper

        grace = Stopper.stop_grace(r, grace)
        workers = engine(r.extra.get("engine")).worker_sigterm
        if r.extra.get("slurm"):
            job = r.extra["slurm"].get("job_id")
            return Plan(
                "stop",
                f"server {r.id}",
                f"stop server {r.id} ({r.profile}): SLURM job {job} on {r.host}: scancel --signal=TERM to its "
                f"{r.extra.get('nodes', 1)} rank(s), {grace:g} s grace, then scancel",
                [
                    f"the job's comment must be this server's launch token (checked on {r.host} before any signal)",
                    workers,
                    f"logs: {r.log} and its other ranks' beside it",
                ],
            )
        ranks = r.extra.get("ranks") or []
        if ranks:
            return Plan(
                "stop",
                f"server {r.id}",
                f"stop server {r.id} ({r.profile}) on {', '.join(str(x.get('host')) for x in ranks)}: rank 0 first "
                f"(SIGTERM, {grace:g} s grace, SIGKILL), then every other rank the same way",
                [
                    *(
                        f"rank {x['rank']} on {x.get('host')}: pid {x.get('pid')}, start time {x.get('starttime')} "
                        "(checked again on its host before signalling)"
                        for x in ranks
                    ),
                    workers,
                    "each rank's other processes only if proven its own (same group and session, started after "
                    "it, the launch token in their environment)",
                    f"port {r.port}; then wait for each host's GPUs {r.extra.get('gpus') or 'all'} to be idle",
                ],
            )
        return Plan(
            "stop",
            f"server {r.id}",
            f"stop server {r.id} ({r.profile}) on {r.host}: SIGTERM to its processes (group "
            f"{r.pgid or r.pid}), {grace:g} s grace, then SIGKILL",
            [
                f"pid {r.pid}, start time {r.starttime} (checked again on the host before signalling)",
                "its other processes only if proven its own: same group and session, started after it, "
                "the launch token in their environment",
                f"port {r.port}, log {r.log}",
                f"then wait for GPUs {r.extra.get('gpus') or 'all'} to be idle",
            ],
        )

    def server_stop(
        self,
        server_id: int,
        *,
        confirm: bool = False,
        grace: float | None = None,
        gpu_wait: float = 60.0,
        idle_mib: float | None = None,
    ) -> StopResult:
        """Stop a server: its identity (pid and start time) checked again on the host, SIGTERM to its
        process group, ``grace`` seconds, SIGKILL, then up to ``gpu_wait`` seconds for its GPUs to
        fall under ``idle_mib``. Without ``confirm=True`` it raises ``ConfirmationRequired`` with
        the plan. Journaled as ``server.stopped``."""
        require(self.stop_plan(server_id, grace), confirm)  # a grace that never ends is refused first
        res = self.lifecycle.stopper.stop(int(server_id), grace=grace, gpu_wait=gpu_wait, idle_mib=idle_mib)
        self._record("server.stopped", f"server:{server_id}", res)
        return res

    # -- measurement ------------------------------------------------------------------------------
    def server_measure(
        self,
        server_id: int,
        *,
        concurrency: int = 4,
        max_new_tokens: int | None = None,
        rounds: int = 1,
        prompts: str | None = None,
        label: str = "",
        warmup: int = 1,
        context: Sequence[int] | str | None = None,
        trained_length: int | None = None,
        training_data: str | None = None,
    ) -> Measurement:
        """Accept length and tokens/s by the protocol: the cache flushed, the fixed prompt set (or
        ``prompts``, a JSON file of them) at ``concurrency``, ``rounds`` times; the server's own
        cumulative accept length after the flush alongside. Journaled as a measurement (``label``
        kept with it) and as ``server.measure``. ``warmup``: untimed requests per concurrency slot
        before the cache reset (0 reads the engine's counters over nothing but the timed rounds).

        ``context`` (e.g. ``[256, 1024, 4096]``): the workload sweeps those context lengths instead
        (each checked against the served context length); the result's ``by_context`` rows mark the
        drafter's trained length (``trained_length``, else read from ``training_data``, else the
        workspace's ``[live] training_data``) and its ``max_position_embeddings`` (the draft config the
        server loaded), and ``findings`` say whether acceptance falls past it."""
        from workbench.servers.context import parse_contexts
        from workbench.servers.engines import engine
        from workbench.servers.measure import run_protocol
        from workbench.servers.registry import ServerState

        contexts = parse_contexts(context) if context is not None else None  # bad input refused first
        sid = int(server_id)
        rec = self.server(sid)
        if rec.state not in (ServerState.READY, ServerState.STARTING):
            raise WorkbenchError(f"server {sid}: is {rec.state}; measure a ready server")
        sweep = None
        if contexts is not None:
            from workbench.servers.measure import Sweep

            sweep = Sweep(contexts, self.draft_context(sid, trained_length=trained_length, training_data=training_data))
        client = self.lifecycle.follow.client(sid, timeout=600)
        m = run_protocol(
            client,
            sid,
            concurrency=concurrency,
            max_new_tokens=max_new_tokens,
            rounds=rounds,
            prompts=prompts,
            progress=lambda i, n: self.progress(Progress("server.measure", i, n, f"round {i}/{n}")),
            engine=engine(rec.extra.get("engine")).spec(rec.extra.get("version")),
            warmup=warmup,
            sweep=sweep,
        )
        payload = m.to_dict()
        if label:
            payload["label"] = label
        self.journal.add_measurement(sid, "protocol", payload)
        self._record("server.measure", f"server:{sid}", payload)
        return m

    def draft_context(
        self, server_id: int, *, trained_length: int | None = None, training_data: str | None = None
    ) -> DraftContext:
        """What is known of a server's drafter's context: ``max_position_embeddings`` from the draft
        config it loaded (the journal's copy from its launch, else the file on its host) and its
        trained length (given, else from the training data: ``training_data`` or ``[live]``'s)."""
        import json

        from workbench.drafter.context import draft_context

        rec = self.server(int(server_id))
        config: dict[str, Any] | None = None
        raw = self.journal.blob(rec.draft_config_sha256)
        notes: list[str] = []
        if raw is None:
            from workbench.servers.engines import engine

            draft = engine(rec.extra.get("engine")).argv_facts(rec.argv).get("draft")
            if draft:
                try:
                    raw = self.host(rec.host).read_bytes(str(draft).rstrip("/") + "/config.json")
                except (WorkbenchError, OSError) as exc:
                    notes.append(f"draft config not read: {exc}")
        if raw is not None:
            try:
                got = json.loads(raw)
                config = got if isinstance(got, dict) else None
            except ValueError:
                notes.append("the draft config is not JSON")
        if training_data is None and trained_length is None:
            training_data = self.workspace.section("live").get("training_data")
        facts = draft_context(config, training_data=training_data, trained_length=trained_length)
        facts.notes[:0] = notes
        return facts

    def measurements(self, server_id: int | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """The journal's measurements (of one server, of one ``kind``: "protocol", "sweep"),
        oldest first, each with its ``accept_length``."""
        from workbench.servers.measure import accept_length

        rows = self.journal.measurement_rows(server_id, kind)
        for row in rows:
            row["accept_length"] = accept_length(row)
        return rows

    # -- sweeps -----------------------------------------------------------------------------------
    def sweep_plan(self, profile: str, points: list[SweepPoint]) -> Plan:
        """What ``server_sweep`` would launch, measure and stop, point by point."""
        return Plan(
            "sweep",
            profile,
            f"relaunch {profile} for {len(points)} points (each: launch, wait, "
            "measure, stop with SIGTERM/SIGKILL of its process group)",
            [f"{p.key}" for p in points],
        )

    def server_sweep(
        self,
        profile: str,
        *,
        steps: Sequence[int],
        topks: Sequence[int] = (1,),
        draft_tokens: Sequence[int] | None = None,
        envs: Sequence[dict[str, str]] | None = None,
        baseline: bool = False,
        confirm: bool = False,
        run: PointRun | None = None,
    ) -> SweepResult:
        """Relaunch ``profile`` at every (steps, topk, draft_tokens, env) point (``baseline``: and
        without speculation), measure each by the protocol and stop it; the fitted throughput model
        and the ranking in the result. Without ``confirm=True`` it raises
        ``ConfirmationRequired`` with the plan. Journaled as ``server.sweep``. ``run``
        (``workbench.api.SweepRun``) says how each point is measured (concurrency, tokens, rounds,
        prompts) and launched and stopped."""
        from workbench.servers import sweep as sw

        self.profile(profile)  # an unknown profile is refused before the plan
        run = run or sw.PointRun()
        points = sw.expand(
            list(steps), list(topks), list(draft_tokens) if draft_tokens else None, list(envs or []), baseline
        )
        measure = {
            "concurrency": run.concurrency,
            "max_new_tokens": run.max_new_tokens,
            "rounds": run.rounds,
            "prompts": run.prompts,
        }
        sid_ = sw.sweep_id(profile, points, measure)
        require(self.sweep_plan(profile, points), confirm)
        result = sw.run(self, profile, points, sid_, self.__dict__.setdefault("_profile_overlay", {}), run)
        self._record("server.sweep", profile, result)
        return result
