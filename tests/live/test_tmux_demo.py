"""The demo's TUI in a real terminal of the smallest size we support (80x24, tmux on a private
socket), driven along the guided path with real key presses: Dashboard (the demo's note on it, F1
there) -> Diagnose -> doctor (tensor-dump relaunch confirmed) -> alignment -> apply fix (diff
confirmed) -> relaunch (confirmed) -> compare. Patterns allow a line break wherever a space is:
at 80 columns the screens wrap."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


class Tmux:
    def __init__(self, name: str):
        self.base = ["tmux", "-L", name]

    def __call__(self, *args: str, check: bool = True) -> str:
        r = subprocess.run(self.base + list(args), capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {r.stderr}")
        return r.stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "demo", check=False)

    def wait_for(self, pattern: str, timeout: float, what: str = "") -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if re.search(pattern, text):
                return text
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what or pattern!r}; screen:\n{text}")

    def wait_all(self, patterns: list, timeout: float, what: str = "") -> str:
        """Until every pattern is on the screen at once (a screen repaints in parts); a space in a
        pattern matches any run of spaces and line breaks (the 80-column screens wrap)."""
        spaced = [p.replace(" ", r"\s+") for p in patterns]
        return self.wait_for("(?s)" + "".join(f"(?=.*{p})" for p in spaced), timeout, what)

    def keys(self, *keys: str) -> None:
        for k in keys:
            self("send-keys", "-t", "demo", k)
            time.sleep(0.3)


@pytest.fixture
def tmux():
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (make sshd-deps installs it)")
    t = Tmux(f"wb-demo-{os.getpid()}")
    yield t
    t("kill-server", check=False)


def test_demo_tui_guided_path(tmux, lab_world, tmp_path):
    ws = tmp_path / "demo"
    # the size comes from the pty (a stale COLUMNS/LINES from the shell would override it)
    cmd = (
        f"unset COLUMNS LINES; cd {shlex.quote(str(ROOT))} && PYTHONPATH={shlex.quote(str(ROOT))} TERM=xterm-256color "
        f"{shlex.quote(sys.executable)} -m workbench --workspace {shlex.quote(str(ws))} demo --size tiny "
        f"--measure-tokens 16"
    )
    tmux("new-session", "-d", "-s", "demo", "-x", "80", "-y", "24", cmd)
    try:
        tmux.wait_all([r"Demo: server \d+ shows accept length", "F12 Alignment"], 600, "the Dashboard, its note")
        tmux.keys("F1")
        tmux.wait_all(["Keys", "binding id", "everywhere"], 30, "every key, on F1")
        tmux.keys("Escape")
        tmux.keys("F8")
        tmux.wait_all([r"Guided path:", r"next: press d"], 30, "the guided bar on Diagnose")
        tmux.keys("d")
        tmux.wait_all([r"debug-tensor-dump-output-folder", r"Yes \[y\]", r"No \[n\]"], 300, "the dump confirmation")
        tmux.keys("y")
        tmux.wait_all(
            [r"Doctor: \d+ finding", "layer-ids-engine-mismatch", "accept length observed"],
            600,
            "the doctor's findings",
        )
        tmux.keys("a")
        screen = tmux.wait_all([r"Alignment \(dump", "next: press f"], 30, "the alignment table")
        assert screen.count("match") >= 3
        tmux.keys("f")
        tmux.wait_all([r"apply fix to", r"Yes \[y\]"], 30, "the fix's diff")
        tmux.keys("y")
        tmux.wait_all([r"launch lab-story again", r"Yes \[y\]"], 60, "the relaunch offer")
        tmux.keys("y")
        screen = tmux.wait_all([r"press c to compare"], 600, "the relaunched server")
        tmux.keys("c")
        tmux.wait_all([r"accept length \d\.\d\d \d\.\d\d x\d", "layer ids", "changed", "all done"], 60, "before/after")
        tmux.keys("C-q")
        deadline = time.monotonic() + 60  # the demo stops its servers, then the session ends
        while (
            time.monotonic() < deadline
            and subprocess.run([*tmux.base, "has-session", "-t", "demo"], capture_output=True).returncode == 0
        ):
            time.sleep(0.5)
    finally:
        tmux("kill-server", check=False)
        leftover = _stop_leftovers(ws)
    assert not leftover, f"servers left running after the TUI exited: {leftover}"
    from workbench.api import Workbench

    with Workbench.open(ws) as wb:
        kinds = [e.kind for e in wb.events()]
        assert {"live.doctor", "config.fix", "live.relaunch", "live.compare"} <= set(kinds)


def _stop_leftovers(ws) -> list:
    """Servers of the demo workspace still running (the demo stops them when it exits)."""
    from workbench.api import Workbench

    if not (ws / ".workbench").exists():
        return []
    with Workbench.open(ws) as wb:
        left = [r.id for r in wb.servers(active=True)]
        for sid in left:
            try:
                wb.server_stop(sid, confirm=True, grace=2, gpu_wait=0)
            except Exception:
                pass
    return left
