"""The doctor and config commands through the real entry point."""

import json
import shutil

from tests.fixtures.drafts import KIMI_BROKEN, KIMI_DRAFT, KIMI_TARGET


def test_doctor_json_contract_and_exit_codes(cli, workspace):
    r = cli("doctor", "--draft", str(KIMI_BROKEN), "--target-config", str(KIMI_TARGET),
            "--engine", "sglang==0.5.12.post1", "--trained-layers", "2,30,58", "--json")
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert set(data) >= {"findings", "capture"}
    f = data["findings"][0]
    assert set(f) == {"code", "severity", "message", "evidence", "fix", "evidence_class"}
    assert f["code"] == "layer-ids-embedding"
    assert data["capture"]["engine_points"] == ["out(2)", "out(30)", None]
    ok = cli("doctor", "--draft", str(KIMI_DRAFT), "--target-config", str(KIMI_TARGET),
             "--engine", "sglang==0.5.12.post1", "--trained-layers", "2,30,58", "--algorithm", "EAGLE3")
    assert ok.returncode == 0 and "capture under sglang==0.5.12.post1" in ok.stdout
    assert [e.kind for e in __import__("workbench.api").api.Workbench.open(workspace).events(kind="doctor")] == \
        ["doctor", "doctor"]


def test_doctor_bad_input_one_line_exit_2(cli, tmp_path):
    (tmp_path / "config.json").write_text("{oops")
    for args in (["--draft", str(tmp_path)], ["--draft", str(tmp_path / "none")],
                 ["--draft", str(KIMI_DRAFT), "--engine", "tgi"],
                 ["--draft", str(KIMI_DRAFT), "--trained-layers", "a,b"]):
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
    refused = cli("config", "revert", p, "--to", "1")             # no terminal, no --yes
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

    code = ("import sys; from workbench.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('torch','textual','numpy','rich','workbench.doctor','workbench.configs') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT)}).stdout.strip()
    assert out == "[]", out


def test_core_modules_stay_headless():
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = ("import sys; import workbench.layers, workbench.draftconfig, workbench.doctor, workbench.configs; "
            "from workbench.doctor import run_static; "
            "run_static('sample_configs/drafts/kimi-k2.5-eagle3', 'sample_configs/targets/kimi-k2.5'); "
            "print(sorted(m for m in ('torch','textual','ipywidgets','rich','transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]", out.stderr
