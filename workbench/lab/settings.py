"""Lab world sizes and their content hash (pure Python).

Budgets are step counts, not seconds, so a build is the same on a busy and an idle machine
(the cache key is a hash of these settings). The drafter's training stops at the first held-out
check inside the calibration bands, measured by real decoding too (``workbench.lab.calibration``),
``draft_steps`` being the cap.
``tiny`` is sized for tests, ``small`` for the demo (the same target, half again the data).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from workbench.lab import corpus

# Bump when the build's code changes in a way that changes its outputs.
BUILD_VERSION = 7

# What the build's stages report as they go: ``(stage, done, total, message)``.
StepProgress = Callable[[str, float, float | None, str], None]


@dataclass(frozen=True)
class LabSettings:
    size: str
    # any seed lands in the bands (with retries: benchmarks/results/lab_grid_*.json); the default is one
    # that lands at its first attempt on the CPUs measured there, so the usual build is one attempt
    seed: int = 1237
    # target (transformers LlamaForCausalLM)
    hidden: int = 64
    layers: int = 12
    heads: int = 4
    ffn: int = 192
    max_positions: int = 1024
    target_steps: int = 100
    target_batch: int = 16
    target_seq: int = 128
    target_lr: float = 5e-3
    init_std: float = 0.02
    # corpus style (``workbench.lab.corpus.Generator``): preferred adjective/verb and successor
    # probabilities, and section weights (story, ask, sums, count, says, records)
    pref: float = 0.6
    succ: float = 0.8
    mix: tuple[float, ...] = corpus.MIX
    ordered: bool = True
    code_len: int = 3
    file_keys: tuple[int, ...] = (2, 4)
    # the language (its preferred words and successor cycle): fixed, so that a seed changes the
    # weights' initialisation and the sampled data, not how predictable the language is
    language: int = 1234
    # self-distilled training data
    prompts: int = 640
    prompt_len: int = 48
    response_len: int = 32
    rows_per_group: int = 2000
    # drafter
    draft_vocab: int = 256
    ttt_steps: int = 3
    draft_steps: int = 200  # the cap: training stops at the first confirmed check in the bands
    draft_batch: int = 32
    draft_lr: float = 3e-3
    loss_decay: float = 0.8
    token_drop: float = 0.5  # share of the drafter's input tokens hidden in training
    # held-out checks during training (``build.HeldoutCheck``): every eval_every steps from check_from;
    # stop_rule "bands" stops at the first check inside the bands, "never" only records them
    eval_every: int = 5
    check_from: int = 20
    stop_rule: str = "bands"
    confirms: int = 4  # checks confirmed by real decoding per attempt (each ~1/4 of a build)
    # evaluation
    eval_prompts: int = 16  # the measured prompts, also the held-out rows
    eval_new_tokens: int = 48
    eval_steps: int = 3
    threads: int = 2
    # a build outside the calibration bands (``workbench.lab.calibration``) rebuilds with seed + 1
    max_retries: int = 9
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def content_hash(self) -> str:
        blob = json.dumps({"build": BUILD_VERSION, **self.to_dict()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


SIZES = {
    "tiny": LabSettings(size="tiny"),
    # the same target and language; three times the drafter training on half again the data
    "small": LabSettings(size="small", prompts=960, draft_steps=400),
}


def corpus_style(s: LabSettings | Mapping[str, Any]) -> dict[str, Any]:
    """The corpus keyword arguments of settings (a ``LabSettings`` or its dict from ``lab.json``)."""
    d = s.to_dict() if isinstance(s, LabSettings) else dict(s)
    defaults = LabSettings(size="tiny")
    style = {k: d.get(k, getattr(defaults, k)) for k in ("pref", "succ", "mix", "ordered", "code_len", "file_keys")}
    # worlds built before the language was a setting drew it from their seed (``world``)
    style["language"] = d.get("language")
    return style


def settings_for(size: str, **overrides: Any) -> LabSettings:
    from workbench.errors import InputError

    if size not in SIZES:
        raise InputError(f"--size: {size!r} is not one of {', '.join(SIZES)}")
    return replace(SIZES[size], **overrides) if overrides else SIZES[size]
