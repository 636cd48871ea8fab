"""The compiled CPU kernels of the alignment engine against float64 references: dot products of
every slot/candidate pair per token, the exact fp32-difference pass, and non-finite values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

ps_mod = pytest.importorskip("workbench.hidden.pairstats")


def _world(S, T, H, seed=0, slot_dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    packed = torch.randn(T + 9, S * H, generator=g).to(slot_dtype)  # slots side by side, like SpecForge aux
    slots = [packed[:, i * H : (i + 1) * H] for i in range(S)]
    cands = [
        torch.randn(T + 5, H, generator=g).bfloat16(),
        torch.randn(T + 5, H, generator=g),  # fp32
        torch.randn(T + 5, 2 * H, generator=g).bfloat16()[:, H:],  # a column slice (row stride 2H)
        torch.randn(T + 5, H, generator=g).half(),
    ]  # converted to fp32
    ref_rows = np.arange(T) + 9 - (np.arange(T) % 3 == 0)  # not a plain range: gathered
    infer_rows = np.arange(T) + 2
    return slots, cands, ref_rows, infer_rows


def _ref(slots, ref_rows, y, infer_rows):
    X = torch.stack([x[torch.as_tensor(ref_rows)].double() for x in slots])  # [S, T, H]
    return X, y[torch.as_tensor(infer_rows)].double()


@pytest.mark.parametrize("S,H", [(1, 64), (2, 200), (3, 128), (4, 96), (5, 160), (3, 7168 // 56), (3, 67)])
@pytest.mark.parametrize(
    "kernel,slot_dtype",
    [
        ("auto", torch.bfloat16),
        ("fma", torch.bfloat16),
        ("auto", torch.float32),
    ],
)
def test_dots_exact_and_norms_match_float64(S, H, kernel, slot_dtype):
    T = 70
    slots, cands, ref_rows, infer_rows = _world(S, T, H, slot_dtype=slot_dtype)
    for threads in (1, 2):
        ps = ps_mod.PairStats(slots, ref_rows, infer_rows, threads=threads)
        if kernel != "auto":
            ps.kernel = kernel
        ys = [ps.prepare(y) for y in cands]
        X0, _ = _ref(slots, ref_rows, cands[0], infer_rows)
        for group in (ys, ys[:1], [ys[0], ys[2]]):
            xx = np.full((S, T), np.nan, np.float32)  # the slots' norms in the same pass
            xy, yy, *_ = ps.dots(group, xx)
            np.testing.assert_allclose(xx, (X0 * X0).sum(-1).numpy(), rtol=2e-6)
            for g, y in enumerate(group):
                X, Y = _ref(slots, ref_rows, y, infer_rows)
                np.testing.assert_allclose(xy[:, g], (X * Y[None]).sum(-1).numpy(), rtol=2e-5, atol=2e-3)
                np.testing.assert_allclose(yy[g], (Y * Y).sum(-1).numpy(), rtol=2e-6)
        pairs = [(S - 1, 2), (0, 0), (0, 1), (S - 1, 3), (0, 3)]
        n, sa, mx = ps.exact(pairs, ys)
        for p, (slot, m) in enumerate(pairs):
            X, Y = _ref(slots, ref_rows, ys[m], infer_rows)
            d = X[slot] - Y
            np.testing.assert_allclose(n[p], (d * d).sum(-1).numpy(), rtol=2e-6)
            np.testing.assert_allclose(sa[p], d.abs().sum(-1).numpy(), rtol=2e-6)
            np.testing.assert_array_equal(mx[p], d.abs().amax(-1).float().numpy())


def test_exact_pass_keeps_digits_the_dot_products_lose():
    """A candidate with rel_diff ~1e-8 from its slot: rebuilt from dot products the per-token
    value is cancellation noise; the difference pass has it to fp32 accuracy."""
    T, H = 32, 4096
    x = torch.randn(T, H, dtype=torch.float64)
    y = (x * (1 + 3e-4 * torch.randn(T, H, dtype=torch.float64))).float()
    xs = x.float()
    ps = ps_mod.PairStats([xs], np.arange(T), np.arange(T))
    n, _, _ = ps.exact([(0, 0)], [y])
    xx1 = np.empty((1, T), np.float32)
    xy, yy, *_ = ps.dots([y], xx1)
    xx = xx1[0].astype(np.float64)
    true = ((xs.double() - y.double()) ** 2).sum(-1).numpy()
    den = xx + yy[0].astype(np.float64)
    assert np.median(true / den) < 1e-7
    err_exact = np.abs(n[0] - true) / den
    err_screen = np.abs(xx + yy[0] - 2.0 * xy[0, 0] - true) / den
    assert err_exact.max() < 1e-12 and err_screen.max() > 100 * err_exact.max()


def test_nonfinite_values_reach_the_sums():
    T, H = 20, 128
    slots, cands, ref_rows, infer_rows = _world(3, T, H)
    y = cands[0].clone()
    y[infer_rows[4], 7] = float("nan")
    y[infer_rows[6], 1] = float("inf")
    ps = ps_mod.PairStats(slots, ref_rows, infer_rows)
    xy, yy, *_ = ps.dots([y])
    n, sa, mx = ps.exact([(2, 0), (2, 1)], [y, cands[0]])
    assert np.isfinite(n[1]).all()
    for arr in (yy[0], n[0], mx[0], sa[0]):
        assert np.isnan(arr[4]) and not np.isfinite(arr[6])
        assert np.isfinite(np.delete(arr, [4, 6])).all()
    assert np.isnan(xy[0, 0, 4]) and not np.isfinite(xy[1, 0, 6])


def test_rows_outside_a_candidate_are_refused():
    slots, cands, ref_rows, infer_rows = _world(2, 10, 64)
    ps = ps_mod.PairStats(slots, ref_rows, infer_rows)
    with pytest.raises(ValueError, match="outside"):
        ps.prepare(cands[0][:5])
    with pytest.raises(ValueError, match="expected"):
        ps.prepare(cands[0][:, :32])


@pytest.mark.parametrize("case", ["finite", "nonfinite", "all-bad", "zero-and-negative"])
def test_pair_statistics_compiled_equal_the_numpy_spelling(case):
    """``PairStats.pair_sums`` (what the CPU path's screen takes per token in its pass) gives what
    ``align._pair_sums`` computes in numpy for the other paths: the same tokens left out, the same
    per-token values, sums to rounding; the same sums on every run with the same threads."""
    from workbench.hidden.align import _pair_sums

    S, C, T = 3, 5, 97
    rng = np.random.default_rng(7)
    xx = rng.uniform(0.5, 2.0, (S, T)).astype(np.float32)
    yy = rng.uniform(0.5, 2.0, (C, T)).astype(np.float32)
    xy = (0.49 * rng.uniform(0.5, 2.0, (S, C, T))).astype(np.float32)
    bad = np.zeros(T, bool)
    if case == "nonfinite":
        bad[[3, 50]] = True
        xx[:, 3], xx[1, 50] = np.nan, np.inf
        yy[1, [7, 8]], yy[4, 90] = np.nan, np.inf
        xy[2, 3, 11] = np.nan  # a product not finite where both norms are
    elif case == "all-bad":
        bad[:] = True
        xx[:] = np.nan
    elif case == "zero-and-negative":
        xx[0, :5], yy[0, :5], xy[0, 0, :5] = 0.0, 0.0, 0.0  # 0 / 0 there: value 0
        xy[1, 2, 9] = 10.0  # xx + yy - 2xy < 0: clamped
    want = _pair_sums(xy.copy(), yy.copy(), xx.astype(np.float64), bad.copy())
    for threads in (1, 3, 8):
        ps = ps_mod.PairStats(
            [torch.zeros(T, 32, dtype=torch.bfloat16)] * S, np.arange(T), np.arange(T), threads=threads, thread_tokens=8
        )
        runs = []
        for _ in range(2):
            out = ps_mod.SumsOut(xx.copy(), np.zeros((C, T), bool), np.full((S, C, T), -1.0, np.float32))
            yy_t = yy.copy()
            runs.append((ps.pair_sums(xy.copy(), yy_t, out), out, yy_t))
        (got, out, yy_t), (again, _, _) = runs
        for a, b in zip(got, again):  # each token range its partial sums, added in range order
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(out.finite, want.finite, err_msg=f"{threads} threads")
        np.testing.assert_array_equal(yy_t, want.yy)
        np.testing.assert_array_equal(out.per_token, want.per_token)
        for field, w in (("num", want.num), ("den", want.den), ("dot", want.dot), ("yy", want.yy_sum)):
            np.testing.assert_allclose(getattr(got, field), w, rtol=1e-13, atol=0, err_msg=f"{field}, {threads}")
    per_token = out.per_token
    if case == "nonfinite":
        assert np.isnan(per_token[2, 3, 11]) and np.isnan(got.num[2, 3])
        assert per_token[:, :, [3, 50]].max() == 0 and yy_t[1, 7] == 0
    if case == "zero-and-negative":
        assert (per_token[0, 0, :5] == 0).all() and per_token[1, 2, 9] == 0


def test_the_split_words_read_both_bf16_of_every_32_bit_word():
    """The bf16 screen takes the element in the low half of a word (shifted up) and the one in the
    high half (masked), at every position, for every slot count: distinct values in each position,
    negative and subnormal included, give the exact float64 dot product, and each slot's sums are
    its own (a slot past ``k`` adds nothing)."""
    import numba

    @numba.njit(nogil=True, fastmath=ps_mod.FM)
    def quad_at(xrow, q, k, n):
        res = np.zeros(20, np.float32)
        ps_mod._quad(xrow, 0, k, q, n, res)
        return res

    def quad(xs, ys, k, n):  # (the arrays stay alive in the caller while the kernel reads them)
        return quad_at(np.array([x.ctypes.data for x in xs]), np.array([y.ctypes.data for y in ys]), k, n)

    g = torch.Generator().manual_seed(3)
    as16 = lambda t: t.view(torch.int16).numpy().view(np.uint16)  # noqa: E731
    x = [torch.randn(40, generator=g).bfloat16() for _ in range(4)]
    y = [torch.randn(40, generator=g).bfloat16() for _ in range(4)]
    for k in (1, 2, 3, 4):
        res = quad([as16(v) for v in x], [as16(v) for v in y], k, 20)
        for m in range(4):
            assert res[5 * m + 4] == pytest.approx(float((y[m].double() ** 2).sum()), rel=1e-6)
            for j in range(4):
                want = float((x[j].double() * y[m].double()).sum()) if j < k else 0.0
                assert res[5 * m + j] == pytest.approx(want, rel=1e-5, abs=1e-6)
    e, one = torch.zeros(40).bfloat16(), torch.ones(40).bfloat16()
    odd = torch.zeros(40).bfloat16()
    odd[1::2] = 1.0  # the high halves only
    assert quad([as16(x[0])] * 4, [as16(odd)] * 4, 1, 20)[0] == pytest.approx(float(x[0][1::2].double().sum()))
    tiny, big = torch.zeros(40).bfloat16(), torch.zeros(40).bfloat16()
    tiny[5], big[5] = 2.0**-130, 2.0**100  # a subnormal input counts
    assert quad([as16(tiny)] * 4, [as16(big)] * 4, 1, 20)[0] == 2.0**-30
    for i in range(40):  # each position alone, whichever half of a word it is in
        e = torch.zeros(40).bfloat16()
        e[i] = 1.0
        assert quad([as16(e)] * 4, [as16(one), as16(y[1]), as16(e), as16(one)], 1, 20)[5] == float(y[1][i])


@pytest.mark.parametrize(
    "T,threads,least", [(2048, 16, 2), (2048, 2, 2), (300, 3, 2), (64, 16, 2), (7, 2, 2), (5, 4, 8), (1, 3, 2)]
)
def test_token_ranges_cover_every_token_once_and_shrink_to_the_end(T, threads, least):
    """Ranges follow each other from 0 to T; each is a share of the tokens left (the first no more
    than a thread's share), never under ``least`` but where fewer are left; they never grow."""
    r = ps_mod.token_ranges(T, threads, least)
    assert r[0][0] == 0 and r[-1][1] == T and all(a[1] == b[0] for a, b in itertools.pairwise(r))
    sizes = [b - a for a, b in r]
    assert all(x >= min(least, T - a) for x, (a, _) in zip(sizes, r))
    assert sizes == sorted(sizes, reverse=True)
    if threads > 1 and least < T:
        assert sizes[0] <= max(least, -(-T // threads)) and len(r) >= min(threads, T // least)


def test_token_ranges_outnumber_the_threads_and_change_no_value():
    """Each thread takes several token ranges in turn (a slow core holds up less); every token's
    sums are the same however the tokens are split."""
    S, T, H = 3, 300, 96
    slots, cands, ref_rows, infer_rows = _world(S, T, H)
    one = ps_mod.PairStats(slots, ref_rows, infer_rows, threads=1)
    many = ps_mod.PairStats(slots, ref_rows, infer_rows, threads=3)
    assert one.ranges == [(0, T)] and many.threads == 3
    assert many.ranges == ps_mod.token_ranges(T, 3) and len(many.ranges) > 3 * 4
    ys = [one.prepare(y) for y in cands]
    xx1, xx3 = np.empty((S, T), np.float32), np.empty((S, T), np.float32)
    for a, b in zip(one.dots(ys, xx1), many.dots(ys, xx3)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(xx1, xx3)
    bf = [y for y in ys if y.dtype == torch.bfloat16]  # the bf16 screen, its pairs in the pass
    for a, b in zip(one.dots(bf, xx1, [(0, 0), (2, 1)]), many.dots(bf, xx3, [(0, 0), (2, 1)])):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(xx1, xx3)
    in_pass = many.dots(bf, None, [(0, 0), (2, 1)])  # the same sums as a pass of their own
    for a, b in zip(in_pass[2:], many.exact([(0, 0), (2, 1)], bf)):
        np.testing.assert_array_equal(a, b)
    pairs = [(0, 0), (2, 3)]
    for a, b in zip(one.exact(pairs, ys), many.exact(pairs, ys)):
        np.testing.assert_array_equal(a, b)
    short = ps_mod.PairStats(slots, ref_rows[:130], infer_rows[:130], threads=8)
    assert short.threads == 2 and short.ranges == ps_mod.token_ranges(130, 2)


def test_the_threads_share_one_counter_and_take_every_range_once():
    """``_take`` is an atomic add: threads that take from one counter at once get each value once
    (a plain read-add-write would hand some out twice and skip none: the counts would show it)."""
    import threading

    from numba import njit

    @njit(nogil=True)
    def grab(counter, n, seen):
        while True:
            r = ps_mod._take(counter)
            if r >= n:
                return
            seen[r] += 1

    n, threads = 400_000, 4
    counter = np.zeros(1, np.int64)
    seen = [np.zeros(n, np.int64) for _ in range(threads)]
    grab(np.zeros(1, np.int64), 1, np.zeros(1, np.int64))  # compiled before the threads start
    workers = [threading.Thread(target=grab, args=(counter, n, seen[i])) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    total = sum(seen)
    assert (total == 1).all()
    assert int(counter[0]) == n + threads  # each thread's last take found none left


def test_a_pass_runs_once_per_thread_and_covers_every_range(monkeypatch):
    """A pass calls its kernel once on each thread (not once per range); the calls between them
    take every range once, whatever the number of ranges."""
    S, T, H = 2, 320, 64
    slots, cands, ref_rows, infer_rows = _world(S, T, H)
    ps = ps_mod.PairStats(slots, ref_rows, infer_rows, threads=3)
    ys = [ps.prepare(cands[0])]
    calls = []
    real = ps_mod.dots_bf16

    def counted(*args):
        calls.append(args[0][1].shape[0])  # the ranges every call is given
        return real(*args)

    monkeypatch.setattr(ps_mod, "dots_bf16", counted)
    got = ps.dots(ys)
    assert calls == [len(ps.ranges)] * 3
    want = ps_mod.PairStats(slots, ref_rows, infer_rows, threads=1).dots(ys)
    for a, b in zip(got[:2], want[:2]):
        np.testing.assert_array_equal(a, b)


def _sums_out(xx, G):
    S, T = xx.shape
    return ps_mod.SumsOut(xx, np.zeros((G, T), bool), np.full((S, G, T), -7.0, np.float32))


@pytest.mark.parametrize("threads", [1, 3])
def test_a_pass_over_some_token_columns_fills_those_alone_with_what_a_whole_pass_gives(threads):
    """A sample's columns and then the rest, into the same arrays, give the whole pass bit for bit
    (screen, slot norms, in-pass differences, the sample's columns differenced in the second pass;
    ``exact`` over columns likewise); columns a pass was not given keep what they held. The pairs'
    statistics taken in the passes are those of the whole, the two passes' sums adding up to its."""
    S, T, H = 3, 300, 128
    slots, cands, ref_rows, infer_rows = _world(S, T, H)
    ps = ps_mod.PairStats(slots, ref_rows, infer_rows, threads=threads)
    ys = [ps.prepare(y) for y in cands]
    bf = [y for y in ys if y.dtype == torch.bfloat16]
    sample = np.array([0, 7, 150, 299])
    rest = np.setdiff1d(np.arange(T), sample)
    pairs = [(0, 0), (2, 1)]
    for group in (ys, bf):
        G = len(group)
        xx_all = np.empty((S, T), np.float32)
        wout = _sums_out(xx_all, G)
        whole = ps.dots(group, xx_all, pairs, sums=wout)
        xy, yy, xx = (
            np.full((S, G, T), -7.0, np.float32),
            np.full((G, T), -7.0, np.float32),
            np.full((S, T), -7.0, np.float32),
        )
        sout = _sums_out(xx, G)
        first = ps.dots(group, xx, (), sample, (xy, yy), 1, sums=sout)
        assert (np.delete(xy, sample, axis=2) == -7.0).all() and (np.delete(xx, sample, axis=1) == -7.0).all()
        assert (np.delete(sout.per_token, sample, axis=2) == -7.0).all()
        part = ps.dots(group, xx, pairs, rest, (xy, yy), exact_cols=sample, sums=sout)
        assert part.xy is xy and part.yy is yy
        for a, b in zip(whole[:5], part[:5]):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(xx_all, xx)
        separate = ps.dots(group, None, pairs, rest, (xy.copy(), yy.copy()))
        ps.exact(pairs, group, sample, (separate.n, separate.sa, separate.mx))
        for a, b in zip(part[2:5], separate[2:5]):
            np.testing.assert_array_equal(a, b)
        for a, b, w in zip(first.sums, part.sums, whole.sums):
            np.testing.assert_allclose(a + b, w, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(sout.per_token, wout.per_token)
        np.testing.assert_array_equal(sout.finite, wout.finite)
        alone = _sums_out(xx_all, G)  # the bf16 screen took them in its pass: as a pass of their own
        for a, b in zip(ps.pair_sums(whole.xy, whole.yy.copy(), alone), whole.sums):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(alone.per_token, wout.per_token)
    with pytest.raises(ValueError, match="token columns"):
        ps.dots(ys, cols=np.array([T]))


def test_the_screen_is_chosen_by_the_data():
    """All-bf16 data: the bf16 screen; anything else: the per-token fp32 kernel."""
    assert ps_mod.screen_kernel(True) == "bf16-fma"
    assert ps_mod.screen_kernel(False) == "fma"


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
    out += list(ps.exact([(1, 2), (0, 4)], ys))
    return out


def test_passes_from_two_threads_at_once_give_each_its_own_result():
    """Two Python threads running passes at the same time (a face's worker and a script): each gets
    what it gets alone (a gang takes one pass at a time)."""
    import threading

    T, H = 240, 128
    g = torch.Generator().manual_seed(3)
    slots = [torch.randn(T, H, generator=g).bfloat16() for _ in range(3)]
    cands = [torch.randn(T, H, generator=g).bfloat16() for _ in range(4)] + [torch.randn(T, H, generator=g)]
    rows = np.arange(T)
    ps = ps_mod.PairStats(slots, rows, rows, threads=2, thread_tokens=8)
    ys = [ps.prepare(y) for y in cands]
    alone = _passes(ps, ys, T)
    got: list[list[np.ndarray]] = [[], []]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                got[i] = _passes(ps, ys, T)
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
