"""Static checks: everything the doctor can say from the files (draft dir, target config) and the
launch settings (engine, algorithm, context length, training provenance), without a GPU or a server.

Every check asks the serving release as ``workbench.engine`` read it from that release's code (the
release is never guessed: one that was not read stops the run with what was read and how to read it),
every finding names the class of evidence it rests on (a finding that rests on engine code carries
the file:line it was read from), and a check that lacks an input is a visible finding or is listed in
``DoctorReport.skipped`` with what it needs, so a short report never reads as an all-clear.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from workbench.doctor.capture import (
    CaptureReport,
    Reading,
    across,
    build_report,
    points_of,
    span,
    trained_readings,
)
from workbench.doctor.findings import CODE_CLASS, ConfigEdit, Finding, Fix, sort_findings
from workbench.draftconfig import DraftCheckpoint, TargetInfo, read_draft, read_target
from workbench.engine import EngineCapture, Release, apply, draft_ids, ids_for, parse_engine
from workbench.engine.draft import VARIANT_FLAGS
from workbench.errors import InputError
from workbench.layers import Point, default_ids, normalize_convention
from workbench.results import Result

if TYPE_CHECKING:
    from pathlib import Path

    from workbench.engine import CaptureRule, DraftClass, Served
    from workbench.provenance import Provenance

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
DEFAULT_ENGINE = "sglang"
NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"
TOP = "eagle_aux_hidden_state_layer_ids"


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


def _fmt(points: Sequence[Point | str | None] | None) -> str:
    return "[" + ", ".join("missing" if p is None else str(p) for p in points or []) + "]"


@dataclass
class _Launch:
    """What the run was told besides the files: the launch, what the training data was."""

    algorithm: str | None = None
    trained_layers: list[int] | None = None
    trained_convention: str = "output-of-layer"
    context_length: int | None = None
    num_layers: int | None = None
    archs: list[str] = field(default_factory=list)
    provenance: Provenance | None = None
    env: dict[str, str] = field(default_factory=dict)
    cuda_graph: bool = True


class _Checker:
    def __init__(self, draft: DraftCheckpoint, target: TargetInfo | None, rel: Release, launch: _Launch):
        self.d, self.t, self.rel = draft, target, rel
        self.algorithm = launch.algorithm
        self.trained_layers, self.trained_convention = launch.trained_layers, launch.trained_convention
        self.provenance = launch.provenance
        self.context_length = launch.context_length
        self.n = launch.num_layers or (target.num_layers if target else None)
        self.archs = archs = launch.archs
        self.cuda_graph = launch.cuda_graph
        self.served: Served | None = rel.serve(archs) if archs else None
        self.rule: CaptureRule | None = self.served.rule if self.served else None
        self.arch = (self.served.arch if self.served else None) or (archs[0] if archs else None)
        self.findings: list[Finding] = []
        self.skipped: list[Skipped] = []
        self.capture: CaptureReport | None = None
        self.res: EngineCapture | None = None
        self.trained: list[Point] | None = None  # the trained points, when settled
        self.readings: list[Reading] = []
        self.cfg_file = draft.config_file
        self.is_vllm = rel.engine == "vllm"
        self.env = dict(launch.env)
        self.ids, self.ids_key = draft_ids(rel, draft.capture)

    @property
    def name(self) -> str:
        return self.rel.name

    def code(self, *what: str) -> list[str]:
        """file:line: text of the serving rule's evidence for these parts (release-wide ones included)."""
        if self.rule is None:
            return []
        return [line for w in what for line in self.rule.where(w)]

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
        if (cls or CODE_CLASS[code]) == "engine-code":
            if ev.get("code"):
                # a finding that rests on engine code names the lines it was read from, and where
                ev.setdefault("read_from", f"{self.name} ({self.rel.source})")
            else:  # no code gave it: never presented as read from one
                cls = "convention"
                severity = "warning" if severity == "error" else severity
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

    def check_target_fields(self) -> None:
        """A target config without a field a check needs is a finding, never a silent skip."""
        t = self.t
        if t is None:
            return
        needs = {
            "num_hidden_layers": ("the layer ids against the engine's capture", t.num_layers),
            "hidden_size": ("the draft's target_hidden_size and fc width", t.hidden_size),
            "vocab_size": ("the draft's vocabulary and its d2t mapping", t.vocab_size),
            "architectures": ("which class the engine serves", t.architectures or None),
        }
        absent = {k: what for k, (what, v) in needs.items() if v is None}
        if not absent:
            return
        self.add(
            "target-config-incomplete",
            "warning",
            f"The target config {t.path} has no {', '.join(absent)}: the checks of "
            + "; ".join(absent.values())
            + " did not run (give --num-layers N, or the full config.json of the served model).",
            {"file": t.path, "missing": list(absent), "checks": list(absent.values())},
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

    # -- the draft is the target -----------------------------------------------------------------
    def check_draft_is_target(self) -> bool:
        """A target passed as its own draft: the engine loads a whole target model as the drafter."""
        d, t = self.d, self.t
        same_path = t is not None and _same_folder(d.path, t.path)
        looks = (
            t is not None
            and not d.is_eagle3
            and d.capture.nested_ids is None
            and d.capture.top_ids is None
            and d.architectures
            and d.architectures == t.architectures
            and d.num_hidden_layers is not None
            and d.num_hidden_layers == t.num_layers
            and d.hidden_size == t.hidden_size
        )
        if not (same_path or looks):
            return False
        self.add(
            "draft-is-target",
            "error",
            f"The draft {d.path} is the target model itself ({', '.join(d.architectures) or 'no architecture'}, "
            f"{d.num_hidden_layers} layers{', the same folder' if same_path else ''}): no EAGLE-3 drafter was given, "
            "so the engine loads the whole target as the draft (or refuses it). Give the trained draft's folder "
            "(--speculative-draft-model-path).",
            {
                "draft": d.path,
                "target": t.path if t else None,
                "architectures": d.architectures,
                "num_hidden_layers": d.num_hidden_layers,
                "same_folder": same_path,
            },
        )
        return True

    # -- the engine can load the draft and serve the target ---------------------------------------
    def draft_class(self) -> tuple[str | None, str]:
        """The draft class the release looks up for this draft, and how it got there."""
        d, rel = self.d, self.rel
        if not self.is_vllm:
            a = d.architectures[0] if d.architectures else None
            return a, f"{rel.name} loads the draft's architectures[0] {a} from its registry"
        if d.capture.speculators:
            sp = rel.facts.get("speculators")
            if sp is None:
                return None, f"{rel.name} has no reader for speculators-format configs"
            archs = sp.get("architectures") if isinstance(sp, dict) else "unknown"
            if isinstance(archs, dict):
                got = archs.get(d.model_type or "llama")
                return got, f"speculators eagle3 config, model_type {d.model_type!r} -> {got}"
            if isinstance(archs, str) and archs != "unknown":
                return archs, f"speculators eagle3 config -> {archs}"
            return None, f"{rel.name}: the speculators config reader was not recognised"
        m = rel.facts.get("arch_map")
        if not isinstance(m, dict) or not d.architectures:
            return (d.architectures[0] if d.architectures else None), "architecture mapping not recognised"
        a = d.architectures[0]
        if (m["keeps_prefixed"] and a.startswith(m["prefix"])) or (m["keeps_suffixed"] and a.endswith(m["prefix"])):
            return a, f"EAGLEConfig keeps {a}"
        return m["prefix"] + a, f"EAGLEConfig renames {a} -> {m['prefix'] + a}"

    def draft_code(self) -> DraftClass | None:
        a, _how = self.draft_class()
        return self.rel.drafts.get(a) if a else None

    def check_loaders(self) -> None:
        d, rel = self.d, self.rel
        arch, how = self.draft_class()
        reg_ev = [str(e) for e in rel.evidence if e.what in ("registry", "arch_map", "speculators")]
        if d.architectures and (arch is None or rel.registered(arch) is None):
            hint = (
                " (a speculators-format draft: serve it with vLLM, or convert it to SpecForge's "
                "LlamaForCausalLMEagle3 format)"
                if d.layout == "speculators" and not self.is_vllm
                else ""
            )
            self.add(
                "draft-arch-unsupported",
                "error",
                f"{rel.name} cannot load this draft: {how}"
                + (f", and its model registry has no {arch}" if arch else "")
                + f"{hint}.",
                {
                    "engine": rel.name,
                    "architectures": d.architectures,
                    "looked_up": arch,
                    "mapping": how,
                    "code": reg_ev,
                },
            )
        if self.t is None or not self.archs:
            self.skip("target supports EAGLE-3 capture", "--target-config FILE", "the target's architecture")
            return
        served = cast("Served", self.served)
        if served.rule is None:
            code = [str(e) for e in served.evidence] or reg_ev
            self.add(
                "target-eagle3-unsupported",
                "error",
                f"{served.problem}.",
                {"engine": rel.name, "target_archs": self.archs, "served": served.arch, "code": code},
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
            "engine": self.name,
        }
        if self.d.is_eagle3 and alg != "EAGLE3":
            msg = (
                f"An Eagle3 draft is launched with --speculative-algorithm {alg}: SGLang feeds it 1*H "
                "features, skips fc silently, and accept length sits at 1.00."
                if not self.is_vllm
                else f"An Eagle3 draft is launched with method {alg.lower()}: {self.name} builds an EAGLE-1 "
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

    # -- variant switches ------------------------------------------------------------------------
    def check_variant_flags(self) -> None:
        """Each switch of the drafter's forward the config sets against what the serving release's draft
        code reads: a switch no code reads is silently ignored, and the drafter runs without it."""
        dc = self.draft_code()
        if dc is None:
            return
        flags = self.d.capture.flags
        copies = None
        if self.is_vllm and self.d.capture.speculators:
            sp = self.rel.facts.get("speculators")
            copies = set(sp.get("copies") or []) if isinstance(sp, dict) else None
        for key, value in sorted(flags.items()):
            base = key.removeprefix("eagle_config.")
            off = VARIANT_FLAGS.get(base)
            if value is None or value == off:
                continue
            read = dc.reads.get(key)
            dropped = copies is not None and key not in copies  # the speculators reader does not copy it
            if read is not None and not dropped:
                continue
            other = dc.reads.get(base if key != base else f"eagle_config.{base}")
            where = (
                f" (it reads {other.text.strip()[:80]!r} at {other.where}: the key under "
                f"{'the top level' if key != base else 'eagle_config'})"
                if other is not None
                else ""
            )
            why = (
                f"{self.name}'s speculators config reader does not copy {key}"
                if dropped
                else f"{self.name}'s {dc.arch} ({dc.file}) never reads {key}{where}"
            )
            self.add(
                "draft-flag-ignored",
                "error",
                f"The draft sets {key}={value!r}, but {why}: the drafter is served without that variant of its "
                "forward, so its features differ from training and accept length drops.",
                {
                    "key": key,
                    "value": value,
                    "engine": self.name,
                    "draft_class": dc.arch,
                    "code": [str(e) for e in dc.evidence]
                    + [f"{e.file}:{e.line}: reads {k}" for k, e in sorted(dc.reads.items()) if base in k][:3]
                    + [f"{dc.file}: no read of {key} among {len(dc.reads)} keys read"],
                    "read_elsewhere": None if other is None else other.where,
                },
            )

    # -- layer ids -----------------------------------------------------------------------------
    def ids_fix(self, points: list[Point] | None, why: str) -> Fix | None:
        """Config ids that make this release capture ``points``; ``why`` says where the points come from."""
        if points is None or self.n is None or self.rule is None:
            return None
        ids = ids_for(self.rule, [str(p) for p in points], self.n)
        if ids is None:
            return None
        key = self.rule.id_source[0] if self.rule.id_source else NESTED
        return self.config_fix(
            f"set {key} to {ids} so {self.name} captures {', '.join(map(str, points))} ({why})",
            [ConfigEdit(key, ids)],
        )

    def settled_points(self) -> tuple[list[Point] | None, str]:
        """The trained points when one reading remains (given, provenance, or all readings agree)."""
        live = [r for r in self.readings if r.points is not None]
        if not live:
            return None, ""
        n = cast(int, self.n)
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
        if not d.is_eagle3 and d.capture.nested_ids is None and d.capture.top_ids is None:
            return  # not an EAGLE-3 draft: no aux capture
        ids, source = self.ids, self.ids_key
        if ids is not None and not _ints(ids):
            return  # config-invalid already says so
        n = self.n
        if n is not None and self.archs:
            self.readings = trained_readings(
                d, n, self.archs, self.trained_layers, self.trained_convention, self.provenance, self.rel
            )
        if (
            d.capture.top_ids is not None
            and d.capture.nested_ids is None
            and d.layout != "speculators"
            and NESTED not in d.bad_fields()
        ):
            self.check_misplaced()
        if self.trained_layers is None and self.provenance is None:
            self.skip(
                "which engine captured the training data",
                "--trained-engine (sglang==X, vllm==X, specforge==V, speculators) or --trained-layers",
                "the training data's provenance (the config's ids are read through every release read instead)",
            )
        if n is None or not self.archs:
            self.skip(
                "layer capture vs training (ids, range, the engine's rule)",
                "--target-config FILE" + (" or --num-layers N" if n is None else ""),
                "the target's " + ("layer count" if n is None else "architecture (the class the release serves)"),
            )
            if ids is not None:  # what needs no target: the order, and the embedding id named as such
                ev = {"config_ids": ids, "ids_key": source, "engine": self.name}
                for i in (i for i in ids if i < 0):
                    self.add(
                        "layer-ids-embedding",
                        "warning",
                        f"Layer id {i} means the embedding output; whether {self.name} captures it depends on "
                        "the target's class (give --target-config to read it), and SpecForge rejects it.",
                        {**ev, "id": i},
                        None,
                        "convention",
                    )
                self.check_unsorted(ids, source, ev)
            return
        if self.rule is None:  # the release cannot serve the target with a capture: the report says why
            from workbench.engine import capture as run_capture

            res = run_capture(self.rel.name, archs=self.archs, num_layers=n, ids=ids, release=self.rel)
            self.capture = build_report(self.rel, res, source, None, "the release has no capture for this target")
            return
        res = apply(self.rule, ids, n, cuda_graph=self.cuda_graph, source=self.rel.source)
        self.res = res
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
                else f"unsettled: {len([r for r in self.readings if r.points is not None])} readings of the "
                "training capture disagree (trained-on column: one point per reading); --trained-engine or an "
                "alignment settles it"
            )
        )
        self.capture = build_report(
            self.rel,
            res,
            source,
            shown,
            src,
            self.readings,
            settled=self.trained is not None,
            across_engines=across(self.archs, d.capture, n),
        )
        base_ev = {
            "config_ids": ids,
            "ids_key": source,
            "engine": self.name,
            "rule": self.capture.rule,
            "num_layers": n,
            "engine_indices": res.indices,
            "code": self.code("id_map", "config_ids", "id_source"),
        }
        if ids is not None and not res.ids_ignored:
            self.check_each_id(res, base_ev, why_settled)
            self.check_unsorted(ids, source, {**base_ev, "engine_points": self.capture.engine_points})
            dflt = default_ids(n)
            if source == NESTED and list(ids) != dflt:
                self.add(
                    "layer-ids-nondefault",
                    "info",
                    f"Layer ids {ids} differ from the default {dflt} (output-of-layer) for {n} layers; "
                    "every engine must be told them explicitly and reads them by its own rule.",
                    {**base_ev, "default_output_of_layer": dflt},
                )
        self.compare_training(res, base_ev)

    def check_each_id(self, res: EngineCapture, base_ev: dict[str, Any], why_settled: str) -> None:
        """Each config id as this release reads it: the embedding, the final boundary, past the end."""
        n = cast(int, self.n)
        for c in res.by_id:
            idx = c.index
            if c.id is None:
                continue
            if c.id < 0 or c.point == "embed":
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
                    f"Layer id {c.id} means the embedding output; {self.name} {what}.",
                    {
                        **base_ev,
                        "id": c.id,
                        "engine_index": idx,
                        "engine_point": c.point,
                        "fatal": res.fatal,
                        "code": base_ev["code"] + self.code("index0", "membership", "missing"),
                    },
                    fix,
                )
            elif n in (c.id, idx):
                # the final boundary: some releases capture it (the stream leaving the last layer, before
                # the final norm), others never do; read per release, never "out of range" where captured
                if c.point is not None and res.fatal is None:
                    continue
                others = _boundary_readers(self.archs, n, self.rel.engine)
                self.add(
                    "layer-ids-final-uncaptured",
                    "error",
                    f"Layer id {c.id} asks for the final boundary (capture index {idx} of a {n}-layer target), "
                    f"which {self.name} never captures ({c.problem or res.fatal}): that aux state is missing"
                    + (f". Releases read that capture it: {others}." if others else "."),
                    {
                        **base_ev,
                        "id": c.id,
                        "engine_index": idx,
                        "engine_points": res.points,
                        "captured_by": others,
                        "code": base_ev["code"] + self.code("boundary", "startup", "missing"),
                    },
                    self.ids_fix(self.trained, why_settled),
                )
            elif idx is not None and (idx > n or idx < -n) and c.point is None:
                self.add(
                    "layer-ids-out-of-range",
                    "error",
                    f"Layer id {c.id} is beyond the target's {n} layers ({self.name} makes it capture index "
                    f"{idx}, outside 0..{n}): that aux state is missing"
                    + (f" and {res.fatal}" if res.fatal else "")
                    + ".",
                    {
                        **base_ev,
                        "id": c.id,
                        "engine_index": idx,
                        "code": base_ev["code"] + self.code("startup", "missing"),
                    },
                    self.ids_fix(self.trained, why_settled),
                )

    def compare_training(self, res: EngineCapture, base_ev: dict[str, Any]) -> None:
        """The engine's capture against every reading of the training capture."""
        n = cast(int, self.n)
        report = cast(CaptureReport, self.capture)
        if not self.readings:
            return
        engine_pts = points_of(res)
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
            pts = cast("list[Point]", r.points)
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
            "code": base_ev["code"] + self.code("index0", "boundary", "missing", "startup"),
        }
        eng = f"{self.name} captures {_fmt(engine_pts)}"
        if ok:
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
                    "ids_if": {
                        r.label: ids_for(
                            cast("CaptureRule", self.rule), [str(p) for p in cast("list[Point]", r.points)], n
                        )
                        for r in bad
                    },
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
        ignored = self.rule is not None and self.rule.config_ids == "ignored"
        if ignored and (self.d.capture.nested_ids or self.d.capture.top_ids):
            msg += (
                f" {self.name} ignores the config's layer ids (its runner asks the model for its defaults), "
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
            self.ids_fix(r.points, why) if same and not ignored else None,
            cls,
        )

    def check_cuda_graph(self) -> None:
        """Releases whose CUDA-graph runner resets the ids to the defaults before capturing decode graphs:
        production decode captures other points than prefill and a dump with graphs off."""
        res = self.res
        if res is None or not self.cuda_graph or not res.graph_differs:
            return
        n = cast(int, self.n)
        trained = [str(p.canonical(n)) for p in self.trained] if self.trained else None

        def canon(points: Sequence[str]) -> list[str]:
            return [str(Point.parse(p).canonical(n)) if p not in ("missing", "unknown") else p for p in points]

        gp = cast("list[str]", res.cuda_graph_points)
        bad = trained is not None and canon(gp) != trained
        self.add(
            "layer-ids-cuda-graph-defaults",
            "error" if bad else "warning",
            f"{res.engine} decodes with CUDA graphs that capture {', '.join(gp)} (its defaults), not the "
            f"config's {', '.join(res.points)}: its graph runner sets the default layers before capturing. Prefill "
            "and --disable-cuda-graph use the config's ids, so a check with CUDA graphs off cannot see this"
            + (f"; the drafter was trained on {', '.join(trained or [])}." if bad else "."),
            {
                "engine": res.engine,
                "engine_points": res.points,
                "cuda_graph_points": gp,
                "trained_points": trained,
                "source": res.source,
                "code": self.code("graph_reset", "config_ids", "config_before_graphs"),
            },
        )

    def check_unsorted(self, ids: list[int], source: str, ev: dict[str, Any]) -> None:
        if not any(b <= a for a, b in itertools.pairwise(ids)):
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
            {k: v for k, v in ev.items() if k != "code"},
            fix,
        )

    def check_misplaced(self) -> None:
        """Ids only at the top level: the releases that read only eagle_config use their defaults."""
        d = self.d
        reads_top = self.rule is not None and TOP in self.rule.id_source
        fix = None
        pts, _why = self.settled_points() if self.n is not None else (None, "")
        if self.n is not None and pts is not None and self.rule is not None and not reads_top:
            new_ids = ids_for(self.rule, [str(p) for p in pts], self.n)
            if new_ids is not None:
                fix = self.config_fix(
                    f"add {NESTED}={new_ids} (what {self.name} needs to capture {', '.join(map(str, pts))})",
                    [ConfigEdit(NESTED, new_ids)],
                )
        keys = list(self.rule.id_source) if self.rule else []
        code = self.code("id_source", "config_ids")
        msg = (
            f"The layer ids sit only at the top level of config.json; {self.name} reads them there"
            + (f" ({', '.join(keys)} in that order)" if keys else "")
            + ", but the releases that read only eagle_config (SGLang) capture their defaults for this config."
            if reads_top
            else f"The layer ids sit only at the top level of config.json, where {self.name} does not read them "
            f"(it reads {', '.join(keys) or 'no key'}): it captures its defaults."
        )
        self.add(
            "eagle-config-misplaced",
            "info" if reads_top else "warning",
            msg,
            {"top_level": d.capture.top_ids, "eagle_config": None, "engine": self.name, "reads": keys, "code": code},
            fix,
            "engine-code" if code else "convention",
        )

    def check_count(self, fc_in: int | None) -> None:
        """The number of states the release captures and its draft class's fc width against the draft's
        fc weight (K * target hidden size)."""
        d = self.d
        ids = self.ids
        if ids is not None and not _ints(ids):
            return
        h_t = d.target_hidden_size or (self.t.hidden_size if self.t else None) or d.hidden_size
        k_eng = len(self.res.points) if self.res is not None else (len(ids) if ids is not None else 3)
        dc = self.draft_code()
        k_fc = None
        how = ""
        if dc is not None and dc.fc_states == "3":
            k_fc, how = 3, f"{self.name}'s {dc.arch} builds fc for 3 target states whatever the config says"
        elif dc is not None and dc.fc_states == "config":
            nested = d.capture.nested_ids
            if isinstance(d.capture.num_aux_hidden_states, int):
                k_fc, how = d.capture.num_aux_hidden_states, "from num_aux_hidden_states"
            elif _ints(nested) and nested:
                k_fc, how = len(nested), "from the number of eagle_config ids"
            else:
                k_fc, how = 3, "3 (no num_aux_hidden_states and no eagle_config ids)"
            how = f"{self.name}'s {dc.arch} sizes fc {how}"
        ev = {"ids": ids, "ids_key": self.ids_key, "k_captured": k_eng, "target_hidden_size": h_t, "fc_in": fc_in}
        code = ([str(e) for e in dc.evidence] if dc else []) + self.code("id_map")
        width = fc_in // h_t if fc_in is not None and h_t and fc_in % h_t == 0 else None
        if k_fc is not None and width is not None and k_fc != width:
            self.add(
                "layer-ids-count-mismatch",
                "error",
                f"{how} ({k_fc}*{h_t}), but the draft's fc.weight takes {width} states ({fc_in}): its fc weight "
                "does not load.",
                {**ev, "k_fc": k_fc, "code": code},
            )
            return
        if k_fc is not None and k_fc != k_eng and self.res is not None and self.res.fatal is None:
            self.add(
                "layer-ids-count-mismatch",
                "error",
                f"{self.name} captures {k_eng} target states but {how} ({k_fc}): the concatenation does not fit "
                "fc and the first draft step fails.",
                {**ev, "k_fc": k_fc, "code": code},
            )
            return
        if fc_in is not None and h_t and dc is None:
            k = len(ids) if ids is not None else 3
            if fc_in != k * h_t:
                self.add(
                    "layer-ids-count-mismatch",
                    "error",
                    f"{k} layer ids need an fc input of {k}*{h_t}={k * h_t}, but fc.weight takes {fc_in} "
                    f"({fc_in / h_t:g} states).",
                    ev,
                )

    # -- sizes ---------------------------------------------------------------------------------
    def check_vocab(self) -> None:
        """The draft's vocabulary against the target's: the engine embeds with the target's table and maps
        draft ids into the target's vocabulary (d2t). Which key names the target vocabulary depends on the
        trainer: ``target_vocab_size`` where one is written (EAGLE's own configs), else ``vocab_size``
        next to a ``draft_vocab_size`` (SpecForge); a config with neither says nothing to compare."""
        d, t = self.d, self.t
        if t is None or t.vocab_size is None:
            return
        cfg = d.config
        tv = cfg.get("target_vocab_size")
        key, value = ("target_vocab_size", tv) if isinstance(tv, int) and not isinstance(tv, bool) else (None, None)
        if key is None and d.draft_vocab_size is not None and d.layout != "speculators" and d.vocab_size is not None:
            key, value = d.key_for.get("vocab_size") or "vocab_size", d.vocab_size
        ev = {
            "key": key,
            "draft_says": value,
            "draft_vocab_size": d.draft_vocab_size,
            "target_vocab_size": t.vocab_size,
        }
        if key is not None and value != t.vocab_size:
            self.add(
                "vocab-mismatch",
                "error",
                f"The draft's {key} {value} is not the target's vocabulary {t.vocab_size}: the drafter was trained "
                "for another target's tokenizer (or against the wrong target config), so its token ids and its "
                "draft-to-target mapping do not line up with this target's.",
                ev,
            )
        if d.draft_vocab_size is not None and d.draft_vocab_size > t.vocab_size:
            self.add(
                "vocab-mismatch",
                "error",
                f"draft_vocab_size {d.draft_vocab_size} is larger than the target's vocabulary {t.vocab_size}: "
                "draft ids map past the target's last token.",
                ev,
            )

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
            "engine": self.name,
        }
        if self.is_vllm:
            if self.rel.facts.get("draft_len") == "min":
                self.add(
                    "draft-context-too-short",
                    "info",
                    f"The draft's context length {draft_ctx} is below the target's {target_ctx}; "
                    f"{self.name} serves it anyway (SpeculativeConfig._maybe_override_draft_max_model_len "
                    f"takes the smaller, {draft_ctx}), and a short draft RoPE range can lower accept length on "
                    "long prompts.",
                    {**ev, "code": [str(e) for e in self.rel.evidence if e.what == "draft_len"]},
                    None,
                    "engine-code",
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


def _same_folder(a: str, b: str) -> bool:
    from pathlib import Path

    pa, pb = Path(a), Path(b)
    pb = pb.parent if pb.name == "config.json" else pb
    try:
        return pa.resolve() == pb.resolve()
    except OSError:
        return False


def _boundary_readers(archs: Sequence[str], n: int, engine: str) -> str:
    """The releases read (of both engines) that capture an id equal to the layer count."""
    from workbench.engine import release, releases

    got: list[str] = []
    for name in ("sglang", "vllm"):
        for v in releases(name):
            rel = release(f"{name}=={v}")
            rule = rel.serve(archs).rule
            if rule is None:
                continue
            res = apply(rule, [n], n, cuda_graph=False)
            if res.complete and res.points and res.points[0] in ("final-prenorm", "final-postnorm"):
                got.append(rel.name)
    if not got:
        return ""
    by: dict[str, list[str]] = {}
    for g in got:
        by.setdefault(g.split("==")[0], []).append(g)
    return "; ".join(span(v) for v in by.values())


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
    read: bool = False,
) -> DoctorReport:
    """Every static check that the given inputs allow; checks lacking an input are listed as skipped.
    ``cuda_graph``: the server decodes with CUDA graphs (the default; False = --disable-cuda-graph).
    ``read``: a release whose code was not read yet is downloaded and read (else ReleaseNotReadError)."""
    from workbench.engine import release
    from workbench.provenance import parse_provenance

    spec = parse_engine(engine or DEFAULT_ENGINE)
    alg = normalize_algorithm(algorithm)
    conv = normalize_convention(trained_convention)
    if context_length is not None and (not isinstance(context_length, int) or context_length < 1):
        raise InputError(f"context length: expected a positive integer, got {context_length!r}")
    if trained_layers is not None and not _ints(trained_layers):
        raise InputError(f"--trained-layers: expected integers like 2,30,58, got {trained_layers!r}")
    if env is not None and not (
        isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise InputError(f"env: expected NAME=VALUE pairs, got {env!r}")
    prov = parse_provenance(trained_engine)
    rel = release(spec, read=read)  # a release that was not read stops here, naming what was
    d = draft if isinstance(draft, DraftCheckpoint) else read_draft(draft)
    t = target_config if isinstance(target_config, TargetInfo) or target_config is None else read_target(target_config)
    archs = [arch] if arch else list(t.architectures) if t and t.architectures else _archs_from_draft(d)
    launch = _Launch(
        alg,
        trained_layers,
        conv,
        context_length,
        num_layers,
        archs,
        prov if prov and prov.engine else None,
        dict(env or {}),
        cuda_graph,
    )
    ck = _Checker(d, t, rel, launch)
    if prov is not None and not prov.engine:
        ck.skip("training capture from provenance", "--trained-engine sglang==X", prov.how)
    ck.check_types()
    ck.check_target_fields()
    ck.check_keys()
    is_target = ck.check_draft_is_target()
    ck.check_loaders()
    ck.check_algorithm()
    if not is_target:
        try:
            ck.check_layers()
        except InputError as exc:
            raise InputError(f"--trained-layers/--trained-engine: {exc}") from None
        ck.check_cuda_graph()
        ck.check_variant_flags()
    ck.check_context()
    ck.check_tied()
    ck.check_hidden()
    ck.check_vocab()
    from workbench.drafter.variants import explain

    for line in explain(d.config, rope=False):  # the sentences live with the forward that implements them
        ck.add("draft-variant", "info", line[0].upper() + line[1:] + ".", {"path": d.path})
    from workbench.doctor.weights import check_weights

    fc_in = check_weights(ck)
    if not is_target:
        ck.check_count(fc_in)
    ck.skip(
        "observed vs predicted accept length, hidden states against training data",
        "a running server: doctor --server ID --training-data PATH",
        "the static doctor reads files only",
    )
    inputs = {
        "draft": d.path,
        "target_config": t.path if t else None,
        "engine": rel.name,
        "engine_given": engine,
        "engine_source": rel.source,
        "target_arch": ck.arch,
        "target_archs": archs,
        "algorithm": alg,
        "trained_layers": trained_layers,
        "trained_convention": conv,
        "trained_engine": trained_engine,
        "provenance": prov.to_dict() if prov else None,
        "context_length": context_length,
        "num_layers": ck.n,
        "env": dict(env or {}),
        "cuda_graph": cuda_graph,
    }
    return DoctorReport(sort_findings(ck.findings), ck.capture, inputs, d.summary(), ck.skipped)


def _archs_from_draft(d: DraftCheckpoint) -> list[str]:
    """No target config: nothing names the served class (a draft class names only its family)."""
    return []
