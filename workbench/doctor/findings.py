"""Findings: a stable code, a severity, one sentence, the evidence that proves it, and a fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.results import Result

SEVERITIES = ("error", "warning", "info")

# What a finding rests on. Its severity follows from it: a finding that rests on a convention nobody
# has settled (no provenance, no numbers) is at most a warning and says what would settle it.
EVIDENCE_CLASSES: dict[str, str] = {
    "engine-code": "what the engine's own code does with these files (capture rule, registry, start-up checks)",
    "static-file": "the files and launch settings alone (types, shapes, sizes, vocabulary mapping)",
    "provenance": "how the training data was captured, as given (--trained-layers, --trained-engine)",
    "numbers": "hidden states compared numerically (training data against the server)",
    "convention": "a reading of the ids that no evidence settles yet",
}
MAX_SEVERITY = {
    "engine-code": "error",
    "static-file": "error",
    "provenance": "error",
    "numbers": "error",
    "convention": "warning",
}

# Every code the static doctor emits, with what it means. Tests pin these names.
CODES: dict[str, str] = {
    "algorithm-mismatch": "an Eagle3 draft launched with another algorithm, or EAGLE3 with a non-Eagle3 draft",
    "layer-ids-engine-mismatch": "the points this engine captures differ from those the drafter was trained on",
    "layer-ids-embedding": "an id meaning the embedding output, or one this engine cannot capture (-1)",
    "layer-ids-out-of-range": "an id beyond the target's layers",
    "layer-ids-final-uncaptured": "asks for the last layer's output, which this engine never captures",
    "layer-ids-unsorted": "ids not ascending: engines concatenate in layer order",
    "layer-ids-count-mismatch": "number of ids disagrees with the fc input width (K * target hidden size)",
    "layer-ids-nondefault": "ids differ from the default [1, N//2-1, N-4] (output-of-layer)",
    "layer-ids-cuda-graph-defaults": "CUDA-graph decode captures the release's default layers, not the config's",
    "eagle-config-misplaced": "ids only at the top level of config.json, where SGLang ignores them",
    "draft-context-too-short": "the draft's context length is below the target's",
    "tied-embeddings": "tie_word_embeddings with a draft vocabulary smaller than the target's",
    "missing-weight": "a weight the engine's drafter needs is absent",
    "unexpected-weight": "a weight name the engine's loader would silently drop",
    "weight-shape-mismatch": "a weight's shape disagrees with the config",
    "d2t-invalid": "d2t does not map draft ids to increasing target ids in the vocabulary, or disagrees with t2d",
    "hidden-size-mismatch": "the draft's target_hidden_size/hidden_size disagree with the target's hidden size",
    "config-invalid": "a config field has the wrong type or an implausible value",
    "weights-unreadable": "the weight files cannot be read (corrupt header, missing shard)",
    "weights-not-checked": "no weight files found: weight checks skipped",
    "draft-variant": "a drafter variant the config selects, and where the engines read it differently",
    "draft-arch-unsupported": "the engine's model registry has no loader for the draft's architecture",
    "target-eagle3-unsupported": "the engine cannot capture EAGLE-3 aux hidden states on this target",
    "unknown-config-key": "a config key no engine or trainer reads (a typo is silently ignored)",
    "training-capture-impossible": "no known capture path could have produced training data for these ids",
    "draft-flag-ignored": "a variant switch the draft sets that the serving release's draft code never reads",
    "draft-is-target": "the draft given is the target model itself (no EAGLE-3 drafter)",
    "target-config-incomplete": "the target config lacks a field a check needs (the check did not run)",
    "vocab-mismatch": "the draft's vocabulary does not match the target's",
}

# The class a code's finding rests on unless the check says otherwise.
CODE_CLASS: dict[str, str] = {
    "algorithm-mismatch": "static-file",
    "layer-ids-engine-mismatch": "engine-code",
    "layer-ids-embedding": "engine-code",
    "layer-ids-out-of-range": "engine-code",
    "layer-ids-final-uncaptured": "engine-code",
    "layer-ids-unsorted": "convention",
    "layer-ids-count-mismatch": "static-file",
    "layer-ids-nondefault": "static-file",
    "eagle-config-misplaced": "engine-code",
    "draft-context-too-short": "static-file",
    "tied-embeddings": "static-file",
    "missing-weight": "static-file",
    # the loader's accepted names come from workbench/drafter/names.py, our reading of SGLang's loader
    "unexpected-weight": "convention",
    "weight-shape-mismatch": "static-file",
    "d2t-invalid": "static-file",
    "hidden-size-mismatch": "static-file",
    "config-invalid": "static-file",
    "weights-unreadable": "static-file",
    "weights-not-checked": "static-file",
    "draft-arch-unsupported": "engine-code",
    "target-eagle3-unsupported": "engine-code",
    "unknown-config-key": "static-file",
    "training-capture-impossible": "engine-code",
    "draft-variant": "static-file",
    "layer-ids-cuda-graph-defaults": "engine-code",
    "draft-flag-ignored": "engine-code",
    "draft-is-target": "static-file",
    "target-config-incomplete": "static-file",
    "vocab-mismatch": "static-file",
}


@dataclass
class ConfigEdit(Result):
    """Set (or delete) one dotted key of a JSON config."""

    key: str
    value: Any = None
    delete: bool = False

    def text(self) -> str:
        import json

        return f"delete {self.key}" if self.delete else f"{self.key}={json.dumps(self.value)}"


@dataclass
class Fix(Result):
    """A concrete remedy: config edits to one file (applied through the history) or a launch change."""

    summary: str
    file: str | None = None  # the config.json the edits apply to
    edits: list[ConfigEdit] = field(default_factory=list)
    launch: list[str] = field(default_factory=list)  # launch-command changes, e.g. "--speculative-algorithm EAGLE3"

    @property
    def applicable(self) -> bool:
        return bool(self.file and self.edits)


@dataclass
class Finding(Result):
    code: str
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: Fix | None = None
    evidence_class: str = ""

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
        if not self.evidence_class:
            self.evidence_class = CODE_CLASS[self.code]
        if self.evidence_class not in EVIDENCE_CLASSES:
            raise ValueError(f"unknown evidence class {self.evidence_class!r}")
        cap = MAX_SEVERITY[self.evidence_class]
        if SEVERITIES.index(self.severity) < SEVERITIES.index(cap):
            raise ValueError(f"{self.code}: a finding resting on {self.evidence_class} is at most a {cap}")


def sort_findings(findings: list[Finding]) -> list[Finding]:
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (order[f.severity], f.code))
