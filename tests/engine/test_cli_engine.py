"""``engine capture``, ``engine read`` and ``doctor`` agree on a release that was not read: exit 2 and
one line naming what was read, the nearest release and the command that reads it, never a capture
table presented as that release's; bad input (a malformed spec, a wheel that is not one) is one line."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIMI = str(ROOT / "sample_configs" / "targets" / "kimi-k2.5")
DRAFT = str(ROOT / "sample_configs" / "drafts" / "kimi-k2.5-eagle3")


def _one_line(r):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout.strip() == ""  # nothing presented as the release's capture
    return r.stderr


def test_a_release_that_does_not_exist_is_never_presented(cli, tmp_path):
    env = {"EAGLE_WB_CACHE": str(tmp_path)}
    cap = _one_line(
        cli("engine", "capture", "--engine", "sglang==9.9.9", "--target-config", KIMI, "--ids", "2,30,58", env=env)
    )
    doc = _one_line(cli("doctor", "--draft", DRAFT, "--target-config", KIMI, "--engine", "sglang==9.9.9", env=env))
    for err in (cap, doc):
        assert "sglang==9.9.9 was not read" in err and "nearest is sglang==0.5.23" in err
        assert "eagle-workbench engine read sglang==9.9.9" in err
    # asked to read it: the index has no such release (or none is reachable): still exit 2, one line
    read = _one_line(cli("engine", "read", "sglang==9.9.9", env=env, timeout=300))
    assert "9.9.9" in read


def test_bad_specs_and_files_are_one_line(cli, tmp_path):
    for spec in ("tgi==1.0", "sglang==banana", "vllm=="):
        err = _one_line(cli("engine", "capture", "--engine", spec, "--target-config", KIMI))
        assert "engine" in err
    fake = tmp_path / "sglang-0.5.99-py3-none-any.whl"
    fake.write_text("not a zip")
    assert "not a wheel" in _one_line(cli("engine", "read", str(fake), env={"EAGLE_WB_CACHE": str(tmp_path)}))
    assert "neither" in _one_line(cli("engine", "read", "nonsense"))


def test_engine_rules_and_capture_for_vllm(cli):
    r = cli("engine", "capture", "--engine", "vllm==0.33.0", "--target-config", KIMI, "--ids", "2,30,58", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["engine"] == "vllm==0.33.0" and d["source"] == "table"
    assert d["points"] == ["out(1)", "out(29)", "out(57)"] and any("deepseek_v2.py" in e for e in d["evidence"])
    r = cli("engine", "rules", "--engine", "vllm==0.9.2")
    assert r.returncode == 0 and "config-ids ignored" in r.stdout and "Eagle3LlamaForCausalLM" in r.stdout
