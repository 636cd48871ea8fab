"""Lab world sizes and their content hash (pure Python).

Budgets are step counts, not seconds, so a build is the same on a busy and an idle machine
(the cache key is a hash of these settings). ``tiny`` is sized for tests (about a minute on two
cores), ``small`` for the demo (a better drafter, a few minutes).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace

# Bump when the build's code changes in a way that changes its outputs.
BUILD_VERSION = 3


@dataclass(frozen=True)
class LabSettings:
    size: str
    seed: int = 1234
    # target (transformers LlamaForCausalLM)
    hidden: int = 64
    layers: int = 12
    heads: int = 4
    ffn: int = 192
    max_positions: int = 1024
    target_steps: int = 300
    target_batch: int = 16
    target_seq: int = 128
    target_lr: float = 5e-3
    # self-distilled training data
    prompts: int = 320
    heldout: int = 48
    prompt_len: int = 48
    response_len: int = 80
    rows_per_group: int = 2000
    # drafter
    draft_vocab: int = 256
    ttt_steps: int = 3
    draft_steps: int = 400
    draft_batch: int = 32
    draft_lr: float = 3e-3
    loss_decay: float = 0.8
    # evaluation
    eval_prompts: int = 16
    eval_new_tokens: int = 64
    eval_steps: int = 3
    threads: int = 2
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def content_hash(self) -> str:
        blob = json.dumps({"build": BUILD_VERSION, **self.to_dict()}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


SIZES = {
    "tiny": LabSettings(size="tiny"),
    "small": LabSettings(size="small", hidden=96, layers=12, ffn=288, target_steps=600, target_lr=4e-3,
                         prompts=640, heldout=64, draft_steps=800, draft_batch=32,
                         eval_prompts=32, eval_new_tokens=96),
}


def settings_for(size: str, **overrides) -> LabSettings:
    from workbench.errors import InputError

    if size not in SIZES:
        raise InputError(f"--size: {size!r} is not one of {', '.join(SIZES)}")
    return replace(SIZES[size], **overrides) if overrides else SIZES[size]
