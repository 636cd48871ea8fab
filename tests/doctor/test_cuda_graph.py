"""The doctor knows from the files alone when CUDA-graph decode captures other points than the config
says: releases whose graph runner resets the ids to the defaults (read from their code)."""

from __future__ import annotations

from workbench.doctor import run_static
from workbench.engine import table


def _find(r, code):
    return [f for f in r.findings if f.code == code]


def test_cuda_graph_defaults_on_0510_and_not_after(tiny):
    d, t = tiny(config_changes={"eagle_config.eagle_aux_hidden_state_layer_ids": [0, 2, 5]})  # 8 layers
    assert table.release("sglang", "0.5.10") is not None
    r = run_static(d, t, engine="sglang==0.5.10", algorithm="EAGLE3")
    f = _find(r, "layer-ids-cuda-graph-defaults")
    assert len(f) == 1 and f[0].severity == "error"  # trained (as the config says) on other points
    assert f[0].evidence["cuda_graph_points"] == ["out(1)", "out(3)", "out(4)"]
    assert f[0].evidence["engine_points"] == ["out(0)", "out(2)", "out(5)"]
    assert any("cuda_graph_runner.py" in e for e in f[0].evidence["code"])
    # trained on the defaults: decode is right, prefill is not -> a warning here
    r = run_static(d, t, engine="sglang==0.5.10", algorithm="EAGLE3", trained_layers=[1, 3, 4])
    assert _find(r, "layer-ids-cuda-graph-defaults")[0].severity == "warning"
    # --disable-cuda-graph: the config's ids are what decode captures
    r = run_static(d, t, engine="sglang==0.5.10", algorithm="EAGLE3", cuda_graph=False)
    assert not _find(r, "layer-ids-cuda-graph-defaults")
    # 0.5.11 applies the config's ids to the graphs
    r = run_static(d, t, engine="sglang==0.5.11", algorithm="EAGLE3")
    assert not _find(r, "layer-ids-cuda-graph-defaults")


def test_default_ids_are_never_flagged(tiny):
    d, t = tiny()  # [1, 3, 4] = the defaults for 8 layers
    r = run_static(d, t, engine="sglang==0.5.10", algorithm="EAGLE3")
    assert not _find(r, "layer-ids-cuda-graph-defaults")
