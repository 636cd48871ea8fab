"""The process's use of the cyclic collector (workbench.collector): paused work, a command's
thresholds, and nothing left for the interpreter's last pass at exit."""

from __future__ import annotations

import gc
import subprocess
import sys

from tests.conftest import ROOT
from workbench import collector

# Runs in a child: an exit handler registered before the command's (so it runs after it) reports
# what the interpreter's last collection would have to walk.
CHILD = r"""
import atexit, gc, sys
atexit.register(lambda: print(len(gc.get_objects()), gc.get_freeze_count()))
from workbench import collector
before = atexit._ncallbacks()
collector.for_a_command()
collector.for_a_command()               # twice: still one handler
kept = [[i] for i in range(200_000)]    # lists are tracked: what a command's work leaves
print(gc.get_threshold()[0], atexit._ncallbacks() - before)
"""


def test_a_command_leaves_nothing_for_the_last_pass_at_exit():
    r = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (threshold, handlers), (tracked, frozen) = (map(int, line.split()) for line in r.stdout.splitlines())
    assert threshold == collector.COMMAND_THRESHOLD[0] and handlers == 1
    assert frozen >= 200_000 and tracked < 1_000, (tracked, frozen)


def test_paused_restores_what_was_there():
    was = gc.isenabled()
    try:
        gc.enable()
        with collector.paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off: it stays off
    finally:
        (gc.enable if was else gc.disable)()
