"""The Alignment screen through Textual's pilot: heat-mapped matrix, verdicts, per-token drill-down,
and "apply to config" through the history after a confirm."""

from __future__ import annotations

import json
import shutil

import pytest
from textual.widgets import DataTable, Input, Select, Static

from tests.fixtures.tiny_llama import N_LAYERS
from tests.fixtures.tui import no_blink, settle, still
from workbench.tui.app import WorkbenchApp
from workbench.tui.screens.alignment import AlignmentScreen
from workbench.tui.widgets.confirm import ConfirmModal

SIZE = (150, 46)


async def fill(pilot, train, infer, draft="", engine="sglang==0.5.12.post1", layers=str(N_LAYERS)):
    s = pilot.app.screen
    s.query_one("#train", Input).value = str(train)
    s.query_one("#infer", Input).value = str(infer)
    s.query_one("#draft", Input).value = str(draft)
    s.query_one("#num_layers", Input).value = layers
    s.query_one("#engine", Select).value = engine
    no_blink(pilot.app)
    await pilot.press("ctrl+r")
    await settle(pilot)


@pytest.fixture
def draft(tmp_path, capture_files):
    d = tmp_path / "draft"
    d.mkdir()
    shutil.copy(capture_files.draft_config, d / "config.json")
    return d


async def test_matrix_verdicts_and_drill_down(workspace, capture_files, draft):
    app = WorkbenchApp(str(workspace), start="alignment")
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, AlignmentScreen)
        await fill(pilot, capture_files.specforge, capture_files.hf_stack, draft)
        s = app.screen
        assert s.error is None and s.result is not None
        m = s.query_one("#matrix", DataTable)
        assert m.row_count == N_LAYERS + 1 and len(m.columns) == 2 + 3
        best = s.query_one("#best", DataTable)
        rows = [[str(c) for c in best.get_row_at(i)] for i in range(best.row_count)]
        assert [r[2] for r in rows] == ["out(1)", "out(4)", "out(6)"] and all(r[6] == "match" for r in rows)
        rec = str(s.query_one("#recommendation", Static).render())
        assert "[1, 4, 6]" in rec and "layer-ids-engine-mismatch" in rec and "a on the matrix applies it" in rec
        assert "aux[0] vs hidden_states[2]" in str(s.query_one("#drill-title", Static).render())
        m.focus()  # the result never takes the keys from the form; tab (or a click) gives them
        await pilot.press("right")  # next slot, same candidate row
        await pilot.pause()
        assert "aux[1] vs hidden_states[2]" in str(s.query_one("#drill-title", Static).render())
        assert "median" in str(s.query_one("#drill", Static).render())


async def test_apply_to_config_confirms_then_writes(workspace, capture_files, draft):
    app = WorkbenchApp(str(workspace), start="alignment")
    async with app.run_test(size=SIZE) as pilot:
        await fill(pilot, capture_files.specforge, capture_files.hf_stack, draft)
        train = app.screen.query_one("#train", Input)
        assert app.focused is train
        await pilot.press("end", "a")  # the form has the keys: a letter is text there, never "apply"
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmModal) and train.value.endswith("a")
        train.value = str(capture_files.specforge)
        app.screen.query_one("#matrix").focus()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert any("[1, 4, 6]" in line or "+" in line for line in app.screen.plan.details)
        await pilot.press("n")
        await settle(pilot)
        ids = json.loads((draft / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        assert ids == [2, 5, 7]  # cancelled: untouched
        await pilot.press("a")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
        await settle(pilot)
        ids = json.loads((draft / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        assert ids == [1, 4, 6]
        assert app.screen.result.findings == [] and app.screen.result.recommendation.differs is False
        versions = app.wb.config_history(str(draft / "config.json")).versions
        assert [v.reason.split(":")[0] for v in versions] == ["tracked", "doctor fix"]


async def test_bad_input_is_one_inline_line(workspace, capture_files, tmp_path):
    app = WorkbenchApp(str(workspace), start="alignment")
    async with app.run_test(size=SIZE) as pilot:
        await fill(pilot, capture_files.specforge, tmp_path / "nothing.json")
        assert app.screen.error and "no such file" in app.screen.error and "\n" not in app.screen.error
        await fill(pilot, "", "")
        assert "enter the training capture" in app.screen.error


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_flow_at_both_sizes(snap_compare, workspace, capture_files, draft, monkeypatch, size):
    """The README's alignment tour: both captures, ctrl+r, the verdicts; tab to the matrix (the
    form keeps the keys until then), a on it, the diff, y: the config is fixed and the alignment
    agrees with it."""
    monkeypatch.chdir(capture_files.root)

    async def flow(pilot):
        app = pilot.app
        await fill(pilot, "specforge/rows_0-2000/data_0.ckpt", "infer_hf.safetensors", str(draft))
        screen = app.screen
        best = screen.query_one("#best", DataTable)
        assert best.row_count == 3 and best.region.y < size[1] - 3  # the verdicts above the fold
        screen.query_one("#matrix", DataTable).focus()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await settle(pilot)
        await settle(pilot)
        assert screen.result.findings == [] and screen.result.recommendation.differs is False
        screen.query_one("#draft", Input).value = "draft"  # as in the form before: the snapshot's path
        await still(pilot)

    assert snap_compare(WorkbenchApp(str(workspace), start="alignment"), terminal_size=size, run_before=flow)


async def test_best_match_table_agrees_with_the_cli_and_stays_legible(workspace, capture_files, cli):
    from workbench.display import HEAT, text_on

    app = WorkbenchApp(str(workspace), start="alignment")
    async with app.run_test(size=(80, 24)) as pilot:
        await fill(pilot, capture_files.specforge, capture_files.hf_stack)
        best = app.screen.query_one("#best", DataTable)
        rows = [[str(c) for c in best.get_row_at(i)] for i in range(best.row_count)]
        # runner-up, margin and verdict are on screen at 80 columns, above the matrix
        region = best.region
        assert region.width >= 70 and sum(w.width for w in best.columns.values()) <= region.width
    r = cli(
        "align",
        "--train",
        str(capture_files.specforge),
        "--infer",
        str(capture_files.hf_stack),
        "--engine",
        "sglang==0.5.12.post1",
        "--num-layers",
        str(N_LAYERS),
        "--json",
    )
    cli_best = json.loads(r.stdout)["best"]
    # at 80 columns the candidates are named by their points (the matrix names the tensors)
    assert [row[4] for row in rows] == [
        ("inf" if b["margin"] is None or b["margin"] == float("inf") else f"x{b['margin']:.3g}") for b in cli_best
    ]
    assert [row[3] for row in rows] == [b["runner_up_physical"] or b["runner_up"] or "-" for b in cli_best]
    assert [row[1] for row in rows] == [b["physical"] for b in cli_best]
    for colour in HEAT:  # every heat cell's number at WCAG AA contrast or better

        def lum(h):
            def f(c):
                return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

            r_, g_, b_ = (int(h[i : i + 2], 16) / 255 for i in (1, 3, 5))
            return 0.2126 * f(r_) + 0.7152 * f(g_) + 0.0722 * f(b_)

        lo, hi = sorted([lum(colour), lum(text_on(colour))])
        assert (hi + 0.05) / (lo + 0.05) >= 4.5, colour
