"""Shared fixtures. Area-specific fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# pytest's assertion rewriting of the test modules is kept as bytecode (tests/**/__pycache__) even
# where PYTHONDONTWRITEBYTECODE is set: rewriting them again costs each process more than half of
# its collection. (Only this process: what the tests start keeps the environment's setting.)
sys.dont_write_bytecode = False

# Two pytest-xdist workers share two cores with the lab builds and servers they start (torch on
# OpenMP, two threads each). libgomp's default has a thread that finished its share spin for its
# peer, on the core the peer (or the other worker) needs: beside one busy core a lab build ran far
# slower than with passive waiting. The waiting policy changes no result (the same world, bit for
# bit); set before torch loads libgomp, and inherited by every process a test starts.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_finish(session):
    """What collection loaded (the modules, their fixtures, the items) lives for the session: out of
    the collector's passes from here on, and collections far apart, as a command's
    (workbench.collector)."""
    from workbench import collector

    gc.collect()
    gc.freeze()
    collector.for_a_command()


# Fixture modules shared across areas (the lab world, the sshd, ...): every tests/fixtures/*.py.
pytest_plugins = sorted(
    f"tests.fixtures.{p.stem}" for p in (ROOT / "tests" / "fixtures").glob("*.py") if p.stem != "__init__"
)


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """An empty workspace; EAGLE_WORKBENCH_HOME points at it so CLI calls use it too."""
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("EAGLE_WORKBENCH_HOME", str(ws))
    return ws


@pytest.fixture
def wb(workspace):
    from workbench.api import Workbench

    with Workbench.open(workspace) as w:
        yield w


def run_cli(*args: str, env: dict | None = None, input: str | None = None, timeout: float = 120):
    """Run the real console entry point in a subprocess; returns CompletedProcess (text)."""
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("PYTHONPATH", str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli
