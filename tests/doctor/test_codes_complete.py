"""Every finding code fires through the doctor users call (``Workbench.doctor``) on the smallest input
built for it. The parametrization is over ``CODES`` itself: a new code without a case here fails."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fixtures.drafts import tiny_tensors
from workbench.doctor import CODES

Tensors = dict[str, np.ndarray]


@dataclass
class Case:
    """The tiny draft and target (tests/fixtures/drafts.py) with these changes, and the finding expected."""

    severity: str
    evidence_class: str
    config: dict[str, Any] = field(default_factory=dict)  # dotted keys of the draft's config.json; None drops
    target: dict[str, Any] = field(default_factory=dict)  # keys of the target config
    tensors: Callable[[Tensors], object] | None = None  # an in-place edit of the healthy weights
    weights: bool = True  # False: no model.safetensors at all
    after: Callable[[Path], None] | None = None  # edit of the written draft directory
    launch: dict[str, Any] = field(default_factory=dict)  # Workbench.doctor keyword arguments


def _corrupt_header(d: Path) -> None:
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 10**9) + b"{}")


def _target_as_draft(d: Path) -> None:
    """The target's own config.json where the draft's should be (the target passed as its own draft)."""
    import json

    from tests.fixtures.drafts import TINY_TARGET

    (d / "config.json").write_text(json.dumps(TINY_TARGET))


def _unsorted_d2t(ts: Tensors) -> None:
    ts["d2t"][5] = ts["d2t"][4] - 1


IDS = "eagle_config.eagle_aux_hidden_state_layer_ids"  # the tiny target has 8 layers: defaults [1, 3, 4]
OLD, NEW = "sglang==0.5.12.post1", "sglang==0.5.23"

CASES: dict[str, Case] = {
    "algorithm-mismatch": Case("error", "static-file", launch={"algorithm": "EAGLE"}),
    "layer-ids-engine-mismatch": Case("error", "provenance", launch={"engine": OLD, "trained_layers": [0, 2, 5]}),
    "layer-ids-embedding": Case("error", "engine-code", config={IDS: [-1, 3, 4]}, launch={"engine": OLD}),
    "layer-ids-out-of-range": Case("error", "engine-code", config={IDS: [1, 3, 12]}, launch={"engine": OLD}),
    "layer-ids-final-uncaptured": Case("error", "engine-code", config={IDS: [1, 3, 7]}, launch={"engine": NEW}),
    "layer-ids-unsorted": Case("warning", "convention", config={IDS: [3, 1, 4]}, launch={"engine": OLD}),
    "layer-ids-count-mismatch": Case("error", "static-file", config={IDS: [1, 2, 3, 4]}),  # fc takes 3 * 16
    "layer-ids-nondefault": Case("info", "static-file", config={IDS: [0, 2, 5]}, launch={"engine": OLD}),
    "layer-ids-cuda-graph-defaults": Case(
        "error", "engine-code", config={IDS: [0, 2, 5]}, launch={"engine": "sglang==0.5.10"}
    ),
    "eagle-config-misplaced": Case(
        "warning",
        "engine-code",
        config={"eagle_config": None, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]},
        launch={"engine": NEW},
    ),
    "draft-context-too-short": Case("error", "static-file", target={"max_position_embeddings": 1024}),
    "tied-embeddings": Case("error", "static-file", config={"tie_word_embeddings": True}),
    "missing-weight": Case("error", "static-file", tensors=lambda ts: ts.pop("lm_head.weight")),
    "unexpected-weight": Case(
        "warning", "convention", tensors=lambda ts: ts.update({"mtp_head.weight": np.zeros((2, 2), np.float32)})
    ),
    "weight-shape-mismatch": Case(
        "error",
        "static-file",  # lm_head for 32 draft tokens, not 16
        tensors=lambda ts: ts.update({"lm_head.weight": np.zeros((32, 16), np.float32)}),
    ),
    "d2t-invalid": Case("error", "static-file", tensors=_unsorted_d2t),
    "hidden-size-mismatch": Case("error", "static-file", target={"hidden_size": 24}),
    "config-invalid": Case("error", "static-file", config={IDS: "1,3,4"}),
    "weights-unreadable": Case("error", "static-file", after=_corrupt_header),
    "weights-not-checked": Case("info", "static-file", weights=False),
    "draft-variant": Case("info", "static-file", config={"norm_output": False}),
    "draft-arch-unsupported": Case(
        "error", "engine-code", config={"architectures": ["Eagle3Speculator"]}, launch={"engine": NEW}
    ),
    "target-eagle3-unsupported": Case(
        "error", "engine-code", target={"architectures": ["MixtralForCausalLM"]}, launch={"engine": NEW}
    ),
    "unknown-config-key": Case(
        "warning", "static-file", config={IDS: None, IDS.replace("layer_ids", "layers_ids"): [1, 3, 4]}
    ),
    "training-capture-impossible": Case(
        "error", "provenance", config={IDS: [-1, 3, 4]}, launch={"trained_engine": OLD}
    ),  # 0.5.12 never captures -1
    # 0.5.10's llama_eagle3.py reads no fc_norm: the per-slot norms the drafter was trained with are dropped
    "draft-flag-ignored": Case("error", "engine-code", config={"fc_norm": True}, launch={"engine": "sglang==0.5.10"}),
    "draft-is-target": Case("error", "static-file", after=_target_as_draft),
    "target-config-incomplete": Case("warning", "static-file", target={"num_hidden_layers": None}),
    "vocab-mismatch": Case("error", "static-file", config={"vocab_size": 128}),  # the target has 64
}


@pytest.mark.parametrize("code", sorted(set(CODES) | set(CASES)))
def test_code_fires(code, tiny, drop_key, wb):
    assert code in CODES, f"CASES has a case for {code!r}, which is no longer a finding code"
    case = CASES.get(code)
    if case is None:
        pytest.fail(f"no input makes {code!r} fire: add a case for it to CASES in {__name__}")
    changes = {k: drop_key if v is None else v for k, v in case.config.items()}
    ts = tiny_tensors()  # sized for the unchanged draft: a changed config disagrees with them
    if case.tensors:
        case.tensors(ts)
    d, t = tiny(config_changes=changes, target_changes=case.target, tensors=ts if case.weights else None)
    if case.after:
        case.after(d)
    report = wb.doctor(str(d), str(t), **case.launch)
    got = {(f.severity, f.evidence_class) for f in report.findings if f.code == code}
    assert got, f"{code} did not fire; the doctor said {report.codes()}"
    assert (case.severity, case.evidence_class) in got, (code, got)
