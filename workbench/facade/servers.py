"""Workbench methods for hosts, profiles and SGLang server lifecycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

from workbench.confirm import Plan, require
from workbench.errors import InputError, WorkbenchError
from workbench.progress import Progress
from workbench.results import Result

if TYPE_CHECKING:
    from workbench.sglang.measure import Measurement
from workbench.facade.configs import ConfigsAPI


@dataclass
class HostInfo(Result):
    name: str
    kind: str
    address: Optional[str]
    python: Optional[str]
    description: str = ""


@dataclass
class HostCheck(Result):
    name: str
    reachable: bool
    latency_s: Optional[float] = None
    python: Optional[str] = None
    python_version: Optional[str] = None
    sglang_version: Optional[str] = None
    gpus: list = field(default_factory=list)
    gpu_error: Optional[str] = None
    error: Optional[str] = None
    host_key: Optional[str] = None        # "unknown" / "changed" when refused
    fingerprint: Optional[str] = None


@dataclass
class ProfileInfo(Result):
    name: str
    host: str
    extends: Optional[str]
    description: str


class ServersAPI(ConfigsAPI):
    """Hosts, profiles and servers. Every operation is journaled; stop needs confirm=True."""

    # -- plumbing ---------------------------------------------------------------------------------
    @property
    def lifecycle(self):
        lc = self.__dict__.get("_lifecycle")
        if lc is None:
            from workbench.sglang.lifecycle import Lifecycle

            overlay = self.__dict__.setdefault("_profile_overlay", {})
            lc = self.__dict__["_lifecycle"] = Lifecycle(
                self.journal, self.hosts_registry, lambda: {**self.workspace.section("profiles"), **overlay},
                self._record)
        return lc

    def close(self) -> None:
        lc = self.__dict__.pop("_lifecycle", None)
        if lc is not None:
            lc.close()
        super().close()

    # -- hosts ------------------------------------------------------------------------------------
    def hosts(self) -> list[HostInfo]:
        out = []
        for name in self.hosts_registry.names():
            t = self.hosts_registry.settings(name)
            out.append(HostInfo(name, t.get("kind", "ssh"), t.get("address"), t.get("python"),
                                t.get("description", "")))
        return out

    def host(self, name: str):
        return self.hosts_registry.get(name)

    def host_check(self, name: str) -> HostCheck:
        from workbench.hosts import ChangedHostKey, HostError, UnknownHostKey
        from workbench.sglang import remote
        from workbench.sglang.lifecycle import parse_gpus
        from workbench.sglang.validate import parse_probe

        host = self.host(name)
        out = HostCheck(name, False)
        try:
            out.latency_s = host.ping()
            out.reachable = True
            python = self.lifecycle.host_python(name)
            r = host.run([python, "-c", remote.PROBE, remote.as_arg({"argv": None})], timeout=60)
            probe = parse_probe(r.out) if r.rc == 0 else {}
            out.python = probe.get("python") or python
            out.python_version = probe.get("python_version")
            out.sglang_version = probe.get("version")
            if r.rc != 0:
                out.error = f"{python}: exit {r.rc}: {r.err.strip()[-200:]}"
            g = host.run(["nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu",
                          "--format=csv,noheader,nounits"], timeout=20)
            if g.rc == 0:
                out.gpus = parse_gpus(g.out)
            else:
                out.gpu_error = (g.err.strip() or f"nvidia-smi exit {g.rc}")[-200:]
        except UnknownHostKey as exc:
            out.error, out.host_key, out.fingerprint = str(exc), "unknown", exc.fingerprint
        except ChangedHostKey as exc:
            out.error, out.fingerprint = str(exc), exc.fingerprint
            out.host_key = "revoked" if type(exc).__name__ == "RevokedHostKey" else "changed"
        except HostError as exc:
            out.error = str(exc)
        self._record("host.check", name, out)
        return out

    def host_trust(self, name: str, fingerprint: Optional[str] = None, *, confirm: bool = False) -> dict:
        """Add an unknown host key to known_hosts (never replaces a changed one)."""
        from workbench.hosts.ssh import SSHHost, fingerprint as fp_of, trust_key

        host = self.host(name)
        if not isinstance(host, SSHHost):
            raise InputError(f"host {name}: not an SSH host; nothing to trust")
        if fingerprint is None:
            fingerprint = fp_of(host.scan_key())
        r = host.resolved
        require(Plan("trust", name, f"add {name}'s host key {fingerprint} to {r.known_hosts} as {r.known_hosts_name}",
                     ["only do this if the fingerprint matches the one the machine's owner gives you"]), confirm)
        out = trust_key(host, expected_fingerprint=fingerprint)
        self.hosts_registry.forget(name)
        self._record("host.trust", name, out)
        return out

    # -- profiles ---------------------------------------------------------------------------------
    def profiles(self) -> list[ProfileInfo]:
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

    def profile(self, name: str):
        return self.lifecycle.profile(name)

    def profile_command(self, name: str, sglang_version: Optional[str] = None, *, offline: bool = False):
        """The exact launch command (argv, env, warnings). With a version, no host is contacted."""
        if sglang_version is not None:
            from workbench.sglang.version import Version

            Version.parse(sglang_version)
        cmd = self.lifecycle.command(self.profile(name), sglang_version, offline=offline)
        self._record("profile.show", name, {"version": cmd.version, "argv": cmd.argv})
        return cmd

    # -- launch -----------------------------------------------------------------------------------
    def launch_preview(self, name: str, sglang_version: Optional[str] = None):
        preview = self.lifecycle.preview(name, sglang_version)
        self._record("server.preview", name, {"ok": preview.ok, "findings": preview.findings,
                                              "version": preview.version})
        return preview

    def launch_plan(self, preview) -> Plan:
        details = [preview.display, *[f"diff: {d}" for d in preview.diff],
                   *[f"{f.severity}: {f.message}" for f in preview.findings if f.severity != "info"],
                   *[f"warning: {w}" for w in preview.warnings]]
        return Plan("launch", preview.profile, f"start {preview.profile} on {preview.host}", details)

    def launch(self, name: str, *, confirm: bool = False, wait: bool = False, timeout: Optional[float] = None,
               preview=None, poll: float = 1.0):
        preview = preview or self.launch_preview(name)
        require(self.launch_plan(preview), confirm)
        self._track_draft_config(name, preview)
        rec = self.lifecycle.launch(name, preview)
        self._record("server.launch", f"server:{rec.id}", {"profile": name, "host": rec.host, "pid": rec.pid,
                                                     "argv": rec.argv, "env": rec.env, "log": rec.log,
                                                     "draft_config_sha256": rec.draft_config_sha256})
        if wait:
            return self.server_wait(rec.id, timeout=timeout, poll=poll)
        return rec

    def _track_draft_config(self, name: str, preview) -> None:
        """Keep the draft's config.json in the config history, so the server's record points at a
        stored version (the timeline then knows which config each server loaded)."""
        prof = self.profile(name)
        if not preview.draft_config_sha256 or not prof.draft or not prof.draft.startswith("/"):
            return
        path = prof.draft.rstrip("/") + "/config.json"
        location = path if prof.host == "local" and "local" not in self.workspace.section("hosts") \
            else f"{prof.host}:{path}"
        try:
            tracked = self.config_track(location, label=f"draft of {name}")
        except WorkbenchError:
            return  # the launch does not depend on the history
        if getattr(tracked, "current_sha256", None):
            preview.draft_config_sha256 = tracked.current_sha256

    def server_wait(self, server_id: int, timeout: Optional[float] = None, poll: float = 1.0,
                    health: bool = True):
        return self.lifecycle.wait_ready(int(server_id), timeout=timeout, poll=poll, progress=self.progress,
                                         health=health)

    # -- status, logs, metrics --------------------------------------------------------------------
    def servers(self, active: bool = False):
        return self.lifecycle.servers(active=active)

    def server(self, server_id: int):
        return self.lifecycle.get(int(server_id))

    def server_status(self, ids: Optional[list] = None, gpus: bool = True):
        """One remote round trip per host."""
        return self.lifecycle.refresh([int(i) for i in ids] if ids else None, gpus=gpus)

    def server_log(self, server_id: int, offset: int = 0, length: Optional[int] = None) -> bytes:
        return self.lifecycle.read_log(int(server_id), offset, length)

    def server_follow(self, server_id: int, offset: int = 0, poll: float = 0.5,
                      stop: Optional[Callable[[], bool]] = None) -> Iterator[tuple[int, bytes]]:
        return self.lifecycle.follow_log(int(server_id), offset, poll=poll, stop=stop)

    def server_lines(self, server_id: int, since: int = 0) -> list[tuple[int, str]]:
        """Log lines fetched by status refreshes, numbered, after line ``since`` (no round trip)."""
        return self.lifecycle.follower(int(server_id)).lines_since(since)

    def server_events(self, server_id: int) -> list[dict]:
        """Milestones and failures parsed from the log so far (no round trip)."""
        return list(self.lifecycle.follower(int(server_id)).events)

    def server_metrics(self, server_id: int) -> dict:
        out = self.lifecycle.metrics(int(server_id))
        self._record("server.metrics", f"server:{server_id}", out)
        return out

    # -- stop -------------------------------------------------------------------------------------
    def stop_plan(self, server_id: int, grace: Optional[float] = None) -> Plan:
        r = self.server(server_id)
        grace = self.lifecycle.stop_grace(r, grace)
        return Plan("stop", f"server {r.id}",
                    f"stop server {r.id} ({r.profile}) on {r.host}: SIGTERM to its processes (group "
                    f"{r.pgid or r.pid}), {grace:g} s grace, then SIGKILL",
                    [f"pid {r.pid}, start time {r.starttime} (checked again on the host before signalling)",
                     "its other processes only if proven its own: same group and session, started after it, "
                     "the launch token in their environment",
                     f"port {r.port}, log {r.log}",
                     f"then wait for GPUs {r.extra.get('gpus') or 'all'} to be idle"])

    def server_stop(self, server_id: int, *, confirm: bool = False, grace: Optional[float] = None,
                    gpu_wait: float = 60.0, idle_mib: Optional[float] = None):
        require(self.stop_plan(server_id, grace), confirm)   # a grace that never ends is refused first
        res = self.lifecycle.stop(int(server_id), grace=grace, gpu_wait=gpu_wait, idle_mib=idle_mib)
        self._record("server.stopped", f"server:{server_id}", res)
        return res

    # -- measurement ------------------------------------------------------------------------------
    def server_measure(self, server_id: int, *, concurrency: int = 4, max_new_tokens: Optional[int] = None,
                       rounds: int = 1, prompts: Optional[str] = None, label: str = "") -> "Measurement":
        from workbench.sglang.measure import run_protocol

        sid = int(server_id)
        rec = self.server(sid)
        if rec.state not in ("ready", "starting"):
            raise WorkbenchError(f"server {sid}: is {rec.state}; measure a ready server")
        client = self.lifecycle.client(sid, timeout=600)
        m = run_protocol(client, sid, concurrency=concurrency, max_new_tokens=max_new_tokens, rounds=rounds,
                         prompts=prompts,
                         progress=lambda i, n: self.progress(Progress("server.measure", i, n, f"round {i}/{n}")))
        payload = m.to_dict()
        if label:
            payload["label"] = label
        self.journal.add_measurement(sid, "protocol", payload)
        self._record("server.measure", f"server:{sid}", payload)
        return m

    def measurements(self, server_id: Optional[int] = None, kind: Optional[str] = None) -> list[dict]:
        from workbench.sglang.measure import accept_length

        rows = self.journal.measurement_rows(server_id, kind)
        for row in rows:
            row["accept_length"] = accept_length(row)
        return rows

    # -- sweeps -----------------------------------------------------------------------------------
    def sweep_plan(self, profile: str, points: list) -> Plan:
        return Plan("sweep", profile, f"relaunch {profile} for {len(points)} points (each: launch, wait, "
                    "measure, stop with SIGTERM/SIGKILL of its process group)",
                    [f"{p.key}" for p in points])

    def server_sweep(self, profile: str, *, steps: Sequence[int], topks: Sequence[int] = (1,), draft_tokens: Optional[list] = None,
                     envs: Optional[list] = None, baseline: bool = False, confirm: bool = False,
                     concurrency: int = 4, max_new_tokens: Optional[int] = None, rounds: int = 1,
                     prompts: Optional[str] = None, ready_timeout: Optional[float] = None, poll: float = 1.0,
                     stop_grace: Optional[float] = None, gpu_wait: float = 60.0):
        from workbench.sglang import sweep as sw

        base = self.profile(profile)
        points = sw.expand(list(steps), list(topks), list(draft_tokens) if draft_tokens else None,
                           list(envs or []), baseline)
        measure = {"concurrency": concurrency, "max_new_tokens": max_new_tokens, "rounds": rounds,
                   "prompts": prompts}
        sid_ = sw.sweep_id(profile, points, measure)
        require(self.sweep_plan(profile, points), confirm)
        done = {m["key"]: m for m in self.measurements(kind="sweep") if m.get("sweep_id") == sid_}
        overlay = self.__dict__.setdefault("_profile_overlay", {})
        resumed = 0
        for i, p in enumerate(points):
            self.progress(Progress("server.sweep", i, len(points), p.key))
            if p.key in done and done[p.key].get("state") == "measured":
                prev = done[p.key]
                for k in ("server_id", "tokens_per_s", "tokens_per_s_per_request", "accept_len",
                          "server_accept_len"):
                    setattr(p, k, prev.get(k))
                p.state, p.resumed = "measured", True
                resumed += 1
                continue
            name = f"{profile}@{p.key}"
            table: dict[str, Any] = {"extends": profile, "description": f"sweep {sid_} point {p.key}"}
            if p.env:
                table["env"] = {k: str(v) for k, v in p.env.items()}
            if p.num_steps:
                table["speculative"] = {"algorithm": base.speculative.get("algorithm", "EAGLE3"),
                                        "num_steps": p.num_steps, "eagle_topk": p.eagle_topk,
                                        "num_draft_tokens": p.num_draft_tokens}
            overlay[name] = table
            if not p.num_steps:  # the baseline: the same server without speculation
                overlay[name] = {**table, "speculative": {}}
                self._baseline_profile(name, profile)
            sid = None
            try:
                rec = self.launch(name, confirm=True)
                sid = p.server_id = rec.id
                st = self.server_wait(rec.id, timeout=ready_timeout, poll=poll)
                if st.state != "ready":
                    raise WorkbenchError(f"{st.state}: {(st.failure or {}).get('class', '')} "
                                         f"{(st.failure or {}).get('text', '')}".strip())
                m = self.server_measure(rec.id, concurrency=concurrency, max_new_tokens=max_new_tokens,
                                        rounds=rounds, prompts=prompts, label=f"sweep {sid_} {p.key}")
                p.tokens_per_s = m.tokens_per_s
                p.tokens_per_s_per_request = m.tokens_per_s_per_request["mean"]
                p.accept_len = m.accept_len["mean"]
                p.server_accept_len = m.server_accept_len
                p.state = "measured"
            except WorkbenchError as exc:
                p.state, p.error = "failed", str(exc)
            finally:
                if sid is not None:
                    try:
                        if self.server(sid).state in ("starting", "ready", "launching", "failed"):
                            self.server_stop(sid, confirm=True, grace=stop_grace, gpu_wait=gpu_wait)
                    except WorkbenchError as exc:
                        p.error = (p.error + "; " if p.error else "") + f"stop: {exc}"
            self.journal.add_measurement(p.server_id, "sweep", {"sweep_id": sid_, "profile": profile, **p.to_dict()})
        self.progress(Progress("server.sweep", len(points), len(points), "done"))
        ranked = sw.rank(points)
        best = next((p for p in ranked if p.state == "measured" and p.num_steps), None)
        base_pt = next((p for p in points if not p.num_steps and p.state == "measured"), None)
        result = sw.SweepResult(sid_, profile, ranked, best.to_dict() if best else None, sw.fit_model(points),
                                resumed, base_pt.tokens_per_s if base_pt else None,
                                (best.tokens_per_s / base_pt.tokens_per_s) if best and base_pt and
                                base_pt.tokens_per_s else None)
        self._record("server.sweep", profile, result)
        return result

    def _baseline_profile(self, name: str, parent: str) -> None:
        """A baseline point drops the draft and the speculative flags of its parent."""
        overlay = self.__dict__["_profile_overlay"]
        parent_table = self.workspace.section("profiles").get(parent, {})
        chain = self.profile(parent)
        overlay[name] = {**overlay[name], "extends": parent}
        # profiles merge speculative key-wise, so build the baseline flat instead of extending
        flat = {"host": chain.host, "model": chain.model, "port": chain.port, "log": chain.log_path,
                "env": {**chain.env, **overlay[name].get("env", {})}, "args": list(chain.args),
                "description": overlay[name]["description"], "stop_grace": chain.stop_grace,
                "ready_timeout": chain.ready_timeout}
        if chain.launcher:
            flat["launcher"] = chain.launcher
        if chain.run_dir:
            flat["run_dir"] = chain.run_dir
        if chain.gpus is not None:
            flat["gpus"] = chain.gpus
        if chain.sglang_version:
            flat["sglang_version"] = chain.sglang_version
        del parent_table
        overlay[name] = flat
