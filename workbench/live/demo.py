"""``eagle-workbench demo``: the story, in the lab, on this machine.

A workspace (the local host, a lab profile) whose draft carries the story's config: the layer ids
with the embedding included and the rest shifted (``draft_broken`` of the lab world). The scripted
run launches it, measures accept length, runs the live doctor (hidden states through the server,
a tensor-dump relaunch to name the trained layers), applies the fix through the config history,
relaunches the same profile and measures again. Every step is an ordinary Workbench operation, so
the journal (and the Timeline) holds all of it.

``engine="vllm"``: the same story on a real vLLM (the CPU build ``make vllm`` installs) serving the lab
world laid out at a head size its CPU attention takes (``lab.json``'s ``vllm``). The draft is the one
SpecForge's capture trained, with the ids written in SGLang's convention; vLLM reads the same ids one
layer earlier. The doctor names the layers from vLLM's own hidden-state extraction and writes the ids in
vLLM's convention; every measurement carries vLLM's own counters.
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
from typing import TYPE_CHECKING, Any, Protocol, Required, TypedDict

from workbench.errors import WorkbenchError
from workbench.progress import Progress, noop
from workbench.results import Result
from workbench.servers.registry import ServerState

if TYPE_CHECKING:
    from workbench.configs.history import ConfigChange, TrackedConfig
    from workbench.doctor.findings import Fix
    from workbench.journal import Event
    from workbench.live.report import FixOutcome, LiveReport
    from workbench.live.types import ComparisonSide
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
    engine: str = "sglang"


class EngineCounters(TypedDict, total=False):
    """The engine's own counters of a measurement (as ``Observed.counters``) and P(the first k+1
    drafts accepted); both or neither."""

    counters: dict[str, Any]  # each engine names its own counters
    per_position: list[float] | None


class StorySide(EngineCounters, total=False):
    """One server of the story: before the fix or after it."""

    accept_length: Required[float | None]
    tokens_per_s: Required[float | None]
    server: Required[int | None]
    layer_ids: Required[list[int] | None]
    config_version: Required[int | None]


class StoryServers(TypedDict, total=False):
    workspace: str
    story: int
    fixed: int | None


@dataclass
class DemoResult(Result):
    before: StorySide
    findings: list[Any]
    fix: dict[str, Any] | None  # the fix's JSON form (``Fix.to_dict``), with the version written and where
    after: StorySide
    predicted: float | None = None
    wall_s: float = 0.0
    journal: list[Any] = field(default_factory=list)  # event kinds, in order
    servers: StoryServers = field(default_factory=lambda: StoryServers())
    transfers: list[Any] = field(default_factory=list)
    engine: str = ""  # the engine that served the story: "sglang==0.5.23" (the lab), "vllm==0.32.0"

    def text(self) -> str:
        b, a = self.before.get("accept_length"), self.after.get("accept_length")
        lines = [
            f"The story, in the lab ({self.engine or 'sglang'}):",
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
    # assignments: dotted key -> JSON value, any key of the config
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
    # the journal's measurement rows: each kind of measurement has its own keys
    def measurements(self, server_id: int | None = None, kind: str | None = None) -> list[dict[str, Any]]: ...
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
    root: Path,
    world: dict[str, Any],  # the lab world's JSON form (``LabWorld``; the lab's own readers take it so)
    size: str,
    port: int | None = None,
    python: str | None = None,
    engine: str = "sglang",
) -> DemoSetup:
    root.mkdir(parents=True, exist_ok=True)
    cfg_path = root / "workbench.toml"
    if cfg_path.exists() and not cfg_path.read_text().startswith(MARKER):
        raise WorkbenchError(
            f"{cfg_path}: exists and was not written by the demo; give the demo its own folder (--workspace DIR)"
        )
    from workbench.lab.process import free_port

    port = port or free_port()
    if engine == "vllm":
        return _write_vllm_workspace(root, world, size, port, cfg_path)
    draft = root / "drafts" / "story-draft"
    _copy_draft(Path(world["draft_broken"]), draft)
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


def _write_vllm_workspace(root: Path, world: dict[str, Any], size: str, port: int, cfg_path: Path) -> DemoSetup:
    """The vLLM story's workspace: a real vLLM serving the lab world (laid out for its CPU attention)
    with the draft's ids as SGLang's convention writes them."""
    from workbench.lab import calibration as K
    from workbench.lab.prompts import write_prompt_set
    from workbench.vllm import local

    vw = world.get("vllm")
    if not vw:
        raise WorkbenchError(f"{world['dir']}: a lab world built before its vLLM layout; rebuild it (lab build)")
    py = local.python()
    if py is None:
        raise WorkbenchError(f"demo --engine vllm: {local.missing()}")
    draft = root / "drafts" / "vllm-story-draft"
    _copy_draft(Path(vw["draft"]), draft)
    env = local.environment(root / "vllm-run")
    story_ids = vw["ids"]["draft"]
    toml = f"""{MARKER}: the story in the lab on a real vLLM, on this machine.
# The profile serves the lab's target with the draft SpecForge's capture trained (layer ids {story_ids} in
# SGLang's convention, trained on {", ".join(vw["points"])}); vLLM reads ids one layer earlier.
# `eagle-workbench demo --engine vllm` puts that config back at every start.

[profiles.{PROFILE}]
engine = "vllm"
description = "the lab target and drafter on a real vLLM, with the draft config SpecForge's capture wrote"
host = "local"
launcher = {json.dumps([py, "-m", local.MODULE])}
model = {json.dumps(vw["target"])}
draft = {json.dumps(str(draft))}
port = {port}
log = {json.dumps(str(root / "logs" / (PROFILE + ".log")))}
run_dir = {json.dumps(str(root))}
args = [
  "--host", "127.0.0.1", "--enforce-eager", "--dtype", "float32", "--max-model-len", "1024",
  "--per-request-spec-decode-metrics", "summary",
]
env = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())} }}
speculative = {{ algorithm = "EAGLE3", num_steps = {K.DEMO_STEPS} }}
ready_timeout = 600
stop_grace = 15

[live]
training_data = {json.dumps(world["training_data"])}
prompts = {json.dumps(str(root / "prompts.json"))}

[configs]
story-draft = {json.dumps(str(draft / "config.json"))}
"""
    cfg_path.write_text(toml)
    write_prompt_set(world, root / "prompts.json", "demo")
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
        "vllm",
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
    story = world["vllm"]["draft"] if setup.engine == "vllm" else world["draft_broken"]
    src = (Path(story) / "config.json").read_bytes()
    path = Path(setup.config)
    if not path.exists():
        path.write_bytes(src)
        wb.config_track(str(path), label="story-draft")
        return
    wb.config_track(str(path), label="story-draft")
    if path.read_bytes() != src:
        from workbench.configs.jsonedit import get_key

        story_cfg, now = json.loads(src), json.loads(path.read_bytes())
        ids = story_cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        edits: dict[str, Any] = {"eagle_config.eagle_aux_hidden_state_layer_ids": ids}
        missing = object()
        if (
            get_key(now, "eagle_aux_hidden_state_layer_ids", missing) is not missing
            and "eagle_aux_hidden_state_layer_ids" not in story_cfg
        ):
            edits["eagle_aux_hidden_state_layer_ids"] = None  # a fix of vLLM's, written at the top level
        wb.config_set(str(path), edits, reason=f"demo: back to the story's config {ids}")


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
    engine: str = "sglang",
) -> DemoSetup:
    """Build (or reuse) the lab world and write the demo workspace around ``wb``'s folder
    (``engine="vllm"``: the story on a real vLLM; without one it says how to get one)."""
    if engine == "vllm":
        from workbench.vllm import local

        if local.missing():
            raise WorkbenchError(f"demo --engine vllm: {local.missing()}")
    progress = progress or noop
    if world is None:
        progress(Progress("demo", 0, 4, f"building the lab world ({size}; cached after the first time)"))
        built = wb.lab_build(size=size, dir=lab_dir)
        world = built.to_dict() if hasattr(built, "to_dict") else dict(built)
    setup = write_workspace(Path(wb.workspace.root), world, size, engine=engine)
    wb.workspace.reload()
    stop_demo_servers(wb)
    reset_story_config(wb, setup, world)
    wb._record("demo.prepare", setup.workspace, setup)
    return setup


def launch_story(
    wb: DemoOps, setup: DemoSetup, timeout: float | None = None, progress: ProgressCallback | None = None
) -> ServerRecord:
    progress = progress or noop
    progress(Progress("demo", 1, 4, f"launching {setup.profile} with the story's config {setup.story_ids}"))
    rec = wb.launch(setup.profile, confirm=True)
    st = wb.server_wait(rec.id, timeout=timeout, poll=0.5)  # None: the profile's ready_timeout
    if st.state != ServerState.READY:
        fail = st.failure or {}
        raise WorkbenchError(
            f"the {setup.engine} server did not start ({st.state}: {fail.get('class', '')} "
            f"{fail.get('text', '') or fail.get('hint', '')}); log {rec.log}"
        )
    return wb.server(rec.id)


def measure_story(wb: DemoOps, server_id: int, measure_tokens: int) -> Measurement:
    """Step 1 of the story: the accept length the server shows with the story's config."""
    return wb.server_measure(
        server_id, max_new_tokens=measure_tokens, prompts=wb.live_prompts(), label="demo: the story's config"
    )


def _counters(wb: DemoOps, server_id: int) -> EngineCounters:
    """The engine's own counters of the server's last protocol measurement, beside its accept length
    (none for an engine that keeps none)."""
    rows = [r for r in wb.measurements(server_id) if r.get("kind") == "protocol"]
    c = rows[-1].get("counters") if rows else None
    if not c:
        return {}
    return {"counters": c, "per_position": rows[-1].get("per_position")}


def _story_side(side: ComparisonSide | None, server: int | None, counters: EngineCounters) -> StorySide:
    """A side of the comparison as the story tells it (None: no comparison was made)."""
    return {
        "accept_length": side.get("accept_length") if side else None,
        "tokens_per_s": side.get("tokens_per_s") if side else None,
        "server": server,
        "layer_ids": side.get("layer_ids") if side else None,
        "config_version": side.get("config_version") if side else None,
        **counters,
    }


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
    # the lab server is small enough to dump beside itself; a real vLLM is stopped first (one at a time)
    alongside = setup.engine != "vllm"
    report = wb.doctor_live(
        sid, setup.training_data, samples=samples, measure=False, dump="yes", dump_alongside=alongside
    )
    if report.fix is None:
        raise WorkbenchError(f"the doctor found no applicable fix on server {sid}: {report.codes}")
    progress(Progress("demo", 3, 4, "applying the fix, relaunching, measuring again"))
    out = wb.live_fix(sid, report.fix, confirm=True, measure_tokens=measure_tokens)
    cmp = out.comparison
    events = [e for e in wb.events() if e.id > first_event]
    progress(Progress("demo", 4, 4, "done"))
    result = DemoResult(
        before=_story_side(cmp.before if cmp else None, sid, _counters(wb, sid)),
        findings=[f.to_dict() for f in report.findings],
        fix={**report.fix.to_dict(), "version": out.change.version.number, "location": out.change.location},
        after=_story_side(
            cmp.after if cmp else None,
            out.server_after,
            _counters(wb, out.server_after) if out.server_after is not None else {},
        ),
        predicted=report.predicted.accept_length,
        wall_s=time.perf_counter() - t0,
        journal=[e.kind for e in events],
        servers={"workspace": setup.workspace, "story": sid, "fixed": out.server_after},
        transfers=[t.to_dict() for t in report.transfers],
        engine=report.engine,
    )
    wb._record(
        "demo.story",
        setup.workspace,
        {"before": result.before, "after": result.after, "fix": result.fix, "wall_s": round(result.wall_s, 1)},
    )
    return result
