"""The doctor and config commands through the real entry point."""

import json
import shutil

from tests.fixtures.drafts import KIMI_BROKEN, KIMI_DRAFT, KIMI_TARGET


def test_doctor_json_contract_and_exit_codes(cli, workspace):
    r = cli(
        "doctor",
        "--draft",
        str(KIMI_BROKEN),
        "--target-config",
        str(KIMI_TARGET),
        "--engine",
        "sglang==0.5.12.post1",
        "--trained-layers",
        "2,30,58",
        "--json",
    )
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert set(data) >= {"findings", "capture"}
    f = data["findings"][0]
    assert set(f) == {"code", "severity", "message", "evidence", "fix", "evidence_class"}
    assert f["code"] == "layer-ids-embedding"
    assert data["capture"]["engine_points"] == ["out(2)", "out(30)", None]
    ok = cli(
        "doctor",
        "--draft",
        str(KIMI_DRAFT),
        "--target-config",
        str(KIMI_TARGET),
        "--engine",
        "sglang==0.5.12.post1",
        "--trained-layers",
        "2,30,58",
        "--algorithm",
        "EAGLE3",
    )
    assert ok.returncode == 0 and "capture under sglang==0.5.12.post1" in ok.stdout
    assert [e.kind for e in __import__("workbench.api").api.Workbench.open(workspace).events(kind="doctor")] == [
        "doctor",
        "doctor",
    ]


def test_doctor_bad_input_one_line_exit_2(cli, tmp_path):
    (tmp_path / "config.json").write_text("{oops")
    for args in (
        ["--draft", str(tmp_path)],
        ["--draft", str(tmp_path / "none")],
        ["--draft", str(KIMI_DRAFT), "--engine", "tgi"],
        ["--draft", str(KIMI_DRAFT), "--trained-layers", "a,b"],
    ):
        r = cli("doctor", *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("eagle-workbench: error:")
        assert "Traceback" not in r.stderr


def test_config_commands(cli, tmp_path):
    d = tmp_path / "draft"
    shutil.copytree(KIMI_DRAFT, d)
    p = str(d / "config.json")
    original = (d / "config.json").read_bytes()
    assert cli("config", "track", p).returncode == 0
    r = cli("config", "set", p, "eagle_config.eagle_aux_hidden_state_layer_ids=[-1,2,30]", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["version"]["number"] == 2
    bad = cli("config", "set", p, 'eagle_config.eagle_aux_hidden_state_layer_ids="2,30,58"')
    assert bad.returncode == 2 and "expected a list of integers" in bad.stderr
    h = json.loads(cli("config", "history", p, "--json").stdout)
    assert [v["number"] for v in h["versions"]] == [1, 2]
    assert "+      -1," in cli("config", "diff", p).stdout
    assert json.loads(cli("config", "show", p, "--version", "1").stdout.strip() or "{}")["eagle_config"]
    refused = cli("config", "revert", p, "--to", "1")  # no terminal, no --yes
    assert refused.returncode == 2 and (d / "config.json").read_bytes() != original
    done = cli("config", "revert", p, "--to", "1", "--yes", "--json")
    assert done.returncode == 0 and (d / "config.json").read_bytes() == original
    assert json.loads(done.stdout)["version"]["reason"] == "revert to v1"
    listed = json.loads(cli("config", "list", "--json").stdout)
    assert listed[0]["versions"] == 3


def test_parser_build_imports_nothing_heavy():
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys; from workbench.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch','textual','numpy','rich','workbench.doctor','workbench.configs') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)}
    ).stdout.strip()
    assert out == "[]", out


def test_core_modules_stay_headless():
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys; import workbench.layers, workbench.draftconfig, workbench.doctor, workbench.configs; "
        "from workbench.doctor import run_static; "
        "run_static('sample_configs/drafts/kimi-k2.5-eagle3', 'sample_configs/targets/kimi-k2.5'); "
        "print(sorted(m for m in ('torch','textual','ipywidgets','rich','transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_draft_alone_lists_what_it_skipped_and_is_no_all_clear(cli):
    r = cli("doctor", "--draft", str(KIMI_DRAFT))
    assert r.returncode == 0
    assert "not an all-clear" in r.stdout
    for needs in (
        "--target-config FILE or --num-layers N",
        "--algorithm ALGO",
        "--trained-engine",
        "doctor --server ID --training-data PATH",
    ):
        assert needs in r.stdout, needs
    data = json.loads(cli("doctor", "--draft", str(KIMI_DRAFT), "--json").stdout)
    checks = {s["check"] for s in data["skipped"]}
    assert any(c.startswith("layer capture vs training") for c in checks)
    assert all(set(s) == {"check", "needs", "why"} for s in data["skipped"])
    full = json.loads(
        cli(
            "doctor",
            "--draft",
            str(KIMI_DRAFT),
            "--target-config",
            str(KIMI_TARGET),
            "--algorithm",
            "EAGLE3",
            "--trained-engine",
            "specforge==0.2.0",
            "--json",
        ).stdout
    )
    assert not any(s["check"].startswith("layer capture") for s in full["skipped"])


def test_text_shows_each_findings_evidence_class(cli):
    r = cli("doctor", "--draft", str(KIMI_DRAFT), "--target-config", str(KIMI_TARGET), "--engine", "sglang==0.5.23")
    assert r.returncode == 0, r.stdout  # a convention-dependent difference alone is no error
    assert "WARNING layer-ids-engine-mismatch [unsettled]" in r.stdout
    assert "INFO    layer-ids-nondefault [static file]" in r.stdout
    e = cli(
        "doctor",
        "--draft",
        str(KIMI_DRAFT),
        "--target-config",
        str(KIMI_TARGET),
        "--engine",
        "sglang==0.5.23",
        "--trained-engine",
        "sglang==0.5.12.post1",
    )
    assert e.returncode == 1 and "ERROR   layer-ids-engine-mismatch [provenance]" in e.stdout
    bad = cli("doctor", "--draft", str(KIMI_DRAFT), "--trained-engine", "specforge==9.9")
    assert bad.returncode == 2 and "specforge==9.9 is not in trainers.json" in bad.stderr


def test_the_fix_never_contradicts_itself(cli):
    """The broken Kimi sample ([-1, 2, 30]) on 0.5.23: without the trained layers no ids are proposed
    (which points training holds is unknown); with them the fix says what it captures and why."""
    r = json.loads(
        cli(
            "doctor",
            "--draft",
            str(KIMI_BROKEN),
            "--target-config",
            str(KIMI_TARGET),
            "--engine",
            "sglang==0.5.23",
            "--json",
        ).stdout
    )
    emb = next(f for f in r["findings"] if f["code"] == "layer-ids-embedding")
    assert emb["fix"] is None
    assert any(f["code"] == "training-capture-impossible" for f in r["findings"])
    given = json.loads(
        cli(
            "doctor",
            "--draft",
            str(KIMI_BROKEN),
            "--target-config",
            str(KIMI_TARGET),
            "--engine",
            "sglang==0.5.23",
            "--trained-layers",
            "2,30,58",
            "--json",
        ).stdout
    )
    fixes = [f["fix"] for f in given["findings"] if f["fix"]]
    assert fixes and all(fx["edits"][0]["value"] == [3, 31, 59] for fx in fixes)
    for fx in fixes:
        assert "captures out(2), out(30), out(58) (the given trained layers)" in fx["summary"]
        assert "embed" not in fx["summary"]


def test_the_launch_environment_turns_sglangs_refusal_into_its_override(cli):
    short = "tests/doctor/corpus/drafts/specforge-qwen3-30b-a3b"
    target = "tests/doctor/corpus/targets/qwen3-30b-a3b.json"
    r = cli("doctor", "--draft", short, "--target-config", target, "--engine", "sglang==0.5.23", "--json")
    f = next(f for f in json.loads(r.stdout)["findings"] if f["code"] == "draft-context-too-short")
    assert r.returncode == 1 and f["severity"] == "error"
    ok = cli(
        "doctor",
        "--draft",
        short,
        "--target-config",
        target,
        "--engine",
        "sglang==0.5.23",
        "--json",
        "--env",
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    )
    f = next(f for f in json.loads(ok.stdout)["findings"] if f["code"] == "draft-context-too-short")
    assert ok.returncode == 0 and f["severity"] == "warning" and "overrides" in f["message"]
    bad = cli("doctor", "--draft", short, "--env", "NOPE")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr
