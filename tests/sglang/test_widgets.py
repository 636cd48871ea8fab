"""Notebook widgets for servers, driven the way a notebook user clicks them (local host)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.fixtures.toml_files import write_toml
from tests.sglang.conftest import STANDIN
from workbench.lab.process import free_port


@pytest.fixture
def local_wb(workspace, tmp_path):
    from workbench.api import Workbench

    draft = tmp_path / "draft"
    draft.mkdir()
    (tmp_path / "target").mkdir()  # the pre-launch checks look for the model folder
    (draft / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    write_toml(
        workspace / "workbench.toml",
        {
            "profiles": {
                "demo": {
                    "host": "local",
                    "launcher": [sys.executable, str(STANDIN)],
                    "model": str(tmp_path / "target"),
                    "draft": str(draft),
                    "port": free_port(),
                    "log": str(tmp_path / "demo.log"),
                    "args": ["--host", "127.0.0.1"],
                    "speculative": {"algorithm": "EAGLE3", "eagle_topk": 1, "num_draft_tokens": 4, "num_steps": 3},
                    "stop_grace": 5,
                }
            }
        },
    )
    with Workbench.open(workspace) as wb:
        yield wb
        for r in wb.servers(active=True):
            wb.server_stop(r.id, confirm=True, grace=1, gpu_wait=0)


def test_launch_servers_logs_widgets(local_wb):
    from workbench.notebook import LaunchWidget, LogsWidget, ServersWidget

    wb = local_wb
    lw = LaunchWidget(wb, profile="demo")
    assert "parser-ok" in lw.view.value and "--speculative-num-steps 3" in lw.view.value
    lw.launch_button.click()  # arm: shows the plan
    assert lw.launch_button.armed and "start demo on local" in lw.launch_button.plan_view.value
    rec = lw.launch_button.click()  # confirm: launches
    assert rec is not None and "started" in lw.result.value
    assert wb.server_wait(rec.id, timeout=60, poll=0.2).state == "ready"

    sw = ServersWidget(wb)
    assert "ready" in sw.table.value and "demo" in sw.table.value
    logs = LogsWidget(wb, rec.id)
    assert "fired up" in logs.log_view.value and "#06c" in logs.log_view.value  # the ready milestone is marked
    sw.select.value = rec.id
    sw.stop_button.click()
    assert sw.stop_button.armed and "SIGTERM" in sw.stop_button.plan_view.value
    res = sw.stop_button.click()
    assert res.result == "stopped" and wb.server(rec.id).state == "stopped"
    assert "no servers" in sw.table.value


def test_launch_widget_shows_problems_and_refuses(local_wb, workspace):
    import tomllib

    from workbench.notebook import LaunchWidget

    data = tomllib.loads((workspace / "workbench.toml").read_text())
    data["profiles"]["bad"] = {"extends": "demo", "speculative": {"num_draft_tokens": 9}}
    write_toml(workspace / "workbench.toml", data)
    local_wb.workspace.reload()
    lw = LaunchWidget(local_wb, profile="bad")
    assert "spec-chain-tokens" in lw.view.value
    lw.launch_button.click()
    assert not lw.launch_button.armed and "fix the errors" in lw.error_line.value
    assert not local_wb.servers()
