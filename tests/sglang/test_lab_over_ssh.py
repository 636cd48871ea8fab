"""The whole lifecycle against the lab server (workbench.lab.serve) over the real sshd.

Runs when the lab server and its ``lab_world`` fixture are present; until then it is skipped and
the stand-in server covers the same paths."""

from __future__ import annotations

import importlib.util
import socket
import sys

import pytest

from tests.conftest import ROOT
from tests.fixtures.teardown import stop_active_servers
from tests.fixtures.toml_files import write_toml
from workbench.lab.process import free_port

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab_wb(request, sshd, tmp_path_factory):
    if importlib.util.find_spec("workbench.lab.serve") is None:
        pytest.skip("the lab server (workbench.lab.serve) is not in this checkout")
    try:
        world = request.getfixturevalue("lab_world")
    except pytest.FixtureLookupError:
        pytest.skip("the lab_world fixture is not in this checkout")
    from workbench.api import Workbench

    root = tmp_path_factory.mktemp("lab-servers")
    sshd.write_known_hosts()
    if sshd.proc is None:
        sshd.start()
    base = {
        "host": "test",
        "launcher": [sys.executable, "-m", "workbench.lab.serve"],
        "model": str(world["target"]),
        "draft": str(world["draft"]),
        "port": free_port(),
        "log": str(root / "lab.log"),
        "args": ["--host", "127.0.0.1"],
        "env": {"PYTHONPATH": str(ROOT)},
        "speculative": {"algorithm": "EAGLE3", "eagle_topk": 1, "num_draft_tokens": 4, "num_steps": 3},
        "ready_timeout": 300,
        "stop_grace": 10,
    }
    profiles = {"lab": base}
    # the busy-port case's port is held by a listener from the moment it is chosen: a port chosen
    # free and bound again later can meanwhile be any process's ephemeral port
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    for fail in ("oom", "port", "draft-context", "cuda-graph"):
        port = holder.getsockname()[1] if fail == "port" else free_port()
        profiles[f"lab-{fail}"] = {
            "extends": "lab",
            "env": {"LAB_FAIL": fail},
            "port": port,
            "log": str(root / f"lab-{fail}.log"),
        }
    write_toml(root / "workbench.toml", {"hosts": {"test": sshd.host_table()}, "profiles": profiles})
    wb = Workbench.open(root)
    try:
        yield wb
    finally:
        holder.close()
        stop_active_servers(wb, grace=2)
        wb.close()


def test_lab_launch_ready_measure_stop(lab_wb):
    wb = lab_wb
    rec = wb.launch("lab", confirm=True)
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    assert st.state == "ready", st
    assert {"weights_target", "weights_draft", "ready"} <= set(st.progress)
    m = wb.server_measure(rec.id, concurrency=2, max_new_tokens=16)
    assert m.accept_len["mean"] and m.accept_len["mean"] >= 1.0
    met = wb.server_metrics(rec.id)
    assert met["server_info"]["steps"] == 3
    assert wb.server_stop(rec.id, confirm=True, gpu_wait=5).result == "stopped"


@pytest.mark.parametrize(
    "fail, cls",
    [("oom", "oom"), ("port", "port-in-use"), ("draft-context", "draft-context"), ("cuda-graph", "cuda-graph")],
)
def test_lab_failures_are_classified(lab_wb, fail, cls):
    wb = lab_wb  # (lab-port's port is held by the fixture's listener)
    rec = wb.launch(f"lab-{fail}", confirm=True)
    st = wb.server_wait(rec.id, timeout=300, poll=0.5)
    assert st.state == "failed" and st.failure["class"] == cls, st
