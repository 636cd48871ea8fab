"""Profiles with extends, version-aware commands, the workbench's rules, `profile show`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench.errors import InputError
from workbench.servers.command import diff_argv
from workbench.servers.profiles import load_profile
from workbench.sglang.command import build
from workbench.sglang.validate import rule_findings
from workbench.workspace import load_settings

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_configs" / "workbench.toml"

STORY_DEBUG = (
    "EAGLE3_DEBUG=1 SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 ~/ml-env/bin/python3 -m sglang.launch_server "
    "--model-path /shared/kimi-k2.5-int4 --trust-remote-code --tp-size 8 --mem-fraction-static 0.88 "
    "--host 0.0.0.0 --port 8000 --num-continuous-decode-steps 4 --disable-custom-all-reduce "
    "--disable-cuda-graph --speculative-algorithm EAGLE3 --speculative-draft-model-path "
    "/data/eagle3/output_100k_sglang/4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 6 "
    "--speculative-num-steps 5 > /data/eagle3/synth_100k/logs/sglang_eagle3_correct_config.log 2>&1"
)
STORY_PROD = (
    STORY_DEBUG.replace("EAGLE3_DEBUG=1 ", "")
    .replace("--disable-cuda-graph ", "")
    .replace("sglang_eagle3_correct_config.log", "sglang_eagle3_prod.log")
)


@pytest.fixture(scope="module")
def profiles():
    return load_settings(SAMPLE)["profiles"]


def test_story_commands_render_exactly(profiles):
    assert build(load_profile(profiles, "kimi-debug"), "0.5.5", "~/ml-env/bin/python3").display == STORY_DEBUG
    prod = build(load_profile(profiles, "kimi-prod"), "0.5.12.post1", "~/ml-env/bin/python3")
    assert prod.display == STORY_PROD and prod.warnings == []


def test_0523_spellings_with_warnings(profiles):
    cmd = build(load_profile(profiles, "kimi-debug"), "0.5.23", "py")
    assert "--disable-cuda-graph" not in cmd.argv
    i = cmd.argv.index("--cuda-graph-backend-decode")
    assert cmd.argv[i : i + 4] == [
        "--cuda-graph-backend-decode",
        "disabled",
        "--cuda-graph-backend-prefill",
        "disabled",
    ]
    assert "--num-continuous-decode-steps" in cmd.argv  # still accepted, but said to be ignored
    assert any("deprecates --disable-cuda-graph" in w for w in cmd.warnings)
    assert any("ignored" in w for w in cmd.warnings)
    llama = build(load_profile(profiles, "llama8b-prod"), "0.5.23", "py")
    assert "--cuda-graph-max-bs-decode" in llama.argv and "--cuda-graph-max-bs" not in llama.argv
    old = build(load_profile(profiles, "llama8b-prod"), "0.5.5", "py")
    assert "--cuda-graph-max-bs" in old.argv and not old.warnings


def test_unknown_version_keeps_spelling_and_warns_about_0523(profiles):
    cmd = build(load_profile(profiles, "kimi-debug"), None, "~/ml-env/bin/python3")
    assert cmd.display == STORY_DEBUG
    assert len(cmd.warnings) == 2 and all(w.startswith("on 0.5.23") for w in cmd.warnings)


def test_new_spellings_go_back_for_old_versions():
    p = load_profile(
        {
            "x": {
                "model": "/m",
                "args": [
                    "--cuda-graph-backend-decode",
                    "disabled",
                    "--cuda-graph-backend-prefill",
                    "disabled",
                    "--cuda-graph-max-bs-decode",
                    "16",
                ],
            }
        },
        "x",
    )
    cmd = build(p, "0.5.5", "py")
    assert cmd.argv.count("--disable-cuda-graph") == 1 and "--cuda-graph-max-bs" in cmd.argv
    with pytest.raises(InputError, match="only SGLang 0.5.23"):
        build(
            load_profile({"x": {"model": "/m", "args": ["--cuda-graph-backend-decode", "breakable"]}}, "x"),
            "0.5.5",
            "py",
        )


def test_extends_merges_env_args_and_remove(profiles):
    dbg = load_profile(profiles, "llama8b-debug")
    assert dbg.chain == ["llama8b-debug", "llama8b-prod"]
    assert "--cuda-graph-max-bs" not in dbg.args and dbg.args[-1] == "--disable-cuda-graph"
    assert dbg.speculative == {"algorithm": "EAGLE3", "eagle_topk": 4, "num_draft_tokens": 8, "num_steps": 5}
    kimi = load_profile(profiles, "kimi-debug")
    assert list(kimi.env) == ["EAGLE3_DEBUG", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"]
    child = load_profile(
        {"a": {"model": "/m", "args": ["--tp-size", "8", "--x"]}, "b": {"extends": "a", "args": ["--tp-size", "4"]}},
        "b",
    )
    assert child.args == ["--tp-size", "4", "--x"]


@pytest.mark.parametrize(
    "tables, msg",
    [
        ({"a": {"extends": "b", "model": "/m"}, "b": {"extends": "a"}}, "cycle"),
        ({"a": {"extends": "nope", "model": "/m"}}, "no profile 'nope'"),
        ({"a": {"model": "/m", "port": "80"}}, "port: expected a port number"),
        ({"a": {"model": "/m", "speculative": {"steps": 3}}}, "speculative.steps: unknown key"),
        ({"a": {"model": "/m", "speculative": {"num_steps": 0}}}, "positive integer"),
        ({"a": {"model": "/m", "args": "--tp 8"}}, "list of strings"),
        ({"a": {"model": "/m", "colour": "red"}}, "unknown key 'colour'"),
        ({"a": {"model": "/m", "draft_config_version": 3}}, "draft_config_version: not a profile key"),
        ({"a": {"host": "x"}}, "model: expected"),
    ],
)
def test_bad_profiles_are_one_line_errors(tables, msg):
    with pytest.raises(InputError, match=msg) as err:
        load_profile(tables, "a")
    assert ("\n" not in str(err.value) and "[profiles." in str(err.value)) or "workbench.toml" in str(err.value)


def test_port_and_spec_flags_belong_to_profile_fields():
    with pytest.raises(InputError, match="--port is set by the profile's port"):
        build(load_profile({"a": {"model": "/m", "args": ["--port", "1"]}}, "a"), None, "py")
    with pytest.raises(InputError, match="belongs in"):
        build(load_profile({"a": {"model": "/m", "args": ["--speculative-num-steps", "3"]}}, "a"), None, "py")


def _codes(spec, draft="/d", cfg=None):
    p = load_profile(
        {"a": {"model": "/m", "draft": draft, "speculative": spec}}
        if draft
        else {"a": {"model": "/m", "speculative": spec}},
        "a",
    )
    return [f.code for f in rule_findings(p, build(p, None, "py"), cfg) if f.severity == "error"]


def test_workbench_rules():
    assert _codes({"algorithm": "EAGLE3", "num_steps": 5, "eagle_topk": 1, "num_draft_tokens": 6}) == []
    assert _codes({"algorithm": "EAGLE3", "num_steps": 5}) == ["spec-partial"]
    assert _codes({"algorithm": "EAGLE3", "num_steps": 5, "eagle_topk": 1, "num_draft_tokens": 4}) == [
        "spec-chain-tokens"
    ]
    assert _codes({"algorithm": "EAGLE3", "num_steps": 2, "eagle_topk": 2, "num_draft_tokens": 8}) == [
        "spec-tokens-bound"
    ]
    assert _codes({"algorithm": "EAGLE3", "num_steps": 2, "eagle_topk": 2, "num_draft_tokens": 5}) == []
    assert _codes({"algorithm": "EAGLE3"}, draft=None) == ["spec-no-draft"]
    eagle3 = {"architectures": ["LlamaForCausalLMEagle3"]}
    assert _codes({"algorithm": "EAGLE"}, cfg=eagle3) == ["spec-eagle3-under-eagle"]


def test_diff_against_last_launch(profiles):
    prod = build(load_profile(profiles, "kimi-prod"), "0.5.5", "py").argv
    dbg = build(load_profile(profiles, "kimi-debug"), "0.5.5", "py").argv
    assert diff_argv(prod, dbg) == ["+ --disable-cuda-graph"]
    assert diff_argv(None, dbg) == ["(first launch of this profile)"]
    assert diff_argv(dbg, prod) == ["- --disable-cuda-graph"]


def test_cli_profile_show_offline(cli, workspace):
    shutil.copy(SAMPLE, workspace / "workbench.toml")
    r = cli("profile", "show", "kimi-debug", "--sglang-version", "0.5.23", "--argv", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"argv", "env", "warnings"}
    assert data["env"] == {"EAGLE3_DEBUG": "1", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    assert "--cuda-graph-backend-decode" in data["argv"] and len(data["warnings"]) == 2
    r = cli("profile", "show", "kimi-debug", "--offline", "--argv")
    assert r.returncode == 0 and r.stdout.splitlines()[0] == STORY_DEBUG
    bad = cli("profile", "show", "kimi-debug", "--sglang-version", "five")
    assert bad.returncode == 2 and "sglang version 'five'" in bad.stderr
    missing = cli("profile", "show", "nope")
    assert missing.returncode == 2 and "no profile 'nope'" in missing.stderr
    lst = cli("profile", "list", "--json")
    assert {p["name"] for p in json.loads(lst.stdout)} >= {"kimi-prod", "kimi-debug", "llama8b-prod", "lab"}
