"""AlignmentWidget without a browser: its state, the HTML it renders, apply-to-config arm/confirm."""

from __future__ import annotations

import json
import shutil

from tests.fixtures.tiny_llama import N_LAYERS
from workbench.notebook import AlignmentWidget


def test_matrix_verdicts_drill_and_apply(wb, capture_files, tmp_path):
    draft = tmp_path / "draft"
    draft.mkdir()
    shutil.copy(capture_files.draft_config, draft / "config.json")
    widget = AlignmentWidget(
        wb,
        train=capture_files.specforge,
        infer=capture_files.hf_stack,
        engine="sglang==0.5.12.post1",
        draft=draft,
        num_layers=N_LAYERS,
    )
    r = widget.result
    assert widget.error is None and [b.physical for b in r.best] == ["out(1)", "out(4)", "out(6)"]
    assert widget.matrix.value.count("<tr") == N_LAYERS + 2 and widget.matrix.value.count("outline:3px") == 3
    assert widget.best.value.count(">match<") == 3
    assert "[1, 4, 6]" in widget.recommendation.value and "layer-ids-engine-mismatch" in widget.recommendation.value
    assert "<svg" in widget.drill.value and "aux[0] vs hidden_states[2]" in widget.drill.value
    widget.slot.value = 2
    assert "aux[2] vs hidden_states[2]" in widget.drill.value
    widget.apply_button.click()  # arm: shows the diff, writes nothing
    assert widget.apply_button.armed and "eagle_aux_hidden_state_layer_ids" in widget.apply_button.plan_view.value
    cfg = json.loads((draft / "config.json").read_text())
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 5, 7]
    widget.apply_button.click()  # confirm
    cfg = json.loads((draft / "config.json").read_text())
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 4, 6]
    assert "applied" in widget.status.value and widget.result.findings == []
    assert len(wb.events(kind="align")) == 2


def test_bad_input_is_one_red_line(wb, capture_files, tmp_path):
    widget = AlignmentWidget(wb)
    assert widget.run() is None and "enter the training capture" in widget.error
    widget.set(train=capture_files.specforge, infer=tmp_path / "none.json")
    assert widget.run() is None and "no such file" in widget.error and "\n" not in widget.error
    assert "c62828" in widget.error_line.value
