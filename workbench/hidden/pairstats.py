"""Per-token pair sums on a CPU, one pass over the candidate bytes (numba kernels).

Reference slots and candidates are ``[rows, H]`` tensors (bf16 or fp32, unit stride along H) read
where they lie: a memory-mapped tensor, a column slice of a packed ``[T, K*H]`` tensor or a token
list that is not a plain range costs no copy (reference token t is row ``ref_rows[t]`` of every
slot and row ``infer_rows[t]`` of every candidate).

- ``dots``: per token, ``xy[s, g, t] = sum_h x*y`` and ``yy[g, t] = sum_h y^2`` for a group of
  candidates: the screen. The products of bf16 values are exact in fp32 and are accumulated in
  fp32 over one row, so a rel_diff rebuilt as ``(xx + yy - 2xy) / (xx + yy)`` is good to about
  1e-6 (cancellation), enough to rank every pair and to draw the far ones. All-bf16 data goes
  through one screen (``bf16-fma``): up to four slots against four candidates per load of their
  rows, a block of tokens at a time so the block's slot rows stay cached while the group streams
  past; each 32-bit word of two bf16 is split into two fp32 values by a shift and a mask (a bf16
  is the high half of an fp32) and multiplied-added, in whatever vectors the compiler picks for
  this CPU. Anything else converts to fp32 per token and uses fused multiply-adds (``fma``).
- ``exact``: chosen (slot, candidate) pairs in one pass, per token ``sum (x-y)^2`` from fp32
  differences (no cancellation), ``sum |x-y|`` and ``max |x-y|``: the refine of the best candidates.
- the slots' per-token ``sum x^2`` come with a group's screen (``dots(ys, xx)``).
- the pairs' statistics (``dots(sums=...)``): per token, the rel_diff of every pair and whether the
  candidate is finite, and over the pass's tokens float64 sums of ``xx + yy - 2xy``, ``xx + yy``,
  ``xy`` and ``yy``, taken in the screen's pass a block of tokens at a time (``_token_sums``).

Kernels release the GIL and run once on each of a pass's threads (a gang of Python threads,
``workbench.hidden.gang``), every call taking the next token range from a counter the calls share
(an atomic add) until none is left; the ranges shrink towards the end so the threads end
together. Fast-math allows reassociation and contraction only: NaN and Inf propagate, so a
non-finite row shows as a non-finite sum. numba compiles on first use and caches the machine code
on disk; this module imports numba, so the engine imports it only for the CPU path.

The kernels are plain numba but for two primitives numba lacks, each a single instruction: a
typed pointer made from an address (``_ptr``: rows are read where they lie) and an atomic add
(``_take``: the shared counter).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from workbench.hidden.gang import gang

if TYPE_CHECKING:
    import numpy.typing as npt
    import torch

BF16, F32 = 1, 2
FM = {"reassoc", "contract", "nsz", "arcp"}  # no nnan/ninf: NaN and Inf must reach the sums
# tokens per block of the bf16 screen: their slot rows stay cached while a group streams past (8 ran
# fastest on both CPUs measured: benchmarks/results/align_h200_host_blocks_kernels.json)
BLOCK = 8
THREAD_TOKENS = 64  # the fewest tokens a thread is given (less costs more in its start than it saves)
GUIDE = 2  # each token range is 1 / (GUIDE * threads) of the tokens not yet handed out
RANGE_TOKENS = 2  # ... and at least this many: ranges shrink as the pass nears its end
# Ranges are taken from a shared counter by whichever thread is free, so a core that falls behind
# (another process, the host) takes fewer, and the shrinking ranges let every thread end together
# (benchmarks/results/figures_from_comments.json has the measurements).


# ------------------------------------------------------------------------------------ primitives
@intrinsic
def _ptr(typingctx, addr, dtype):
    """A pointer to ``dtype`` elements at the integer address ``addr``."""
    if not isinstance(dtype, types.NumberClass):
        return None
    sig = types.CPointer(dtype.instance_type)(types.int64, dtype)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(sig.return_type))

    return sig, codegen


@intrinsic
def _take(typingctx, counter):
    """``counter[0] += 1``, atomically, returning the value before: the next token range for
    whichever thread asks (every thread of a pass shares one counter)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        return builder.atomic_rmw("add", data, ir.Constant(ir.IntType(64), 1), "monotonic")

    return types.int64(counter), codegen


@njit(inline="always")
def _words(addr, n):
    """``n`` 32-bit words at ``addr``: each holds two bf16 (the first in its low half)."""
    return numba.carray(_ptr(addr, np.uint32), (n,))


@njit(inline="always")
def _lo(w):
    """The bf16 in the low half of a word, as fp32 (a bf16 is the high half of an fp32)."""
    return np.uint32(w << 16).view(np.float32)


@njit(inline="always")
def _hi(w):
    """The bf16 in the high half of a word, as fp32."""
    return np.uint32(w & np.uint32(0xFFFF0000)).view(np.float32)


@njit(inline="always")
def _madd(acc, u, w):
    """``acc`` plus the dot product of the two bf16 pairs in words ``u`` and ``w``."""
    return acc + _lo(u) * _lo(w) + _hi(u) * _hi(w)


@njit(inline="always")
def _abs_bits(d):
    """The bits of ``|d|``: they order as the magnitudes do, a NaN above Inf."""
    return np.uint32(np.float32(d).view(np.uint32) & np.uint32(0x7FFFFFFF))


def _cv(v):
    """An element as fp32 (compiled only: see the overload below)."""
    raise NotImplementedError


@overload(_cv, inline="always")
def _cv_impl(v):
    if v == types.uint16:  # bf16 bits: the high half of an fp32
        return lambda v: np.uint32(np.uint32(v) << 16).view(np.float32)
    if v == types.float32:
        return lambda v: v
    return None


def screen_kernel(all_bf16: bool) -> str:
    """The kernel that screens this data: ``bf16-fma`` (all bf16) or ``fma``."""
    return "bf16-fma" if all_bf16 else "fma"


def compiled() -> bool:
    """Whether a screen was compiled or loaded in this process (a first pass's time is mostly that)."""
    return bool(dots_bf16.signatures or dots_any.signatures)


# --------------------------------------------------------------------------- screen: dot products
# Slots and candidates are described by row addresses: slot s, reference token t lives at
# ``xa[s] + xr[t] * xs[s]`` (bytes), candidate g at ``ya[g] + yr[t] * ys[g]``: rows are read where
# they lie (a packed [T, K*H] tensor or a gathered token list costs no copy). A kernel takes them
# as ``x = (xa, xs, xc, xr)`` and ``y = (ya, ys, yc, yr)`` (xc, yc: element codes), and its share
# of the work as ``work = (cols, ranges, counter)``: tokens ``cols[i0:i1]`` for each range
# ``(i0, i1)`` it takes from the counter.
def _dot4(xs, ys, n, k):
    """Slot rows ``xs[:k]`` against the four candidate rows ``ys`` (bf16, addresses) over ``n``
    words (compiled only: see the overload below)."""
    raise NotImplementedError


@overload(_dot4, inline="always")
def _dot4_impl(xs, ys, n, k):
    """``(x0.y0, x1.y0, x2.y0, x3.y0, y0.y0, x0.y1, ..)``: 20 sums, five a candidate, those of slots
    from ``k`` (a literal) on left at zero. Each word of the slot rows, loaded once, serves the four
    candidates: the loop is bound by loads, and four candidates need about half those of one."""
    if not isinstance(k, types.IntegerLiteral):
        return None
    K = k.literal_value

    def impl(xs, ys, n, k):
        u0, u1, u2, u3 = _words(xs[0], n), _words(xs[1], n), _words(xs[2], n), _words(xs[3], n)
        w0, w1, w2, w3 = _words(ys[0], n), _words(ys[1], n), _words(ys[2], n), _words(ys[3], n)
        z = np.float32(0.0)
        a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = a20 = a21 = a22 = a23 = z
        a30 = a31 = a32 = a33 = q0 = q1 = q2 = q3 = z
        for i in range(n):
            p, b0, b1, b2, b3 = u0[i], w0[i], w1[i], w2[i], w3[i]
            q0, q1, q2, q3 = _madd(q0, b0, b0), _madd(q1, b1, b1), _madd(q2, b2, b2), _madd(q3, b3, b3)
            a00, a01, a02, a03 = _madd(a00, p, b0), _madd(a01, p, b1), _madd(a02, p, b2), _madd(a03, p, b3)
            if K > 1:
                p = u1[i]
                a10, a11, a12, a13 = _madd(a10, p, b0), _madd(a11, p, b1), _madd(a12, p, b2), _madd(a13, p, b3)
            if K > 2:
                p = u2[i]
                a20, a21, a22, a23 = _madd(a20, p, b0), _madd(a21, p, b1), _madd(a22, p, b2), _madd(a23, p, b3)
            if K > 3:
                p = u3[i]
                a30, a31, a32, a33 = _madd(a30, p, b0), _madd(a31, p, b1), _madd(a32, p, b2), _madd(a33, p, b3)
        return (a00, a10, a20, a30, q0, a01, a11, a21, a31, q1, a02, a12, a22, a32, q2, a03, a13, a23, a33, q3)

    return impl


@njit(nogil=True, fastmath=FM, inline="always")
def _quad(xrow, s0, k, q, n, res):
    """Slot rows ``xrow[s0 : s0 + k]`` (k of 1..4; the rest of the four repeat the last, unread)
    against candidate rows ``q[0..3]``, over ``n`` words: ``_dot4``'s sums into ``res``."""
    xs = (xrow[s0], xrow[s0 + min(1, k - 1)], xrow[s0 + min(2, k - 1)], xrow[s0 + min(3, k - 1)])
    ys = (q[0], q[1], q[2], q[3])
    if k == 4:
        r = _dot4(xs, ys, n, 4)
    elif k == 3:
        r = _dot4(xs, ys, n, 3)
    elif k == 2:
        r = _dot4(xs, ys, n, 2)
    else:
        r = _dot4(xs, ys, n, 1)
    for i in range(20):
        res[i] = r[i]


@njit(nogil=True, fastmath=FM, inline="always")
def _last_element(xrow, s0, k, q, H, res):
    """The element ``H - 1`` of an odd ``H`` (past the words ``_quad`` reads), added into ``res``."""
    i = H - 1
    for m in range(4):
        v = _cv(numba.carray(_ptr(q[m], np.uint16), (H,))[i])
        res[5 * m + 4] += v * v
        for j in range(k):
            res[5 * m + j] += _cv(numba.carray(_ptr(xrow[s0 + j], np.uint16), (H,))[i]) * v


@njit(nogil=True, fastmath=FM, inline="always")
def _norm_bf16(addr, H):
    """``sum x^2`` of a bf16 row (address), in fp32."""
    n = H // 2
    u = _words(addr, n)
    acc = np.float32(0.0)
    for i in range(n):
        acc = _madd(acc, u[i], u[i])
    if H % 2:
        v = _cv(numba.carray(_ptr(addr, np.uint16), (H,))[H - 1])
        acc += v * v
    return acc


@njit(nogil=True, fastmath=FM, cache=True)
def dots_bf16(work, x, y, H, block, out, pairs, stats):
    """All-bf16 screen, per token: slots four at a time against candidates four at a time (a short
    last quad repeats its last one), into ``out = (xy [S, G, T], yy [G, T], xx [S, T], with_xx)``
    (``with_xx``: the slots' squared norms too, as the block's slot rows are first read).
    ``pairs = (pidx, n, sa, mx, ecols, eranges)``: pair ``p = pidx[s, g] >= 0`` is differenced
    exactly (``exact``'s sums, into ``n``, ``sa``, ``mx [P, T]``) while the token's rows are in
    cache; so are, before the screen, the tokens ``ecols`` (ranges ``eranges``, taken from the same
    counter) that an earlier pass screened. ``stats = (with_sums, finite, per_token, part, ypart)``:
    each token's pair statistics as it is screened (``_token_sums``)."""
    cols, ranges, counter = work
    ecols, eranges = pairs[4], pairs[5]
    with_sums, finite, per_token, part, ypart = stats
    scratch = (np.zeros(20, np.float32), np.empty(x[0].shape[0], np.int64), np.empty(4, np.int64))
    E = eranges.shape[0]
    while True:
        r = _take(counter)
        if r < E:
            _exact_range(x, y, H, ecols[eranges[r, 0] : eranges[r, 1]], pairs)
            continue
        r -= E
        if r >= ranges.shape[0]:
            return
        i0, i1 = ranges[r, 0], ranges[r, 1]
        if with_sums:
            _clear(part[r], ypart[r])
        for b0 in range(i0, i1, block):
            b1 = min(i1, b0 + block)
            tokens = cols[b0:b1]
            _screen_block(x, y, H, tokens, out, pairs, scratch)
            if with_sums:  # (the block's sums still in cache)
                _token_sums((out[2], out[0], out[1]), tokens, (finite, per_token, part[r], ypart[r]))


@njit(nogil=True, fastmath=FM, inline="always")
def _exact_range(x, y, H, tokens, pairs):
    """Pairs ``pidx[s, g] >= 0`` differenced over ``tokens`` (bf16 rows, addresses)."""
    xa, xs, _, xr = x
    ya, ys, _, yr = y
    pidx, n_out, sa_out, mx_out = pairs[0], pairs[1], pairs[2], pairs[3]
    S, G = pidx.shape
    for t in tokens:
        for s in range(S):
            for g in range(G):
                p = pidx[s, g]
                if p >= 0:
                    n_out[p, t], sa_out[p, t], mx_out[p, t] = _diff_row_bf16(
                        xa[s] + xr[t] * xs[s], ya[g] + yr[t] * ys[g], H
                    )


@njit(nogil=True, fastmath=FM, inline="always")
def _screen_block(x, y, H, tokens, out, pairs, scratch):
    """A block of ``tokens`` of the bf16 screen (see ``dots_bf16``), a quad of candidates at a time
    over the whole block."""
    xa, xs, _, xr = x
    ya, ys, _, yr = y
    xy_out, yy_out, xx_out, with_xx = out
    pidx, n_out, sa_out, mx_out = pairs[0], pairs[1], pairs[2], pairs[3]
    res, xrow, q = scratch
    S, G, n = xa.shape[0], ya.shape[0], H // 2
    for g0 in range(0, G, 4):
        for t in tokens:
            for s in range(S):
                xrow[s] = xa[s] + xr[t] * xs[s]
            if with_xx and g0 == 0:
                for s in range(S):
                    xx_out[s, t] = _norm_bf16(xrow[s], H)
            for m in range(4):
                g = min(g0 + m, G - 1)
                q[m] = ya[g] + yr[t] * ys[g]
            for s0 in range(0, S, 4):
                k = min(4, S - s0)
                _quad(xrow, s0, k, q, n, res)
                if H % 2:
                    _last_element(xrow, s0, k, q, H, res)
                for m in range(min(4, G - g0)):
                    for j in range(k):
                        xy_out[s0 + j, g0 + m, t] = res[5 * m + j]
                    yy_out[g0 + m, t] = res[5 * m + 4]
            for m in range(min(4, G - g0)):
                for s in range(S):
                    p = pidx[s, g0 + m]
                    if p >= 0:
                        n_out[p, t], sa_out[p, t], mx_out[p, t] = _diff_row_bf16(xrow[s], q[m], H)


@njit(nogil=True, fastmath=FM, cache=True)
def _load_x(x, H, t, buf):
    """Slot rows of reference token t as fp32 into ``buf [S, H]``."""
    xa, xs, xc, xr = x
    for s in range(xa.shape[0]):
        a = xa[s] + xr[t] * xs[s]
        if xc[s] == BF16:
            src = numba.carray(_ptr(a, np.uint16), (H,))
            for i in range(H):
                buf[s, i] = _cv(src[i])
        else:
            srcf = numba.carray(_ptr(a, np.float32), (H,))
            for i in range(H):
                buf[s, i] = srcf[i]


@njit(nogil=True, fastmath=FM, cache=True)
def _fdot(xs, s0, k, y, H, out):
    """fp32 slot rows ``xs[s0..s0+k)`` against ``y`` (bf16 or fp32): ``out[0..k)`` and yy in ``out[k]``."""
    if k == 4:
        x0, x1, x2, x3 = xs[s0], xs[s0 + 1], xs[s0 + 2], xs[s0 + 3]
        a0 = a1 = a2 = a3 = yy = np.float32(0.0)
        for i in range(H):
            v = _cv(y[i])
            yy += v * v
            a0 += x0[i] * v
            a1 += x1[i] * v
            a2 += x2[i] * v
            a3 += x3[i] * v
        out[0], out[1], out[2], out[3], out[4] = a0, a1, a2, a3, yy
    elif k == 3:
        x0, x1, x2 = xs[s0], xs[s0 + 1], xs[s0 + 2]
        a0 = a1 = a2 = yy = np.float32(0.0)
        for i in range(H):
            v = _cv(y[i])
            yy += v * v
            a0 += x0[i] * v
            a1 += x1[i] * v
            a2 += x2[i] * v
        out[0], out[1], out[2], out[3] = a0, a1, a2, yy
    elif k == 2:
        x0, x1 = xs[s0], xs[s0 + 1]
        a0 = a1 = yy = np.float32(0.0)
        for i in range(H):
            v = _cv(y[i])
            yy += v * v
            a0 += x0[i] * v
            a1 += x1[i] * v
        out[0], out[1], out[2] = a0, a1, yy
    else:
        x0 = xs[s0]
        a0 = yy = np.float32(0.0)
        for i in range(H):
            v = _cv(y[i])
            yy += v * v
            a0 += x0[i] * v
        out[0], out[1] = a0, yy


@njit(nogil=True, fastmath=FM, cache=True)
def dots_any(work, x, y, H, out):
    """Portable screen: slot rows converted to fp32 once per token, fused multiply-adds, into
    ``out = (xy, yy, xx, with_xx)`` as ``dots_bf16``'s."""
    cols, ranges, counter = work
    buf = np.empty((x[0].shape[0], H), np.float32)
    res = np.zeros(5, np.float32)
    while True:
        r = _take(counter)
        if r >= ranges.shape[0]:
            return
        for i in range(ranges[r, 0], ranges[r, 1]):
            _dots_any_token(x, y, H, cols[i], out, buf, res)


@njit(nogil=True, fastmath=FM, inline="always")
def _dots_any_token(x, y, H, t, out, buf, res):
    ya, ys, yc, yr = y
    xy_out, yy_out, xx_out, with_xx = out
    S, G = buf.shape[0], ya.shape[0]
    _load_x(x, H, t, buf)
    if with_xx:
        for s in range(S):
            acc = np.float32(0.0)
            for h in range(H):
                acc += buf[s, h] * buf[s, h]
            xx_out[s, t] = acc
    for g in range(G):
        a = ya[g] + yr[t] * ys[g]
        for s0 in range(0, S, 4):
            k = min(4, S - s0)
            if yc[g] == BF16:
                _fdot(buf, s0, k, numba.carray(_ptr(a, np.uint16), (H,)), H, res)
            else:
                _fdot(buf, s0, k, numba.carray(_ptr(a, np.float32), (H,)), H, res)
            for j in range(k):
                xy_out[s0 + j, g, t] = res[j]
            yy_out[g, t] = res[k]


# --------------------------------------------------------------------- refine: fp32 differences
@njit(nogil=True, fastmath=FM, cache=True)
def _diff_row_bf16(xaddr, yaddr, H):
    """``(sum d^2, sum |d|, max |d|)`` of two bf16 rows (addresses), ``d = x - y`` in fp32, a word
    (two elements) a step. NaN and Inf reach the sums; the maximum is taken on the bits of ``|d|``,
    so a NaN orders above Inf."""
    n = H // 2
    u, w = _words(xaddr, n), _words(yaddr, n)
    sn = sa = np.float32(0.0)
    mx = np.uint32(0)
    for i in range(n):
        d0 = _lo(u[i]) - _lo(w[i])
        d1 = _hi(u[i]) - _hi(w[i])
        sn += d0 * d0 + d1 * d1
        sa += abs(d0) + abs(d1)
        mx = max(mx, _abs_bits(d0), _abs_bits(d1))
    if H % 2:
        d = _cv(numba.carray(_ptr(xaddr, np.uint16), (H,))[H - 1]) - _cv(
            numba.carray(_ptr(yaddr, np.uint16), (H,))[H - 1]
        )
        sn += d * d
        sa += abs(d)
        mx = max(mx, _abs_bits(d))
    return sn, sa, np.uint32(mx).view(np.float32)


@njit(nogil=True, fastmath=FM, cache=True)
def _diff_row(x, y, H):
    sn = np.float32(0.0)
    sa = np.float32(0.0)
    mx = np.uint32(0)
    for i in range(H):
        d = _cv(x[i]) - _cv(y[i])
        sn += d * d
        sa += abs(d)
        mx = max(mx, _abs_bits(d))  # on the bits: NaN orders above Inf
    return sn, sa, np.uint32(mx).view(np.float32)


@njit(nogil=True, fastmath=FM, cache=True)
def exact_rows(work, x, y, H, sel, diffs):
    """Pairs (slot ``sel[0][p]``, candidate ``sel[1][p]``): per token, every pair's candidate row
    differenced against its slot row into ``diffs = (n, sa, mx)``, both read where they lie (bf16
    widened in the loop, exactly: no fp32 copy of the slot rows to write and read back)."""
    cols, ranges, counter = work
    while True:
        r = _take(counter)
        if r >= ranges.shape[0]:
            return
        for i in range(ranges[r, 0], ranges[r, 1]):
            _exact_token(x, y, H, sel, cols[i], diffs)


@njit(nogil=True, fastmath=FM, inline="always")
def _exact_token(x, y, H, sel, t, diffs):
    xa, xs, xc, xr = x
    ya, ys, yc, yr = y
    p_slot, p_cand = sel
    n_out, sa_out, mx_out = diffs
    for p in range(p_slot.shape[0]):
        s, m = p_slot[p], p_cand[p]
        a = xa[s] + xr[t] * xs[s]
        b = ya[m] + yr[t] * ys[m]
        if xc[s] == BF16:
            if yc[m] == BF16:
                r = _diff_row_bf16(a, b, H)
            else:
                r = _diff_row(numba.carray(_ptr(a, np.uint16), (H,)), numba.carray(_ptr(b, np.float32), (H,)), H)
        elif yc[m] == BF16:
            r = _diff_row(numba.carray(_ptr(a, np.float32), (H,)), numba.carray(_ptr(b, np.uint16), (H,)), H)
        else:
            r = _diff_row(numba.carray(_ptr(a, np.float32), (H,)), numba.carray(_ptr(b, np.float32), (H,)), H)
        n_out[p, t], sa_out[p, t], mx_out[p, t] = r


# ------------------------------------------------------------------------ statistics of the pairs
# A pass's statistics of every pair are taken per token as it is screened (``with_sums``), the
# token's sums still in reach of the cache: no pass of their own over ``[S, G, T]`` afterwards. Each
# token range adds into partial sums of its own (``part [R, 3, S, G]``, ``ypart [R, G]``, float64),
# summed in range order after the pass: the same sums whichever thread takes which range.
@njit(nogil=True, cache=True)  # IEEE arithmetic: no fast-math (NaN tests, the sums' order)
def _token_sums(sc, tokens, st):
    """The ``tokens``' statistics of every pair from their screen ``sc = (xx [S, T],
    xy [S, G, T], yy [G, T])`` (fp32), in float64, in token order, into ``st = (finite, per_token,
    part, ypart)``: ``finite [G, T]`` (yy finite) and ``per_token [S, G, T]`` (rel_diff) written,
    ``part [3, S, G]`` (sum of ``max(xx + yy - 2xy, 0)``, of ``xx + yy``, of ``xy``) and ``ypart
    [G]`` (sum of yy) added to. A token where a slot or the candidate is not finite is left out:
    per_token 0, yy zeroed in place, nothing added. (A call a block of tokens: a call a token and
    candidate cost more than the sums.)"""
    for t in tokens:
        _one_token(sc, t, st)


@njit(nogil=True, cache=True, inline="always")
def _one_token(sc, t, st):
    xx, xy, yy = sc
    finite, per_token, part, ypart = st
    S, G = xy.shape[0], xy.shape[1]
    bad = False
    for s in range(S):
        if not np.isfinite(xx[s, t]):
            bad = True
    for g in range(G):
        fin = np.isfinite(yy[g, t])
        finite[g, t] = fin
        if bad or not fin:
            yy[g, t] = 0.0
            for s in range(S):
                per_token[s, g, t] = 0.0
            continue
        y = np.float64(yy[g, t])
        ypart[g] += y
        for s in range(S):
            v = np.float64(xy[s, g, t])
            d = np.float64(xx[s, t]) + y
            n = d - 2.0 * v
            if n < 0.0:  # noqa: PLR1730  (max() would turn a NaN into 0; numpy's maximum keeps it, so must this)
                n = 0.0
            part[0, s, g] += n
            part[1, s, g] += d
            part[2, s, g] += v
            per_token[s, g, t] = n / (1e-30 if d < 1e-30 else d)


@njit(nogil=True, cache=True)
def _clear(part, ypart):
    part[:] = 0.0
    ypart[:] = 0.0


@njit(nogil=True, cache=True)
def sums_rows(work, sc, stats):
    """``_token_sums`` of every candidate over the work's tokens, into ``stats = (finite,
    per_token, part, ypart)``: the statistics of a screen that did not take them in its pass
    (``dots_any``)."""
    cols, ranges, counter = work
    finite, per_token, part, ypart = stats
    while True:
        r = _take(counter)
        if r >= ranges.shape[0]:
            return
        _clear(part[r], ypart[r])
        _token_sums(sc, cols[ranges[r, 0] : ranges[r, 1]], (finite, per_token, part[r], ypart[r]))


# ------------------------------------------------------------------------------------- the driver
CODES = {"bfloat16": BF16, "float32": F32}  # the element codes the kernels read, by dtype name


@functools.lru_cache(maxsize=1)
def _codes() -> dict[Any, int]:
    import torch

    return {getattr(torch, name): code for name, code in CODES.items()}


def _code(t: torch.Tensor) -> int | None:
    return _codes().get(t.dtype)


class Group(NamedTuple):
    """Prepared candidates and the addresses the kernels read them by, made once for every pass
    over them (``PairStats.group``): a pass takes a group or a plain list of candidates."""

    tensors: tuple[torch.Tensor, ...]
    ya: npt.NDArray[np.int64]  # each candidate's first byte
    yc: npt.NDArray[np.int64]  # its element code (BF16, F32)
    ys: npt.NDArray[np.int64]  # its row stride in bytes
    owner: Any = None  # what keeps the bytes mapped, where there are no tensors (``group_at``)


class Screened(NamedTuple):
    """What ``PairStats.dots`` gives: the screen's sums and the asked pairs' exact sums."""

    xy: npt.NDArray[np.float32]  # [S, G, T]
    yy: npt.NDArray[np.float32]  # [G, T]
    n: npt.NDArray[np.float32]  # [P, T] sum (x - y)^2
    sa: npt.NDArray[np.float32]  # [P, T] sum |x - y|
    mx: npt.NDArray[np.float32]  # [P, T] max |x - y|
    sums: PairSums | None = None  # the pairs' statistics over the pass's tokens, where asked for


class SumsOut(NamedTuple):
    """Where a pass puts its pairs' per-token statistics (``_token_sums``), and the slots' squared
    norms they read (the pass's own ``xx`` where it writes them)."""

    xx: npt.NDArray[np.float32]  # [S, T]
    finite: npt.NDArray[np.bool_]  # [G, T] the candidate's yy is finite
    per_token: npt.NDArray[np.float32]  # [S, G, T] rel_diff, 0 where a token is left out


class PairSums(NamedTuple):
    """A pass's statistics of every pair over its tokens, float64 (tokens left out add nothing)."""

    num: npt.NDArray[np.float64]  # [S, G] sum max(xx + yy - 2xy, 0)
    den: npt.NDArray[np.float64]  # [S, G] sum (xx + yy)
    dot: npt.NDArray[np.float64]  # [S, G] sum xy
    yy: npt.NDArray[np.float64]  # [G] sum yy


def token_ranges(T: int, threads: int, least: int = RANGE_TOKENS) -> list[tuple[int, int]]:
    """Tokens ``0..T`` cut into ranges for ``threads`` threads to take in turn: each ``1 / (GUIDE *
    threads)`` of the tokens left (at least ``least``), so they shrink towards the end."""
    if threads <= 1 or least >= T:
        return [(0, T)] if T else []
    out, t = [], 0
    while t < T:
        n = min(T - t, max(least, -(-(T - t) // (GUIDE * threads))))
        out.append((t, t + n))
        t += n
    return out


def _partials(R: int, S: int, G: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The partial sums of a pass's ``R`` token ranges, ``[R, 3, S, G]`` and ``[R, G]`` (each range
    clears its own: ``_clear``); none where the pass takes no statistics."""
    return np.empty((R, 3, S, G)), np.empty((R, G))


def _summed(part: npt.NDArray[np.float64], ypart: npt.NDArray[np.float64]) -> PairSums:
    """A pass's partial sums (``[R, 3, S, G]``, ``[R, G]``, one per token range) added in range order."""
    tot = part.sum(0)
    return PairSums(tot[0], tot[1], tot[2], ypart.sum(0))


_Plan = tuple["npt.NDArray[np.int64]", "npt.NDArray[np.int64]", int]  # token columns, ranges of them, threads
_Rows = tuple["npt.NDArray[np.int64]", "npt.NDArray[np.int64]", "npt.NDArray[np.int64]", "npt.NDArray[np.int64]"]
_Diffs = tuple["npt.NDArray[np.float32]", "npt.NDArray[np.float32]", "npt.NDArray[np.float32]"]


class PairStats:
    """Reference slots (each ``[rows, H]``, reference token t at row ``ref_rows[t]``) against
    candidates whose compared rows are ``infer_rows``; work split over ``threads`` token ranges.
    A pass covers every token, or the token columns ``cols`` it is given (its sums go to those
    columns of the arrays it fills, the others are left as they are): a sample of tokens and then
    the rest, each token read once."""

    def __init__(
        self,
        slots: Sequence[torch.Tensor],
        ref_rows: np.ndarray,
        infer_rows: np.ndarray,
        threads: int = 1,
        thread_tokens: int = THREAD_TOKENS,
    ) -> None:
        self.xr = np.ascontiguousarray(ref_rows, dtype=np.int64)
        self.yr = np.ascontiguousarray(infer_rows, dtype=np.int64)
        self.T = len(self.xr)
        if self.yr.shape != (self.T,):
            raise ValueError(f"{len(self.yr)} inference rows for {self.T} reference tokens")
        self.H = int(slots[0].shape[1])
        self.lo, self.hi = (int(self.yr.min()), int(self.yr.max())) if self.T else (0, -1)
        self.slots = [self._prepare(x, self.xr, "reference slot") for x in slots]
        self.S = len(self.slots)
        self.x = (
            np.array([x.data_ptr() for x in self.slots], np.int64),
            np.array([x.stride(0) * x.element_size() for x in self.slots], np.int64),
            np.array([_code(x) for x in self.slots], np.int64),
            self.xr,
        )
        self.max_threads = max(1, int(threads))
        self.thread_tokens = thread_tokens
        self._all = self._plan(np.arange(self.T, dtype=np.int64), thread_tokens)
        self.threads = self._all[2]
        self.block = BLOCK
        self.kernel = screen_kernel(bool((self.x[2] == BF16).all()))

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """The token ranges of a pass over every token."""
        return [(int(a), int(b)) for a, b in self._all[1]]

    @property
    def differences_in_pass(self) -> bool:
        """Whether ``dots`` differences the asked pairs in its own pass (the bf16 screen), not in
        a pass of ``exact`` after it."""
        return self.kernel == "bf16-fma"

    def _pass(self, cols: np.ndarray | None, thread_tokens: int | None) -> _Plan:
        """A pass over token columns ``cols`` (None: all), at least ``thread_tokens`` tokens a thread
        (None: this one's)."""
        if cols is None and thread_tokens is None:
            return self._all
        cols_ = np.arange(self.T, dtype=np.int64) if cols is None else np.ascontiguousarray(cols, dtype=np.int64)
        if len(cols_) and not (int(cols_.min()) >= 0 and int(cols_.max()) < self.T):
            raise ValueError(f"token columns outside 0..{self.T - 1}")
        return self._plan(cols_, thread_tokens or self.thread_tokens)

    def _plan(self, cols: npt.NDArray[np.int64], thread_tokens: int) -> _Plan:
        """The columns, their ranges and the threads that take them."""
        n = max(1, min(self.max_threads, len(cols) // thread_tokens))
        ranges = np.array(token_ranges(len(cols), n, min(RANGE_TOKENS, thread_tokens)), np.int64).reshape(-1, 2)
        return cols, ranges, n

    def _run(self, fn: Callable[..., Any], plan: _Plan, *args: Any, more: int = 0) -> None:
        """``fn((cols, ranges, counter), *args)`` once on each of the plan's threads (this one and its
        gang's): each call takes the next range from the shared counter until none is left, so a
        thread that falls behind takes fewer and no range waits on a busy thread (``more``: ranges
        of its own the kernel's counter hands out first)."""
        cols, ranges, threads = plan
        call = ((cols, ranges, np.zeros(1, np.int64)), *args)
        n = min(threads, len(ranges) + more)
        if n <= 1:
            fn(*call)
            return
        gang(threads).run([functools.partial(fn, *call)] * n)

    def _prepare(self, y: torch.Tensor, rows: np.ndarray, what: str) -> torch.Tensor:
        import torch

        if y.dim() != 2 or y.shape[1] != self.H:
            raise ValueError(f"{what} of shape {tuple(y.shape)}, expected [rows, {self.H}]")
        lo, hi = (self.lo, self.hi) if rows is self.yr else (int(rows.min()), int(rows.max())) if len(rows) else (0, -1)
        if not (lo >= 0 and hi < y.shape[0]):
            raise ValueError(f"compared rows up to {hi} fall outside a {what} of {y.shape[0]} rows")
        if _code(y) is None:
            y = y.to(torch.float32)
        if y.stride(1) != 1 or (y.shape[0] > 1 and y.stride(0) < self.H):
            y = y.contiguous()
        return y

    def prepare(self, y: torch.Tensor) -> torch.Tensor:
        """A candidate as the kernels read it: bf16 or fp32, unit stride along H (else a copy)."""
        return self._prepare(y, self.yr, "candidate")

    def group(self, ys: Sequence[torch.Tensor]) -> Group:
        """Candidates prepared (``prepare``) for the passes over them, their addresses taken once."""
        ts = tuple(self.prepare(y) for y in ys)
        return Group(
            ts,
            np.array([y.data_ptr() for y in ts], np.int64),
            np.array([_code(y) for y in ts], np.int64),
            np.array([y.stride(0) * y.element_size() for y in ts], np.int64),
        )

    def group_at(
        self, owner: Any, addresses: Sequence[int], codes: Sequence[int], row_bytes: Sequence[int], rows: Sequence[int]
    ) -> Group:
        """Candidates read where they lie in a mapping that ``owner`` keeps: candidate g's row r at
        ``addresses[g] + r * row_bytes[g]``, ``rows[g]`` rows of H elements of ``codes[g]`` (BF16 or
        F32) each. No tensor is made (a file's candidates cost one mapping, not one load each)."""
        ya, yc, ys = (np.array(v, np.int64) for v in (addresses, codes, row_bytes))
        for g in range(len(ya)):
            if yc[g] not in (BF16, F32):
                raise ValueError(f"candidate {g}: element code {yc[g]}, expected bf16 or fp32")
            if ys[g] < self.H * (2 if yc[g] == BF16 else 4):
                raise ValueError(f"candidate {g}: rows of {ys[g]} bytes hold fewer than {self.H} elements")
            if not self.hi < rows[g]:
                raise ValueError(f"compared rows up to {self.hi} fall outside a candidate of {rows[g]} rows")
        return Group((), ya, yc, ys, owner)

    def _group(self, ys: Group | Sequence[torch.Tensor]) -> Group:
        return ys if isinstance(ys, Group) else self.group(ys)

    def _y(self, grp: Group) -> _Rows:
        return (grp.ya, grp.ys, grp.yc, self.yr)

    def dots(
        self,
        ys: Group | Sequence[torch.Tensor],
        xx: npt.NDArray[np.float32] | None = None,
        pairs: Sequence[tuple[int, int]] = (),
        cols: np.ndarray | None = None,
        out: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]] | None = None,
        thread_tokens: int | None = None,
        *,
        diffs: _Diffs | None = None,
        exact_cols: np.ndarray | None = None,
        sums: SumsOut | None = None,
    ) -> Screened:
        """Screen of a group of candidates (``group``, or a list): ``xy [S, G, T]`` and ``yy [G, T]``
        (fp32, into ``out`` where given); given ``xx [S, T]`` (fp32), the slots' squared norms are
        written there in the same pass (no read of the slots of their own); ``pairs``
        ``[(slot, index into ys)]`` get ``exact``'s sums (``n, sa, mx [P, T]``, into ``diffs`` where
        given), from the same pass where the bf16 screen runs (the rows are in cache), else from
        ``exact``; so do the token columns ``exact_cols`` (screened by an earlier pass), in the same
        pass. Only token columns ``cols`` are screened (None: all), at least ``thread_tokens`` a
        thread (None: this one's). ``sums``: the pairs' statistics of those tokens too, per token
        into its arrays and summed (``Screened.sums``); yy is zeroed where a token is left out."""
        grp = self._group(ys)  # (held to the end: the kernels read its tensors by address)
        G = len(grp.ya)
        plan = self._pass(cols, thread_tokens)
        xy, yy = self._screen_out(out, G)
        self._check_sums(sums, xx, G)
        xx_ = xx if xx is not None else sums.xx if sums is not None else np.empty((1, 1), np.float32)
        screen = (xy, yy, xx_, xx is not None)
        n, sa, mx = self._diffs_out(diffs, len(pairs))
        if self.kernel == "bf16-fma" and (grp.yc == BF16).all():
            return self._dots_bf16(grp, plan, screen, pairs, (n, sa, mx), exact_cols, sums)
        self._run(dots_any, plan, self.x, self._y(grp), self.H, screen)
        if len(pairs):
            self.exact(pairs, grp, cols, (n, sa, mx), thread_tokens)
            if exact_cols is not None and len(exact_cols):
                self.exact(pairs, grp, exact_cols, (n, sa, mx), RANGE_TOKENS)
        return Screened(
            xy, yy, n, sa, mx, self.pair_sums(xy, yy, sums, cols, thread_tokens) if sums is not None else None
        )

    def _dots_bf16(
        self,
        grp: Group,
        plan: _Plan,
        screen: tuple[Any, ...],
        pairs: Sequence[tuple[int, int]],
        diffs: _Diffs,
        exact_cols: np.ndarray | None,
        sums: SumsOut | None,
    ) -> Screened:
        """``dots`` on the bf16 screen: the pairs differenced and the statistics taken in its pass."""
        G = len(grp.ya)
        pidx = np.full((self.S, G), -1, np.int64)
        for p, (s, g) in enumerate(pairs):
            pidx[s, g] = p
        ecols, eranges, _ = self._pass(
            exact_cols if exact_cols is not None and len(pairs) else np.empty(0, np.int64), RANGE_TOKENS
        )
        part, ypart = _partials(len(plan[1]) if sums is not None else 0, self.S, G)
        stats = (
            (True, sums.finite, sums.per_token, part, ypart)
            if sums is not None
            else (False, np.empty((1, 1), np.bool_), np.empty((1, 1, 1), np.float32), part, ypart)
        )
        self._run(
            dots_bf16,
            plan,
            self.x,
            self._y(grp),
            self.H,
            self.block,
            screen,
            (pidx, *diffs, ecols, eranges),
            stats,
            more=len(eranges),
        )
        return Screened(screen[0], screen[1], *diffs, _summed(part, ypart) if sums is not None else None)

    def _screen_out(
        self, out: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]] | None, G: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """The screen's ``xy [S, G, T]`` and ``yy [G, T]``: ``out``, checked, or new arrays."""
        if out is None:
            return np.empty((self.S, G, self.T), np.float32), np.empty((G, self.T), np.float32)
        xy, yy = out
        if xy.shape != (self.S, G, self.T) or yy.shape != (G, self.T):
            raise ValueError(
                f"out: arrays of shape {xy.shape}, {yy.shape} for {self.S} slots, {G} candidates, {self.T} tokens"
            )
        return xy, yy

    def _check_sums(self, sums: SumsOut | None, xx: npt.NDArray[np.float32] | None, G: int) -> None:
        if sums is None:
            return
        if xx is not None and sums.xx is not xx:
            raise ValueError("sums: its xx must be the pass's own xx where the pass writes the norms")
        if (
            sums.xx.shape != (self.S, self.T)
            or sums.finite.shape != (G, self.T)
            or sums.per_token.shape != (self.S, G, self.T)
        ):
            raise ValueError(
                f"sums: arrays of shape {sums.xx.shape}, {sums.finite.shape}, {sums.per_token.shape} "
                f"for {self.S} slots, {G} candidates, {self.T} tokens"
            )

    def _diffs_out(self, diffs: _Diffs | None, P: int) -> _Diffs:
        """The differences' ``n, sa, mx [P, T]``: ``diffs``, checked, or new arrays."""
        if diffs is None:
            return tuple(np.empty((P, self.T), np.float32) for _ in range(3))  # type: ignore[return-value]
        if any(a.shape != (P, self.T) for a in diffs):
            n, sa, mx = diffs
            raise ValueError(f"diffs: arrays of shape {n.shape}, {sa.shape}, {mx.shape} for {P} pairs, {self.T} tokens")
        return diffs

    def pair_sums(
        self,
        xy: npt.NDArray[np.float32],
        yy: npt.NDArray[np.float32],
        out: SumsOut,
        cols: np.ndarray | None = None,
        thread_tokens: int | None = None,
    ) -> PairSums:
        """The statistics ``dots(sums=...)`` takes in its pass, from a screen's ``xy [S, G, T]`` and
        ``yy [G, T]`` (fp32; yy zeroed where a token is left out) and the slots' norms ``out.xx``,
        over token columns ``cols`` (None: all): per token into ``out``, summed by token range."""
        plan = self._pass(cols, thread_tokens)
        part, ypart = _partials(len(plan[1]), self.S, yy.shape[0])
        self._run(sums_rows, plan, (out.xx, xy, yy), (out.finite, out.per_token, part, ypart))
        return _summed(part, ypart)

    def exact(
        self,
        pairs: Sequence[tuple[int, int]],
        ys: Group | Sequence[torch.Tensor],
        cols: np.ndarray | None = None,
        out: _Diffs | None = None,
        thread_tokens: int | None = None,
    ) -> _Diffs:
        """fp32 differences of ``pairs`` ``[(slot, index into ys)]`` over prepared candidates ``ys``,
        in one pass: per token ``n [P, T]`` (sum of squares), ``sa [P, T]`` (sum of |d|) and
        ``mx [P, T]`` (max |d|), into ``out`` where given; token columns and threads as ``dots``."""
        diffs = self._diffs_out(out, len(pairs))
        sel = (np.array([int(p[0]) for p in pairs], np.int64), np.array([int(p[1]) for p in pairs], np.int64))
        grp = self._group(ys)
        if len(pairs):
            self._run(exact_rows, self._pass(cols, thread_tokens), self.x, self._y(grp), self.H, sel, diffs)
        return diffs
