"""PredictorWidget without a browser: the widget's own state and the HTML it renders."""

import pytest

from workbench.notebook import PredictorWidget
from workbench.predict import chain_accept_length


def test_opens_on_the_story_numbers(wb):
    widget = PredictorWidget(wb)
    r = widget.result
    assert round(r.accept_length, 3) == 3.288 and r.verdict.code == "accept-length-gap"
    assert "3.288" in widget.headline.value and "accept-length-gap" in widget.verdict.value
    assert widget.table.value.count("<tr") == 9  # header + steps 1..8
    assert "<svg" in widget.plot.value and "observed 1.12" in widget.plot.value
    assert "acc_{k-1}" in widget.formula.value
    assert len(wb.events(kind="predict")) == 1


def test_inputs_drive_the_prediction(wb):
    widget = PredictorWidget(wb)
    widget.controls["rates"].value = "0.8,0.7"
    assert widget.result.accept_length == pytest.approx(chain_accept_length([0.8, 0.7, 0.7, 0.7, 0.7]))
    widget.controls["steps"].value = 3
    assert widget.result.steps == 3 and widget.result.draft_tokens == 4  # SGLang's topk=1 adjustment
    assert any("adjusted" in w for w in widget.result.warnings) and "adjusted" in widget.warnings.value
    widget.set(convention="marginal", rates="0.633,0.404,0.264", observed="", draft_tokens=4)
    assert round(widget.result.accept_length, 3) == 2.301 and widget.result.verdict is None
    assert "Enter an observed" in widget.verdict.value


def test_tree_and_timings(wb):
    widget = PredictorWidget(wb, observed="")
    widget.set(topk=2, draft_tokens=8, topk_hits="0.75,0.9", verify_ms="2:20,8:26", draft_ms="1", baseline_ms="19")
    r = widget.result
    assert r.model == "tree" and r.accept_length > r.chain_accept_length
    assert "tok/s" in widget.headline.value and "<th>tok/s</th>" in widget.table.value


def test_bad_input_is_one_red_line_and_keeps_the_last_result(wb):
    widget = PredictorWidget(wb)
    good = widget.result
    widget.controls["rates"].value = "1.4"
    assert widget.error == "acc: value 1 (1.4) is outside [0, 1]"
    assert "outside [0, 1]" in widget.error_line.value and widget.result is good
    assert "the last valid inputs' result" in widget.headline.value
    widget.controls["observed"].value = "abc"
    widget.controls["rates"].value = "0.75"  # a bad observed value costs the verdict only
    assert widget.error is None and round(widget.result.accept_length, 3) == 3.288
    assert "no verdict" in widget.verdict.value and "&#x27;abc&#x27; is not a number" in widget.verdict.value
    widget.set(observed="1.12", topk=3, draft_tokens=30)
    assert "steps*topk+1 = 16" in widget.error
    widget.set(draft_tokens=6)
    assert widget.error is None and widget.error_line.value == ""


def test_unknown_field_is_a_type_error(wb):
    with pytest.raises(TypeError, match="unknown predictor fields: bogus"):
        PredictorWidget(wb, bogus=1)


def test_the_same_inputs_give_the_same_numbers_in_every_face(wb, cli, workspace):
    """The widget reads its form as the TUI's Predictor does (workbench.forms), and the TUI's
    "copy CLI" command of the same fields gives the CLI's JSON: one prediction in three faces,
    the inputs a chain does not use (top-k hits) left out everywhere."""
    import json
    import shlex

    from workbench.tui.screens.predictor import cli_command

    fields = {
        "convention": "acc",
        "rates": "0.8,0.7,0.65",
        "topk_hits": "0.8,0.9",
        "steps": "4",
        "topk": "1",
        "draft_tokens": "5",
        "observed": "2.1",
        "verify_ms": "2:20,4:22,6:24",
        "draft_ms": "1.1",
        "baseline_ms": "15",
    }
    widget = PredictorWidget(
        wb, **{k: int(v) if k in ("steps", "topk", "draft_tokens") else v for k, v in fields.items()}
    )
    assert "not used: top-k hit rates" in widget.error_line.value
    out = cli(*shlex.split(cli_command(fields, skip={"topk_hits"}))[1:])
    data = json.loads(out.stdout)
    r = widget.result
    assert data["accept_length"] == pytest.approx(r.accept_length)
    assert data["throughput"]["tokens_per_s"] == pytest.approx(r.throughput.tokens_per_s)
    assert [p["tokens_per_s"] for p in data["curve"]] == pytest.approx([p.tokens_per_s for p in r.curve], nan_ok=True)
    assert data["verdict"]["code"] == r.verdict.code and data["warnings"] == r.warnings
