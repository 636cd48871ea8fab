"""Launch inputs: seconds that are finite and in range (profiles and flags), ``--flag=-value`` kept in
one piece, a NUL byte refused before anything is recorded."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from tests.fixtures.toml_files import write_toml
from workbench.errors import InputError
from workbench.servers.profiles import load_profile
from workbench.sglang.command import build

STANDIN = Path(__file__).with_name("standin_server.py")


@pytest.mark.parametrize(
    "key, value",
    [
        ("stop_grace", math.inf),
        ("stop_grace", math.nan),
        ("stop_grace", -1),
        ("stop_grace", 1e400),
        ("ready_timeout", math.nan),
        ("ready_timeout", math.inf),
        ("ready_timeout", 0),
        ("ready_timeout", -5),
        ("stop_grace", True),
        ("ready_timeout", "60"),
        ("stop_grace", 10**40),
    ],
)
def test_profile_seconds_must_be_finite_and_in_range(key, value):
    with pytest.raises(InputError) as err:
        load_profile({"a": {"model": "/m", key: value}}, "a")
    msg = str(err.value)
    assert "\n" not in msg and f"[profiles.a].{key}" in msg and "expected" in msg


def test_profile_seconds_in_range_are_kept():
    p = load_profile({"a": {"model": "/m", "stop_grace": 0, "ready_timeout": 90.5}}, "a")
    assert p.stop_grace == 0 and p.ready_timeout == 90.5


def test_profile_seconds_from_toml(workspace):
    """``stop_grace = inf`` and ``ready_timeout = nan`` are valid TOML: the workspace refuses them, in one
    line naming the profile and the key, when workbench.toml is read (or the profile itself, if it is not)."""
    from workbench.api import Workbench

    for name, key, value in (("a", "stop_grace", "inf"), ("b", "ready_timeout", "nan")):
        (workspace / "workbench.toml").write_text(f'[profiles.{name}]\nmodel = "/m"\n{key} = {value}\n')
        with pytest.raises(InputError, match=rf"profiles\.{name}\]?\.{key}.*not finite") as err:
            with Workbench.open(workspace) as wb:
                wb.profile(name)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("arg", ["--json-model-override-args=-x", "--x=-1", "--chat-template=--weird", "--a=b=c"])
def test_flag_equals_value_stays_one_argument(arg):
    p = load_profile({"a": {"model": "/m", "args": ["--tp-size", "2", arg, "--trust-remote-code"]}}, "a")
    argv = build(p, None, "py").argv
    assert arg in argv and argv[argv.index(arg) + 1] == "--trust-remote-code"
    child = load_profile({"a": {"model": "/m", "args": [arg]}, "b": {"extends": "a", "args": ["--tp-size", "2"]}}, "b")
    assert child.args == [arg, "--tp-size", "2"]


def test_flag_equals_value_is_parsed_by_sglang_as_one_value():
    """SGLang's own parser (through the host probe): ``--x=-v`` gives the value ``-v``; split in two
    the same value is refused."""
    from workbench.hosts.local import LocalHost
    from workbench.servers import host_scripts
    from workbench.sglang.probe import PROBE

    def probe(args):
        r = (
            LocalHost()
            .python_run(PROBE, [host_scripts.as_arg({"argv": args, "keys": ["served_model_name"]})], timeout=120)
            .check()
        )
        return json.loads(r.out)

    p = load_profile({"a": {"model": "/m", "args": ["--served-model-name=-dash"]}}, "a")
    argv = build(p, None, "py").argv[3:]
    got = probe(argv)
    assert got["ok"] and got["args"]["served_model_name"] == "-dash", got
    assert not probe(["--model-path", "/m", "--served-model-name", "-dash"])["ok"]


@pytest.mark.parametrize("where", ["args", "env", "log", "run_dir"])
def test_a_nul_byte_in_a_local_launch_arg_is_refused_and_nothing_is_left_launching(workspace, where):
    from workbench.api import Workbench

    table = {
        "host": "local",
        "launcher": [sys.executable, str(STANDIN)],
        "model": str(workspace / "m"),
        "port": 1,
        "log": str(workspace / "logs" / "nul.log"),
        "sglang_version": "0.5.23",
    }
    table.update(
        {
            "args": {"args": ["--served-model-name", "a\0b"]},
            "env": {"env": {"X": "a\0b"}},
            "log": {"log": str(workspace / "logs" / "n\0ul.log")},
            "run_dir": {"run_dir": str(workspace) + "/\0"},
        }[where]
    )
    write_toml(workspace / "workbench.toml", {"profiles": {"nul": table}})
    (workspace / "m").mkdir()  # the model folder is there: the NUL byte is the only fault
    with Workbench.open(workspace) as wb:
        with pytest.raises(InputError, match="NUL byte"):
            wb.lifecycle.launcher.preview("nul")  # refused before the host's parser is asked
        with pytest.raises(InputError, match="NUL byte"):
            wb.lifecycle.launcher.launch("nul")
        assert [r.state for r in wb.servers()] == []
        assert not (workspace / "logs").exists()


@pytest.mark.ssh
@pytest.mark.parametrize("grace", ["inf", "nan", "-3"])
def test_cli_stop_refuses_grace_that_never_ends(cli, ssh_workspace, grace):
    r = cli("server", "launch", "standin", "--yes", "--wait", "--json", timeout=180)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["id"]
    try:
        r = cli("server", "stop", str(sid), "--yes", f"--grace={grace}", "--gpu-wait", "0", timeout=60)
        assert r.returncode == 2 and "grace" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        st = json.loads(cli("server", "status", "--json").stdout)
        assert [s["process"] for s in st if s["id"] == sid] == ["running"]
    finally:
        assert cli("server", "stop", str(sid), "--yes", "--grace", "2", "--gpu-wait", "0").returncode == 0


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_cli_launch_refuses_a_wait_that_never_ends_before_launching(cli, workspace, value):
    write_toml(
        workspace / "workbench.toml",
        {
            "profiles": {
                "p": {
                    "host": "local",
                    "launcher": [sys.executable, str(STANDIN)],
                    "model": str(workspace / "m"),
                    "log": str(workspace / "logs" / "p.log"),
                    "sglang_version": "0.5.23",
                }
            }
        },
    )
    r = cli("server", "launch", "p", "--yes", "--wait", f"--timeout={value}")
    assert r.returncode == 2 and "--timeout" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (workspace / "logs").exists()
