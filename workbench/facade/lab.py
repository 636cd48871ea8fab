"""Workbench methods for the miniature EAGLE-3 world.

- ``lab_build(size="tiny", dir=None, force=False, seed=None, threads=None) -> LabWorld``: build or
  reuse the cached world (``seed``/``threads`` override the size's settings).
- ``lab_start(world=None, draft="draft", port=None, extra=(), env=None, steps=3) -> LabProcess``:
  start the reference server locally (own process group, log file), wait until it is ready.
- ``lab_stop(pid, pgid=None, confirm=False)``: TERM the group, then KILL after a grace period
  (destructive: needs ``confirm=True``; only pids this workspace started are accepted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.facade.base import WorkbenchBase
from workbench.results import Result

if TYPE_CHECKING:
    from workbench.lab.process import LabProcess
    from workbench.progress import Progress

DRAFTS = ("draft", "draft_broken", "draft_shifted")


@dataclass
class LabWorld(Result):
    dir: str
    size: str
    target: str
    draft: str
    draft_broken: str
    draft_shifted: str
    training_data: str
    heldout_data: str
    acc: dict[str, Any]
    layers: dict[str, Any]
    accept_length: dict[str, Any] = field(default_factory=dict)
    heldout: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    cached: bool = False
    # the world laid out for vLLM's CPU attention: target, drafts and their ids (``lab/vllm_layout.py``)
    vllm: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_manifest(cls, m: dict[str, Any]) -> LabWorld:
        fields = {k: m[k] for k in cls.__dataclass_fields__ if k in m}
        fields["cached"] = bool(m.get("cached", False))
        return cls(**fields)


class LabAPI(WorkbenchBase):
    def lab_build(
        self,
        size: str = "tiny",
        dir: str | None = None,
        force: bool = False,
        seed: int | None = None,
        threads: int | None = None,
    ) -> LabWorld:
        from workbench.lab.build import build

        def prog(p: Progress) -> None:
            self.progress(p)

        overrides = {k: v for k, v in (("seed", seed), ("threads", threads)) if v is not None}
        manifest = build(size, root=Path(dir).expanduser() if dir else None, progress=prog, force=force, **overrides)
        world = LabWorld.from_manifest(manifest)
        self._record(
            "lab.build",
            world.dir,
            {
                "size": size,
                "cached": world.cached,
                "acc": world.acc,
                "accept_length": world.accept_length,
                "seed": world.calibration.get("seed_used"),
                "retries": world.calibration.get("retries"),
            },
        )
        return world

    def lab_start(
        self,
        world: LabWorld | str | None = None,
        draft: str | None = "draft",
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
        steps: int = 3,
        log_path: str | None = None,
        timeout: float = 180.0,
    ) -> LabProcess:
        from workbench.lab.build import load_manifest
        from workbench.lab.process import start_server

        if world is None:
            world = self.lab_build()
        m = world.to_dict() if isinstance(world, LabWorld) else load_manifest(world)
        if draft is not None and draft not in DRAFTS:
            raise InputError(f"draft: {draft!r} is not one of {', '.join(DRAFTS)} (or None for no speculation)")
        if log_path is None:
            logs = Path(self.workspace.state_dir) / "lab-logs"
            logs.mkdir(parents=True, exist_ok=True)
            log_path = str(logs / f"lab-{draft or 'plain'}-{port or 'auto'}.log")
        proc = start_server(
            m["target"],
            m[draft] if draft else None,
            host=host,
            port=port,
            extra=extra,
            env=env,
            steps=steps,
            log_path=log_path,
            timeout=timeout,
        )
        self._record("lab.start", f"{host}:{proc.port}", proc.to_dict())
        self.__dict__.setdefault("_lab_procs", {})[proc.pid] = proc
        return proc

    def lab_stop(self, pid: int, pgid: int | None = None, confirm: bool = False) -> str:
        from workbench.confirm import Plan, require
        from workbench.lab.process import stop_server

        proc = self.__dict__.get("_lab_procs", {}).get(pid)
        if proc is None:
            raise InputError(f"pid {pid}: not a lab server started by this workbench")
        if pgid is not None and pgid != proc.pgid:
            raise InputError(f"pid {pid}: its process group is {proc.pgid}, not {pgid}")
        plan = Plan(
            "stop",
            f"pid {pid}",
            f"stop the lab server (pid {pid}, process group {proc.pgid})",
            [
                f"pid {pid}, start time {proc.starttime} (checked again before any signal)",
                "SIGTERM to its processes (the group's, proven its own)",
                "SIGKILL after 5 s if still running",
            ],
        )
        require(plan, confirm)
        outcome = stop_server(proc)
        self.__dict__["_lab_procs"].pop(pid, None)
        self._record("lab.stop", f"pid {pid}", {"outcome": outcome})
        return outcome
