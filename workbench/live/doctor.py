"""The doctor on a running server.

What it checks, in order:

1. **The config the server loaded**: the draft ``config.json`` bytes recorded at launch (the journal
   keeps them by sha256; the file may have been edited since), the target's ``config.json`` and the
   engine version from ``/server_info``; the static checks run on the host, near the weights.
2. **Observed accept length**: the measurement protocol (flush, fixed prompt set, ``/server_info``).
3. **Predicted accept length**: the drafter evaluated on training samples at the server's number of
   steps (or accuracies the caller gives, through the predictor).
4. **Hidden states**: training samples' ``input_ids`` sent to the server (cache flushed) with
   ``return_hidden_states``; the packed features the engine feeds the drafter are aligned with the
   training slots on the host. When a slot is not the engine's part at the same place, a short
   relaunch of the same profile with a tensor dump (after asking) makes every residual-stream point
   a candidate, names the trained points and gives ``layer-ids-engine-mismatch`` its recommended ids.
   The drafter is evaluated again on the server's features: the difference to the training features
   is the accept length the features cost, which ranks the finding against the observed gap.

``ops`` is the Workbench (its server operations are journaled as when a user runs them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from workbench.confirm import Plan
from workbench.doctor.findings import Finding, Fix
from workbench.errors import InputError, WorkbenchError
from workbench.live.ops import LiveOps
from workbench.live.report import LiveReport, RankedFinding, finding_from_dict, rank
from workbench.live.types import (
    Alignment,
    Draft,
    DrafterJob,
    DrafterSummary,
    DraftFacts,
    EngineCaptureJob,
    Evaluations,
    FeatureFacts,
    Features,
    HiddenStatesAnswer,
    HiddenStatesJob,
    Observed,
    Predicted,
    Rules,
    ServerFacts,
    Spec,
    StaticJob,
    Target,
    TargetFacts,
)
from workbench.progress import Progress, noop
from workbench.servers.measure import accept_length
from workbench.servers.registry import STOPPABLE, ServerState

if TYPE_CHECKING:
    from workbench.hosts.base import Host
    from workbench.remote import NearCompute

SAME_MAX = 1e-3  # a slot "is" the engine's part at its place: bf16 noise, not an adjacent layer
DUMP_MODES = ("ask", "yes", "no")


def engine_of(version: str | None, name: str = "sglang") -> str:
    """The engine spec of a server: ``sglang==0.5.23``, ``vllm==0.32.0``, or the bare name."""
    from workbench.engine import Version

    if not version:
        return name
    try:
        return f"{name}=={Version.parse(str(version))}"
    except InputError:
        return name


def _arg(argv: Sequence[str], flag: str) -> str | None:
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


class LiveDoctor:
    def __init__(self, ops: LiveOps, server_id: int, *, progress: Callable[[Progress], None] | None = None) -> None:
        self.ops = ops
        self.sid = int(server_id)
        self.progress = progress or noop
        self.rec = ops.server(self.sid)
        self.host = ops.host(self.rec.host)
        self.steps: list[str] = []
        self.notes: list[str] = []
        self.transfers: list[Any] = []

    # -- small helpers ------------------------------------------------------------------------------
    def _step(self, stage: str, i: int, n: int, message: str) -> None:
        self.steps.append(message)
        self.progress(Progress(stage, i, n, message))

    def location(self, path: str) -> str:
        return path if self.rec.host == "local" else f"{self.rec.host}:{path}"

    def _near(self) -> NearCompute:
        from workbench.remote import NearCompute

        python = self.ops.lifecycle.launcher.host_python(self.rec.host) if self.rec.host != "local" else None
        return NearCompute(self.host, python=python)

    def _job(self, job: str, args: Mapping[str, object], timeout: float = 1800.0) -> dict[str, Any]:
        """A job's answer on the host, as its JSON (each job its own keys; read with care)."""
        result, tr = self._near().run(job, dict(args), timeout=timeout)
        if tr.tensor_bytes or tr.moved_bytes:
            self.transfers.append(tr)
        return dict(result)

    def _read_json(self, path: str) -> tuple[dict[str, Any] | None, bytes | None]:  # a config.json: any keys
        from workbench.hosts import HostError

        try:
            raw = self.host.read_bytes(path)
        except HostError:
            return None, None
        try:
            return json.loads(raw), raw
        except ValueError:
            return None, raw

    # -- the server -----------------------------------------------------------------------------------
    def server_facts(self) -> ServerFacts:
        """Engine version, resolved speculative settings, model and draft paths, from the server."""
        rec = self.rec
        try:
            facts = cast(ServerFacts, dict(self.ops.lifecycle.follow.server_info(self.sid)))
        except WorkbenchError as exc:
            raise WorkbenchError(f"server {self.sid}: the server does not answer ({exc}); is it ready?") from None
        facts["model"] = facts.get("model") or _arg(rec.argv, "--model-path") or _arg(rec.argv, "--model")
        facts["draft"] = facts.get("draft") or _arg(rec.argv, "--speculative-draft-model-path")
        return facts

    def target_info(self, model: str) -> TargetFacts:
        cfg, _ = self._read_json(model.rstrip("/") + "/config.json")
        if cfg is None:
            self.notes.append(f"cannot read {model}/config.json on {self.rec.host}: the layer count is unknown")
            return {"path": model, "arch": None, "num_layers": None}
        from workbench.engine.target import text_config

        text: dict[str, Any] = text_config(cfg)  # the model's own config: any keys
        archs = cfg.get("architectures") or []
        return {
            "path": model,
            "arch": archs[0] if archs else cfg.get("model_type"),
            "archs": [a for a in archs if isinstance(a, str)],
            "num_layers": text.get("num_hidden_layers"),
            "context_length": text.get("max_position_embeddings"),
        }

    def draft_info(self, draft: str) -> DraftFacts:
        from workbench.hosts.base import sha256

        path = draft.rstrip("/") + "/config.json"
        _current, raw = self._read_json(path)
        loaded_sha = self.rec.draft_config_sha256
        loaded_raw = None
        if loaded_sha:
            loaded_raw = self.ops.journal.blob(loaded_sha)
        if loaded_raw is None:
            loaded_raw = raw
            if loaded_sha:
                self.notes.append("the config loaded at launch is not in the journal: checked the file as it is now")
        loaded = json.loads(loaded_raw) if loaded_raw else None
        cur_sha = sha256(raw) if raw is not None else None
        changed = bool(loaded_sha and cur_sha and cur_sha != loaded_sha)
        if changed:
            self.notes.append(
                f"{path} changed since server {self.sid} loaded it: the server still runs the old "
                "version (relaunch to load the new one)"
            )
        return {
            "path": draft,
            "config": path,
            "location": self.location(path),
            "loaded": loaded,
            "loaded_text": loaded_raw.decode("utf-8") if loaded_raw else None,
            "ids": None,  # what the serving release reads from it: set once the release is known
            "loaded_sha256": loaded_sha or cur_sha,
            "current_sha256": cur_sha,
            "changed_since_launch": changed,
        }


@dataclass(frozen=True)
class DiagnoseOptions:
    """What the live doctor is asked to do (``Workbench.doctor_live``'s keywords, validated once).

    ``confirm``: True, False, or a callable taking the dump relaunch's Plan and answering it."""

    training_data: str | None = None
    accuracies: Sequence[Any] | None = None
    samples: int = 4
    eval_samples: int = 32
    measure: bool = True
    measure_tokens: int | None = None
    measure_concurrency: int = 4
    dump: str = "ask"
    confirm: bool | Callable[[Plan], bool] = False
    static: bool = True
    dump_alongside: bool = False
    ready_timeout: float | None = None
    prompts: str | None = None

    def __post_init__(self) -> None:
        if self.dump not in DUMP_MODES:
            raise InputError(f"dump: {self.dump!r} is not one of {', '.join(DUMP_MODES)}")
        if self.samples < 1:
            raise InputError("samples: expected at least 1 training sample")
        if self.eval_samples < 0:
            raise InputError(f"eval_samples: expected 0 or more, got {self.eval_samples}")
        if self.measure_concurrency < 1:
            raise InputError(f"measure_concurrency: expected at least 1, got {self.measure_concurrency}")
        if self.measure_tokens is not None and self.measure_tokens < 1:
            raise InputError(f"measure_tokens: expected at least 1, got {self.measure_tokens}")

    def go_ahead(self, plan: Plan) -> bool:
        """Whether the dump relaunch runs: ``dump="yes"``, or ``"ask"`` and ``confirm`` says yes."""
        if self.dump == "yes":
            return True
        if self.dump == "no":
            return False
        return bool(self.confirm(plan)) if callable(self.confirm) else bool(self.confirm)


N_STEPS = 6


def diagnose(
    ops: LiveOps,
    server_id: int,
    options: DiagnoseOptions | None = None,
    *,
    progress: Callable[[Progress], None] | None = None,
) -> LiveReport:
    """The live doctor's steps, in order (each a method of ``Diagnosis``; the module docstring says why)."""
    t0 = time.perf_counter()
    run = Diagnosis(ops, server_id, options or DiagnoseOptions(), progress)
    run.read_server()
    run.static_checks()
    run.decode_graphs()
    run.observe()
    run.hidden_states_and_drafter()
    run.settle_by_numbers()
    run.rank_findings()
    return run.report(time.perf_counter() - t0)


class Diagnosis:
    """One run of the live doctor: what each step found, for the steps after it."""

    def __init__(
        self, ops: LiveOps, server_id: int, opts: DiagnoseOptions, progress: Callable[[Progress], None] | None
    ) -> None:
        self.ops, self.opts = ops, opts
        self.d = LiveDoctor(ops, server_id, progress=progress)
        self.ranked: list[RankedFinding] = []
        self.observed = Observed(None, None, source="not measured")
        self.predicted = Predicted()
        self.features: FeatureFacts = {}
        self.alignment: Alignment | None = None
        self.pending: Plan | None = None
        self.gap: float | None = None

    # 0. what the server loaded
    def read_server(self) -> None:
        d = self.d
        st = self.ops.server_status([d.sid], gpus=False)[0]
        if st.state != ServerState.READY:
            raise WorkbenchError(f"server {d.sid}: is {st.state}; the live doctor needs a ready server")
        d._step("live.doctor", 0, N_STEPS, "reading what the server loaded")
        self.facts = facts = d.server_facts()
        from workbench.servers.engines import engine

        self.adapter = engine(d.rec.extra.get("engine"))
        self.engine = engine_of(facts["version"], self.adapter.name)
        self.target: TargetFacts = (
            d.target_info(facts["model"]) if facts["model"] else {"path": None, "arch": None, "num_layers": None}
        )
        draft_path = facts["draft"]
        if not draft_path and facts["algorithm"] and facts["model"]:
            # speculative decoding with no draft path: the engine loads the target as its own draft
            # (the static checks say so: draft-is-target)
            draft_path = facts["model"]
            d.notes.append(f"server {d.sid} names no draft model: the target {facts['model']} is its draft")
        draft = d.draft_info(draft_path) if draft_path else None
        if draft is None:
            raise WorkbenchError(f"server {d.sid}: runs without a draft model (no speculative decoding to diagnose)")
        from workbench import engine as eng
        from workbench.remote.engine import shipment

        fields = eng.read_draft_fields(draft["loaded"] or {})
        rel = eng.release(self.engine)
        draft["ids"], draft["ids_key"] = eng.draft_ids(rel, fields)
        # the rules every host job answers with: the laptop's, narrowed to this target and draft
        self.rules = shipment(self.target.get("archs") or [], list(fields.architectures))
        self.draft = draft
        self.spec = Spec(facts["algorithm"], facts["steps"], facts["topk"], facts["draft_tokens"])
        from workbench.engine.flags import cuda_graph_on

        if self.adapter.name == "vllm":
            self.production_graphs = "--enforce-eager" not in d.rec.argv
        else:
            self.production_graphs = cuda_graph_on(d.rec.argv)
        self.readable = draft["loaded"] is not None
        if not self.readable:
            d.notes.append(
                f"{draft['config']} cannot be read on {d.rec.host} (a hub id, or no access): static "
                "checks and the drafter evaluation skipped"
            )

    # 1. static checks on the loaded config, on the host (weights stay there)
    def static_checks(self) -> None:
        if not (self.opts.static and self.readable):
            return
        d, draft, target, facts = self.d, self.draft, self.target, self.facts
        d._step("live.doctor", 1, N_STEPS, f"static checks of the loaded config ({self.engine})")
        job: StaticJob = {
            "draft": draft["path"],
            "config_text": draft["loaded_text"],
            "target_config": target["path"],
            "engine": self.engine,
            "algorithm": facts["algorithm"],
            "context_length": facts["context_length"],
            "env": dict(getattr(d.rec, "env", None) or {}),
            "cuda_graph": self.production_graphs,
            "rules": self.rules,
        }
        rep = d._job("static", job)
        for f in rep["findings"]:
            if f["severity"] == "info" and f["code"] in ("layer-ids-nondefault", "weights-not-checked"):
                continue  # true of any non-default or remote draft; not a problem of this server
            self.ranked.append(RankedFinding(finding_from_dict(f, d.location), "static"))

    # 1b. the production configuration: what CUDA-graph decode captures, asked of the host's own SGLang.
    # The hidden-state checks below see prefill and a dump taken with graphs off, never decode graphs.
    def decode_graphs(self) -> None:
        if self.adapter.name != "sglang":
            return  # what decode graphs capture is read from SGLang's graph runner; vLLM's is not read yet
        if self.readable and self.target.get("num_layers"):
            _check_decode_graphs(
                self.d, self.ranked, self.engine, self.target, self.draft, self.production_graphs, self.rules
            )

    # 2. observed accept length
    def observe(self) -> None:
        o = self.opts
        self.d._step("live.doctor", 2, N_STEPS, "measuring accept length (flush, fixed prompts)")
        self.observed = _observe(
            self.ops, self.d, self.facts, o.measure, o.measure_tokens, o.measure_concurrency, o.prompts
        )

    # 3 and 4. hidden states and the drafter, near the data
    def hidden_states_and_drafter(self) -> None:
        o, d, spec = self.opts, self.d, self.spec
        if o.accuracies:
            self.predicted = _from_accuracies(list(o.accuracies), spec)
        if not o.training_data:
            if not o.accuracies:
                d.notes.append(
                    "no training data: predicted accept length and hidden states not checked "
                    "(give training_data on the server's host, or accuracies)"
                )
            return
        target, draft = self.target, self.draft
        job: HiddenStatesJob = {
            "training_data": o.training_data,
            "count": o.samples,
            "part_points": _engine_points(self.engine, target, draft),
            "engine": self.engine,
            "rules": self.rules,
            "arch": target["arch"],
            "num_layers": target["num_layers"],
            "draft_config": draft["loaded"],
            "draft_config_path": draft["config"],
            "draft": draft["path"] if self.readable else None,
            "target": target["path"] if target.get("num_layers") else None,
            "steps": spec.steps,
            "eval_samples": 0 if o.accuracies else o.eval_samples,
        }
        evals = self._hidden_states(job)
        if (
            not o.accuracies
            and job["draft"]
            and job["target"]
            and spec.steps
            and (evals is None or "headline" not in evals)
        ):
            d._step("live.doctor", 4, N_STEPS, f"evaluating the drafter on {o.eval_samples} training samples")
            ask: DrafterJob = {
                "draft": job["draft"],
                "target": job["target"],
                "training_data": o.training_data,
                "steps": spec.steps,
                "samples": o.eval_samples,
            }
            evals = {**(evals or {}), **cast(Evaluations, d._job("drafter", ask))}
        if evals:
            self._take_evaluations(evals)
        d.notes += [f"drafter evaluation: {n}" for n in (evals or {}).get("notes", [])]

    def _hidden_states(self, job: HiddenStatesJob) -> Evaluations | None:
        """Training samples through the server; when its features are not the training slots, the
        dump relaunch (asked first) names every layer. Returns the drafter evaluations made on the way."""
        o, d = self.opts, self.d
        res: HiddenStatesAnswer | None = None
        evals = None
        if self.facts["return_hidden_states"]:
            d._step("live.doctor", 3, N_STEPS, f"sending {o.samples} training samples with return_hidden_states")
            payload: HiddenStatesJob = {**job, "url": f"http://127.0.0.1:{d.rec.port}", "mode": "payload"}
            res = cast(HiddenStatesAnswer, d._job("live", payload))
            self.alignment = _compact(res, "payload")
            evals = res.get("evals")
            same = _same_as_engine(self.alignment)
            self.features["verdict"] = (
                "every training slot is the engine's part at its place (the server feeds the drafter what it "
                "was trained on)"
                if same
                else "the server's features differ from the training slots: " + _diff_text(self.alignment)
            )
        else:
            same = None
            self.features["verdict"] = "the server does not return hidden states (--enable-return-hidden-states is off)"
        need_dump = res is None or not same
        if need_dump and res is not None and self.alignment is not None and _all_slots_matched(self.alignment):
            need_dump = False  # every slot found among the engine's parts (a permutation): named already
            _add_alignment_findings(self.ranked, res, d)
        if not need_dump:
            return evals
        plan = dump_plan(self.ops, d, o.samples, o.dump_alongside)
        if not o.go_ahead(plan):
            self.pending = plan if o.dump == "ask" else None
            if res is not None and self.alignment is not None:
                self.ranked.append(
                    RankedFinding(_provisional(self.alignment, self.draft, self.engine), "hidden states")
                )
            d.notes.append(
                "the trained layers are not named yet: "
                + plan.summary
                + (" (confirm to run it)" if o.dump == "ask" else " (dump disabled)")
            )
            return evals
        d._step("live.doctor", 4, N_STEPS, f"relaunching ({plan.summary.split(' with ', 1)[-1]}) to name every layer")
        dres = _dump_run(self.ops, d, {**job, "eval_samples": 0}, o.dump_alongside, o.ready_timeout)
        if dres is not None:
            self.alignment = _compact(dres, "dump")
            if dres.get("evals"):
                kept = {k: v for k, v in (dres.get("evals") or {}).items() if k in ("train", "live")}
                evals = cast(Evaluations, {**(evals or {}), **kept})
            _add_alignment_findings(self.ranked, dres, d)
        return evals

    def _take_evaluations(self, evals: Evaluations) -> None:
        """The drafter on training features vs on the server's: what the features cost; the headline
        evaluation is the prediction when no accuracies were given."""
        tr: DrafterSummary = evals.get("train") or {}
        lv: DrafterSummary = evals.get("live") or {}
        self.features.update(
            {
                "train_accept_length": tr.get("accept_length"),
                "live_accept_length": lv.get("accept_length"),
                "samples": tr.get("samples"),
            }
        )
        ta, la = tr.get("accept_length"), lv.get("accept_length")
        if ta is not None and la is not None:
            self.features["explains"] = ta - la
        if not self.opts.accuracies:
            head = evals.get("headline") or tr
            self.predicted = Predicted(
                head.get("accept_length"),
                head.get("acc"),
                f"drafter on {head.get('samples')} training samples, {self.spec.steps} steps",
                head.get("samples"),
                head.get("full_acc"),
                absent=frozenset() if head.get("full_acc") is not None else frozenset({"full_acc"}),
            )

    # numbers settle what the files could only read two ways
    def settle_by_numbers(self) -> None:
        if self.alignment is None:
            return
        unsettled = [
            r
            for r in self.ranked
            if r.source == "static"
            and r.code == "layer-ids-engine-mismatch"
            and r.finding.evidence_class == "convention"
        ]
        if unsettled:
            self.ranked = [r for r in self.ranked if r not in unsettled]
            self.d.notes.append(
                "the layer-id reading the files left open is settled by the hidden states: "
                + (self.features.get("verdict") or "see the alignment")
            )

    # 5. rank by the share of the gap each finding explains
    def rank_findings(self) -> None:
        self.d._step("live.doctor", 5, N_STEPS, "ranking findings")
        if self.predicted.accept_length is not None and self.observed.accept_length is not None:
            self.gap = self.predicted.accept_length - self.observed.accept_length
        gap, explains = self.gap, self.features.get("explains")
        for r in self.ranked:
            if r.source == "hidden states" and r.code == "layer-ids-engine-mismatch" and explains is not None:
                r.explains = explains
            elif r.code == "algorithm-mismatch" and gap is not None:
                r.explains = gap  # an EAGLE3 draft under EAGLE sits at accept length 1: all of it
            if r.explains is not None and gap and gap > 0:
                r.share = max(0.0, min(1.0, r.explains / gap))
        self.ranked = rank(_dedupe(_settle_fixes(self.ranked, self.draft["loaded"])))

    def report(self, seconds: float) -> LiveReport:
        d = self.d
        fix = next((r.fix for r in self.ranked if r.fix is not None and r.fix.applicable), None)
        d._step("live.doctor", N_STEPS, N_STEPS, "done")
        # the parts built from the host's files and job answers are kept as the host gave them (check=False):
        # a config's odd value is the doctor's subject, not a reason to lose the report
        draft = {k: v for k, v in self.draft.items() if k not in ("loaded", "loaded_text", "ids_key")}
        target = {k: v for k, v in self.target.items() if k != "archs"}
        return LiveReport(
            d.sid,
            d.rec.profile,
            d.rec.host,
            self.ops.server(d.sid).state,
            self.engine,
            self.facts["version"],
            self.spec,
            Target.from_dict(target, check=False),
            Draft.from_dict(draft, check=False),
            self.observed,
            self.predicted,
            self.gap,
            Features.from_dict(self.features, check=False),
            self.alignment,
            self.ranked,
            fix,
            self.pending,
            d.transfers,
            d.steps,
            d.notes,
            seconds,
        )


# ------------------------------------------------------------------------------------------- parts
def _observe(
    ops: LiveOps,
    d: LiveDoctor,
    facts: ServerFacts,
    measure: bool,
    tokens: int | None,
    concurrency: int,
    prompts: str | None,
) -> Observed:
    if measure:
        m = ops.server_measure(
            d.sid, concurrency=concurrency, max_new_tokens=tokens, prompts=prompts, label="live doctor"
        )
        counted = m.counters is not None
        return Observed(
            m.accept_length,
            m.tokens_per_s,
            m.accept_len,
            f"measurement protocol ({m.prompts} prompts x {m.max_new_tokens} tokens)"
            + (f", {m.engine}'s counters" if counted else ""),
            m.counters,
            list(m.per_position) if counted else None,
            absent=frozenset() if counted else frozenset({"counters", "per_position"}),
        )
    rows = [r for r in ops.measurements(d.sid) if r.get("kind") == "protocol"]
    if rows:
        r = rows[-1]
        counted = bool(r.get("counters"))
        return Observed(
            accept_length(r),
            r.get("tokens_per_s"),
            source=f"last measurement ({time.strftime('%H:%M:%S', time.localtime(r['ts']))})"
            + (f", {r.get('engine')}'s counters" if counted else ""),
            counters=r.get("counters") if counted else None,
            per_position=list(r.get("per_position") or []) if counted else None,
        )
    if facts.get("avg_spec_accept_length") is not None:
        return Observed(
            facts["avg_spec_accept_length"], None, source="/server_info avg_spec_accept_length (since the last flush)"
        )
    return Observed(None, None, source="not measured")


def _from_accuracies(acc: list[Any], spec: Spec) -> Predicted:
    from workbench.predict import predict

    steps = int(spec.steps or len(acc))
    topk = int(spec.topk or 1)
    ndt = int(spec.draft_tokens or steps + 1)
    p = predict("acc", [float(a) for a in acc], steps, topk, ndt)
    return Predicted(
        p.accept_length,
        list(acc),
        f"predictor from the given accuracies ({steps} steps, topk {topk}, {ndt} draft tokens)",
    )


def _engine_points(engine: str, target: TargetFacts, draft: DraftFacts) -> list[str | None] | None:
    """The points the engine captures for the loaded ids, in concatenation order (None: missing)."""
    from workbench.engine import capture

    archs, n = target.get("archs"), target.get("num_layers")
    if not n or not archs:
        return None
    try:
        cap = capture(engine, archs=archs, num_layers=int(n), ids=draft.get("ids"))
    except InputError:
        return None
    return [None if p in ("missing", "unknown") else p for p in cap.points]


def _check_decode_graphs(
    d: LiveDoctor,
    ranked: list[RankedFinding],
    engine: str,
    target: TargetFacts,
    draft: DraftFacts,
    graphs: bool,
    rules: Rules,
) -> None:
    """A server is only healthy if its decode graphs capture what its prefill does: asked on the host,
    of its own engine when it is that release, else of the rules shipped (the answer says which)."""
    if not graphs:
        d.notes.append(
            "the server runs with CUDA graphs off: decode captures what prefill does "
            "(production launches with graphs on may differ on some releases)"
        )
        return
    job: EngineCaptureJob = {
        "engine": engine,
        "archs": target.get("archs") or [],
        "num_layers": int(target["num_layers"] or 0),
        "ids": draft.get("ids"),
        "cuda_graph": True,
        "rules": rules,
    }
    try:
        res = d._job("engine_capture", job)
    except WorkbenchError as exc:
        d.notes.append(f"CUDA-graph decode capture not checked ({exc})")
        return
    gp, pts = res.get("cuda_graph_points"), res.get("points")
    d.notes.append(
        f"CUDA-graph decode capture read from {res.get('source')}: "
        + (", ".join(gp) if gp is not None else "not settled by the code")
    )
    if gp is None or pts is None or gp == pts or any(r.code == "layer-ids-cuda-graph-defaults" for r in ranked):
        return
    code = [
        e
        for e in res.get("evidence", [])
        if e.split(":", 1)[0] in ("graph_reset", "config_ids", "config_before_graphs")
    ]
    f = Finding(
        "layer-ids-cuda-graph-defaults",
        "error" if code else "warning",
        f"{res.get('engine')} decodes with CUDA graphs that capture {', '.join(gp)}, not the config's "
        f"{', '.join(pts)} (its graph runner resets the ids to the defaults): prefill and a dump with "
        "graphs off look right while production decode feeds the drafter other layers.",
        {"engine_points": pts, "cuda_graph_points": gp, "source": res.get("source"), "code": code},
        None,
        "engine-code" if code else "convention",
    )
    ranked.append(RankedFinding(f, "production"))


def _same_as_engine(al: Alignment) -> bool:
    """Every slot's best candidate is the engine's part at the same place, at numeric-noise level."""
    cols = al.cols or []
    best = al.best or []
    if len(best) != len(cols):
        return False
    for i, b in enumerate(best):
        if b.candidate != cols[i] or b.verdict != "match" or (b.value or 1.0) > SAME_MAX:
            return False
    return True


def _all_slots_matched(al: Alignment) -> bool:
    rec = al.recommendation
    return bool(rec and rec.confident) and all((b.value or 1.0) <= SAME_MAX for b in al.best or [])


def _diff_text(al: Alignment) -> str:
    parts = []
    cols, phys = al.cols or [], al.cols_physical or []

    def name(j: int) -> str:
        if j >= len(cols):
            return "?"
        return (phys[j] if j < len(phys) else None) or cols[j]

    for i, b in enumerate(al.best or []):
        v = b.value
        vt = "-" if v is None else f"{v:.2g}"
        j = cols.index(b.candidate) if b.candidate in cols else None
        if j == i and v is not None and v <= SAME_MAX:
            continue
        if j == i:
            parts.append(f"slot {i} vs the engine's {name(i)}: rel_diff {vt}, not the same state")
        else:
            parts.append(
                f"slot {i} is closest to the engine's slot {j} {name(j) if j is not None else '?'} "
                f"(rel_diff {vt}), not its own {name(i)}"
            )
    return "; ".join(parts) or "margins too small to call"


def _compact(res: HiddenStatesAnswer, mode: str) -> Alignment:
    """The alignment part of the report, kept as the host gave it (check=False: the doctor's subject)."""
    al = res["align"]
    keep = (
        "rows",
        "rows_physical",
        "cols",
        "cols_physical",
        "matrix",
        "best",
        "tokens_compared",
        "recommendation",
        "device",
        "precision",
        "notes",
        "thresholds",
    )
    return Alignment.from_dict(
        {
            "mode": mode,
            **{k: al.get(k) for k in keep},
            "samples": res.get("samples"),
            "tensor_bytes": res.get("tensor_bytes"),
        },
        check=False,
    )


def _add_alignment_findings(ranked: list[RankedFinding], res: HiddenStatesAnswer, d: LiveDoctor) -> None:
    for f in res["align"].get("findings") or []:
        ranked.append(RankedFinding(finding_from_dict(f, d.location), "hidden states"))


def _provisional(al: Alignment, draft: DraftFacts, engine: str) -> Finding:
    """The mismatch seen in the packed features, before the dump names the trained layers."""
    return Finding(
        "layer-ids-engine-mismatch",
        "warning",
        f"{engine} feeds the drafter other hidden states than it was trained on ({_diff_text(al)}); "
        "a tensor dump names the trained layers and the ids to write.",
        {
            "engine": engine,
            "config_ids": draft.get("ids"),
            "engine_points": al.cols_physical,
            "source": "numeric alignment (return_hidden_states)",
            "best": [b.physical or b.candidate for b in al.best or []],
            "rel_diff": [b.value for b in al.best or []],
        },
        None,
        "numbers",
    )


def _settle_fixes(ranked: list[RankedFinding], loaded: dict[str, Any] | None) -> list[RankedFinding]:
    # ``loaded``: the draft's config.json as the server loaded it (DraftFacts.loaded)
    """A static layer finding knows no trained layers here, so its fix can only restate the config;
    the alignment's fix (from the layers the training data really holds) replaces it."""
    from workbench.configs.jsonedit import get_key

    def noop(fix: Fix | None) -> bool:
        if fix is None or not fix.edits or loaded is None:
            return False
        missing = object()
        return all(not e.delete and get_key(loaded, e.key, missing) == e.value for e in fix.edits)

    named = next((r.fix for r in ranked if r.source == "hidden states" and r.fix is not None), None)
    for r in ranked:
        if r.source == "static" and r.code.startswith("layer-ids-") and (noop(r.fix) or named is not None):
            r.finding.fix = named
    return ranked


def _dedupe(ranked: list[RankedFinding]) -> list[RankedFinding]:
    """One finding per code and source; an alignment finding with a fix replaces a provisional one."""
    out: dict[tuple[str, str], RankedFinding] = {}
    for r in ranked:
        key = (r.code, r.source)
        old = out.get(key)
        if old is None or (r.fix is not None and old.fix is None):
            out[key] = r
    return list(out.values())


# ------------------------------------------------------------------------------------- the dump
# The relaunch that names every layer: SGLang's tensor dump (--debug-tensor-dump-output-folder), or vLLM's
# extract_hidden_states for every id (workbench.vllm.extract). Both run the server's own capture.
def _engine_name(d: LiveDoctor) -> str:
    return str(d.rec.extra.get("engine") or "sglang")


def dump_profile(ops: LiveOps, d: LiveDoctor, port: int, stamp: str) -> tuple[str, dict[str, Any], str]:
    """(profile name, its table as workbench.toml writes one: any profile keys, checked by the
    profile's own reader, dump folder)."""
    prof = ops.profile(d.rec.profile)
    base = (prof.run_dir or "/tmp/eagle-workbench").rstrip("/")
    dump_dir = f"{base}/dumps/server{d.sid}-{stamp}"
    name = f"{d.rec.profile}@dump"
    if _engine_name(d) == "vllm":
        from workbench.vllm import extract

        n = _num_layers(d)
        python = prof.launcher[0] if prof.launcher and prof.launcher[0] != "{python}" else d.host.python
        cpu = not _cuda(d.host, str(python))
        root = extract.connector_root(d.host) if cpu else None
        table = extract.extraction_table(prof, port, dump_dir, n, cpu=cpu, pythonpath=root, log=f"{dump_dir}.log")
        return name, table, dump_dir
    table = {
        "extends": d.rec.profile,
        "port": port,
        "log": f"{dump_dir}.log",
        "args": ["--debug-tensor-dump-output-folder", dump_dir],
        "description": f"tensor dump of {d.rec.profile} for the live doctor (server {d.sid})",
    }
    return name, table, dump_dir


def _num_layers(d: LiveDoctor) -> int:
    """The target's layer count, from its config on the host."""
    from workbench.servers.engines import engine

    model = engine("vllm").argv_facts(d.rec.argv).get("model") or ""
    cfg, _ = d._read_json(str(model).rstrip("/") + "/config.json")
    from workbench.engine.target import text_config

    n = text_config(cfg or {}).get("num_hidden_layers")
    if not isinstance(n, int) or n < 1:
        raise WorkbenchError(f"server {d.sid}: the target's layer count is unknown ({model}/config.json)")
    return n


def _cuda(host: Host, python: str) -> bool:
    """Whether the server's python sees a CUDA device (else vLLM is a CPU build: its connector is ours)."""
    r = host.run([python, "-c", "import torch; print(int(torch.cuda.is_available()))"], timeout=120)
    return r.rc == 0 and r.out.strip().endswith("1")


def dump_plan(ops: LiveOps, d: LiveDoctor, samples: int, alongside: bool) -> Plan:
    prof = ops.profile(d.rec.profile)
    first = "" if alongside else f"stop server {d.sid}, then "
    keep = (
        []
        if alongside
        else [f"server {d.sid} is stopped first (the machine cannot hold two copies); relaunch it after the fix"]
    )
    if _engine_name(d) == "vllm":
        return Plan(
            "relaunch",
            f"server {d.sid}",
            f"{first}launch {d.rec.profile}'s target again with extract_hidden_states on another port, "
            f"send {samples} training sample(s), stop it",
            [
                f"profile {prof.name} on {prof.host}: the same target and arguments, no draft; vLLM's "
                "extract_hidden_states for every id 0..N and a hidden-state connector writing safetensors",
                "the files hold every residual-stream point vLLM can capture for those tokens; the alignment "
                "runs on the host",
                *keep,
            ],
        )
    return Plan(
        "relaunch",
        f"server {d.sid}",
        f"{first}launch {d.rec.profile} again with --debug-tensor-dump-output-folder on another port, "
        f"send {samples} training sample(s), stop it",
        [
            f"profile {prof.name} on {prof.host}: the same command plus the tensor dump (CUDA graphs and "
            "warm-up are off in dump mode)",
            "the dump holds every layer's residual stream for those tokens; the alignment runs on the host",
            *keep,
        ],
    )


def _free_port(host: Host) -> int:
    r = host.python_run(
        "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\nprint(s.getsockname()[1])", timeout=30
    )
    r.check("free port")
    return int(r.out.strip().splitlines()[-1])


def _dump_run(
    ops: LiveOps, d: LiveDoctor, job: HiddenStatesJob, alongside: bool, ready_timeout: float | None
) -> HiddenStatesAnswer | None:
    port = _free_port(d.host)
    name, table, dump_dir = dump_profile(ops, d, port, time.strftime("%Y%m%d-%H%M%S"))
    ops.session_profile(name, table)
    if not alongside:
        ops.server_stop(d.sid, confirm=True)
        d.notes.append(f"server {d.sid} was stopped for the relaunch that names every layer")
    rec = ops.launch(name, confirm=True)
    d.notes.append(f"{'extraction' if _engine_name(d) == 'vllm' else 'dump'} server {rec.id} ({name}) wrote {dump_dir}")
    try:
        st = ops.server_wait(rec.id, timeout=ready_timeout)
        if st.state != ServerState.READY:
            fail = st.failure or {}
            d.notes.append(
                f"the relaunch did not become ready ({st.state}: {fail.get('class', '')} "
                f"{fail.get('hint', '')} {fail.get('text', '')}); layers not named"
            )
            return None
        url = f"http://127.0.0.1:{port}"
        if _engine_name(d) == "vllm":
            ids = _all_ids(table)
            points = _id_points(job["engine"], job.get("arch"), len(ids) - 1, ids)
            ext: HiddenStatesJob = {**job, "url": url, "mode": "extract", "extract_ids": ids, "extract_points": points}
            return cast(HiddenStatesAnswer, d._job("live", ext))
        dump: HiddenStatesJob = {**job, "url": url, "mode": "dump", "dump_dir": dump_dir}
        return cast(HiddenStatesAnswer, d._job("live", dump))
    finally:
        try:
            if ops.server(rec.id).state in STOPPABLE:
                ops.server_stop(rec.id, confirm=True, gpu_wait=60)
        except WorkbenchError as exc:
            d.notes.append(f"stopping relaunched server {rec.id}: {exc}")


def _all_ids(table: dict[str, Any]) -> list[int]:  # dump_profile's table
    args = table["args"]
    spec = json.loads(args[args.index("--speculative-config") + 1])
    return [int(i) for i in spec["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"]]


def _id_points(engine: str, arch: str | None, num_layers: int, ids: list[int]) -> list[str | None]:
    """What the engine's rule (read from its code) says each id captures, one id at a time."""
    from workbench.engine import capture

    out: list[str | None] = []
    for i in ids:
        pts = capture(engine, arch=arch or "LlamaForCausalLM", num_layers=num_layers, ids=[i]).points
        out.append(pts[0] if pts and pts[0] not in ("missing", "unknown") else None)
    return out
