"""``eagle-workbench align`` and ``drafter`` through the real console entry point."""

from __future__ import annotations

import json

from tests.fixtures.tiny_llama import N_LAYERS


def test_align_json_contract_and_mismatch_exit(cli, capture_files, workspace):
    r = cli(
        "align",
        "--train",
        str(capture_files.specforge),
        "--infer",
        str(capture_files.hf_stack),
        "--engine",
        "sglang==0.5.12.post1",
        "--draft",
        str(capture_files.draft_config.parent),
        "--json",
    )
    assert r.returncode == 1, r.stderr  # the draft's ids are one layer late
    out = json.loads(r.stdout)
    for key in ("rows", "cols", "metric", "matrix", "best", "tokens_compared", "recommendation"):
        assert key in out
    assert out["metric"] == "rel_diff" and len(out["matrix"]) == 3 and len(out["matrix"][0]) == N_LAYERS + 1
    b = out["best"][1]
    for key in ("slot", "candidate", "physical", "value", "runner_up", "margin", "verdict"):
        assert key in b
    assert [x["physical"] for x in out["best"]] == ["out(1)", "out(4)", "out(6)"]
    assert out["recommendation"]["layer_ids"] == [1, 4, 6] and out["tokens_compared"] == 64
    assert out["findings"][0]["code"] == "layer-ids-engine-mismatch"
    assert "per_token_values" not in out


def test_align_text_per_token_and_errors(cli, capture_files, workspace):
    r = cli(
        "align", "--train", str(capture_files.specforge), "--infer", str(capture_files.payload), "--per-token", "0:0"
    )
    assert r.returncode == 0, r.stderr
    assert "MATCH" in r.stdout and "per-token rel_diff, aux[0] vs hidden_states[0]" in r.stdout
    bad = cli("align", "--train", str(capture_files.specforge), "--infer", str(capture_files.root / "nope.json"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr
    bad2 = cli(
        "align", "--train", str(capture_files.specforge), "--infer", str(capture_files.payload), "--per-token", "zz"
    )
    assert bad2.returncode == 2 and "SLOT:CANDIDATE" in bad2.stderr
