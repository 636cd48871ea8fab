"""``eagle-workbench demo``: the story, in the lab, on this machine.

A workspace (the local host, a lab profile) whose draft carries the story's config: the layer ids
with the embedding included and the rest shifted (``draft_broken`` of the lab world). The scripted
run launches it, measures accept length, runs the live doctor (hidden states through the server,
a tensor-dump relaunch to name the trained layers), applies the fix through the config history,
relaunches the same profile and measures again. Every step is an ordinary Workbench operation, so
the journal (and the Timeline) holds all of it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from workbench.errors import WorkbenchError
from workbench.progress import Progress, noop
from workbench.results import Result
from workbench.servers.registry import ServerState

if TYPE_CHECKING:
    from workbench.configs.history import ConfigChange, TrackedConfig
    from workbench.doctor.findings import Fix
    from workbench.journal import Event
    from workbench.live.report import FixOutcome, LiveReport
    from workbench.progress import ProgressCallback
    from workbench.servers.measure import Measurement
    from workbench.servers.registry import ServerRecord
    from workbench.servers.status import ServerStatus
    from workbench.servers.stop import StopResult
    from workbench.workspace import Workspace

PROFILE = "lab-story"
MARKER = "# written by `eagle-workbench demo`"
LAB_ENGINE = "sglang==0.5.23"  # the engine rule that captures the embedding at index 0, as in the story


@dataclass
class DemoSetup(Result):
    workspace: str
    profile: str
    world: str
    draft: str  # the workspace's copy of the story's draft (its config gets fixed)
    config: str  # draft/config.json
    training_data: str
    story_ids: list[Any]
    trained_ids: list[Any]
    port: int
    size: str


@dataclass
class DemoResult(Result):
    before: dict[str, Any]
    findings: list[Any]
    fix: dict[str, Any] | None
    after: dict[str, Any]
    predicted: float | None = None
    wall_s: float = 0.0
    journal: list[Any] = field(default_factory=list)  # event kinds, in order
    servers: dict[str, Any] = field(default_factory=dict)
    transfers: list[Any] = field(default_factory=list)

    def text(self) -> str:
        b, a = self.before.get("accept_length"), self.after.get("accept_length")
        lines = [
            "The story, in the lab:",
            f"  1. the server runs the story's draft config (layer ids {self.before.get('layer_ids')}): "
            f"accept length {_f(b)}" + (f", the drafter predicts {_f(self.predicted)}" if self.predicted else ""),
        ]
        lines.append("  2. the doctor, from the server's hidden states and the training data:")
        for i, f in enumerate(self.findings[:4], 1):
            ex = f" (costs {_f(f['explains'])} accept length)" if f.get("explains") is not None else ""
            lines.append(f"       {i}. {f['severity']} {f['code']}{ex}: {f['message']}")
        if self.fix:
            lines.append(
                f"  3. fix, written through the config history (v{self.fix.get('version')}): {self.fix.get('summary')}"
            )
        lines.append(
            f"  4. relaunched the same profile: accept length {_f(b)} -> {_f(a)}"
            + (f" (x{a / b:.2f})" if a and b else "")
        )
        lines.append(
            f"  {len(self.journal)} steps in the journal (eagle-workbench --workspace {self.servers.get('workspace')} "
            f"timeline); {self.wall_s:.0f} s"
        )
        return "\n".join(lines)


class DemoOps(Protocol):
    """What the scripted story needs from the workbench: the ``Workbench`` facade in the product."""

    workspace: Workspace

    def _record(self, kind: str, subject: str = "", payload: Any = None) -> int: ...
    def events(self, kind: str | None = None, subject: str | None = None, limit: int | None = None) -> list[Event]: ...
    def config_track(self, path: str, label: str = "") -> TrackedConfig: ...
    def config_set(self, path: str, assignments: dict[str, Any], *, reason: str | None = None) -> ConfigChange: ...
    def servers(self, active: bool = False) -> list[ServerRecord]: ...
    def server(self, server_id: int) -> ServerRecord: ...
    def server_stop(
        self, server_id: int, *, confirm: bool = False, grace: float | None = None, gpu_wait: float = ...
    ) -> StopResult: ...
    def launch(self, name: str, *, confirm: bool = False) -> ServerRecord: ...
    def server_wait(self, server_id: int, timeout: float | None = None, poll: float = 1.0) -> ServerStatus: ...
    def server_measure(
        self,
        server_id: int,
        *,
        concurrency: int = ...,
        max_new_tokens: int | None = ...,
        rounds: int = ...,
        prompts: str | None = ...,
        label: str = ...,
    ) -> Measurement: ...
    def live_prompts(self) -> str | None: ...
    def doctor_live(
        self,
        server_id: int,
        training_data: str | None = None,
        *,
        samples: int = ...,
        measure: bool = ...,
        dump: str = ...,
        dump_alongside: bool = ...,
    ) -> LiveReport: ...
    def live_fix(
        self, server_id: int, fix: Fix, *, confirm: bool = False, measure_tokens: int | None = None
    ) -> FixOutcome: ...


class DemoPrepareOps(DemoOps, Protocol):
    """``prepare`` also builds the lab world (``Workbench.lab_build``)."""

    def lab_build(self, size: str = ..., dir: str | None = None) -> Result | Mapping[str, Any]: ...


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def default_dir() -> Path:
    from workbench.workspace import default_root

    return default_root() / "demo"


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _copy_draft(src: Path, dst: Path) -> None:
    """The story's draft in the workspace: its own config.json (the fix edits this one, never the
    lab's cache), the weights linked (or copied across filesystems)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if not f.is_file() or f.name == "config.json":
            continue
        target = dst / f.name
        if target.exists():
            continue
        try:
            os.link(f, target)
        except OSError:
            shutil.copy2(f, target)


def write_workspace(
    root: Path, world: dict[str, Any], size: str, port: int | None = None, python: str | None = None
) -> DemoSetup:
    root.mkdir(parents=True, exist_ok=True)
    cfg_path = root / "workbench.toml"
    if cfg_path.exists() and not cfg_path.read_text().startswith(MARKER):
        raise WorkbenchError(
            f"{cfg_path}: exists and was not written by the demo; give the demo its own folder (--workspace DIR)"
        )
    draft = root / "drafts" / "story-draft"
    _copy_draft(Path(world["draft_broken"]), draft)
    from workbench.lab.process import free_port

    port = port or free_port()
    logs = root / "logs"
    story_ids = world["layers"]["draft_broken"]
    toml = f"""{MARKER}: the story in the lab, on this machine.
# The profile serves the lab's target with the story's draft config (layer ids {story_ids}, trained on
# {world["layers"]["trained"]}); `eagle-workbench demo` puts that config back at every start.

[profiles.{PROFILE}]
description = "the lab target and drafter, served with the story's draft config"
host = "local"
launcher = {json.dumps([python or sys.executable, "-m", "workbench.lab.serve", "--lab-engine", LAB_ENGINE])}
model = {json.dumps(world["target"])}
draft = {json.dumps(str(draft))}
port = {port}
log = {json.dumps(str(logs / (PROFILE + ".log")))}
run_dir = {json.dumps(str(root))}
args = ["--host", "127.0.0.1", "--enable-return-hidden-states", "--decode-log-interval", "10"]
env = {{ PYTHONPATH = {json.dumps(_package_root())} }}
speculative = {{ algorithm = "EAGLE3", num_steps = 5, eagle_topk = 1, num_draft_tokens = 6 }}
ready_timeout = 300
stop_grace = 5

[live]
training_data = {json.dumps(world["training_data"])}
prompts = {json.dumps(str(root / "prompts.json"))}

[configs]
story-draft = {json.dumps(str(draft / "config.json"))}
"""
    cfg_path.write_text(toml)
    write_prompts(world, root / "prompts.json")
    return DemoSetup(
        str(root),
        PROFILE,
        world["dir"],
        str(draft),
        str(draft / "config.json"),
        world["training_data"],
        story_ids,
        world["layers"]["trained"],
        port,
        size,
    )


def write_prompts(world: dict[str, Any], path: Path, count: int = 16) -> None:
    """The measurement prompts in the lab's own language: held-out documents of its corpus (the
    package's English prompt set is mostly unknown words to the lab's word-level tokenizer).
    Written again when the workspace's file came from another lab world."""
    name = f"lab-{Path(world['dir']).name}-{count}"
    try:
        if json.loads(path.read_text()).get("name") == name:
            return
    except (OSError, ValueError):
        pass
    from transformers import AutoTokenizer

    from workbench.lab.build import load_manifest
    from workbench.lab.capture import make_prompts
    from workbench.lab.settings import corpus_style, settings_for

    s = settings_for(world.get("size") or "tiny")
    built = load_manifest(world["dir"]).get("settings") or s.to_dict()
    ids = make_prompts(built["prompt_len"], count, built["seed"] + 7, built["seed"], corpus_style(built))
    tok = AutoTokenizer.from_pretrained(world["target"])
    texts = [tok.decode(row.tolist(), skip_special_tokens=True) for row in ids]
    path.write_text(
        json.dumps(
            {
                "name": name,
                "max_new_tokens": 64,
                "description": "held-out documents of the lab corpus (greedy)",
                "prompts": texts,
            },
            indent=1,
        )
        + "\n"
    )


def reset_story_config(wb: DemoOps, setup: DemoSetup, world: dict[str, Any]) -> None:
    """The story's config.json in the workspace draft, through the history when it was edited."""
    src = (Path(world["draft_broken"]) / "config.json").read_bytes()
    path = Path(setup.config)
    if not path.exists():
        path.write_bytes(src)
        wb.config_track(str(path), label="story-draft")
        return
    wb.config_track(str(path), label="story-draft")
    if path.read_bytes() != src:
        ids = json.loads(src)["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        wb.config_set(
            str(path),
            {"eagle_config.eagle_aux_hidden_state_layer_ids": ids},
            reason=f"demo: back to the story's config {ids}",
        )


def stop_demo_servers(wb: DemoOps) -> list[int]:
    """Servers this workspace still runs (from an earlier demo), identity-checked by the lifecycle."""
    stopped: list[int] = []
    for rec in wb.servers(active=True):
        try:
            wb.server_stop(rec.id, confirm=True, grace=5, gpu_wait=0)
            stopped.append(rec.id)
        except WorkbenchError:
            pass
    return stopped


def prepare(
    wb: DemoPrepareOps,
    size: str = "small",
    *,
    lab_dir: str | None = None,
    progress: ProgressCallback | None = None,
    world: dict[str, Any] | None = None,
) -> DemoSetup:
    """Build (or reuse) the lab world and write the demo workspace around ``wb``'s folder."""
    progress = progress or noop
    if world is None:
        progress(Progress("demo", 0, 4, f"building the lab world ({size}; cached after the first time)"))
        built = wb.lab_build(size=size, dir=lab_dir)
        world = built.to_dict() if hasattr(built, "to_dict") else dict(built)
    setup = write_workspace(Path(wb.workspace.root), world, size)
    wb.workspace.reload()
    stop_demo_servers(wb)
    reset_story_config(wb, setup, world)
    wb._record("demo.prepare", setup.workspace, setup)
    return setup


def launch_story(
    wb: DemoOps, setup: DemoSetup, timeout: float = 300.0, progress: ProgressCallback | None = None
) -> ServerRecord:
    progress = progress or noop
    progress(Progress("demo", 1, 4, f"launching {setup.profile} with the story's config {setup.story_ids}"))
    rec = wb.launch(setup.profile, confirm=True)
    st = wb.server_wait(rec.id, timeout=timeout, poll=0.5)
    if st.state != ServerState.READY:
        fail = st.failure or {}
        raise WorkbenchError(
            f"the lab server did not start ({st.state}: {fail.get('class', '')} "
            f"{fail.get('text', '') or fail.get('hint', '')}); log {rec.log}"
        )
    return wb.server(rec.id)


def measure_story(wb: DemoOps, server_id: int, measure_tokens: int) -> Measurement:
    """Step 1 of the story: the accept length the server shows with the story's config."""
    return wb.server_measure(
        server_id, max_new_tokens=measure_tokens, prompts=wb.live_prompts(), label="demo: the story's config"
    )


def run_story(
    wb: DemoOps,
    setup: DemoSetup,
    *,
    measure_tokens: int = 48,
    samples: int = 4,
    progress: ProgressCallback | None = None,
    server_id: int | None = None,
) -> DemoResult:
    """The scripted story on a launched (or to-be-launched) server."""
    t0 = time.perf_counter()
    first_event = wb.events()[-1].id if wb.events() else 0
    progress = progress or noop
    sid = server_id if server_id is not None else launch_story(wb, setup, progress=progress).id
    progress(Progress("demo", 2, 4, "measuring accept length, then asking the doctor"))
    measure_story(wb, sid, measure_tokens)
    report = wb.doctor_live(sid, setup.training_data, samples=samples, measure=False, dump="yes", dump_alongside=True)
    if report.fix is None:
        raise WorkbenchError(f"the doctor found no applicable fix on server {sid}: {report.codes}")
    progress(Progress("demo", 3, 4, "applying the fix, relaunching, measuring again"))
    out = wb.live_fix(sid, report.fix, confirm=True, measure_tokens=measure_tokens)
    cmp = out.comparison
    before, after = cmp.before if cmp else {}, cmp.after if cmp else {}
    events = [e for e in wb.events() if e.id > first_event]
    progress(Progress("demo", 4, 4, "done"))
    result = DemoResult(
        before={
            "accept_length": before.get("accept_length"),
            "tokens_per_s": before.get("tokens_per_s"),
            "server": sid,
            "layer_ids": before.get("layer_ids"),
            "config_version": before.get("config_version"),
        },
        findings=[f.to_dict() for f in report.findings],
        fix={**report.fix.to_dict(), "version": out.change.version.number, "location": out.change.location},
        after={
            "accept_length": after.get("accept_length"),
            "tokens_per_s": after.get("tokens_per_s"),
            "server": out.server_after,
            "layer_ids": after.get("layer_ids"),
            "config_version": after.get("config_version"),
        },
        predicted=report.predicted.accept_length,
        wall_s=time.perf_counter() - t0,
        journal=[e.kind for e in events],
        servers={"workspace": setup.workspace, "story": sid, "fixed": out.server_after},
        transfers=[t.to_dict() for t in report.transfers],
    )
    wb._record(
        "demo.story",
        setup.workspace,
        {"before": result.before, "after": result.after, "fix": result.fix, "wall_s": round(result.wall_s, 1)},
    )
    return result
