"""DrafterWidget without a browser: the table, the summary and feeding a PredictorWidget."""

from __future__ import annotations

import pytest

from workbench.notebook import DrafterWidget


def test_table_summary_and_predictor(wb, drafter_world):
    w = drafter_world
    widget = DrafterWidget(wb, draft=w["draft"], data=w["data"], target=w["target"], depth=3)
    r = widget.result
    assert widget.error is None and r.depth == 3
    assert widget.table.value.count("<tr") == 4 and f"{100 * r.acc[0]:.1f}%" in widget.table.value
    assert "predicted accept length" in widget.summary.value and ">ok<" in widget.summary.value
    pred = widget.to_predictor()
    assert pred.result.accept_length == pytest.approx(r.predicted["accept_length"], abs=1e-3)
    assert pred.fields()["convention"] == "marginal" and pred.fields()["steps"] == 3
    assert widget.to_predictor(pred) is pred


def test_bad_input(wb, tmp_path, drafter_world):
    widget = DrafterWidget(wb, draft=drafter_world["draft"], data=tmp_path, target=drafter_world["target"])
    assert widget.result is None and "no SpecForge" in widget.error
    with pytest.raises(Exception, match="evaluate a drafter first"):
        widget.to_predictor()
