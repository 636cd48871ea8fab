"""The Predictor screen, driven through Textual's pilot like a user would."""

import json

import pytest
from textual.widgets import DataTable, Input, Select, Static

from tests.fixtures.tui import no_blink, settle, still
from workbench.predict import chain_accept_length
from workbench.tui.screens.predictor import PredictorScreen

SIZE = (130, 44)


async def _type(pilot, field_id: str, text: str, keys: bool = False) -> None:
    """Give a field ``text``: key by key where the keystrokes themselves are tested, else as one
    edit (each key press through the pilot waits for the app to go idle twice)."""
    widget = pilot.app.screen.query_one(f"#{field_id}", Input)
    widget.focus()
    widget.value = ""
    if keys:
        await pilot.press(*text) if text else None
    else:
        widget.value = text
        await pilot.pause()


def _text(screen, wid) -> str:
    return str(screen.query_one(f"#{wid}", Static).render())


async def test_opens_on_the_story_numbers(tui_app):
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, PredictorScreen)
        r = screen.result
        assert round(r.accept_length, 3) == 3.288 and r.verdict.code == "accept-length-gap"
        assert "3.288" in _text(screen, "headline") and "accept-length-gap" in _text(screen, "verdict")
        table = screen.query_one("#curve", DataTable)
        assert table.row_count == 8
        assert [table.get_row_at(i)[2] for i in range(8)] == [
            f"{chain_accept_length([0.75] * s):.3f}" for s in range(1, 9)
        ]
        assert table.get_row_at(4)[0].startswith("▶")
        plot = _text(screen, "plot")
        assert "◀ configured" in plot and "┃" in plot
        assert "acc_{k-1}" in _text(screen, "formula")
        assert "depths 2..5 reuse" in _text(screen, "warnings")
        assert _text(screen, "status").startswith("● up to date")


async def test_updates_as_inputs_change_and_journals_once_per_pause(tui_app, workspace, monkeypatch):
    """Keystrokes inside the debounce are one prediction (each is journaled): the pause is made
    long here and ended by hand, so a loaded machine's slow keystrokes do not end it early."""
    monkeypatch.setattr(PredictorScreen, "DEBOUNCE_S", 60.0)
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        if screen._timer is not None:
            screen._timer.stop()
        screen.recompute()  # the first prediction, without its debounce
        await settle(pilot)
        before = len(app.wb.events(kind="predict"))
        await _type(pilot, "rates", "0.8,0.7", keys=True)
        await settle(pilot)
        assert len(app.wb.events(kind="predict")) == before and screen.state == "updating"
        if screen._timer is not None:
            screen._timer.stop()
        screen.recompute()  # the pause ends
        await settle(pilot)
        r = screen.result
        assert r.accept_length == pytest.approx(chain_accept_length([0.8, 0.7, 0.7, 0.7, 0.7]))
        assert len(app.wb.events(kind="predict")) == before + 1  # 7 keystrokes, one prediction
        monkeypatch.setattr(PredictorScreen, "DEBOUNCE_S", 0.02)
        await _type(pilot, "steps", "3")
        await _type(pilot, "draft_tokens", "4")
        await settle(pilot)
        assert screen.result.steps == 3
        assert screen.query_one("#curve", DataTable).get_row_at(2)[0].startswith("▶")


async def test_bad_input_is_shown_above_the_results_and_on_the_input(tui_app, monkeypatch):
    monkeypatch.setattr(PredictorScreen, "DEBOUNCE_S", 0.02)  # six edits; the debounce has its own test
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        good = app.screen.result
        await _type(pilot, "rates", "1.5")
        await settle(pilot)
        screen = app.screen
        assert "acc: value 1 (1.5) is outside [0, 1]" in _text(screen, "status")
        assert screen.query_one("#results").has_class("-invalid") and screen.result is good
        assert screen.query_one("#rates").has_class("-bad")
        await _type(pilot, "rates", "0.7,abc")
        await settle(pilot)
        assert "'abc' is not a number" in _text(screen, "status")
        await _type(pilot, "rates", "0.7")
        await _type(pilot, "topk", "")
        await settle(pilot)
        assert "all three or none" in _text(screen, "status")
        assert screen.query_one("#topk").has_class("-bad") and not screen.query_one("#rates").has_class("-bad")
        await _type(pilot, "topk", "2")
        await _type(pilot, "draft_tokens", "20")
        await settle(pilot)
        assert "steps*topk+1 = 11" in _text(screen, "status") and screen.query_one("#draft_tokens").has_class("-bad")
        await _type(pilot, "draft_tokens", "6")
        await settle(pilot)
        assert screen.error is None and not screen.query_one("#results").has_class("-invalid")
        assert _text(screen, "status").startswith("● up to date") and screen.result.model == "tree"


async def test_every_keystroke_marks_the_result_stale_until_its_own_comes(tui_app):
    """Typing 1.5: the result of the keystroke 1 (6.000) is marked the moment '.' is typed, and
    the error replaces it; a late result of older inputs never clears the mark."""
    app = tui_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        await _type(pilot, "rates", "")
        await pilot.press("1")
        await settle(pilot)
        assert round(screen.result.accept_length, 3) == 6.0 and screen.state == "current"
        await pilot.press(".")
        assert screen.state == "updating" and screen.query_one("#results").has_class("-stale")
        assert "updating" in _text(screen, "status")
        await pilot.press("5")
        await settle(pilot)
        assert screen.state == "invalid" and "1.5" in _text(screen, "status")
        assert round(screen.result.accept_length, 3) == 6.0 and screen.query_one("#results").has_class("-invalid")
        # the error is above the fold at 80x24: the status line is on screen
        assert screen.query_one("#status").region.bottom <= 24 - 1
        # a result computed for older inputs does not clear the mark of newer ones
        generation = screen._generation
        screen._edited()
        screen._predicted((generation, None, screen.result, None))
        assert screen.state == "invalid" and "updating" in _text(screen, "status")
        await settle(pilot)


async def test_inputs_the_prediction_does_not_use_never_block_it(tui_app, monkeypatch):
    """Top-k hit rates with topk 1, a verify time without its draft time, a bad observed value:
    the accept length is predicted and each says why it is not used (the verdict why it is missing)."""
    monkeypatch.setattr(PredictorScreen, "DEBOUNCE_S", 0.02)
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        await _type(pilot, "topk_hits", "0.7,oops")
        await _type(pilot, "verify_ms", "2:20,4:22")
        await _type(pilot, "observed", "1.1x")
        await settle(pilot)
        assert screen.state == "current" and round(screen.result.accept_length, 3) == 3.288
        status = _text(screen, "status")
        assert "top-k hit rates: not used while topk is 1" in status
        assert "verify ms: not used until draft step ms is given too" in status
        assert "no verdict until it reads" in status and "no verdict" in _text(screen, "verdict")
        assert screen.query_one("#topk_hits").has_class("-unused") and screen.query_one("#observed").has_class("-bad")
        # the copied command leaves out what the prediction did not use
        await pilot.press("ctrl+y")
        assert "--topk-hits" not in app.clipboard and "--observed" not in app.clipboard
        # used again (a tree), the same bad hit rates are an error
        await _type(pilot, "topk", "2")
        await settle(pilot)
        assert screen.state == "invalid" and "'oops' is not a number" in _text(screen, "status")


async def test_the_curve_leaves_out_tok_s_outside_the_measured_verify_times(tui_app, monkeypatch):
    """As the CLI's sweep does: no rate from an extrapolated verify time, and the same warning."""
    monkeypatch.setattr(PredictorScreen, "DEBOUNCE_S", 0.02)
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        await _type(pilot, "verify_ms", "4:21,6:23")
        await _type(pilot, "draft_ms", "1")
        await settle(pilot)
        table = screen.query_one("#curve", DataTable)
        tps = [table.get_row_at(i)[4] for i in range(table.row_count)]
        assert tps[:2] == ["-", "-"] and tps[5:] == ["-", "-", "-"] and all(t != "-" for t in tps[2:5])
        assert "5 step counts of the curve have no tok/s" in _text(screen, "warnings")
        assert "outside the measured verify times (4..6)" in _text(screen, "warnings")


async def test_convention_and_timings(tui_app):
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        screen.query_one("#convention", Select).value = "marginal"
        await _type(pilot, "rates", "0.633,0.404,0.264")
        await _type(pilot, "steps", "3")
        await _type(pilot, "draft_tokens", "4")
        await _type(pilot, "verify_ms", "2:20,4:22")
        await _type(pilot, "draft_ms", "1")
        await _type(pilot, "baseline_ms", "19")
        await settle(pilot)
        r = screen.result
        assert r.convention == "marginal" and round(r.accept_length, 3) == 2.301
        assert "P_k" in _text(screen, "convention-help")
        assert r.throughput.tokens_per_s == pytest.approx(2.301 * 1000 / 25, rel=1e-3)
        assert "tok/s" in _text(screen, "headline")
        assert "tok/s" in [str(c.label) for c in screen.query_one("#curve", DataTable).columns.values()]


async def test_copy_command_runs_the_same_prediction(tui_app, cli, workspace):
    notes = []
    app = tui_app()
    async with app.run_test(size=SIZE, message_hook=notes.append) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+y")
        await pilot.pause()
        command = app.clipboard
        shown = app.screen.result.accept_length
    assert command.startswith("eagle-workbench predict --acc 0.75 --steps 5 --topk 1 --draft-tokens 6")
    assert any(type(m).__name__ == "Notify" and m.notification.message == command for m in notes)
    import shlex

    out = cli(*shlex.split(command)[1:])
    assert out.returncode == 0 and json.loads(out.stdout)["accept_length"] == pytest.approx(shown)


async def test_reset_restores_the_example(tui_app):
    app = tui_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await _type(pilot, "rates", "0.5")
        await settle(pilot)
        assert app.screen.result.accept_length < 2
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert round(app.screen.result.accept_length, 3) == 3.288


async def test_screen_args_prefill(tui_app):
    app = tui_app(screen_args={"predictor": {"rates": "0.6", "observed": ""}})
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen.result.accept_length == pytest.approx(chain_accept_length([0.6] * 5))
        assert app.screen.result.verdict is None


SIZES = [(80, 24), (200, 60)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_flow_at_both_sizes(snap_compare, tui_app, size, monkeypatch):
    """The README's Predictor tour as a user types it: rates key by key (1.5 is an error above the
    results; the stale mark of each keystroke has its own test), rates that read, top-k hits a
    chain does not use, timings; the result, its status and the curve are on screen."""
    monkeypatch.setattr(PredictorScreen, "DEBOUNCE_S", 0.02)

    async def flow(pilot):
        app = pilot.app
        screen = app.screen
        await settle(pilot)
        no_blink(app)
        await _type(pilot, "rates", "")
        await pilot.press("1", ".", "5")
        await settle(pilot)
        assert screen.state == "invalid" and screen.query_one("#status").region.bottom < size[1]
        await _type(pilot, "rates", "0.8,0.7,0.6")
        await _type(pilot, "topk_hits", "0.8,0.9")
        await _type(pilot, "verify_ms", "2:20.2,4:21.7,6:23.4")
        await _type(pilot, "draft_ms", "1.1")
        await _type(pilot, "baseline_ms", "11.3")
        await settle(pilot)
        assert screen.state == "current" and screen.result.throughput is not None
        assert "top-k hit rates: not used" in _text(screen, "status")
        # the headline is above the fold at both sizes
        assert screen.query_one("#headline").region.y < size[1] - 2
        await still(pilot)

    assert snap_compare(tui_app(), terminal_size=size, run_before=flow)
