"""The lab's engine takes capture behaviour from real SGLang code (installed release, wheels), never
from the table; a table that disagrees with the code fails here."""

from __future__ import annotations

import pytest


def _release(version):
    """The release's wheel from PyPI (cached under ~/.cache/eagle-workbench); skip when offline."""
    from workbench.engine.wheels import unpacked

    try:
        unpacked("sglang", version)
    except Exception as exc:
        pytest.skip(f"sglang=={version} wheel not available: {exc}")


def _engine(world, draft, engine, **kw):
    from workbench.lab.engine import LabEngine

    return LabEngine(world["target"], world[draft], engine=engine, dtype="float32", **kw)


@pytest.fixture(scope="module")
def world(lab_world):
    return lab_world


def test_installed_release_is_read_from_its_code(world, monkeypatch):
    from workbench.engine import capture, table

    eng = _engine(world, "draft", "sglang==0.5.23")
    try:
        assert eng.capture.source == "installed"  # the installed sglang, read in place
        assert eng.capture.points == ["out(1)", "out(5)", "out(8)"]
        # the table must say the same: a wrong table fails here
        tab = capture("sglang==0.5.23", arch="LlamaForCausalLM", num_layers=12, ids=[1, 5, 8], source="table")
        assert tab.points == eng.capture.points and tab.fatal == eng.capture.fatal
        assert tab.cuda_graph_points == eng.capture.cuda_graph_points
    finally:
        eng.close()
    # the lab never reads the table: poisoning it changes nothing
    monkeypatch.setattr(table, "load", lambda e: {"0.5.23": {"rules": []}})
    eng = _engine(world, "draft_broken", "sglang==0.5.23")
    try:
        assert eng.capture.points == ["embed", "out(1)", "out(5)"] and eng.capture.fatal is None
    finally:
        eng.close()


def test_old_release_crashes_on_index0_from_its_wheel(world):
    _release("0.5.12")
    eng = _engine(world, "draft_broken", "sglang==0.5.12")
    try:
        assert eng.capture.source == "wheel"
        with pytest.raises(TypeError, match="NoneType"):
            eng.generate([1, 4, 5], 4, ignore_eos=True)
    finally:
        eng.close()


def test_cuda_graph_decode_uses_the_defaults_on_0510(world):
    """0.5.10's graph runner resets the ids to the defaults before capturing: verify rounds with CUDA
    graphs on capture out(1), out(5), out(8) whatever the config says; prefill keeps the config's."""
    _release("0.5.10")
    on = _engine(world, "draft_shifted", "sglang==0.5.10")
    off = _engine(world, "draft_shifted", "sglang==0.5.10", cuda_graph=False)
    try:
        assert on.capture.points == ["out(2)", "out(6)", "out(9)"]
        assert on.capture.cuda_graph_points == ["out(1)", "out(5)", "out(8)"]
        assert on._aux_names(graph=True) == ["out(1)", "out(5)", "out(8)"]
        assert on._aux_names() == ["out(2)", "out(6)", "out(9)"]
        assert off.capture.cuda_graph_points is None and off._aux_names(graph=True) == off._aux_names()
        a = on.generate([1, 4, 5, 9, 3, 7], 24, ignore_eos=True)
        b = off.generate([1, 4, 5, 9, 3, 7], 24, ignore_eos=True)
        assert a.output_ids == b.output_ids  # speculation never changes greedy output
    finally:
        on.close()
        off.close()
