"""Servers across nodes, before anything starts: each rank's command with the engine's own rank flags,
and the refusals (one line, exit 2) of what the engine would accept and then hang on, of rank flags
by hand that contradict the profile, and of bad hosts and node counts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.fixtures.toml_files import write_toml
from workbench.errors import InputError
from workbench.servers import ranks
from workbench.servers.engines import engine


def _ws(workspace, profiles, hosts=None):
    hosts = hosts or {
        "n1": {"address": "10.1.0.1", "python": "/usr/bin/python3"},
        "n2": {"address": "10.1.0.2", "python": "/usr/bin/python3"},
        "n3": {"address": "10.1.0.3"},
        "lo": {"address": "127.0.0.1", "port": 2222},
        "lo2": {"address": "127.0.0.1", "port": 2223},
        "cluster": {"kind": "slurm", "address": "local", "partition": "gpu", "env": {"SLURM_CONF": "/x"}},
    }
    write_toml(workspace / "workbench.toml", {"hosts": hosts, "profiles": profiles})
    from workbench.api import Workbench

    return Workbench.open(workspace)


BASE = {"model": "/m", "port": 30000, "args": ["--host", "0.0.0.0", "--tp-size", "2"]}


def test_sglang_ranks_get_nnodes_node_rank_and_rank0s_address(workspace):
    with _ws(workspace, {"two": {**BASE, "hosts": ["n1", "n2"]}}) as wb:
        cmd = wb.profile_command("two", "0.5.23")
    assert [r["rank"] for r in cmd.ranks] == [0, 1] and [r["host"] for r in cmd.ranks] == ["n1", "n2"]
    for r in cmd.ranks:
        argv = r["argv"]
        tail = argv[argv.index("--nnodes") :]
        assert tail == ["--nnodes", "2", "--node-rank", str(r["rank"]), "--dist-init-addr", "10.1.0.1:{port}"]
        assert [argv[i] for i in r["subst"]] == ["10.1.0.1:{port}"]
    assert cmd.argv == cmd.ranks[0]["argv"] and "rank 1 on n2:" in cmd.display
    # the port is the one placeholder left: filled in on rank 0's node at launch
    assert ranks.fill(cmd.ranks[1]["argv"], cmd.ranks[1]["subst"], None, 4242)[-1] == "10.1.0.1:4242"


def test_vllm_ranks_workers_headless_through_vllm_serve(workspace):
    prof = {"model": "/m", "engine": "vllm", "port": 8000, "args": ["--tensor-parallel-size", "2"]}
    with _ws(workspace, {"v": {**prof, "hosts": ["n1", "n2"]}}) as wb:
        cmd = wb.profile_command("v", "0.32.0")
    r0, r1 = cmd.ranks
    assert r0["argv"][1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert r1["argv"][1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]
    flags0 = r0["argv"][r0["argv"].index("--nnodes") :]
    assert flags0 == [
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--master-addr",
        "10.1.0.1",
        "--master-port",
        "{port}",
        "--distributed-executor-backend",
        "mp",
    ]
    assert r1["argv"][-1] == "--headless" and "--headless" not in r0["argv"]


def test_a_rendezvous_given_by_hand_is_kept(workspace):
    prof = {**BASE, "hosts": ["n1", "n2"], "args": [*BASE["args"], "--dist-init-addr", "192.168.7.1:5000"]}
    with _ws(workspace, {"p": prof}) as wb:
        cmd = wb.profile_command("p", "0.5.23")
    for r in cmd.ranks:
        assert r["argv"].count("--dist-init-addr") == 1 and "192.168.7.1:5000" in r["argv"] and r["subst"] == []


def test_a_slurm_profile_leaves_rank0s_address_to_the_job(workspace):
    with _ws(workspace, {"s": {**BASE, "host": "cluster", "nodes": 2}}) as wb:
        cmd = wb.profile_command("s", "0.5.23")
    assert [r["host"] for r in cmd.ranks] == [None, None]
    assert cmd.ranks[1]["argv"][-1] == "{rank0}:{port}"


@pytest.mark.parametrize(
    "profile, needle",
    [
        ({"hosts": ["n1", "nope"]}, "[profiles.p].hosts: no host 'nope'"),
        ({"hosts": ["n1", "n1"]}, "[profiles.p].hosts: 'n1' is listed twice"),
        ({"hosts": []}, "[profiles.p].hosts: expected host names"),
        ({"hosts": ["n1", "cluster"]}, "'cluster' is a SLURM host"),
        ({"host": "n1", "nodes": 2}, "[profiles.p].nodes: host 'n1' is not a SLURM host"),
        ({"host": "cluster", "nodes": 0}, "[profiles.p].nodes: expected a node count of at least 1"),
        ({"host": "cluster", "nodes": True}, "[profiles.p].nodes: expected a node count"),
        ({"hosts": ["n1", "n2"], "host": "n1"}, "host and hosts both given"),
        ({"hosts": ["n1", "n2"], "args": ["--tp-size", "3"]}, "tp_size 3 x pp_size 1 does not divide over 2 nodes"),
        ({"hosts": ["n1", "n2"], "args": ["--tp-size", "2", "--node-rank", "1"]}, "--node-rank is set for each node"),
        ({"hosts": ["n1", "n2"], "args": ["--tp-size", "2", "--nnodes", "3"]}, "--nnodes 3 contradicts the profile"),
        ({"host": "n1", "args": ["--nnodes", "2"]}, "--nnodes 2 contradicts the profile, which runs on 1 node"),
        ({"hosts": ["n1", "n2"], "args": ["--tp-size", "2", "--dp-size", "2"]}, "multi-node data-parallel"),
        ({"hosts": ["lo", "n2"], "args": ["--tp-size", "2"]}, "whose address on the other nodes' network"),
        ({"hosts": ["n1", "n2"], "args": ["--tp-size", "2", "--dist-init-addr", "10.0.0.1"]}, "ADDRESS:PORT"),
        ({"hosts": ["n1", "n2"], "args": ["--tp-size", "two"]}, "--tp-size 'two' is not an integer"),
    ],
)
def test_bad_placements_are_one_line_input_errors(workspace, profile, needle):
    prof = {"model": "/m", "port": 30000, "args": ["--tp-size", "2"], **profile}
    with _ws(workspace, {"p": prof}) as wb, pytest.raises(InputError) as err:
        wb.profile_command("p", "0.5.23")
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--tensor-parallel-size", "3"], "world size 3"),
        (["--tensor-parallel-size", "2", "--headless"], "--headless is set by the workbench on ranks >= 1"),
        (
            ["--tensor-parallel-size", "2", "--distributed-executor-backend", "ray"],
            "runs with --distributed-executor-backend mp",
        ),
        (["--tensor-parallel-size", "2", "-r", "0"], "-r is set for each node"),
        (["--tensor-parallel-size", "2", "--data-parallel-backend", "ray"], "needs the mp backend"),
        (["-tp", "2", "-pp", "x"], "-pp 'x' is not an integer"),
        (["-tp", "3"], "world size 3"),
    ],
)
def test_vllm_refusals(workspace, args, needle):
    prof = {"model": "/m", "engine": "vllm", "hosts": ["n1", "n2"], "args": args}
    with _ws(workspace, {"v": prof}) as wb, pytest.raises(InputError) as err:
        wb.profile_command("v", "0.32.0")
    assert needle in str(err.value)


def test_loopback_hosts_of_one_machine_meet_on_loopback(workspace):
    with _ws(workspace, {"p": {**BASE, "hosts": ["lo", "lo2"]}}) as wb:
        cmd = wb.profile_command("p", "0.5.23")
    assert cmd.ranks[1]["argv"][-1] == "127.0.0.1:{port}"


def test_a_child_profile_places_itself(workspace):
    profiles = {"one": {**BASE, "host": "n1"}, "two": {"extends": "one", "hosts": ["n2", "n3"]}}
    with _ws(workspace, profiles) as wb:
        assert wb.profile("two").hosts == ["n2", "n3"] and wb.profile("two").host == "n2"
        assert wb.profile("one").node_count == 1 and wb.profile("two").node_count == 2


@pytest.mark.parametrize(
    "table, needle",
    [
        ({"kind": "slurm"}, ".address: expected the login node"),
        ({"kind": "slurm", "address": "local", "partition": 3}, ".partition: expected a partition name"),
        ({"kind": "slurm", "address": "local", "sbatch_args": "--x"}, ".sbatch_args: expected a list"),
        ({"kind": "slurm", "address": "local", "env": {"A": 1}}, ".env: expected a table"),
        ({"kind": "ssh", "address": "x", "partition": "gpu"}, "unknown key 'partition'"),
        ({"kind": "cluster", "address": "x"}, ".kind: expected one of"),
    ],
)
def test_slurm_host_tables_are_checked(workspace, table, needle):
    with _ws(workspace, {"p": {**BASE, "host": "c"}}, hosts={"c": table}) as wb, pytest.raises(InputError) as err:
        wb.profile("p")
    assert needle in str(err.value)


def test_the_cli_refuses_in_one_line_with_exit_2(workspace):
    _ws(workspace, {"p": {**BASE, "hosts": ["n1", "n1"]}}).close()
    r = subprocess.run(
        [sys.executable, "-m", "workbench", "--workspace", str(workspace), "server", "launch", "p", "--yes"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "listed twice" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_rank_flags_are_the_engines_own_flags():
    """Every rank flag the workbench writes is one the engine's own parser defines (SGLang's parser is
    installed here; vLLM's flags are read from its arguments' source where it is not)."""
    from workbench.sglang.probe import PROBE

    rf = engine("sglang").rank_flags()
    argv = ["--model-path", "/m", "--tp-size", "2", rf.nnodes[0], "2", rf.node_rank[0], "1", rf.addr[0], "10.0.0.1:5"]
    r = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps({"argv": argv, "keys": ["nnodes", "node_rank", "dist_init_addr"]})],
        capture_output=True,
        text=True,
    )
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["ok"], got
    assert got["args"] == {"nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.1:5"}
