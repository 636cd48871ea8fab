"""The scripted demo end to end on the tiny lab: accept length recovers after the fix, and every
step is in the journal."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow

STEPS = [
    "lab.build",
    "demo.prepare",
    "server.launch",
    "server.ready",
    "server.measure",
    "live.doctor",
    "config.fix",
    "live.fix",
    "server.stop",
    "live.relaunch",
    "live.compare",
    "demo.story",
]


def test_scripted_demo_json(lab_world, tmp_path, cli):
    ws = tmp_path / "demo"
    r = cli(
        "--workspace", str(ws), "demo", "--no-tui", "--json", "--size", "tiny", "--measure-tokens", "48", timeout=1200
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    before, after = out["before"]["accept_length"], out["after"]["accept_length"]
    assert out["before"]["layer_ids"] == lab_world["layers"]["draft_broken"]
    assert out["after"]["layer_ids"] == lab_world["layers"]["trained"]
    assert out["findings"][0]["code"] == "layer-ids-engine-mismatch" and out["findings"][0]["explains"] > 0
    assert out["fix"]["edits"][0]["value"] == lab_world["layers"]["trained"] and out["fix"]["version"] == 2

    from workbench.api import Workbench

    with Workbench.open(ws) as wb:
        kinds = [e.kind for e in wb.events()]
        at = -1
        for k in STEPS:  # each step journaled, in the story's order
            assert k in kinds[at + 1 :], (k, kinds)
            at = kinds.index(k, at + 1)
        assert not wb.servers(active=True)  # the demo stopped its servers
        # the Timeline answers "which config was live when accept length was X?"
        tl = wb.timeline(category="measurement")
        measured = [e for e in tl.entries if e.kind == "server.measure"]
        live = [wb.timeline_live_config(e.id) for e in measured]
        ids = [json.loads(c.content)["eagle_config"]["eagle_aux_hidden_state_layer_ids"] for c in live]
        assert ids[0] == lab_world["layers"]["draft_broken"] and ids[-1] == lab_world["layers"]["trained"]

    # the story's size of recovery: the lab's broken config costs about a third of accept length
    print(f"\ndemo accept length {before:.3f} -> {after:.3f} (x{after / before:.2f})")
    assert after >= 1.5 * before, (before, after)
