"""Before and at launch, for any engine: the profile, the exact command, the preview (the host's own
engine parser, rules, paths, ports) and the launch itself, which records the server before anything
starts on the host. The preview reads the profile and the draft's ``config.json`` once and carries
both to the launch (and to the config history)."""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError, WorkbenchError
from workbench.hosts import Host, HostError, HostKeyError, Hosts
from workbench.hosts.base import check_argv, sha256
from workbench.results import Result
from workbench.servers import host_scripts
from workbench.servers.command import Command, diff_argv
from workbench.servers.engines import Engine, engine
from workbench.servers.profiles import Profile, load_profile
from workbench.servers.registry import Registry, ServerRecord, ServerState
from workbench.servers.validate import Finding, doctor_findings, parse_probe


@dataclass
class Preview(Result):
    profile: str
    host: str
    version: str | None
    command: dict[str, Any]
    display: str
    diff: list[Any]
    findings: list[Any]
    warnings: list[Any]
    draft_config_sha256: str | None = None
    engine: str = "sglang"
    # what the preview read, carried to the launch (never read twice): the resolved profile and the
    # draft's config.json bytes as they were checked
    resolved: Profile | None = field(default=None, repr=False, metadata={"internal": True})
    draft_config_raw: bytes | None = field(default=None, repr=False, metadata={"internal": True})

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["ok"] = self.ok
        return d


def _refuse_unrunnable(name: str, cmd: dict[str, Any]) -> None:
    """A command no exec can carry (a NUL byte in an argument, a variable or a path; a bad variable
    name): an input error naming the field."""
    check_argv(cmd["argv"], cmd["env"], f"profile {name}")
    for key in ("log", "run_dir"):
        if "\0" in (cmd.get(key) or ""):
            raise InputError(f"profile {name}: {key} contains a NUL byte; no path can")


class Launcher:
    def __init__(self, registry: Registry, hosts: Hosts, profiles: Callable[[], dict[str, Any]]):
        self.registry = registry
        self.hosts = hosts
        self._profiles = profiles
        self._versions: dict[str, str | None] = {}
        self._probes: dict[str, dict[str, Any]] = {}

    def profile(self, name: str) -> Profile:
        return load_profile(self._profiles(), name)

    def host_python(self, host_name: str) -> str:
        """The host's python: [hosts.NAME].python, or python3 (this interpreter for local hosts)."""
        return self.hosts.get(host_name).python

    def detect_version(
        self, host: Host, python: str | None = None, refresh: bool = False, engine_name: str = "sglang"
    ) -> str | None:
        """The engine release installed for ``python`` on ``host`` (asked once per session)."""
        python = python or host.python
        key = f"{engine_name}:{host.name}:{python}"
        if refresh or key not in self._versions:
            self._versions[key] = engine(engine_name).host_version(host, python)
        return self._versions[key]

    def command(self, profile: Profile, version: str | None = None, *, offline: bool = False) -> Command:
        """The launch command; the version comes from the caller, the profile, or the host."""
        eng = engine(profile.engine)
        python = self.hosts.get(profile.host).python
        warnings: list[str] = []
        v = version or profile.version
        if v is None and not offline:
            try:
                v = self.detect_version(self.hosts.get(profile.host), _python_of(profile, python), engine_name=eng.name)
                if v is None:
                    warnings.append(
                        f"{eng.name} is not installed for the launcher's python on {profile.host}: "
                        "flags spelled as written"
                    )
            except (HostError, InputError) as exc:
                warnings.append(f"version unknown ({exc}); flags spelled as written")
        cmd = eng.build(profile, v, python)
        cmd.warnings = warnings + cmd.warnings
        return cmd

    def preview(self, name: str, version: str | None = None) -> Preview:
        """Everything checked before anything starts: command, diff, host parser, rules."""
        profile = self.profile(name)
        eng = engine(profile.engine)
        host = self.hosts.get(profile.host)
        findings: list[Finding] = []
        python = _python_of(profile, host.python)
        reachable = True
        v = version or profile.version
        if v is None:
            try:
                v = self.detect_version(host, python, engine_name=eng.name)
            except HostKeyError:
                raise
            except HostError as exc:  # one failed contact is enough: nothing else is tried
                reachable = False
                findings.append(Finding("error", "host-unreachable", str(exc), "check the host", "host"))
        cmd = eng.build(profile, v, python)
        _refuse_unrunnable(name, cmd.to_dict())  # before the host is asked anything about it
        if v is None and reachable:
            cmd.warnings.insert(
                0, f"{eng.name} is not installed for {python} on {profile.host}: flags spelled as written"
            )
        probe = self._parser_probe(eng, host, profile, python, cmd, reachable, findings)
        if probe:
            findings += eng.parser_findings(probe)
        draft_cfg, draft_raw = self._draft_config(host, profile) if reachable else (None, None)
        draft_sha = sha256(draft_raw) if draft_raw is not None else None
        from workbench.engine.flags import cuda_graph_on

        doctor = doctor_findings(
            host,
            profile,
            eng.spec(cmd.version or probe.get("version")),
            draft_cfg,
            cuda_graph=cuda_graph_on(cmd.argv),
        )
        rules = eng.rule_findings(profile, cmd, draft_cfg)
        if any(f.code == "algorithm-mismatch" for f in doctor):
            rules = [f for f in rules if f.code != "spec-eagle3-under-eagle"]
        findings += rules + doctor
        findings += self._port_findings(profile)
        if reachable:
            findings += self._path_findings(host, profile)
        last = self.registry.last_launch(name)
        return Preview(
            name,
            profile.host,
            cmd.version,
            cmd.to_dict(),
            cmd.display,
            diff_argv(last.argv if last else None, cmd.argv),
            findings,
            cmd.warnings,
            draft_sha,
            eng.name,
            resolved=profile,
            draft_config_raw=draft_raw,
        )

    def _parser_probe(
        self,
        eng: Engine,
        host: Host,
        profile: Profile,
        python: str,
        cmd: Command,
        reachable: bool,
        findings: list[Finding],
    ) -> dict[str, Any]:
        """The host's own parser on the command's engine arguments (one verdict per command: the port
        number does not change it, so one probe serves all ports)."""
        args = list(cmd.engine_args)
        if "--port" in args:
            args[args.index("--port") + 1] = "0"
        key = json.dumps([eng.name, profile.host, python, args])
        probe: dict[str, Any] = {}
        try:
            probe = self._probes.get(key) or {}
            if not probe and reachable:
                r = host.run(eng.probe_argv(python, cmd.engine_args), timeout=120)
                probe = parse_probe(r.out) if r.rc == 0 else {"version": None, "error": r.err.strip()[-300:]}
                if r.rc == 0 and probe.get("ok") is not None:
                    self._probes[key] = probe  # the same command gets the same verdict
        except HostKeyError:
            raise
        except HostError as exc:
            findings.append(Finding("error", "host-unreachable", str(exc), "check the host", "host"))
        return probe

    def _draft_config(self, host: Host, profile: Profile) -> tuple[dict[str, Any] | None, bytes | None]:
        """The draft's config.json, read once: (parsed, raw bytes); a hub id or an unreadable file is None."""
        if not profile.draft or not (profile.draft.startswith(("/", "~", "."))):
            return None, None
        path = profile.draft.rstrip("/") + "/config.json"
        try:
            raw = host.read_bytes(path)
        except HostError:
            return None, None
        from workbench import strictjson

        try:  # strict: a hostile config (deep nesting, NaN, a top-level list) is "unreadable", not a crash
            cfg = strictjson.loads(raw, path)
        except InputError:
            return None, raw
        return (cfg if isinstance(cfg, dict) else None), raw

    def _path_findings(self, host: Host, profile: Profile) -> list[Finding]:
        """A model or draft folder that is not there fails minutes into a launch (as a transformers
        OSError, ``process-died``): name it before anything starts. Hub ids (``org/name``) are not
        paths and are left to the engine."""
        import os
        import posixpath

        from workbench.hosts.local import LocalHost

        local = isinstance(host, LocalHost)
        out = []
        for what, path in (("model", profile.model), ("draft", profile.draft)):
            if not path or not path.startswith(("/", "~", ".")):
                continue
            p = path
            if p.startswith("~"):
                p = os.path.expanduser(p) if local else p[2:] if p.startswith("~/") else p
            elif not p.startswith("/"):
                base = profile.run_dir or (os.getcwd() if local else "")
                p = posixpath.join(base, p) if base else p  # ssh: relative to the login's home
            try:
                there = host.exists(p)
            except HostError:
                continue
            if not there:
                out.append(
                    Finding(
                        "error",
                        f"{what}-missing",
                        f"{what} {path}: no such file or folder on "
                        f"{profile.host}" + (f" (looked at {p})" if p != path else ""),
                        f"fix [profiles.{profile.name}].{what} in workbench.toml",
                        "workbench",
                    )
                )
        return out

    def _port_findings(self, profile: Profile) -> list[Finding]:
        busy = [s for s in self.registry.all(active=True) if s.host == profile.host and s.port == profile.port]
        return [
            Finding(
                "error",
                "port-taken",
                f"server {s.id} ({s.profile}) already uses port {s.port} on {s.host}",
                "stop it or change the profile's port",
            )
            for s in busy
        ]

    def launch(self, name: str, preview: Preview | None = None) -> ServerRecord:
        preview = preview or self.preview(name)
        errors = [f for f in preview.findings if f.severity == "error"]
        if errors:
            raise WorkbenchError(
                f"profile {name}: not launched: {errors[0].message}"
                + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")
            )
        profile = preview.resolved or self.profile(name)
        eng = engine(profile.engine)
        host = self.hosts.get(profile.host)
        cmd = preview.command
        _refuse_unrunnable(name, cmd)  # before anything is recorded
        python = _python_of(profile, host.python)
        now = time.time()
        token = secrets.token_hex(16)
        # one log per launch: two servers of a profile (or a relaunch) never share a log, so each
        # server's metrics come from its own lines only
        sid, log = self.registry.insert(
            name,
            profile.host,
            profile.port,
            cmd["log"],
            argv=cmd["argv"],
            env=cmd["env"],
            draft_config_sha256=preview.draft_config_sha256,
            launched=now,
            extra={
                "engine": eng.name,
                "version": preview.version,
                "display": preview.display,
                "gpus": _gpus_of(profile, cmd, eng),
                "stop_grace": profile.stop_grace,
                "ready_timeout": profile.ready_timeout,
                "launch_token": token,
            },
            log_of=lambda sid: unique_log(cmd["log"], sid, token),
        )
        argv = host_scripts.launch_line(python, cmd["argv"], cmd["env"], log, cmd.get("run_dir"), token)
        try:
            r = host.run(argv, timeout=60)
        except BaseException as exc:
            self.registry.set(sid, state=ServerState.FAILED, extra={"failure": {"class": "launch", "text": str(exc)}})
            raise
        if r.rc != 0 or not r.out.strip():
            self.registry.set(
                sid, state=ServerState.FAILED, extra={"failure": {"class": "launch", "text": r.err.strip()[-300:]}}
            )
            raise WorkbenchError(
                f"profile {name}: the launch command failed (exit {r.rc}): {(r.err.strip() or r.out.strip())[-300:]}"
            )
        ident = json.loads(r.out.strip().splitlines()[-1])
        st = ident.get("stat") or {}
        self.registry.started(sid, ident["pid"], st.get("pgid"), str(st.get("starttime")) if st else None)
        self.registry.set(sid, extra={"boot_id": ident.get("boot_id")})
        raw = preview.draft_config_raw
        if preview.draft_config_sha256 and raw is not None and sha256(raw) == preview.draft_config_sha256:
            # the bytes the preview checked, content-addressed like the config history's
            self.registry.journal.put_blob(preview.draft_config_sha256, raw)
        return self.registry.get(sid)


def unique_log(path: str, sid: int, token: str) -> str:
    """The profile's log path made this launch's own: ``/logs/debug.log`` -> ``/logs/debug.7-1a2b3c.log``
    (server id, and a piece of the launch token so two workspaces launching one profile never meet)."""
    folder, base = os.path.split(path)
    stem, ext = os.path.splitext(base)
    if not stem:  # ".log" or a name that is only an extension
        stem, ext = base, ""
    return os.path.join(folder, f"{stem}.{sid}-{token[:6]}{ext}")


def _python_of(profile: Profile, default: str) -> str:
    """The python that runs the engine: the launcher's when it is ``PY -m MODULE``, else the host's."""
    if (
        profile.launcher
        and len(profile.launcher) >= 3
        and profile.launcher[1] == "-m"
        and profile.launcher[0] != "{python}"
    ):
        return str(profile.launcher[0])
    return default


def _gpus_of(profile: Profile, cmd: dict[str, Any], eng: Engine) -> list[Any]:
    if profile.gpus is not None:
        return list(profile.gpus)
    vis = cmd.get("env", {}).get("CUDA_VISIBLE_DEVICES")
    if vis:
        try:
            return [int(x) for x in vis.split(",") if x.strip()]
        except ValueError:
            return []
    return list(range(eng.tp_size(cmd["argv"])))
