"""The Drafter screen through Textual's pilot: evaluate, read the per-depth table, send the rates
to the Predictor."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, Select, Static

from tests.fixtures.tui import no_blink, settle, still
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.drafter import DrafterScreen

SIZE = (140, 40)


async def fill(pilot, draft, data, target, depth="3"):
    s = pilot.app.screen
    for name, value in (("draft", draft), ("data", data), ("target", target), ("depth", depth)):
        s.query_one(f"#{name}", Input).value = str(value)
    no_blink(pilot.app)
    await pilot.press("ctrl+r")
    await settle(pilot)


async def test_eval_table_and_send_to_predictor(workspace, drafter_world):
    w = drafter_world
    app = WorkbenchApp(str(workspace), start="drafter")
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, DrafterScreen)
        await fill(pilot, w["draft"], w["data"], w["target"])
        s = app.screen
        assert s.error is None and s.result is not None
        t = s.query_one("#depths", DataTable)
        assert t.row_count == 3
        assert str(t.get_row_at(0)[1]) == f"{100 * s.result.acc[0]:.1f}%"
        assert "weights: ok" in str(s.query_one("#drafter-weights", Static).render())
        assert "predicted accept length" in str(s.query_one("#drafter-summary", Static).render())
        t.focus()  # p is a key of the result table (the form's inputs take it as text)
        await pilot.press("p")
        await settle(pilot)
        p = app.screen
        assert p.__class__.__name__ == "PredictorScreen"
        assert p.query_one("#convention", Select).value == "marginal"
        assert p.query_one("#steps", Input).value == "3" and p.query_one("#draft_tokens", Input).value == "4"
        rates = [float(x) for x in p.query_one("#rates", Input).value.split(",")]
        assert rates[0] == round(s.result.full_acc[0], 4)
        assert p.result is not None and abs(p.result.accept_length - s.result.predicted["accept_length"]) < 1e-3
        # no other run's observed accept length (the story's 1.12) judges this drafter
        assert p.query_one("#observed", Input).value == "" and p.result.verdict is None


async def test_bad_input_inline(workspace, tmp_path, drafter_world):
    app = WorkbenchApp(str(workspace), start="drafter")
    async with app.run_test(size=SIZE) as pilot:
        await fill(pilot, drafter_world["draft"], tmp_path, drafter_world["target"])
        assert app.screen.error and "no SpecForge" in app.screen.error and "\n" not in app.screen.error
        await fill(pilot, "", "", "")
        assert app.screen.error.startswith("draft:")


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_flow_at_both_sizes(snap_compare, workspace, drafter_world, monkeypatch, size):
    """The README's drafter tour: the three folders, ctrl+r, the per-depth table and the predicted
    accept length; p on the table sends the rates to the Predictor, which predicts from them."""
    monkeypatch.chdir(drafter_world["root"])

    async def flow(pilot):
        app = pilot.app
        await fill(pilot, "draft", "data", "target")
        screen = app.screen
        assert screen.result is not None and screen.query_one("#drafter-summary").region.y < size[1] - 3
        screen.query_one("#depths", DataTable).focus()
        await pilot.press("p")
        await settle(pilot)
        predictor = app.screen
        assert type(predictor).__name__ == "PredictorScreen" and predictor.result.convention == "marginal"
        await still(pilot)

    assert snap_compare(WorkbenchApp(str(workspace), start="drafter"), terminal_size=size, run_before=flow)
