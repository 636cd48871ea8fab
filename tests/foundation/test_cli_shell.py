"""The CLI dispatcher: fast help, one-line usage errors, quiet when its reader goes away."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_help_lists_commands(cli):
    r = cli("--help")
    assert r.returncode == 0 and "predict" in r.stdout and "demo" in r.stdout


def test_usage_errors_are_one_line(cli):
    r = cli("no-such-command")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "invalid choice" in r.stderr


def test_closed_pipe_is_not_a_traceback(workspace):
    args = [
        sys.executable,
        "-m",
        "workbench",
        "predict",
        "sweep",
        "--acc",
        "0.75",
        "--topk-hits",
        "0.75,0.85,0.9",
        "--verify-ms",
        "2:20,200:90",
        "--draft-ms",
        "1",
        "--steps",
        "1..30",
        "--json",
    ]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and proc.returncode == 141  # the output is far larger than a pipe buffer


def test_global_options_work_after_the_subcommand_too(cli, tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    r1 = cli("--workspace", str(before), "--json", "timeline")
    r2 = cli("timeline", "--workspace", str(after), "--json")
    assert r1.returncode == 0 and r2.returncode == 0, (r1.stderr, r2.stderr)
    import json

    assert json.loads(r1.stdout) == json.loads(r2.stdout)
    assert (before / "journal.sqlite").exists() or any(before.iterdir())
    assert any(after.iterdir())
    # nested groups too, and a value before the subcommand is not lost
    r3 = cli("--workspace", str(after), "config", "list", "--json")
    r4 = cli("config", "list", "--workspace", str(after), "--json")
    assert r3.returncode == r4.returncode == 0 and r3.stdout == r4.stdout


# Runs of every kind: global options before and after the command, nested groups, values that look
# like flags, usage errors (each parser's own), help at each level, a group without its subcommand.
RUNS = [
    ["predict", "--acc", "0.7", "--steps", "3"],
    ["--json", "predict", "sweep", "--acc", "0.75"],
    ["--workspace", "/w", "--json", "timeline"],
    ["timeline", "--workspace", "/w", "--json"],
    ["--workspace=/w", "config", "list", "--json"],
    ["config", "set", "f.json", "a.b=1", "--workspace", "/w"],
    ["config", "revert", "f.json"],
    ["drafter", "check", "--draft", "d"],
    ["drafter", "eval", "--draft"],
    ["drafter", "check", "--draft", "d", "--depth", "2"],
    ["server", "stop", "3", "--grace", "2.5"],
    ["server", "stop", "x"],
    ["server", "launch", "p", "--yes", "--wait", "--timeout=5"],
    ["doctor", "--draft", "d", "--json"],
    ["logs", "parse", "x.log", "--json"],
    ["lab", "serve", "--port", "1"],
    ["drafter"],
    ["drafter", "--help"],
    ["config", "set", "--help"],
    ["--json"],
    ["--workspace", "/w"],
    ["--workspace"],
    ["--help"],
    ["-h", "doctor"],
    ["--version"],
    ["no-such-command"],
    ["--", "doctor"],
    ["--jso", "doctor"],
    ["doctor", "--help", "--x"],
]


@pytest.mark.parametrize("argv", RUNS, ids=" ".join)
def test_a_run_parses_as_with_every_command_registered(argv, capsys):
    """``build_parser(argv)`` registers only the command the run names: what the run parses to, or
    the error and the help it prints, is what the whole command line gives."""
    from workbench.cli import build_parser

    def parse(parser):
        try:
            return vars(parser.parse_args(argv)), None, capsys.readouterr()
        except SystemExit as exc:
            return None, exc.code, capsys.readouterr()

    assert parse(build_parser(argv)) == parse(build_parser())


def test_a_run_builds_only_the_command_it_names():
    import argparse

    from workbench.cli import build_parser, command_modules

    def commands(argv):
        (sub,) = [a for a in build_parser(argv)._actions if isinstance(a, argparse._SubParsersAction)]
        return list(sub.choices)

    every = [m[len("cmd_") :] for m in command_modules()]
    assert commands(["--workspace", "/w", "--json", "drafter", "check", "--help"]) == ["drafter"]
    assert commands(["--workspace=/w", "config", "list"]) == ["config"]
    for argv in (None, [], ["--help", "doctor"], ["--version"], ["nope"], ["--", "doctor"]):
        assert sorted(commands(argv)) == sorted(every), argv


def test_a_malformed_per_token_pair_is_refused_before_any_capture_is_read(cli, tmp_path):
    r = cli("align", "--train", str(tmp_path / "nope.ckpt"), "--infer", str(tmp_path / "nope"), "--per-token", "zz")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "SLOT:CANDIDATE" in r.stderr, r.stderr


def test_every_argument_has_help():
    import argparse

    from workbench.cli import build_parser, leaf_parsers

    parser = build_parser()
    missing = [
        f"{leaf.prog} {a.option_strings or a.dest}"
        for leaf in [parser, *leaf_parsers(parser)]
        for a in leaf._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        and (not a.help or a.help == argparse.SUPPRESS)
    ]
    assert missing == []


def test_progress_printer_names_stage_step_and_time():
    import io

    from workbench.cli.common import ProgressPrinter
    from workbench.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    t = [0.0]
    plain = io.StringIO()
    pp = ProgressPrinter(plain, clock=lambda: t[0])
    for i in range(3):
        pp(Progress("server.measure", i, 3, "round"))  # same message: one line
    pp(Progress("lab.train", 1, 4, "training the drafter"))
    assert plain.getvalue().splitlines() == ["[server.measure 0/3] round", "[lab.train 1/4] training the drafter"]
    tty = Tty()
    pp = ProgressPrinter(tty, clock=lambda: t[0])
    pp(Progress("demo", 1, 4, "launching"))
    t[0] = 42.0
    pp(Progress("demo", 1, 4, "launching"))
    pp.finish()
    assert "[demo 1/4] launching  (42 s)" in tty.getvalue() and tty.getvalue().endswith("\r\x1b[2K")


def test_config_set_refuses_an_unknown_key_with_the_closest_one(cli, tmp_path):
    cfg = tmp_path / "config.json"
    original = '{\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [-1, 2, 30]\n  }\n}\n'
    cfg.write_text(original)
    typo = "eagle_config.eagle_aux_hidden_state_layers_ids=[2,30,58]"
    r = cli("config", "set", str(cfg), typo, "--workspace", str(tmp_path / "ws"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "did you mean 'eagle_config.eagle_aux_hidden_state_layer_ids'" in r.stderr and "--add" in r.stderr
    assert cfg.read_text() == original
    r = cli("config", "set", str(cfg), typo, "--add", "--workspace", str(tmp_path / "ws"))
    assert r.returncode == 0, r.stderr
    assert "eagle_aux_hidden_state_layers_ids" in cfg.read_text()


def test_a_destructive_command_asks_in_a_terminal(tmp_path):
    """Without --yes: in a terminal it asks (and n keeps the file); without one it says how to confirm."""
    import pty

    cfg = tmp_path / "config.json"
    cfg.write_text('{"a": 1}\n')
    ws = str(tmp_path / "ws")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "workbench", "config", "track", str(cfg), "--workspace", ws],
        check=True,
        env=env,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, "-m", "workbench", "config", "set", str(cfg), "a=2", "--workspace", ws],
        check=True,
        env=env,
        capture_output=True,
    )
    argv = [sys.executable, "-m", "workbench", "config", "revert", str(cfg), "--to", "1", "--workspace", ws]
    piped = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert piped.returncode == 2 and "not done without --yes" in piped.stderr
    pid, fd = pty.fork()
    if pid == 0:  # the child: a command in a terminal
        os.execve(sys.executable, argv, env)
    out = b""
    import time

    deadline = time.time() + 60
    while b"[y/N]" not in out and time.time() < deadline:
        out += os.read(fd, 1024)
    os.write(fd, b"n\n")
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert b"revert" in out and b"[y/N]" in out and os.waitstatus_to_exitcode(status) == 1
    assert cfg.read_text() == '{"a": 2}\n'


def test_a_measurement_says_when_it_cannot_be_trusted():
    from workbench.servers.measure import stability

    steady = {"mean": 120.0, "stdev": 6.0, "min": 110.0, "max": 130.0}
    assert stability(12.0, [118.0, 121.0, 120.0], steady) == []
    # the relaunched server measured for about a second while still warming: a fraction of its rate
    warming = stability(1.1, [20.6], {"mean": 20.6, "stdev": 1.0, "min": 19.0, "max": 22.0})
    assert len(warming) == 1 and "timed for 1.1 s" in warming[0]
    rounds = stability(30.0, [20.6, 480.0, 491.0], steady)
    assert any("rounds spread" in w for w in rounds)
    ragged = stability(30.0, [100.0], {"mean": 100.0, "stdev": 80.0, "min": 5.0, "max": 300.0})
    assert any("requests spread" in w for w in ragged)


def test_launch_checks_name_a_missing_model_or_draft_folder(workspace):
    from tests.fixtures.toml_files import write_toml
    from workbench.api import Workbench

    draft = workspace / "draft"
    draft.mkdir()
    (draft / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    spec = {"algorithm": "EAGLE3", "eagle_topk": 1, "num_draft_tokens": 4, "num_steps": 3}
    write_toml(
        workspace / "workbench.toml",
        {
            "profiles": {
                "gone": {
                    "host": "local",
                    "model": str(workspace / "no-such-target"),
                    "draft": str(draft),
                    "sglang_version": "0.5.23",
                    "speculative": spec,
                },
                "hub": {
                    "host": "local",
                    "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "draft": str(workspace / "nodraft"),
                    "sglang_version": "0.5.23",
                    "speculative": spec,
                },
            }
        },
    )
    with Workbench.open(workspace) as wb:
        preview = wb.launch_preview("gone")
        gone = {f.code: f for f in preview.findings}
        assert "model-missing" in gone and "no-such-target" in gone["model-missing"].message
        assert "draft-missing" not in gone and not preview.ok
        hub = {f.code for f in wb.launch_preview("hub").findings}
        assert "model-missing" not in hub and "draft-missing" in hub  # a hub id is not a path
