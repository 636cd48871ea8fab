"""The `eagle-workbench predict` JSON contract and exit codes, through the real entry point."""

import json

import pytest


def test_predict_json_contract(cli, workspace):
    r = cli("predict", "--acc", "0.75", "--steps", "5", "--topk", "1", "--draft-tokens", "6", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {
        "accept_length",
        "accepted_drafts",
        "sglang_accept_rate",
        "per_depth",
        "convention",
        "formula",
        "warnings",
    } <= set(d)
    assert "verdict" not in d
    assert round(d["accept_length"], 3) == 3.288 and round(d["accepted_drafts"], 3) == 2.288
    assert d["convention"] == "acc"
    assert [set(p) for p in d["per_depth"]] == [{"depth", "conditional", "marginal"}] * 5
    assert set(d["sglang_accept_rate"]) == {">=0.5.12", "0.5.5"}


def test_predict_verdict_and_journal(cli, workspace):
    r = cli(
        "predict",
        "--marginal",
        "0.633,0.404,0.264",
        "--steps",
        "3",
        "--topk",
        "1",
        "--draft-tokens",
        "4",
        "--observed-accept-length",
        "1.12",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert round(d["accept_length"], 3) == 2.301
    assert set(d["verdict"]) >= {"code", "ratio", "explanation"}
    assert d["verdict"]["code"] == "accept-length-gap"
    from workbench.journal import Journal

    assert [e.kind for e in Journal(workspace / ".workbench" / "journal.sqlite3").events()] == ["predict"]


def test_predict_adjusts_draft_tokens_with_warning(cli, workspace):
    d = json.loads(
        cli("predict", "--alpha", "0.8", "--steps", "3", "--topk", "1", "--draft-tokens", "8", "--json").stdout
    )
    assert d["draft_tokens"] == 4 and any("adjusted" in w for w in d["warnings"])


def test_sweep_json_contract(cli, workspace):
    r = cli(
        "predict",
        "sweep",
        "--acc",
        "0.75",
        "--verify-ms",
        "2:20,3:20.6,4:21.5,5:22.4,6:23.5",
        "--draft-ms",
        "1.2",
        "--baseline-ms",
        "11.3",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d["best"]) >= {"steps", "topk", "draft_tokens", "tokens_per_s"}
    assert d["best"] == d["table"][0]
    assert [row["tokens_per_s"] for row in d["table"]] == sorted(
        (row["tokens_per_s"] for row in d["table"]), reverse=True
    )
    assert all(row["speedup"] == pytest.approx(row["tokens_per_s"] / (1000 / 11.3)) for row in d["table"])


def test_sweep_trees_with_hits(cli, workspace):
    d = json.loads(
        cli(
            "predict",
            "sweep",
            "--acc",
            "0.7",
            "--topk-hits",
            "0.7,0.85,0.9/0.65,0.8,0.86",
            "--verify-ms",
            "2:20,16:26",
            "--draft-ms",
            "1",
            "--steps",
            "1..4",
            "--json",
        ).stdout
    )
    assert {row["topk"] for row in d["table"]} == {1, 2, 3}
    assert all(row["draft_tokens"] <= row["steps"] * row["topk"] + 1 for row in d["table"])


def test_fit_json(cli, workspace):
    d = json.loads(cli("predict", "fit", "--measured", "1:1.8,2:2.44", "--max-steps", "4", "--json").stdout)
    assert d["conditional"][:2] == pytest.approx([0.8, 0.8])
    assert len(d["curve"]) == 4


def test_text_output_names_the_convention(cli, workspace):
    r = cli(
        "predict",
        "--acc",
        "0.75",
        "--steps",
        "5",
        "--topk",
        "1",
        "--draft-tokens",
        "6",
        "--observed-accept-length",
        "1.12",
    )
    assert r.returncode == 0
    assert "3.288" in r.stdout and "bonus token included" in r.stdout and "accept-length-gap" in r.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["predict", "--acc", "0.75,x", "--steps", "5", "--topk", "1", "--draft-tokens", "6"],
            "--acc: 'x' is not a number",
        ),
        (["predict", "--acc", "1.5", "--steps", "5", "--topk", "1", "--draft-tokens", "6"], "outside [0, 1]"),
        (["predict", "--acc", "", "--steps", "5", "--topk", "1", "--draft-tokens", "6"], "empty list"),
        (["predict", "--acc", "0.7", "--steps", "5"], "all three or none"),
        (["predict", "--acc", "0.7", "--steps", "3", "--topk", "2", "--draft-tokens", "9"], "steps*topk+1"),
        (["predict", "--steps", "3", "--topk", "1", "--draft-tokens", "4"], "give one of --acc"),
        (["predict", "--acc", "0.7", "--alpha", "0.7"], "not allowed with"),
        (["predict", "--acc", "0.7", "--steps", "three"], "invalid int value"),
        (["predict", "--convention", "foo"], "unknown flag --convention (did you mean --conditional?)"),
        (["predict", "--acc", "0.7", "--stpes", "5"], "predict: error: unknown flag --stpes (did you mean --steps"),
        (["predict", "sweep", "--acc", "0.7", "--verify-ms", "2:20", "--stepz", "1..3"], "did you mean --steps"),
        (["predict", "sweep", "--acc", "0.7", "--verify-ms", "2=20", "--draft-ms", "1"], "not a KEY:VALUE pair"),
        (["predict", "sweep", "--acc", "0.7", "--draft-ms", "1"], "required: --verify-ms"),
        (["predict", "fit", "--measured", "2:9"], "outside 1..3"),
        (
            [
                "predict",
                "--acc",
                "0.7",
                "--steps",
                "5",
                "--topk",
                "1",
                "--draft-tokens",
                "6",
                "--observed-accept-length",
                "0.5",
            ],
            "below 1",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, workspace, args, needle):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_demo_predictor_prints_the_predictor(cli, workspace):
    r = cli("demo", "--predictor")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "accept length   3.288" in out and "accept-length-gap" in out
    assert "    5             6          3.288" in out  # the steps 1..8 table
    assert "5 steps ▕" in out and "┃" in out  # the plot, observed marker included


def test_warnings_go_to_stderr_and_stdout_stays_the_result(cli, workspace):
    """A line one copies from stdout is never a warning; the warnings are on stderr (and in --json)."""
    r = cli("predict", "--acc", "0.75", "--steps", "5", "--topk", "1", "--draft-tokens", "9")
    assert r.returncode == 0
    assert "warning" not in r.stdout and "accept length" in r.stdout
    assert "warning: draft_tokens 9 adjusted to steps+1 = 6" in r.stderr
    r = cli("predict", "sweep", "--acc", "0.75", "--verify-ms", "2:20,4:22", "--draft-ms", "1")
    assert "warning" not in r.stdout and "left out" in r.stderr
