"""Servers over a real sshd: a workspace whose host is the fixture's sshd and whose profiles
launch the stand-in server (tests/sglang/standin_server.py) with the test venv's python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fixtures.teardown import stop_active_servers
from tests.fixtures.toml_files import write_toml
from workbench.lab.process import free_port

STANDIN = Path(__file__).with_name("standin_server.py")


def standin_profiles(root: Path, sshd, n_fail_ports: int = 0) -> dict:
    draft = root / "draft"
    draft.mkdir(exist_ok=True)
    (root / "target").mkdir(exist_ok=True)  # the pre-launch checks look for the model folder
    (draft / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLMEagle3"],
                "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]},
            }
        )
    )
    base = {
        "host": "test",
        "launcher": [sys.executable, str(STANDIN)],
        "model": str(root / "target"),
        "draft": str(draft),
        "port": free_port(),
        "log": str(root / "logs" / "standin.log"),
        "args": ["--host", "127.0.0.1", "--tp-size", "1"],
        "env": {"STANDIN_GPU_FILE": str(sshd.gpu_file)},
        "speculative": {"algorithm": "EAGLE3", "eagle_topk": 1, "num_draft_tokens": 4, "num_steps": 3},
        "gpus": [0],
        "ready_timeout": 60,
        "stop_grace": 5,
    }
    profiles = {"standin": base}
    for cls in (
        "oom",
        "port",
        "draft-context",
        "cuda-graph",
        "nccl",
        "scheduler-exception",
        "warmup-failed",
        "crash",
        "crash-after-ready",
    ):
        profiles[f"fail-{cls}"] = {
            "extends": "standin",
            "env": {"STANDIN_FAIL": cls},
            "log": str(root / "logs" / f"{cls}.log"),
            "port": free_port(),
        }
    profiles["hang-scheduler-exception"] = {
        "extends": "standin",
        "env": {"STANDIN_FAIL": "scheduler-exception", "STANDIN_HANG": "1"},
        "log": str(root / "logs" / "hang.log"),
        "port": free_port(),
    }
    profiles["stubborn"] = {
        "extends": "standin",
        "env": {"STANDIN_IGNORE_TERM": "1"},
        "log": str(root / "logs" / "stubborn.log"),
        "port": free_port(),
        "stop_grace": 1,
    }
    profiles["quoted"] = {
        "extends": "standin",
        "args": ["--served-model-name", "my model; $(id) 'q' \"d\""],
        "env": {"STANDIN_NOTE": "a b;c $(x) `y`\nz"},
        "log": str(root / "logs" / "with space" / "quoted.log"),
        "port": free_port(),
    }
    return profiles


@pytest.fixture(scope="module")
def server_ws(sshd, tmp_path_factory):
    """A Workbench over a workspace with host ``test`` (the sshd) and stand-in profiles."""
    from workbench.api import Workbench

    root = tmp_path_factory.mktemp("servers")
    sshd.write_known_hosts()
    if sshd.proc is None:
        sshd.start()
    write_toml(
        root / "workbench.toml",
        {"hosts": {"test": {**sshd.host_table(), "gpu_idle_mib": 500}}, "profiles": standin_profiles(root, sshd)},
    )
    wb = Workbench.open(root)
    yield wb
    stop_active_servers(wb, grace=1)
    wb.close()


@pytest.fixture
def ssh_workspace(workspace, sshd):
    sshd.write_known_hosts()
    if sshd.proc is None:
        sshd.start()
    write_toml(
        workspace / "workbench.toml",
        {"hosts": {"test": sshd.host_table()}, "profiles": standin_profiles(workspace, sshd)},
    )
    return workspace
