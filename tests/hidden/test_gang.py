"""The threads that start a parallel pass together (``workbench.hidden.gang``): every call runs,
at once, one of them on the caller; errors reach the caller; one pass at a time."""

from __future__ import annotations

import threading
import time

import pytest

from workbench.hidden.gang import Gang, gang


def test_every_call_runs_at_once_one_on_the_caller():
    g = Gang(4)
    barrier = threading.Barrier(4, timeout=10)  # only passes if all four run at the same time
    seen: list[str] = []
    lock = threading.Lock()

    def call():
        barrier.wait()
        with lock:
            seen.append(threading.current_thread().name)

    for _ in range(3):  # the same threads, pass after pass
        seen.clear()
        g.run([call] * 4)
        assert len(seen) == 4 and threading.current_thread().name in seen
    g.run([lambda: seen.append("one")])  # fewer calls than threads
    assert seen[-1] == "one"
    with pytest.raises(ValueError, match="5 calls for a gang of 4"):
        g.run([call] * 5)


def test_a_worker_error_reaches_the_caller_after_every_call_ended():
    g = Gang(3)
    ended = []

    def slow():
        time.sleep(0.05)
        ended.append(1)

    def bad():
        raise RuntimeError("kernel failed")

    with pytest.raises(RuntimeError, match="kernel failed"):
        g.run([slow, bad, slow])
    assert len(ended) == 2  # nothing still running when the error came
    g.run([slow, slow, slow])  # and the gang still works
    assert len(ended) == 5


def test_two_callers_take_turns():
    g = Gang(2)
    inside = [0]
    most = [0]
    lock = threading.Lock()

    def call():
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.02)
        with lock:
            inside[0] -= 1

    callers = [threading.Thread(target=g.run, args=([call, call],)) for _ in range(3)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert most[0] == 2  # one pass's two calls, never two passes at once


def test_one_gang_per_size_in_a_process():
    assert gang(3) is gang(3) and gang(3) is not gang(2) and gang(0).n == 1
