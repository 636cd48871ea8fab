"""Static checks: everything the doctor can say from the files (draft dir, target config) and the
launch settings (engine, algorithm, context length, training provenance), without a GPU or a server.

Every check is engine-aware (the engine's rules come through ``workbench.doctor.engines``), every
finding names the class of evidence it rests on, and a check that lacks an input is listed in
``DoctorReport.skipped`` with what it needs, so a short report never reads as an all-clear.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from workbench.doctor.capture import CaptureReport, Reading, build_report, trained_readings
from workbench.doctor.engines import VllmRule, engine_rule
from workbench.doctor.findings import ConfigEdit, Finding, Fix, sort_findings
from workbench.draftconfig import DraftCheckpoint, TargetInfo, read_draft, read_target
from workbench.errors import InputError
from workbench.layers import CaptureResult, EngineRule, Point, arch_family, default_ids, normalize_convention
from workbench.results import Result

if TYPE_CHECKING:
    from pathlib import Path

    from workbench.provenance import Provenance

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
DEFAULT_ENGINE = "sglang"


@dataclass
class Skipped(Result):
    """A check that did not run, what it needs and why."""

    check: str
    needs: str
    why: str


@dataclass
class DoctorReport(Result):
    findings: list[Finding]
    capture: CaptureReport | None
    inputs: dict[str, Any] = field(default_factory=dict)
    draft: dict[str, Any] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def codes(self, severity: str | None = None) -> list[str]:
        return [f.code for f in self.findings if severity is None or f.severity == severity]

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "capture": self.capture.to_dict() if self.capture else None,
            "inputs": self.inputs,
            "draft": self.draft,
            "skipped": [s.to_dict() for s in self.skipped],
        }


def normalize_algorithm(name: str | None) -> str | None:
    if name is None:
        return None
    a = str(name).strip().upper()
    if a not in ALGORITHMS:
        raise InputError(f"algorithm: {name!r} is not one of {', '.join(ALGORITHMS)}")
    return "EAGLE" if a == "NEXTN" else a


def _ints(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)


def _fmt(points: Sequence[Point | None] | None) -> str:
    return "[" + ", ".join("missing" if p is None else str(p) for p in points or []) + "]"


class _Checker:
    def __init__(
        self,
        draft: DraftCheckpoint,
        target: TargetInfo | None,
        rule: EngineRule,
        algorithm: str | None,
        trained_layers: list[int] | None,
        trained_convention: str,
        context_length: int | None,
        num_layers: int | None,
        arch: str | None,
        provenance: Provenance | None = None,
        env: dict[str, str] | None = None,
    ):
        self.d, self.t, self.rule = draft, target, rule
        self.algorithm = algorithm
        self.trained_layers, self.trained_convention = trained_layers, trained_convention
        self.provenance = provenance
        self.context_length = context_length
        self.n = num_layers or (target.num_layers if target else None)
        self.arch = arch
        self.findings: list[Finding] = []
        self.skipped: list[Skipped] = []
        self.capture: CaptureReport | None = None
        self.trained: list[Point] | None = None  # the trained points, when settled
        self.readings: list[Reading] = []
        self.cfg_file = draft.config_file
        self.is_vllm = isinstance(rule, VllmRule)
        self.env = dict(env or {})

    def add(
        self,
        code: str,
        severity: str,
        message: str,
        evidence: dict[str, Any] | None = None,
        fix: Fix | None = None,
        cls: str = "",
    ) -> None:
        ev = dict(evidence or {})
        assumed = getattr(self.rule, "assumed_from", None)
        if assumed and (cls or "") in ("", "engine-code") and severity == "error":
            # the rule is a nearby release's: as sure as a convention, never as a finding
            severity, cls = "warning", "convention"
            message += (
                f" (the rule of {self.rule.name} is assumed for vllm=={assumed}: regenerate the table to settle it)"
            )
        self.findings.append(Finding(code, severity, message, ev, fix, cls))

    def skip(self, check: str, needs: str, why: str) -> None:
        self.skipped.append(Skipped(check, needs, why))

    def config_fix(self, summary: str, edits: list[ConfigEdit]) -> Fix:
        return Fix(summary, self.cfg_file, edits)

    # -- inputs ------------------------------------------------------------------------------
    def check_types(self) -> None:
        for p in self.d.problems + (self.t.problems if self.t else []):
            self.add(
                "config-invalid",
                "error",
                f"{p.field} in {p.file} has the wrong type or value: {p.message}.",
                {"file": p.file, "field": p.field, "problem": p.message},
            )
        if self.d.weights_error:
            no_files = not self.d.weight_files or "pytorch_model.bin" in self.d.weights_error
            if no_files:
                self.add(
                    "weights-not-checked",
                    "info",
                    f"Weight checks skipped: {self.d.weights_error}.",
                    {"path": self.d.path, "reason": self.d.weights_error},
                )
                self.skip(
                    "weight names, shapes and d2t", "model.safetensors in the draft directory", self.d.weights_error
                )
            else:
                self.add(
                    "weights-unreadable",
                    "error",
                    f"The draft's weights cannot be read: {self.d.weights_error}.",
                    {"path": self.d.path, "files": self.d.weight_files, "error": self.d.weights_error},
                )

    def check_keys(self) -> None:
        from workbench.doctor.config_keys import unknown_keys

        for key, guess, value in unknown_keys(self.d.config, self.d.layout):
            if guess:
                fix = self.config_fix(
                    f"rename {key} to {guess}", [ConfigEdit(key, delete=True), ConfigEdit(guess, value)]
                )
                self.add(
                    "unknown-config-key",
                    "warning",
                    f"{key} is read by no engine or trainer; did you mean {guess}? As written it is ignored "
                    "(the engine falls back on what the missing key would have said).",
                    {"key": key, "did_you_mean": guess, "value": value},
                    fix,
                )
            elif key.startswith("eagle_config."):
                self.add(
                    "unknown-config-key",
                    "info",
                    f"{key} is read by no engine or trainer.",
                    {"key": key, "did_you_mean": None, "value": value},
                )

    # -- the engine can load the draft and capture on the target -----------------------------------
    def check_loaders(self) -> None:
        d = self.d
        if isinstance(self.rule, VllmRule):  # self.is_vllm
            arch, how = self.rule.draft_architecture(
                d.architectures, d.config.get("speculators_model_type"), d.model_type
            )
            known = self.rule.facts.get("draft_archs") or []
            ev = {
                "engine": self.rule.name,
                "architectures": d.architectures,
                "vllm_architecture": arch,
                "mapping": how,
                "code": self.rule.evidence("arch_map") + self.rule.evidence("draft_archs"),
            }
            if arch is None or (known and arch not in known):
                self.add(
                    "draft-arch-unsupported",
                    "error",
                    f"{self.rule.name} cannot load this draft under method eagle3: {how}"
                    + (f", and {arch} is not in its _SPECULATIVE_DECODING_MODELS registry" if arch else "")
                    + ".",
                    ev,
                )
            targets = self.rule.facts.get("eagle3_targets")
            if self.arch and isinstance(targets, list) and self.t is not None:
                if self.arch not in targets:
                    self.add(
                        "target-eagle3-unsupported",
                        "error",
                        f"{self.rule.name} has no EAGLE-3 aux capture for {self.arch}: its class implements no "
                        "set_aux_hidden_state_layers (the runner refuses EAGLE-3 or fails at load).",
                        {
                            "engine": self.rule.name,
                            "target_arch": self.arch,
                            "code": self.rule.evidence("eagle3_targets"),
                        },
                    )
            elif self.t is None:
                self.skip("target supports EAGLE-3 capture", "--target-config FILE", "the target's architecture")
            return
        from workbench.doctor.sglang_loaders import registry
        from workbench.layers import version_text

        ver = version_text(self.rule.version) if self.rule.version else None
        reg = registry(ver)
        if reg is None:
            self.skip(
                "draft loader in SGLang's model registry",
                f"sglang=={ver} installed (or in the registry table)",
                "that release's model registry has not been read",
            )
            return
        archs = reg["architectures"]
        ev_base = {
            "engine": self.rule.name,
            "registry": f"sglang {reg['version']} EntryClass names "
            "(sglang/srt/models/registry.py import_model_classes)",
        }
        if d.architectures and not any(a in archs for a in d.architectures):
            hint = (
                " (a speculators-format draft: serve it with vLLM, or convert it to SpecForge's "
                "LlamaForCausalLMEagle3 format)"
                if d.layout == "speculators"
                else ""
            )
            self.add(
                "draft-arch-unsupported",
                "error",
                f"sglang {reg['version']} has no loader for {', '.join(d.architectures)}: no module of "
                f"sglang/srt/models names it in EntryClass, so the draft cannot be loaded{hint}.",
                {**ev_base, "architectures": d.architectures, "layout": d.layout},
            )
        if self.t is None or not self.arch:
            self.skip("target supports EAGLE-3 capture", "--target-config FILE", "the target's architecture")
            return
        entry = archs.get(self.arch)
        if entry is not None and not entry["eagle3_capture"]:
            self.add(
                "target-eagle3-unsupported",
                "error",
                f"sglang {reg['version']}'s {self.arch} ({entry['file']}) defines no "
                "set_eagle3_layers_to_capture: EAGLE-3 cannot capture aux hidden states on this target.",
                {**ev_base, "target_arch": self.arch, "file": entry["file"], "line": entry["line"]},
            )

    # -- algorithm -----------------------------------------------------------------------------
    def check_algorithm(self) -> None:
        alg = self.algorithm
        if alg is None:
            self.skip(
                "algorithm vs draft architecture",
                "--algorithm ALGO",
                "the launch's --speculative-algorithm was not given",
            )
            return
        ev = {
            "algorithm": alg,
            "architectures": self.d.architectures,
            "is_eagle3": self.d.is_eagle3,
            "engine": self.rule.name,
        }
        if self.d.is_eagle3 and alg != "EAGLE3":
            msg = (
                f"An Eagle3 draft is launched with --speculative-algorithm {alg}: SGLang feeds it 1*H "
                "features, skips fc silently, and accept length sits at 1.00."
                if not self.is_vllm
                else f"An Eagle3 draft is launched with method {alg.lower()}: {self.rule.name} builds an EAGLE-1 "
                "drafter for it."
            )
            self.add(
                "algorithm-mismatch",
                "error",
                msg,
                ev,
                Fix("launch with --speculative-algorithm EAGLE3", launch=["--speculative-algorithm EAGLE3"]),
            )
        elif alg == "EAGLE3" and not self.d.is_eagle3 and not self.is_vllm:
            # vLLM renames any draft to its eagle3 class under method eagle3 (check_loaders says if it loads)
            eagle1 = any("eagle" in a.lower() for a in self.d.architectures)
            self.add(
                "algorithm-mismatch",
                "error",
                f"--speculative-algorithm EAGLE3 with a draft whose architectures {self.d.architectures} "
                "are not Eagle3: the engine builds the wrong drafter.",
                ev,
                Fix("launch with --speculative-algorithm EAGLE", launch=["--speculative-algorithm EAGLE"])
                if eagle1
                else None,
            )

    # -- layer ids -----------------------------------------------------------------------------
    def ids_edit_key(self) -> str:
        """The key the chosen engine reads ids from (where a fix must write)."""
        if self.rule.reads_top_level_first:
            # vLLM reads the top-level key first and SGLang ignores it: a fix there leaves SGLang's reading alone
            return "eagle_aux_hidden_state_layer_ids"
        return "eagle_config.eagle_aux_hidden_state_layer_ids"

    def ids_fix(self, points: list[Point] | None, why: str) -> Fix | None:
        """Config ids that make this engine capture ``points``; ``why`` says where the points come from."""
        if points is None or self.n is None or getattr(self.rule, "config_ids", "") == "ignored":
            return None
        ids = self.rule.ids_for(points, self.n)
        if ids is None:
            return None
        key = self.ids_edit_key()
        return self.config_fix(
            f"set {key} to {ids} so {self.rule.name} captures {', '.join(map(str, points))} ({why})",
            [ConfigEdit(key, ids)],
        )

    def settled_points(self) -> tuple[list[Point] | None, str]:
        """The trained points when one reading remains (given, provenance, or all readings agree)."""
        live = [r for r in self.readings if r.points is not None]
        if not live:
            return None, ""
        n = cast(int, self.n)  # readings are made only with a layer count
        keys = {tuple(str(p.canonical(n)) for p in cast("list[Point]", r.points)) for r in live}
        if len(keys) == 1:
            r = live[0]
            why = {"given": "the given trained layers", "provenance": "the training capture given"}.get(
                r.basis, "what every known capture of the config's ids yields"
            )
            return r.points, why
        return None, ""

    def check_layers(self) -> None:
        d = self.d
        if not d.is_eagle3 and d.layer_ids is None and d.top_level_layer_ids is None:
            return  # not an EAGLE-3 draft: no aux capture
        ids, source = self.rule.ids_from_config(d.config)
        if ids is not None and not _ints(ids):
            return  # config-invalid already says so
        n = self.n
        if n is not None:
            try:
                self.readings = trained_readings(
                    d, n, self.arch, self.trained_layers, self.trained_convention, self.provenance
                )
            except InputError as exc:
                raise InputError(f"--trained-layers: {exc}") from None
        if (
            d.top_level_layer_ids is not None
            and d.layer_ids is None
            and d.layout != "speculators"
            and "eagle_config.eagle_aux_hidden_state_layer_ids" not in d.bad_fields()
        ):
            self.check_misplaced()
        if self.trained_layers is None and self.provenance is None:
            self.skip(
                "which engine captured the training data",
                "--trained-engine (sglang==X, specforge==V, speculators) or --trained-layers",
                "the training data's provenance (the config's ids are read through every known capture instead)",
            )
        if n is None:
            self.skip(
                "layer capture vs training (ids, range, the engine's rule)",
                "--target-config FILE or --num-layers N",
                "the target's layer count",
            )
            if ids is not None:  # what needs no layer count: the embedding id and the order
                ev = {"config_ids": ids, "ids_key": source, "engine": self.rule.name, "num_layers": None}
                for i in ids:
                    if i < 0:
                        self.add(
                            "layer-ids-embedding",
                            "error",
                            f"Layer id {i} asks for the embedding output (or nothing); EAGLE-3 drafters are "
                            "trained on decoder-layer outputs and engines do not capture it reliably.",
                            {**ev, "id": i, "note": "target layer count unknown: give --target-config"},
                        )
                self.check_unsorted(ids, source, ev)
            return
        self.trained, why_settled = self.settled_points()
        shown = (
            self.trained
            if self.trained is not None
            else next((r.points for r in self.readings if r.points is not None), None)
        )
        src = (
            self.readings[0].label
            if len(self.readings) == 1
            else (
                "every reading agrees: " + "; ".join(r.label for r in self.readings)
                if self.trained is not None
                else f"unsettled: {len([r for r in self.readings if r.points is not None])} readings of the training capture "
                "disagree (trained-on column: one point per reading); --trained-engine or an alignment settles it"
            )
        )
        report, res = build_report(
            self.rule, d.config, ids, source, n, self.arch, shown, src, self.readings, settled=self.trained is not None
        )
        self.capture = report
        base_ev = {
            "config_ids": ids,
            "ids_key": source,
            "engine": self.rule.name,
            "rule": self.rule.source,
            "num_layers": n,
            "engine_indices": res.indices,
        }
        if isinstance(self.rule, VllmRule):
            base_ev["code"] = self.rule.evidence("config_ids") + self.rule.evidence("capture")
        if ids is not None:
            for c in res.by_id:
                idx = c.index
                if c.id == -1 or c.point == "embed":
                    trained_embed = self.trained is not None and any(p.kind == "embed" for p in self.trained)
                    captured = c.point == "embed" and res.fatal is None
                    what = (
                        "captures the embedding output"
                        if captured
                        else f"cannot capture it ({c.problem or res.fatal or 'never fires'})"
                    )
                    fix = self.ids_fix(self.trained, why_settled) if not (captured and trained_embed) else None
                    self.add(
                        "layer-ids-embedding",
                        "warning" if captured and trained_embed else "error",
                        f"Layer id {c.id} means the embedding output; {self.rule.name} {what}.",
                        {**base_ev, "id": c.id, "engine_index": idx, "engine_point": c.point, "fatal": res.fatal},
                        fix,
                    )
                elif idx is not None and (idx > n or idx < 0):
                    self.add(
                        "layer-ids-out-of-range",
                        "error",
                        f"Layer id {c.id} is beyond the target's {n} layers (valid output-of-layer ids 0..{n - 1}).",
                        {**base_ev, "id": c.id, "engine_index": idx},
                        self.ids_fix(self.trained, why_settled),
                    )
                elif idx == n and not self.rule.final_boundary:
                    self.add(
                        "layer-ids-final-uncaptured",
                        "error",
                        f"Layer id {c.id} asks for the last layer's output (capture index {n}), which "
                        f"{self.rule.name} never captures: that aux state is missing.",
                        {**base_ev, "id": c.id, "engine_index": idx, "engine_points": report.engine_points},
                        self.ids_fix(self.trained, why_settled),
                    )
            self.check_unsorted(ids, source, {**base_ev, "engine_points": report.engine_points})
            conv_ids = ids if source != "eagle_aux_hidden_state_layer_ids" else None
            dflt = default_ids(n)
            if conv_ids is not None and list(conv_ids) != dflt:
                self.add(
                    "layer-ids-nondefault",
                    "info",
                    f"Layer ids {ids} differ from the default {dflt} (output-of-layer) for {n} layers; "
                    "every engine must be told them explicitly and reads them by its own rule.",
                    {**base_ev, "default_output_of_layer": dflt},
                )
        self.compare_training(res, report, base_ev)

    def compare_training(self, res: CaptureResult, report: CaptureReport, base_ev: dict[str, Any]) -> None:
        """The engine's capture against every reading of the training capture."""
        n = cast(int, self.n)  # readings are made only with a layer count
        if not self.readings:
            return
        engine_pts = res.points
        live = [r for r in self.readings if r.points is not None]
        if not live:
            r0 = self.readings[0]
            trainer = (
                _specforge_rejects_negative()
                if self.d.layout != "speculators" and any(i < 0 for i in (report.config_ids or []))
                else ""
            )
            self.add(
                "training-capture-impossible",
                "error" if r0.basis != "assumed" else "warning",
                f"No known capture of the training data yields these ids ({r0.problem}{trainer}): the config does not "
                "say what the drafter was trained on (were the ids edited after training? `config log` shows "
                "the history); --trained-layers or an alignment against the training data settles it.",
                {**base_ev, "readings": [r.to_dict() for r in self.readings]},
                None,
                "provenance" if r0.basis != "assumed" else "convention",
            )
            return

        def matches(r: Reading) -> bool:
            pts = cast("list[Point]", r.points)  # only live readings are matched
            return (
                res.fatal is None
                and len(engine_pts) == len(pts)
                and all(e is not None and e.same_stream(t, n) for e, t in zip(engine_pts, pts))
            )

        ok = [r for r in live if matches(r)]
        bad = [r for r in live if not matches(r)]
        if not bad:
            return
        readings_ev = [{**r.to_dict(), "matches": matches(r)} for r in self.readings]
        ev = {
            **base_ev,
            "engine_points": report.engine_points,
            "trained_source": report.trained_source,
            "fatal": res.fatal,
            "readings": readings_ev,
        }
        eng = f"{self.rule.name} captures {_fmt(engine_pts)}"
        if ok:
            # the readings disagree: the config fits one account of training and not another
            alts = "; ".join(
                f"if {r.label.removeprefix('assumed: ')}, it was trained on {_fmt(r.points)}"
                + _shift_text(engine_pts, cast("list[Point]", r.points), n)
                for r in bad
            )
            good = "; ".join(r.label.removeprefix("assumed: ") for r in ok)
            self.add(
                "layer-ids-engine-mismatch",
                "warning",
                f"{eng}: that is what the drafter was trained on if {good}; {alts}. Which one holds depends "
                "on the engine that captured the training data: --trained-engine (e.g. specforge==0.2.0, "
                "which pins its SGLang) or aligning the training data against the server "
                "(doctor --server ID --training-data PATH) settles it.",
                {
                    **ev,
                    "trained_points": None,
                    "shift": None,
                    "settle": ["--trained-engine", "--trained-layers", "doctor --server ID --training-data PATH"],
                    "ids_if": {r.label: self.rule.ids_for(cast("list[Point]", r.points), n) for r in bad},
                },
                None,
                "convention",
            )
            return
        r = bad[0]
        same = all(
            tuple(map(str, cast("list[Point]", x.points))) == tuple(map(str, cast("list[Point]", r.points)))
            for x in bad
        )
        shift = _shift(engine_pts, cast("list[Point]", r.points), n) if same else None
        msg = f"{eng} but the drafter was trained on {_fmt(r.points)}" + (
            f" (a {abs(shift)}-layer shift)" if shift else ""
        )
        if len(bad) > 1:
            msg += f" under every known capture of the training data ({'; '.join(x.label for x in bad)})"
        msg += "."
        if res.fatal:
            msg = msg[:-1] + f"; the engine also fails: {res.fatal}."
        if getattr(self.rule, "config_ids", "") == "ignored" and (self.d.layer_ids or self.d.top_level_layer_ids):
            msg += (
                f" {self.rule.name} ignores the config's layer ids (its runner asks the model for its defaults), "
                "so no config edit changes what it captures: serve it with a release that reads them, "
                "or train on its defaults."
            )
        cls = {"given": "provenance", "provenance": "provenance"}.get(r.basis, "engine-code")
        why = {"given": "the given trained layers", "provenance": "the training capture given"}.get(
            r.basis, "what every known capture of the config's ids yields"
        )
        self.add(
            "layer-ids-engine-mismatch",
            "error",
            msg,
            {**ev, "trained_points": [str(p) for p in cast("list[Point]", r.points)], "shift": shift},
            self.ids_fix(r.points, why) if same else None,
            cls,
        )

    def check_cuda_graph(self, engine_text: str, arch: str | None, cuda_graph: bool) -> None:
        """Releases whose CUDA-graph runner resets the ids to the defaults before capturing decode graphs
        (read from the release's code by ``workbench.engine``): production decode captures other points."""
        if not cuda_graph or self.capture is None or self.rule.engine != "sglang" or self.n is None:
            return
        from workbench.engine import capture as engine_capture
        from workbench.errors import WorkbenchError

        ids, _source = self.rule.ids_from_config(self.d.config)
        try:
            res = engine_capture(engine_text, arch=arch, num_layers=self.n, ids=ids, cuda_graph=True, source="table")
        except WorkbenchError:
            return  # a release the table lacks: said by `engine capture --source wheel`
        if not res.graph_differs:
            return
        n = self.n
        trained = [str(p.canonical(n)) for p in self.trained] if self.trained else None

        def canon(points: Sequence[str]) -> list[str]:
            return [str(Point.parse(p).canonical(n)) if p not in ("missing", "unknown") else p for p in points]

        bad = trained is not None and canon(cast("list[str]", res.cuda_graph_points)) != trained  # graph_differs
        self.add(
            "layer-ids-cuda-graph-defaults",
            "error" if bad else "warning",
            f"{res.engine} decodes with CUDA graphs that capture {', '.join(cast('list[str]', res.cuda_graph_points))} (its "
            f"defaults), not the config's {', '.join(res.points)}: its graph runner calls "
            "set_eagle3_layers_to_capture() without ids before capturing. Prefill and --disable-cuda-graph "
            "use the config's ids, so a check with CUDA graphs off cannot see this"
            + (f"; the drafter was trained on {', '.join(cast('list[str]', trained))}." if bad else "."),
            {
                "engine": res.engine,
                "engine_points": res.points,
                "cuda_graph_points": res.cuda_graph_points,
                "trained_points": trained,
                "source": res.source,
                "code": [
                    e
                    for e in res.evidence
                    if e.split(":", 1)[0] in ("graph_reset", "config_ids", "config_before_graphs")
                ],
            },
        )

    def check_unsorted(self, ids: list[int], source: str, ev: dict[str, Any]) -> None:
        if not any(b <= a for a, b in zip(ids, ids[1:])):
            return
        fix = None
        srt = sorted(set(ids))
        if len(srt) == len(ids):
            fix = self.config_fix(
                f"sort the ids to {srt} (only right if training concatenated in layer order)", [ConfigEdit(source, srt)]
            )
        self.add(
            "layer-ids-unsorted",
            "warning",
            f"Layer ids {ids} are not strictly ascending: engines concatenate in layer order while "
            "SpecForge's HF backend uses list order, a silent channel permutation.",
            ev,
            fix,
        )

    def check_misplaced(self) -> None:
        d = self.d
        sglang = self.rule if self.rule.engine == "sglang" else engine_rule(DEFAULT_ENGINE, self.arch)
        fix = None
        pts, _why = self.settled_points() if self.n is not None else (None, "")
        if self.n is not None and pts is not None:
            new_ids = sglang.ids_for(pts, self.n)
            if new_ids is not None:
                fix = self.config_fix(
                    f"add eagle_config.eagle_aux_hidden_state_layer_ids={new_ids} (what "
                    f"{sglang.name} needs to capture {', '.join(map(str, pts))})",
                    [ConfigEdit("eagle_config.eagle_aux_hidden_state_layer_ids", new_ids)],
                )
        reads_top = self.rule.engine == "vllm" and getattr(self.rule, "config_ids", "").startswith("top")
        self.add(
            "eagle-config-misplaced",
            "info" if reads_top else "warning",
            "The layer ids sit only at the top level of config.json, where SGLang ignores them for capture "
            f"(it uses its defaults){' while ' + self.rule.name + ' reads them first' if reads_top else ''}.",
            {"top_level": d.top_level_layer_ids, "eagle_config": None, "engine": self.rule.name},
            fix,
        )

    def check_count(self, fc_in: int | None) -> None:
        """K ids vs fc in-dim (K * H_t); falls back on num_aux_hidden_states when fc is absent."""
        d = self.d
        ids, source = self.rule.ids_from_config(d.config)
        if ids is not None and not _ints(ids):
            return
        k = len(ids) if ids is not None else 3
        h_t = d.target_hidden_size or (self.t.hidden_size if self.t else None) or d.hidden_size
        ev = {"ids": ids, "ids_key": source, "k": k, "target_hidden_size": h_t}
        if self.is_vllm and cast(VllmRule, self.rule).facts.get("fc_states") == "3":
            # this release sizes fc for 3 states whatever the config says (llama_eagle3.py)
            given = [x for x in (d.layer_ids, d.top_level_layer_ids) if x]
            n_cfg = len(given[0]) if given else None
            width = fc_in // h_t if fc_in is not None and h_t and fc_in % h_t == 0 else None
            bad = next((x for x in (n_cfg, width) if x is not None and x != 3), None)
            if bad is not None:
                self.add(
                    "layer-ids-count-mismatch",
                    "error",
                    f"{self.rule.name} builds the draft's fc for 3 target states (hidden_size * 3), but this "
                    f"draft has {bad}: its fc weight does not load.",
                    {
                        **ev,
                        "fc_in": fc_in,
                        "engine": self.rule.name,
                        "code": cast(VllmRule, self.rule).evidence("fc_states"),
                    },
                )
                return
        if fc_in is not None and h_t:
            if fc_in != k * h_t:
                k_fc = fc_in / h_t
                self.add(
                    "layer-ids-count-mismatch",
                    "error",
                    f"{k} layer ids need an fc input of {k}*{h_t}={k * h_t}, but fc.weight takes {fc_in} "
                    f"({k_fc:g} states).",
                    {**ev, "fc_in": fc_in},
                )
        elif d.num_aux_hidden_states is not None and d.num_aux_hidden_states != k:
            self.add(
                "layer-ids-count-mismatch",
                "error",
                f"num_aux_hidden_states={d.num_aux_hidden_states} but the engine captures {k} states.",
                {**ev, "num_aux_hidden_states": d.num_aux_hidden_states},
            )

    # -- sizes ---------------------------------------------------------------------------------
    def check_context(self) -> None:
        target_ctx = self.context_length or (self.t.context_length if self.t else None)
        draft_ctx = self.d.context_length
        if target_ctx is None:
            self.skip(
                "draft context length vs the server's",
                "--target-config FILE or --context-length N",
                "the target's context length",
            )
            return
        if draft_ctx is None or draft_ctx >= target_ctx:
            return
        key = self.d.key_for["max_position_embeddings"]
        ev = {
            "draft_context_length": draft_ctx,
            "draft_key": key,
            "target_context_length": target_ctx,
            "target_source": "--context-length" if self.context_length else "target config",
            "engine": self.rule.name,
        }
        if isinstance(self.rule, VllmRule):  # self.is_vllm
            how = self.rule.facts.get("draft_len")
            if how == "min":
                self.add(
                    "draft-context-too-short",
                    "info",
                    f"The draft's context length {draft_ctx} is below the target's {target_ctx}; "
                    f"{self.rule.name} serves it anyway (SpeculativeConfig._maybe_override_draft_max_model_len "
                    f"takes the smaller, {draft_ctx}), and a short draft RoPE range can lower accept length on "
                    "long prompts.",
                    {**ev, "code": self.rule.evidence("draft_len")},
                )
            return
        fix = self.config_fix(f"set {key} to {target_ctx}", [ConfigEdit(key, target_ctx)])
        if _env_true(self.env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")):
            self.add(
                "draft-context-too-short",
                "warning",
                f"The draft's context length {draft_ctx} is below the target's {target_ctx}; with "
                "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN set, SGLang starts and overrides the draft's "
                f"max_position_embeddings to {target_ctx} (ModelConfig._derive_context_length), so positions "
                f"past {draft_ctx} use a RoPE range the drafter never saw: accept length can drop on long prompts.",
                {
                    **ev,
                    "env": {
                        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": self.env[
                            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
                        ]
                    },
                },
                fix,
            )
            return
        self.add(
            "draft-context-too-short",
            "error",
            f"The draft's context length {draft_ctx} is below the target's {target_ctx}: SGLang refuses to "
            "start unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (ModelConfig._derive_context_length "
            "raises), and a short draft RoPE range lowers accept length on long prompts.",
            ev,
            fix,
        )

    def check_tied(self) -> None:
        d = self.d
        vocab = (self.t.vocab_size if self.t else None) or d.vocab_size
        if d.tie_word_embeddings and d.draft_vocab_size and vocab and d.draft_vocab_size < vocab:
            key = d.key_for["tie_word_embeddings"]
            self.add(
                "tied-embeddings",
                "error" if not self.is_vllm else "warning",
                f"tie_word_embeddings is true with a {d.draft_vocab_size}-token draft vocabulary (target "
                f"{vocab}): SGLang uses the target embedding as the draft's lm_head"
                + (" (vLLM's handling is not read)." if self.is_vllm else "."),
                {"tie_word_embeddings": True, "draft_vocab_size": d.draft_vocab_size, "target_vocab_size": vocab},
                self.config_fix(f"set {key} to false", [ConfigEdit(key, False)]),
                "static-file" if self.is_vllm else "",
            )

    def check_hidden(self) -> None:
        d, t = self.d, self.t
        if t is None or t.hidden_size is None:
            self.skip(
                "hidden sizes and vocabulary vs the target",
                "--target-config FILE",
                "the target's hidden size and vocabulary",
            )
            return
        if d.target_hidden_size is not None:
            if d.target_hidden_size != t.hidden_size:
                self.add(
                    "hidden-size-mismatch",
                    "error",
                    f"The draft's target_hidden_size {d.target_hidden_size} is not the target's hidden size "
                    f"{t.hidden_size}.",
                    {"target_hidden_size": d.target_hidden_size, "target_config_hidden_size": t.hidden_size},
                    self.config_fix(
                        f"set target_hidden_size to {t.hidden_size}", [ConfigEdit("target_hidden_size", t.hidden_size)]
                    ),
                )
        elif d.hidden_size is not None and d.hidden_size != t.hidden_size:
            self.add(
                "hidden-size-mismatch",
                "error",
                f"The draft has hidden_size {d.hidden_size} and no target_hidden_size, so the engine sizes fc "
                f"for {d.hidden_size}-wide target states; the target's are {t.hidden_size}.",
                {"hidden_size": d.hidden_size, "target_hidden_size": None, "target_config_hidden_size": t.hidden_size},
                self.config_fix(
                    f"set target_hidden_size to {t.hidden_size}", [ConfigEdit("target_hidden_size", t.hidden_size)]
                ),
            )


def _env_true(value: str | None) -> bool:
    """SGLang's EnvBool (sglang/srt/environ.py): true, 1, yes, y (any case)."""
    return value is not None and value.strip().lower() in ("true", "1", "yes", "y")


def _specforge_rejects_negative() -> str:
    """What SpecForge's own id resolver (run on stubs when trainers.json was generated) says of -1."""
    from workbench.provenance import load_table

    rel = load_table().get("specforge", {}).get("releases", {})
    for v, r in sorted(rel.items(), reverse=True):
        if r.get("rejects_negative_ids"):
            return f"; specforge=={v} itself rejects negative ids ({r['resolver']})"
    return ""


def _shift(engine_pts: Sequence[Point | None], trained: Sequence[Point], n: int) -> int | None:
    """The common layer offset between engine and training points, when there is exactly one."""
    offs: set[int] = set()
    if len(engine_pts) != len(trained):
        return None
    for e, t in zip(engine_pts, trained):
        if e is None:
            return None
        e, t = e.canonical(n), t.canonical(n)
        le = -1 if e.kind == "embed" else e.layer if e.kind == "out" else None
        lt = -1 if t.kind == "embed" else t.layer if t.kind == "out" else None
        if le is None or lt is None:
            return None
        offs.add(le - lt)
    return offs.pop() if len(offs) == 1 and 0 not in offs else None


def _shift_text(engine_pts: Sequence[Point | None], trained: Sequence[Point], n: int) -> str:
    s = _shift(engine_pts, trained, n)
    return f" (a {abs(s)}-layer shift)" if s else ""


def run_static(
    draft: str | Path | DraftCheckpoint,
    target_config: str | Path | TargetInfo | None = None,
    *,
    engine: str | None = None,
    algorithm: str | None = None,
    trained_layers: list[int] | None = None,
    trained_convention: str = "output-of-layer",
    context_length: int | None = None,
    num_layers: int | None = None,
    arch: str | None = None,
    trained_engine: str | None = None,
    env: dict[str, str] | None = None,
    cuda_graph: bool = True,
) -> DoctorReport:
    """Every static check that the given inputs allow; checks lacking an input are listed as skipped.
    ``cuda_graph``: the server decodes with CUDA graphs (SGLang's default; False = --disable-cuda-graph)."""
    from workbench.provenance import parse_provenance

    d = draft if isinstance(draft, DraftCheckpoint) else read_draft(draft)
    t = target_config if isinstance(target_config, TargetInfo) or target_config is None else read_target(target_config)
    engine_text = engine or DEFAULT_ENGINE
    alg = normalize_algorithm(algorithm)
    conv = normalize_convention(trained_convention)
    if context_length is not None and (not isinstance(context_length, int) or context_length < 1):
        raise InputError(f"context length: expected a positive integer, got {context_length!r}")
    if trained_layers is not None and not _ints(trained_layers):
        raise InputError(f"--trained-layers: expected integers like 2,30,58, got {trained_layers!r}")
    prov = parse_provenance(trained_engine)
    target_arch = arch or (t.arch if t else None) or _arch_from_draft(d)
    rule = engine_rule(engine_text, target_arch)
    if env is not None and not (
        isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise InputError(f"env: expected NAME=VALUE pairs, got {env!r}")
    ck = _Checker(
        d,
        t,
        rule,
        alg,
        trained_layers,
        conv,
        context_length,
        num_layers,
        arch or (t.arch if t else None),
        prov if prov and prov.engine else None,
        env,
    )
    if prov is not None and not prov.engine:
        ck.skip("training capture from provenance", "--trained-engine sglang==X", prov.how)
    ck.check_types()
    ck.check_keys()
    ck.check_loaders()
    ck.check_algorithm()
    ck.check_layers()
    ck.check_cuda_graph(engine_text, target_arch, cuda_graph)
    ck.check_context()
    ck.check_tied()
    ck.check_hidden()
    from workbench.drafter.variants import explain

    for line in explain(d.config, rope=False):  # the sentences live with the forward that implements them
        ck.add("draft-variant", "info", line[0].upper() + line[1:] + ".", {"path": d.path})
    from workbench.doctor.weights import check_weights

    fc_in = check_weights(ck)
    ck.check_count(fc_in)
    ck.skip(
        "observed vs predicted accept length, hidden states against training data",
        "a running server: doctor --server ID --training-data PATH",
        "the static doctor reads files only",
    )
    inputs = {
        "draft": d.path,
        "target_config": t.path if t else None,
        "engine": rule.name,
        "engine_given": engine,
        "target_arch": target_arch,
        "arch_family": arch_family(target_arch),
        "algorithm": alg,
        "trained_layers": trained_layers,
        "trained_convention": conv,
        "trained_engine": trained_engine,
        "provenance": prov.to_dict() if prov else None,
        "context_length": context_length,
        "num_layers": ck.n,
        "env": dict(env or {}),
        "cuda_graph": cuda_graph,
        "engine_rule_assumed_from": getattr(rule, "assumed_from", None),
    }
    return DoctorReport(sort_findings(ck.findings), ck.capture, inputs, d.summary(), ck.skipped)


def _arch_from_draft(d: DraftCheckpoint) -> str | None:
    """A draft class like Eagle3DeepseekV2ForCausalLM tells the target family when no target config is given."""
    for a in d.architectures:
        if "deepseek" in a.lower() or "kimi" in a.lower():
            return a
    return None
