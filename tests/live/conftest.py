"""Workspaces whose profile serves the tiny lab world: on the sshd fixture's host (the lab server
started over SSH with the test venv's python) or on this machine. The draft is copied into the
test folder, so fixes edit the copy and never the lab cache."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.fixtures.teardown import stop_active_servers
from workbench.lab.process import free_port


def copy_draft(world: dict, which: str, dest: Path) -> Path:
    shutil.copytree(world[which], dest)
    return dest


def lab_profile(world: dict, draft: Path, root: Path, host: str, steps: int = 3) -> dict:
    return {
        "host": host,
        "launcher": [sys.executable, "-m", "workbench.lab.serve", "--lab-engine", "sglang==0.5.23"],
        "model": world["target"],
        "draft": str(draft),
        "port": free_port(),
        "run_dir": str(root),
        "log": str(root / "logs" / "lab.log"),
        "args": ["--host", "127.0.0.1", "--enable-return-hidden-states", "--decode-log-interval", "10"],
        "env": {"PYTHONPATH": str(ROOT)},
        "speculative": {"algorithm": "EAGLE3", "num_steps": steps, "eagle_topk": 1, "num_draft_tokens": steps + 1},
        "ready_timeout": 240,
        "stop_grace": 5,
    }


@pytest.fixture
def stop_servers():
    """Stops every server the test's Workbench still runs (identity-checked, by process group)."""
    opened = []
    yield opened.append
    for wb in opened:
        stop_active_servers(wb, grace=2)
        wb.close()
