"""The compiled passes on numba's thread-safe parallel layer (``workbench.hidden.team``): where it
loads, a pass runs there and not on the gang, with the gang's result bit for bit; where it does
not (or in a forked child), the gang runs it."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

ps_mod = pytest.importorskip("workbench.hidden.pairstats")
from workbench.hidden import team  # noqa: E402


def _world(S=3, G=6, T=240, H=128, seed=3):
    g = torch.Generator().manual_seed(seed)
    slots = [torch.randn(T, H, generator=g).bfloat16() for _ in range(S)]
    cands = [torch.randn(T, H, generator=g).bfloat16() for _ in range(G - 1)] + [torch.randn(T, H, generator=g)]
    return slots, cands, np.arange(T)


def _passes(ps, ys, T):
    """A screen with its statistics and in-pass differences (bf16 candidates), the portable screen
    and its statistics (all of them), and the exact pass."""
    S, out = ps.S, []
    for group in (ys[:-1], ys):
        G = len(group)
        xx = np.empty((S, T), np.float32)
        sums = ps_mod.SumsOut(xx, np.zeros((G, T), bool), np.zeros((S, G, T), np.float32))
        got = ps.dots(group, xx, [(0, 1), (2, 0)], sums=sums)
        out += [xx, sums.finite, sums.per_token, *got[:5], *got.sums]
    out += list(ps.exact([(1, 2), (0, 5)], ys))
    return out


def test_a_pass_runs_on_the_team_where_a_thread_safe_layer_loads(monkeypatch):
    if not team.ready():
        pytest.skip("no thread-safe numba threading layer (TBB or OpenMP) here: the gang runs the passes")
    import numba

    assert numba.threading_layer() in team.SAFE_LAYERS
    slots, cands, rows = _world()
    ps = ps_mod.PairStats(slots, rows, rows, threads=3, thread_tokens=8)
    ys = [ps.prepare(y) for y in cands]
    launched = []
    for fn, launch in list(ps_mod.LAUNCHERS.items()):

        def counted(n, *args, _launch=launch, _fn=fn):
            launched.append((_fn, n))
            return _launch(n, *args)

        monkeypatch.setitem(ps_mod.LAUNCHERS, fn, counted)

    def no_gang(n):
        raise AssertionError("the gang ran a pass the team should have")

    monkeypatch.setattr(ps_mod, "gang", no_gang)
    on_team = _passes(ps, ys, len(rows))
    names = {getattr(fn, "__name__", "") for fn, _ in launched}
    assert {"dots_any", "sums_rows", "exact_rows"} <= names and all(n == 3 for _, n in launched)
    assert names & set(ps_mod.SCREEN_FUNCS.values())  # the bf16 screen itself
    monkeypatch.undo()

    monkeypatch.setattr(team, "ready", lambda: False)  # the same passes on the gang
    on_gang = _passes(ps, ys, len(rows))
    for a, b in zip(on_team, on_gang):
        np.testing.assert_array_equal(a, b)


def test_a_forked_child_keeps_to_the_gang(monkeypatch):
    """The layer started in another process (a fork's parent): this one uses the gang."""
    team.ready()
    monkeypatch.setattr(team, "_STARTED", (os.getpid() + 1, True))
    assert not team.ready()
    assert not team.run(lambda n, *a: None, 2, ())


def test_passes_from_two_threads_at_once_give_each_its_own_result():
    """Two Python threads running passes at the same time (a face's worker and a script): each gets
    what it gets alone (the team is thread-safe; the gang takes one pass at a time)."""
    import threading

    slots, cands, rows = _world()
    ps = ps_mod.PairStats(slots, rows, rows, threads=2, thread_tokens=8)
    ys = [ps.prepare(y) for y in cands]
    alone = _passes(ps, ys, len(rows))
    got: list[list[np.ndarray]] = [[], []]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                got[i] = _passes(ps, ys, len(rows))
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not errors and all(not w.is_alive() for w in workers)
    for res in got:
        for a, b in zip(res, alone):
            np.testing.assert_array_equal(a, b)


_KEEPS_THREADS = """
import numpy as np, torch
from workbench.hidden import pairstats, team
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
slots = [torch.randn(64, 96, generator=g).bfloat16() for _ in range(3)]
rows = np.arange(64)
ps = pairstats.PairStats(slots, rows, rows, threads=3, thread_tokens=8)
ys = [ps.prepare(torch.randn(64, 96, generator=g).bfloat16()) for _ in range(5)]
seen = []
for asked in (1, 2):
    torch.set_num_threads(asked)
    ps.dots(ys)
    ps.exact([(0, 1)], ys)
    seen.append(torch.get_num_threads())
print(team.ready(), seen)
"""


def test_the_team_leaves_torchs_thread_count_as_it_was(tmp_path):
    """Starting numba's OpenMP layer sets the OpenMP runtime's thread count it shares with torch to
    all of numba's threads: a process that asked torch for fewer must keep them (its next
    alignment, and its own torch work, run on what it asked for). A fresh process, where the layer
    has not started."""
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_NUM_THREADS": "4", "OMP_NUM_THREADS": "4"}
    res = subprocess.run(
        [sys.executable, "-c", _KEEPS_THREADS], capture_output=True, text=True, env=env, timeout=300, cwd=os.getcwd()
    )
    assert res.returncode == 0, res.stderr[-2000:]
    ready, seen = res.stdout.split(maxsplit=1)
    if ready != "True":
        pytest.skip("no thread-safe numba threading layer here: the gang runs the passes")
    assert seen.strip() == "[1, 2]"
