"""Static checks: everything the doctor can say from the files (draft dir, target config) and the
launch settings (engine, algorithm, context length), without a GPU or a server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from workbench.doctor.capture import CaptureReport, build_report, trained_points
from workbench.doctor.findings import ConfigEdit, Finding, Fix, sort_findings
from workbench.draftconfig import DraftCheckpoint, TargetInfo, read_draft, read_target
from workbench.errors import InputError
from workbench.layers import EngineRule, Point, arch_family, default_ids, normalize_convention, rule_for
from workbench.results import Result

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
DEFAULT_ENGINE = "sglang"


@dataclass
class DoctorReport(Result):
    findings: list[Finding]
    capture: Optional[CaptureReport]
    inputs: dict[str, Any] = field(default_factory=dict)
    draft: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def codes(self, severity: Optional[str] = None) -> list[str]:
        return [f.code for f in self.findings if severity is None or f.severity == severity]

    def to_dict(self) -> dict:
        return {"findings": [f.to_dict() for f in self.findings],
                "capture": self.capture.to_dict() if self.capture else None,
                "inputs": self.inputs, "draft": self.draft}


def normalize_algorithm(name: Optional[str]) -> Optional[str]:
    if name is None:
        return None
    a = str(name).strip().upper()
    if a not in ALGORITHMS:
        raise InputError(f"algorithm: {name!r} is not one of {', '.join(ALGORITHMS)}")
    return "EAGLE" if a == "NEXTN" else a


def _ints(value) -> bool:
    return isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)


class _Checker:
    def __init__(self, draft: DraftCheckpoint, target: Optional[TargetInfo], rule: EngineRule,
                 algorithm: Optional[str], trained_layers, trained_convention: str,
                 context_length: Optional[int], num_layers: Optional[int]):
        self.d, self.t, self.rule = draft, target, rule
        self.algorithm = algorithm
        self.trained_layers, self.trained_convention = trained_layers, trained_convention
        self.context_length = context_length
        self.n = num_layers or (target.num_layers if target else None)
        self.findings: list[Finding] = []
        self.capture: Optional[CaptureReport] = None
        self.trained: Optional[list[Point]] = None
        self.cfg_file = draft.config_file

    def add(self, code, severity, message, evidence=None, fix=None):
        self.findings.append(Finding(code, severity, message, evidence or {}, fix))

    def config_fix(self, summary: str, edits: list[ConfigEdit]) -> Fix:
        return Fix(summary, self.cfg_file, edits)

    # -- inputs ------------------------------------------------------------------------------
    def check_types(self):
        for p in self.d.problems + (self.t.problems if self.t else []):
            self.add("config-invalid", "error", f"{p.field} in {p.file} has the wrong type: {p.message}.",
                     {"file": p.file, "field": p.field, "problem": p.message})
        if self.d.weights_error:
            no_files = not self.d.weight_files or "pytorch_model.bin" in self.d.weights_error
            if no_files:
                self.add("weights-not-checked", "info", f"Weight checks skipped: {self.d.weights_error}.",
                         {"path": self.d.path, "reason": self.d.weights_error})
            else:
                self.add("weights-unreadable", "error", f"The draft's weights cannot be read: {self.d.weights_error}.",
                         {"path": self.d.path, "files": self.d.weight_files, "error": self.d.weights_error})

    # -- algorithm -----------------------------------------------------------------------------
    def check_algorithm(self):
        alg = self.algorithm
        if alg is None:
            return
        ev = {"algorithm": alg, "architectures": self.d.architectures, "is_eagle3": self.d.is_eagle3}
        if self.d.is_eagle3 and alg != "EAGLE3":
            self.add("algorithm-mismatch", "error",
                     f"An Eagle3 draft is launched with --speculative-algorithm {alg}: SGLang feeds it 1*H "
                     "features, skips fc silently, and accept length sits at 1.00.",
                     ev, Fix("launch with --speculative-algorithm EAGLE3", launch=["--speculative-algorithm EAGLE3"]))
        elif alg == "EAGLE3" and not self.d.is_eagle3:
            eagle1 = any("eagle" in a.lower() for a in self.d.architectures)
            self.add("algorithm-mismatch", "error",
                     f"--speculative-algorithm EAGLE3 with a draft whose architectures {self.d.architectures} "
                     "are not Eagle3: the engine builds the wrong drafter.", ev,
                     Fix("launch with --speculative-algorithm EAGLE", launch=["--speculative-algorithm EAGLE"])
                     if eagle1 else None)

    # -- layer ids -----------------------------------------------------------------------------
    def ids_edit_key(self) -> str:
        """The key the chosen engine reads ids from (where a fix must write)."""
        if self.rule.reads_top_level_first and self.d.top_level_layer_ids is not None:
            return "eagle_aux_hidden_state_layer_ids"
        return "eagle_config.eagle_aux_hidden_state_layer_ids"

    def ids_fix(self, why: str) -> Optional[Fix]:
        if self.trained is None or self.n is None:
            return None
        ids = self.rule.ids_for(self.trained, self.n)
        if ids is None:
            return None
        key = self.ids_edit_key()
        return self.config_fix(f"set {key} to {ids} so {self.rule.name} captures "
                               f"{', '.join(map(str, self.trained))} ({why})", [ConfigEdit(key, ids)])

    def check_layers(self):
        d = self.d
        if not self.d.is_eagle3 and d.layer_ids is None and d.top_level_layer_ids is None:
            return  # not an EAGLE-3 draft: no aux capture
        ids, source = self.rule.ids_from_config(d.config)
        if ids is not None and not _ints(ids):
            return  # config-invalid already says so
        n = self.n
        trained_src = ""
        if n is not None:
            try:
                self.trained, trained_src = trained_points(d, n, self.trained_layers, self.trained_convention)
            except InputError as exc:
                raise InputError(f"--trained-layers: {exc}") from None
        if d.top_level_layer_ids is not None and d.layer_ids is None and \
                "eagle_config.eagle_aux_hidden_state_layer_ids" not in d.bad_fields():
            self.check_misplaced()
        if n is None:
            if ids is not None:   # what needs no layer count: the embedding id and the order
                ev = {"config_ids": ids, "ids_key": source, "engine": self.rule.name, "num_layers": None}
                for i in ids:
                    if i < 0:
                        self.add("layer-ids-embedding", "error",
                                 f"Layer id {i} asks for the embedding output (or nothing); EAGLE-3 drafters are "
                                 "trained on decoder-layer outputs and engines do not capture it reliably.",
                                 {**ev, "id": i, "note": "target layer count unknown: give --target-config"})
                self.check_unsorted(ids, source, ev)
            return
        arch = self.t.arch if self.t else None
        report, res = build_report(self.rule, d.config, ids, source, n, arch, self.trained, trained_src)
        self.capture = report
        base_ev = {"config_ids": ids, "ids_key": source, "engine": self.rule.name, "rule": self.rule.source,
                   "num_layers": n, "engine_indices": res.indices}
        if ids is not None:
            for c in res.by_id:
                idx = c.index
                if c.id == -1 or c.point == "embed":
                    trained_embed = self.trained is not None and any(p.kind == "embed" for p in self.trained)
                    captured = c.point == "embed" and res.fatal is None
                    sev = "warning" if captured and trained_embed else "error"
                    what = ("captures the embedding output" if captured else
                            f"cannot capture it ({c.problem or res.fatal or 'never fires'})")
                    self.add("layer-ids-embedding", sev,
                             f"Layer id {c.id} means the embedding output; {self.rule.name} {what}.",
                             {**base_ev, "id": c.id, "engine_index": idx, "engine_point": c.point,
                              "fatal": res.fatal}, self.ids_fix("drop the embedding id"))
                elif idx is not None and (idx > n or idx < 0):
                    self.add("layer-ids-out-of-range", "error",
                             f"Layer id {c.id} is beyond the target's {n} layers (valid output-of-layer ids 0..{n - 1}).",
                             {**base_ev, "id": c.id, "engine_index": idx}, self.ids_fix("ids within range"))
                elif idx == n and not self.rule.final_boundary:
                    self.add("layer-ids-final-uncaptured", "error",
                             f"Layer id {c.id} asks for the last layer's output (capture index {n}), which "
                             f"{self.rule.name} never captures: that aux state is missing.",
                             {**base_ev, "id": c.id, "engine_index": idx, "engine_points": report.engine_points},
                             self.ids_fix("capturable points"))
            self.check_unsorted(ids, source, {**base_ev, "engine_points": report.engine_points})
            conv_ids = ids if source != "eagle_aux_hidden_state_layer_ids" else None
            dflt = default_ids(n)
            if conv_ids is not None and list(conv_ids) != dflt:
                self.add("layer-ids-nondefault", "info",
                         f"Layer ids {ids} differ from the default {dflt} (output-of-layer) for {n} layers; "
                         "every engine must be told them explicitly and reads them by its own rule.",
                         {**base_ev, "default_output_of_layer": dflt})
        if self.trained is not None and not report.match:
            shift = _shift(res.points, self.trained, n)
            msg = (f"{self.rule.name} captures {_fmt(report.engine_points)} but the drafter was trained on "
                   f"{_fmt(report.trained_points)}")
            msg += f" (a {abs(shift)}-layer shift)." if shift else "."
            if res.fatal:
                msg = msg[:-1] + f"; the engine also fails: {res.fatal}."
            self.add("layer-ids-engine-mismatch", "error", msg,
                     {**base_ev, "engine_points": report.engine_points, "trained_points": report.trained_points,
                      "trained_source": report.trained_source, "shift": shift, "fatal": res.fatal},
                     self.ids_fix("match training"))

    def check_cuda_graph(self, engine_text: str, arch: Optional[str], cuda_graph: bool) -> None:
        """Releases whose CUDA-graph runner resets the ids to the defaults before capturing decode graphs
        (read from the release's code by ``workbench.engine``): production decode captures other points."""
        if not cuda_graph or self.capture is None or self.rule.engine != "sglang" or self.n is None:
            return
        from workbench.engine import capture as engine_capture
        from workbench.errors import WorkbenchError

        ids, _source = self.rule.ids_from_config(self.d.config)
        try:
            res = engine_capture(engine_text, arch=arch, num_layers=self.n, ids=ids, cuda_graph=True,
                                 source="table")
        except WorkbenchError:
            return                       # a release the table lacks: said by `engine capture --source wheel`
        if not res.graph_differs:
            return
        n = self.n
        trained = [str(p.canonical(n)) for p in self.trained] if self.trained else None

        def canon(points):
            return [str(Point.parse(p).canonical(n)) if p not in ("missing", "unknown") else p for p in points]
        bad = trained is not None and canon(res.cuda_graph_points) != trained
        self.add("layer-ids-cuda-graph-defaults", "error" if bad else "warning",
                 f"{res.engine} decodes with CUDA graphs that capture {', '.join(res.cuda_graph_points)} (its "
                 f"defaults), not the config's {', '.join(res.points)}: its graph runner calls "
                 "set_eagle3_layers_to_capture() without ids before capturing. Prefill and --disable-cuda-graph "
                 "use the config's ids, so a check with CUDA graphs off cannot see this"
                 + (f"; the drafter was trained on {', '.join(trained)}." if bad else "."),
                 {"engine": res.engine, "engine_points": res.points, "cuda_graph_points": res.cuda_graph_points,
                  "trained_points": trained, "source": res.source,
                  "code": [e for e in res.evidence if e.split(":", 1)[0] in ("graph_reset", "config_ids",
                                                                            "config_before_graphs")]})

    def check_unsorted(self, ids: list, source: str, ev: dict) -> None:
        if not any(b <= a for a, b in zip(ids, ids[1:])):
            return
        fix = None
        srt = sorted(set(ids))
        if len(srt) == len(ids):
            fix = self.config_fix(f"sort the ids to {srt} (only right if training concatenated in layer order)",
                                  [ConfigEdit(source, srt)])
        self.add("layer-ids-unsorted", "warning",
                 f"Layer ids {ids} are not strictly ascending: engines concatenate in layer order while "
                 "SpecForge's HF backend uses list order, a silent channel permutation.", ev, fix)

    def check_misplaced(self):
        d = self.d
        sglang = self.rule if self.rule.engine == "sglang" else rule_for(DEFAULT_ENGINE, self.t.arch if self.t else None)
        fix = None
        if self.n is not None and self.trained is not None:
            new_ids = sglang.ids_for(self.trained, self.n)
            if new_ids is not None:
                fix = self.config_fix(f"add eagle_config.eagle_aux_hidden_state_layer_ids={new_ids} (what "
                                      f"{sglang.name} needs to capture {', '.join(map(str, self.trained))})",
                                      [ConfigEdit("eagle_config.eagle_aux_hidden_state_layer_ids", new_ids)])
        self.add("eagle-config-misplaced", "info" if self.rule.engine == "vllm" else "warning",
                 "The layer ids sit only at the top level of config.json, where SGLang ignores them for capture "
                 "(it uses its defaults) while vLLM reads them first.",
                 {"top_level": d.top_level_layer_ids, "eagle_config": None, "engine": self.rule.name}, fix)

    def check_count(self, fc_in: Optional[int]):
        """K ids vs fc in-dim (K * H_t); falls back on num_aux_hidden_states when fc is absent."""
        d = self.d
        ids, source = self.rule.ids_from_config(d.config)
        if ids is not None and not _ints(ids):
            return
        k = len(ids) if ids is not None else 3
        h_t = d.target_hidden_size or (self.t.hidden_size if self.t else None) or d.hidden_size
        ev = {"ids": ids, "ids_key": source, "k": k, "target_hidden_size": h_t}
        if fc_in is not None and h_t:
            if fc_in != k * h_t:
                k_fc = fc_in / h_t
                self.add("layer-ids-count-mismatch", "error",
                         f"{k} layer ids need an fc input of {k}*{h_t}={k * h_t}, but fc.weight takes {fc_in} "
                         f"({k_fc:g} states).", {**ev, "fc_in": fc_in})
        elif d.num_aux_hidden_states is not None and d.num_aux_hidden_states != k:
            self.add("layer-ids-count-mismatch", "error",
                     f"num_aux_hidden_states={d.num_aux_hidden_states} but the engine captures {k} states.",
                     {**ev, "num_aux_hidden_states": d.num_aux_hidden_states})

    # -- sizes ---------------------------------------------------------------------------------
    def check_context(self):
        target_ctx = self.context_length or (self.t.context_length if self.t else None)
        draft_ctx = self.d.context_length
        if target_ctx is None or draft_ctx is None or draft_ctx >= target_ctx:
            return
        key = self.d.key_for["max_position_embeddings"]
        self.add("draft-context-too-short", "error",
                 f"The draft's context length {draft_ctx} is below the target's {target_ctx}: SGLang refuses to "
                 "start unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, and a short draft RoPE range "
                 "lowers accept length on long prompts.",
                 {"draft_context_length": draft_ctx, "draft_key": key, "target_context_length": target_ctx,
                  "target_source": "--context-length" if self.context_length else "target config"},
                 self.config_fix(f"set {key} to {target_ctx}", [ConfigEdit(key, target_ctx)]))

    def check_tied(self):
        d = self.d
        vocab = (self.t.vocab_size if self.t else None) or d.vocab_size
        if d.tie_word_embeddings and d.draft_vocab_size and vocab and d.draft_vocab_size < vocab:
            key = d.key_for["tie_word_embeddings"]
            self.add("tied-embeddings", "error",
                     f"tie_word_embeddings is true with a {d.draft_vocab_size}-token draft vocabulary (target "
                     f"{vocab}): SGLang uses the target embedding as the draft's lm_head.",
                     {"tie_word_embeddings": True, "draft_vocab_size": d.draft_vocab_size, "target_vocab_size": vocab},
                     self.config_fix(f"set {key} to false", [ConfigEdit(key, False)]))

    def check_hidden(self):
        d, t = self.d, self.t
        if t is None or t.hidden_size is None:
            return
        if d.target_hidden_size is not None:
            if d.target_hidden_size != t.hidden_size:
                self.add("hidden-size-mismatch", "error",
                         f"The draft's target_hidden_size {d.target_hidden_size} is not the target's hidden size "
                         f"{t.hidden_size}.",
                         {"target_hidden_size": d.target_hidden_size, "target_config_hidden_size": t.hidden_size},
                         self.config_fix(f"set target_hidden_size to {t.hidden_size}",
                                         [ConfigEdit("target_hidden_size", t.hidden_size)]))
        elif d.hidden_size is not None and d.hidden_size != t.hidden_size:
            self.add("hidden-size-mismatch", "error",
                     f"The draft has hidden_size {d.hidden_size} and no target_hidden_size, so the engine sizes fc "
                     f"for {d.hidden_size}-wide target states; the target's are {t.hidden_size}.",
                     {"hidden_size": d.hidden_size, "target_hidden_size": None,
                      "target_config_hidden_size": t.hidden_size},
                     self.config_fix(f"set target_hidden_size to {t.hidden_size}",
                                     [ConfigEdit("target_hidden_size", t.hidden_size)]))


def _fmt(points) -> str:
    return "[" + ", ".join("missing" if p is None else str(p) for p in points or []) + "]"


def _shift(engine_pts, trained, n) -> Optional[int]:
    """The common layer offset between engine and training points, when there is exactly one."""
    offs = set()
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


def run_static(draft: "str | DraftCheckpoint", target_config=None, *, engine: Optional[str] = None,
               algorithm: Optional[str] = None, trained_layers: Optional[list[int]] = None,
               trained_convention: str = "output-of-layer", context_length: Optional[int] = None,
               num_layers: Optional[int] = None, arch: Optional[str] = None,
               cuda_graph: bool = True) -> DoctorReport:
    """Every static check that the given inputs allow; checks lacking an input are skipped.
    ``cuda_graph``: the server decodes with CUDA graphs (SGLang's default; False = --disable-cuda-graph)."""
    d = draft if isinstance(draft, DraftCheckpoint) else read_draft(draft)
    t = target_config if isinstance(target_config, TargetInfo) or target_config is None else read_target(target_config)
    engine_text = engine or DEFAULT_ENGINE
    alg = normalize_algorithm(algorithm)
    conv = normalize_convention(trained_convention)
    if context_length is not None and (not isinstance(context_length, int) or context_length < 1):
        raise InputError(f"context length: expected a positive integer, got {context_length!r}")
    if trained_layers is not None and not _ints(trained_layers):
        raise InputError(f"--trained-layers: expected integers like 2,30,58, got {trained_layers!r}")
    target_arch = arch or (t.arch if t else None) or _arch_from_draft(d)
    rule = rule_for(engine_text, target_arch)
    ck = _Checker(d, t, rule, alg, trained_layers, conv, context_length, num_layers)
    ck.check_types()
    ck.check_algorithm()
    ck.check_layers()
    ck.check_cuda_graph(engine_text, target_arch, cuda_graph)
    ck.check_context()
    ck.check_tied()
    ck.check_hidden()
    from workbench.doctor.weights import check_weights

    fc_in = check_weights(ck)
    ck.check_count(fc_in)
    inputs = {"draft": d.path, "target_config": t.path if t else None, "engine": rule.name,
              "engine_given": engine, "target_arch": target_arch, "arch_family": arch_family(target_arch),
              "algorithm": alg, "trained_layers": trained_layers, "trained_convention": conv,
              "context_length": context_length, "num_layers": ck.n}
    return DoctorReport(sort_findings(ck.findings), ck.capture, inputs, d.summary())


def _arch_from_draft(d: DraftCheckpoint) -> Optional[str]:
    """A draft class like Eagle3DeepseekV2ForCausalLM tells the target family when no target config is given."""
    for a in d.architectures:
        if "deepseek" in a.lower() or "kimi" in a.lower():
            return a
    return None
