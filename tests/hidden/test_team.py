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
    assert names & set(ps_mod.SCREEN_FUNCS.values())          # the bf16 screen itself
    monkeypatch.undo()

    monkeypatch.setattr(team, "ready", lambda: False)         # the same passes on the gang
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
        except BaseException as exc:  # noqa: BLE001 - reported below
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
