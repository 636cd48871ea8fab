"""Per-token pair sums on a CPU, one pass over the candidate bytes (numba kernels).

Reference slots and candidates are ``[rows, H]`` tensors (bf16 or fp32, unit stride along H) read
where they lie: a memory-mapped tensor, a column slice of a packed ``[T, K*H]`` tensor or a token
list that is not a plain range costs no copy (reference token t is row ``ref_rows[t]`` of every
slot and row ``infer_rows[t]`` of every candidate).

- ``dots``: per token, ``xy[s, g, t] = sum_h x*y`` and ``yy[g, t] = sum_h y^2`` for a group of
  candidates: the screen. The products of bf16 values are exact in fp32 and are accumulated in
  fp32 over one row, so a rel_diff rebuilt as ``(xx + yy - 2xy) / (xx + yy)`` is good to about
  1e-6 (cancellation), enough to rank every pair and to draw the far ones. All-bf16 data goes
  through one screen: four candidates per load of the slot rows, a block of tokens at a time so the
  block's slot rows stay cached while the group streams past, the candidate rows read next
  prefetched into L2 line by line. On a CPU with AVX512-BF16 its products are ``vdpbf16ps`` (two
  products per lane, fp32 accumulate; subnormal inputs count as zero); elsewhere each 32-bit lane
  of bf16 pairs is split into two fp32 values by a shift and a mask (a bf16 is the high half of an
  fp32) and multiplied-added, in vectors of 16 lanes (``bf16-fma``) or, on a CPU without
  AVX-512 (16 vector registers), of 8 (``bf16-fma256``). Anything else converts to fp32 per token
  and uses fused multiply-adds (``fma``).
- ``exact``: chosen (slot, candidate) pairs in one pass, per token ``sum (x-y)^2`` from fp32
  differences (no cancellation), ``sum |x-y|`` and ``max |x-y|``: the refine of the best candidates.
- the slots' per-token ``sum x^2`` come with a group's screen (``dots(ys, xx)``).
- the pairs' statistics (``dots(sums=...)``): per token, the rel_diff of every pair and whether the
  candidate is finite, and over the pass's tokens float64 sums of ``xx + yy - 2xy``, ``xx + yy``,
  ``xy`` and ``yy``, taken in the screen's pass a block of tokens at a time (``_token_sums``).

Kernels release the GIL and run once on each of a pass's threads (numba's OpenMP or TBB threads,
``workbench.hidden.team``; else a gang of Python threads, ``workbench.hidden.gang``), every call
taking the next token range from a counter the calls share (an atomic add) until none is left; the ranges shrink towards the end so the threads end together. Fast-math allows
reassociation and contraction only: NaN and Inf propagate, so a non-finite row shows as a
non-finite sum. numba compiles on first use and caches the machine code on disk; this module
imports numba, so the engine imports it only for the CPU path.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from workbench.hidden import team
from workbench.hidden.gang import gang

if TYPE_CHECKING:
    import numpy.typing as npt
    import torch

BF16, F32 = 1, 2
VDP, SPLIT, SPLIT256 = 0, 1, 2  # how the bf16 screen multiplies (``_dot_km``'s literal argument)
FM = {"reassoc", "contract", "nsz", "arcp"}  # no nnan/ninf: NaN and Inf must reach the sums
BLOCK: int | None = None  # tokens per block of the bf16 screen; None: sized to the L2 cache (block_tokens)
MAX_BLOCK = 8  # tokens per block at most: the fastest measured (block_tokens)
PF_LOCALITY = 2  # the bf16 screen prefetches the rows it reads next into L2 (T1; -1: none)
THREAD_TOKENS = 64  # the fewest tokens a thread is given (less costs more in its start than it saves)
GUIDE = 2  # each token range is 1 / (GUIDE * threads) of the tokens not yet handed out
RANGE_TOKENS = 2  # ... and at least this many: ranges shrink as the pass nears its end
# Ranges are taken from a shared counter by whichever thread is free, so a core that falls behind
# (another process, the host) takes fewer, and the shrinking ranges let every thread end together.
# The screen over 1.82 GB on the H200 host, 16 threads: 24.1-26.6 ms with one range a thread,
# 17.3-22.5 ms with 4 a thread (handed out by a pool), 16.8-17.9 ms with 16 of 8 tokens a thread
# from the counter. Ranges of 8 tokens still left the last thread ending 0.8-1.4 ms after the first
# (3 ms at 2 threads); shrinking ones, 0.6 ms (0.1 ms).


def _host_features() -> dict[str, bool]:
    try:
        from llvmlite import binding

        return {str(k): bool(v) for k, v in binding.get_host_cpu_features().items()}
    except Exception:
        return {}


_FEATURES = _host_features()
HAS_BF16_DOT = _FEATURES.get("avx512bf16", False)
# The split-lane screen keeps 16 accumulators (3 slots and the candidate's own norm, for each of 4
# candidates). In 16-lane vectors they take 16 of AVX-512's 32 registers, but on a CPU with 16
# registers of 256 bits each is two: LLVM spills them to the stack, 99 moves per 64 multiply-adds
# in the inner loop; in 8-lane vectors (``bf16-fma256``) 59. On a 2-core AMD EPYC (Zen 2, AVX2) the
# screen over 1.82 GB took 110-111 ms with 8 lanes against 117-132 ms with 16 (fastest of 7, two
# rounds interleaved); 2 candidates a pass spilled least (8 moves) but ran slowest (121-125 ms).
HAS_AVX512 = _FEATURES.get("avx512f", False)


# ------------------------------------------------------------------------------------ intrinsics
@intrinsic
def _ptr_u16(typingctx, addr):
    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.uint16)))

    return types.CPointer(types.uint16)(types.int64), codegen


@intrinsic
def _ptr_f32(typingctx, addr):
    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.float32)))

    return types.CPointer(types.float32)(types.int64), codegen


@intrinsic
def _bits_f32(typingctx, v):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))

    return types.float32(types.uint32), codegen


@intrinsic
def _abs_max_bits(typingctx, mx, d):
    """``max(mx, bits(|d|))`` on 32-bit lanes: the bits of a non-negative float order as the float
    does and a NaN above Inf. (Written in numba, the integers widen to 64 bits and the loop runs
    on half as many lanes.)"""

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        bits = builder.and_(builder.bitcast(args[1], i32), ir.Constant(i32, 0x7FFFFFFF))
        return builder.select(builder.icmp_unsigned(">", bits, args[0]), bits, args[0])

    return types.uint32(types.uint32, types.float32), codegen


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


def _cv(v):
    """An element as fp32 (compiled only: see the overload below)."""
    raise NotImplementedError


@overload(_cv, inline="always")
def _cv_impl(v):
    if v == types.uint16:  # bf16 bits: the high half of an fp32
        return lambda v: _bits_f32(np.uint32(v) << np.uint32(16))
    if v == types.float32:
        return lambda v: v


def _bf16_operand() -> Any:
    """The intrinsic's operand type: ``<32 x bfloat>`` since LLVM 17 (llvmlite has no ``bfloat``:
    a small type class spells it), ``<16 x i32>`` before. None where neither can be made."""
    try:
        from llvmlite import binding

        if tuple(binding.llvm_version_info) < (17,):
            return ir.VectorType(ir.IntType(32), 16)

        class BFloat(ir.types._BaseFloatType):  # type: ignore[misc]  # llvmlite has no type information
            null = "0.0"
            intrinsic_name = "bf16"

            def __str__(self) -> str:
                return "bfloat"

        BFloat._create_instance()
        return ir.VectorType(BFloat(), 32)
    except Exception:
        return None


_BF16_OPERAND = _bf16_operand()
HAS_BF16_DOT = HAS_BF16_DOT and _BF16_OPERAND is not None
HAS_BF16_SCREEN = True  # the bf16 screen builds here (cleared where this numba/LLVM cannot)
# the bf16 screens and the kernel each runs (looked up by name when called, so a test can stand in)
SCREEN_FUNCS = {"vdpbf16ps": "dots_bf16", "bf16-fma": "dots_bf16_fma", "bf16-fma256": "dots_bf16_fma256"}
BF16_SCREENS = tuple(SCREEN_FUNCS)


def screen_kernel(all_bf16: bool) -> str:
    """The kernel that screens this data on this CPU: ``vdpbf16ps``, ``bf16-fma`` (split lanes in
    512-bit vectors), ``bf16-fma256`` (in 256-bit ones: a CPU without AVX-512) or ``fma``."""
    if not all_bf16 or not HAS_BF16_SCREEN:
        return "fma"
    if HAS_BF16_DOT:
        return "vdpbf16ps"
    return "bf16-fma" if HAS_AVX512 else "bf16-fma256"


@intrinsic
def _dot_km(typingctx, xs, ys, yn, nb, how):
    """``(x_0..x_{K-1}), (y_0..y_{M-1}), nblocks, how -> (x_0.y_0 .. x_{K-1}.y_0, y_0.y_0, x_0.y_1 ..)``:
    K bf16 slot rows against M bf16 candidate rows (addresses) over ``32 * nblocks`` elements. Each
    slot vector loaded serves all M candidates: the loop is bound by loads, and M = 4 needs 2.3x
    fewer than one candidate at a time. ``how`` (a literal) is ``VDP``: ``vdpbf16ps`` (AVX512-BF16),
    or ``SPLIT``: each 32-bit lane of two bf16 split into two fp32 (the low one shifted up, the high
    one masked) and multiplied-added, in vectors of 16 lanes, or ``SPLIT256``: the same in vectors
    of 8 lanes, two to a block (any CPU runs either: LLVM splits vectors wider than the CPU's)."""
    if not isinstance(how, types.IntegerLiteral) or how.literal_value not in (VDP, SPLIT, SPLIT256):
        return None
    split = how.literal_value != VDP
    lanes = 8 if how.literal_value == SPLIT256 else 16
    K, M = len(xs), len(ys)
    sig = types.UniTuple(types.float32, M * (K + 1))(xs, ys, yn, nb, how)
    f32v = ir.VectorType(ir.FloatType(), lanes)
    i32v = ir.VectorType(ir.IntType(32), lanes)
    bf32 = _BF16_OPERAND
    i64 = ir.IntType(64)

    def codegen(context, builder, sig, args):
        xt, yt, ynt, n, _how = args
        xaddr = [builder.extract_value(xt, k) for k in range(K)]
        yaddr = [builder.extract_value(yt, m) for m in range(M)]
        ynext = [builder.extract_value(ynt, m) for m in range(M)]
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        pf = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch"
        )  # (LLVM adds the pointer type to the name)
        zero = ir.Constant(f32v, None)
        accs = [[cgutils.alloca_once_value(builder, zero) for _ in range(K + 1)] for _ in range(M)]
        vp = i32v.as_pointer()
        if split:
            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(f32v, [f32v] * 3), f"llvm.fmuladd.v{lanes}f32"
            )
            sixteen = ir.Constant(i32v, [ir.Constant(i32, 16)] * lanes)
            high = ir.Constant(i32v, [ir.Constant(i32, -65536)] * lanes)  # 0xFFFF0000

            def vec(addr):  # (even elements, odd elements) as fp32
                v = builder.load(builder.inttoptr(addr, vp), align=2)
                return (builder.bitcast(builder.shl(v, sixteen), f32v), builder.bitcast(builder.and_(v, high), f32v))

            def acc(slot, u, v):
                a = builder.call(fma, [u[0], v[0], builder.load(slot)])
                builder.store(builder.call(fma, [u[1], v[1], a]), slot)
        else:
            dp = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(f32v, [f32v, bf32, bf32]), "llvm.x86.avx512bf16.dpbf16ps.512"
            )

            def vec(addr):
                return builder.bitcast(builder.load(builder.inttoptr(addr, vp), align=2), bf32)

            def acc(slot, u, v):
                builder.store(builder.call(dp, [builder.load(slot), u, v]), slot)

        step = 4 * lanes  # bytes of bf16 in one vector of 32-bit lanes
        with cgutils.for_range(builder, n) as loop:
            off = builder.mul(loop.index, ir.Constant(i64, 64))
            for j in range(64 // step):  # a block of 32 elements: one vector of 16 lanes, two of 8
                o = builder.add(off, ir.Constant(i64, j * step)) if j else off
                xv = [vec(builder.add(xaddr[k], o)) for k in range(K)]
                for m in range(M):
                    if PF_LOCALITY >= 0 and j == 0:  # (read, this locality, data): a line a block
                        builder.call(
                            pf,
                            [
                                builder.inttoptr(builder.add(ynext[m], off), i8p),
                                ir.Constant(i32, 0),
                                ir.Constant(i32, PF_LOCALITY),
                                ir.Constant(i32, 1),
                            ],
                        )
                    yv = vec(builder.add(yaddr[m], o))
                    acc(accs[m][K], yv, yv)
                    for k in range(K):
                        acc(accs[m][k], xv[k], yv)
        outs = []
        for m in range(M):
            for k in range(K + 1):
                v = builder.load(accs[m][k])
                sm = builder.extract_element(v, ir.Constant(ir.IntType(32), 0))
                for j in range(1, lanes):
                    sm = builder.fadd(sm, builder.extract_element(v, ir.Constant(ir.IntType(32), j)))
                outs.append(sm)
        return context.make_tuple(builder, sig.return_type, outs)

    return sig, codegen


# --------------------------------------------------------------------------- screen: dot products
# Slots and candidates are described by row addresses: slot s, reference token t lives at
# ``xa[s] + xr[t] * xs[s]`` (bytes), candidate g at ``ya[g] + yr[t] * ys[g]``: rows are read where
# they lie (a packed [T, K*H] tensor or a gathered token list costs no copy).
@njit(nogil=True, fastmath=FM, cache=True)
def _tail_dots(xrow, s0, k, y, lo, H, out, base):
    """Elements ``lo..H`` of slot rows ``xrow[s0..s0+k)`` against bf16 ``y``, added into ``out[base..]``."""
    for i in range(lo, H):
        v = _cv(y[i])
        out[base + k] += v * v
        for j in range(k):
            out[base + j] += _cv(numba.carray(_ptr_u16(xrow[s0 + j]), (H,))[i]) * v


@njit(nogil=True, fastmath=FM, cache=True)
def _store(r, out):
    for i in range(len(r)):
        out[i] = r[i]


@njit(nogil=True, fastmath=FM, inline="always")
def _dot_vdp(xs, ys, yn, nb):
    return _dot_km(xs, ys, yn, nb, VDP)


@njit(nogil=True, fastmath=FM, inline="always")
def _dot_split(xs, ys, yn, nb):
    return _dot_km(xs, ys, yn, nb, SPLIT)


@njit(nogil=True, fastmath=FM, inline="always")
def _dot_split256(xs, ys, yn, nb):
    return _dot_km(xs, ys, yn, nb, SPLIT256)


@njit(nogil=True, fastmath=FM, cache=True)
def dots_bf16_fma256(
    xa,
    xs,
    xr,
    H,
    ya,
    ys,
    yr,
    block,
    ecols,
    eranges,
    cols,
    ranges,
    counter,
    xy_out,
    yy_out,
    xx_out,
    with_xx,
    pidx,
    n_out,
    sa_out,
    mx_out,
    with_sums,
    finite,
    per_token,
    part,
    ypart,
):
    """The bf16 screen with split lanes in 256-bit vectors (a CPU without AVX-512)."""
    _screen_bf16(
        xa,
        xs,
        xr,
        H,
        ya,
        ys,
        yr,
        block,
        ecols,
        eranges,
        cols,
        ranges,
        counter,
        xy_out,
        yy_out,
        xx_out,
        with_xx,
        pidx,
        n_out,
        sa_out,
        mx_out,
        with_sums,
        finite,
        per_token,
        part,
        ypart,
        _dot_split256,
    )


@njit(nogil=True, fastmath=FM, cache=True)
def dots_bf16(
    xa,
    xs,
    xr,
    H,
    ya,
    ys,
    yr,
    block,
    ecols,
    eranges,
    cols,
    ranges,
    counter,
    xy_out,
    yy_out,
    xx_out,
    with_xx,
    pidx,
    n_out,
    sa_out,
    mx_out,
    with_sums,
    finite,
    per_token,
    part,
    ypart,
):
    """The bf16 screen with ``vdpbf16ps`` (only where the CPU has AVX512-BF16)."""
    _screen_bf16(
        xa,
        xs,
        xr,
        H,
        ya,
        ys,
        yr,
        block,
        ecols,
        eranges,
        cols,
        ranges,
        counter,
        xy_out,
        yy_out,
        xx_out,
        with_xx,
        pidx,
        n_out,
        sa_out,
        mx_out,
        with_sums,
        finite,
        per_token,
        part,
        ypart,
        _dot_vdp,
    )


@njit(nogil=True, fastmath=FM, cache=True)
def dots_bf16_fma(
    xa,
    xs,
    xr,
    H,
    ya,
    ys,
    yr,
    block,
    ecols,
    eranges,
    cols,
    ranges,
    counter,
    xy_out,
    yy_out,
    xx_out,
    with_xx,
    pidx,
    n_out,
    sa_out,
    mx_out,
    with_sums,
    finite,
    per_token,
    part,
    ypart,
):
    """The bf16 screen with split lanes and fused multiply-adds (any CPU)."""
    _screen_bf16(
        xa,
        xs,
        xr,
        H,
        ya,
        ys,
        yr,
        block,
        ecols,
        eranges,
        cols,
        ranges,
        counter,
        xy_out,
        yy_out,
        xx_out,
        with_xx,
        pidx,
        n_out,
        sa_out,
        mx_out,
        with_sums,
        finite,
        per_token,
        part,
        ypart,
        _dot_split,
    )


@njit(nogil=True, fastmath=FM, inline="always")
def _screen_bf16(
    xa,
    xs,
    xr,
    H,
    ya,
    ys,
    yr,
    block,
    ecols,
    eranges,
    cols,
    ranges,
    counter,
    xy_out,
    yy_out,
    xx_out,
    with_xx,
    pidx,
    n_out,
    sa_out,
    mx_out,
    with_sums,
    finite,
    per_token,
    part,
    ypart,
    dot,
):
    """All-bf16 screen of tokens ``cols[i0:i1]``, each range ``(i0, i1)`` of ``ranges`` taken from
    ``counter`` in turn: per token, slots four at a time against candidates four at a time (a short
    last quad repeats its last one), multiplied by ``dot`` (``_dot_vdp``, ``_dot_split`` or ``_dot_split256``). While
    a token's candidate rows are read, the rows the loop reads next are prefetched. ``with_xx``:
    the slots' squared norms too, into ``xx_out [S, T]``, as the block's slot rows are first read.
    Pair ``p = pidx[s, g] >= 0`` is differenced exactly (``exact``'s sums, into ``n_out``,
    ``sa_out``, ``mx_out [P, T]``) while the token's rows are in cache; so are, before the screen,
    the tokens ``ecols`` (ranges ``eranges``, taken from the same counter) that an earlier pass
    screened. ``with_sums``: each token's pair statistics as it is screened (``_token_sums``)."""
    out = np.zeros(20, np.float32)
    xrow = np.empty(xa.shape[0], np.int64)
    q = np.empty(4, np.int64)
    qn = np.empty(4, np.int64)
    E = eranges.shape[0]
    while True:
        r = _take(counter)
        if r < E:
            _exact_range(xa, xs, xr, H, ya, ys, yr, ecols, eranges[r, 0], eranges[r, 1], pidx, n_out, sa_out, mx_out)
            continue
        r -= E
        if r >= ranges.shape[0]:
            return
        _screen_range(
            xa,
            xs,
            xr,
            H,
            ya,
            ys,
            yr,
            block,
            cols,
            ranges[r, 0],
            ranges[r, 1],
            r,
            xy_out,
            yy_out,
            xx_out,
            with_xx,
            pidx,
            n_out,
            sa_out,
            mx_out,
            with_sums,
            finite,
            per_token,
            part,
            ypart,
            dot,
            out,
            xrow,
            q,
            qn,
        )


@njit(nogil=True, fastmath=FM, inline="always")
def _exact_range(xa, xs, xr, H, ya, ys, yr, cols, i0, i1, pidx, n_out, sa_out, mx_out):
    """Pairs ``pidx[s, g] >= 0`` differenced over tokens ``cols[i0:i1]`` (bf16 rows, addresses)."""
    S, G = pidx.shape
    for i in range(i0, i1):
        t = cols[i]
        for s in range(S):
            for g in range(G):
                p = pidx[s, g]
                if p >= 0:
                    n_out[p, t], sa_out[p, t], mx_out[p, t] = _diff_row_bf16(
                        xa[s] + xr[t] * xs[s], ya[g] + yr[t] * ys[g], H
                    )


@njit(nogil=True, fastmath=FM, inline="always")
def _screen_range(
    xa,
    xs,
    xr,
    H,
    ya,
    ys,
    yr,
    block,
    cols,
    i0,
    i1,
    r,
    xy_out,
    yy_out,
    xx_out,
    with_xx,
    pidx,
    n_out,
    sa_out,
    mx_out,
    with_sums,
    finite,
    per_token,
    part,
    ypart,
    dot,
    out,
    xrow,
    q,
    qn,
):
    S = xa.shape[0]
    G = ya.shape[0]
    nb = H // 32
    lo = nb * 32
    if with_sums:
        _clear(part[r], ypart[r])
    for b0 in range(i0, i1, block):
        b1 = min(i1, b0 + block)
        for g0 in range(0, G, 4):
            for i in range(b0, b1):
                t = cols[i]
                for s in range(S):
                    xrow[s] = xa[s] + xr[t] * xs[s]
                if with_xx and g0 == 0:
                    for s in range(S):
                        v = dot((xrow[s],), (xrow[s],), (xrow[s],), nb)[0]
                        row = numba.carray(_ptr_u16(xrow[s]), (H,))
                        for h in range(lo, H):
                            w = _cv(row[h])
                            v += w * w
                        xx_out[s, t] = v
                # what the loop reads next: this quad's next token, or the next quad's first
                tn, gn = i + 1, g0
                if tn == b1:
                    tn, gn = b0, g0 + 4
                    if gn >= G:
                        tn, gn = min(b1, i1 - 1), 0
                tn = cols[tn]
                for m in range(4):
                    g = min(g0 + m, G - 1)
                    q[m] = ya[g] + yr[t] * ys[g]
                    g = min(gn + m, G - 1)
                    qn[m] = ya[g] + yr[tn] * ys[g]
                yq = (q[0], q[1], q[2], q[3])
                yn = (qn[0], qn[1], qn[2], qn[3])
                s0 = 0
                while s0 < S:
                    k = min(4, S - s0)
                    if k == 4:
                        _store(dot((xrow[s0], xrow[s0 + 1], xrow[s0 + 2], xrow[s0 + 3]), yq, yn, nb), out)
                    elif k == 3:
                        _store(dot((xrow[s0], xrow[s0 + 1], xrow[s0 + 2]), yq, yn, nb), out)
                    elif k == 2:
                        _store(dot((xrow[s0], xrow[s0 + 1]), yq, yn, nb), out)
                    else:
                        _store(dot((xrow[s0],), yq, yn, nb), out)
                    for m in range(min(4, G - g0)):
                        base = m * (k + 1)
                        if lo < H:
                            _tail_dots(xrow, s0, k, numba.carray(_ptr_u16(q[m]), (H,)), lo, H, out, base)
                        for j in range(k):
                            xy_out[s0 + j, g0 + m, t] = out[base + j]
                        yy_out[g0 + m, t] = out[base + k]
                    s0 += k
                for m in range(min(4, G - g0)):
                    for s in range(S):
                        p = pidx[s, g0 + m]
                        if p >= 0:
                            n_out[p, t], sa_out[p, t], mx_out[p, t] = _diff_row_bf16(xrow[s], q[m], H)
        if with_sums:  # (the block's sums still in cache)
            _token_sums(xx_out, xy_out, yy_out, cols, b0, b1, finite, per_token, part[r], ypart[r])


@njit(nogil=True, fastmath=FM, cache=True)
def _load_x(xa, xs, xc, xr, H, t, buf):
    """Slot rows of reference token t as fp32 into ``buf [S, H]``."""
    for s in range(xa.shape[0]):
        a = xa[s] + xr[t] * xs[s]
        if xc[s] == BF16:
            src = numba.carray(_ptr_u16(a), (H,))
            for i in range(H):
                buf[s, i] = _cv(src[i])
        else:
            srcf = numba.carray(_ptr_f32(a), (H,))
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
def dots_any(xa, xs, xc, xr, H, ya, yc, ys, yr, cols, ranges, counter, xy_out, yy_out, xx_out, with_xx):
    """Portable screen: slot rows converted to fp32 once per token, fused multiply-adds
    (``with_xx``: the slots' squared norms too, into ``xx_out``)."""
    buf = np.empty((xa.shape[0], H), np.float32)
    out = np.zeros(5, np.float32)
    while True:
        r = _take(counter)
        if r >= ranges.shape[0]:
            return
        _dots_any(
            xa,
            xs,
            xc,
            xr,
            H,
            ya,
            yc,
            ys,
            yr,
            cols,
            ranges[r, 0],
            ranges[r, 1],
            xy_out,
            yy_out,
            xx_out,
            with_xx,
            buf,
            out,
        )


@njit(nogil=True, fastmath=FM, inline="always")
def _dots_any(xa, xs, xc, xr, H, ya, yc, ys, yr, cols, i0, i1, xy_out, yy_out, xx_out, with_xx, buf, out):
    S = xa.shape[0]
    G = ya.shape[0]
    for i in range(i0, i1):
        t = cols[i]
        _load_x(xa, xs, xc, xr, H, t, buf)
        if with_xx:
            for s in range(S):
                acc = np.float32(0.0)
                for h in range(H):
                    acc += buf[s, h] * buf[s, h]
                xx_out[s, t] = acc
        for g in range(G):
            a = ya[g] + yr[t] * ys[g]
            s0 = 0
            while s0 < S:
                k = min(4, S - s0)
                if yc[g] == BF16:
                    _fdot(buf, s0, k, numba.carray(_ptr_u16(a), (H,)), H, out)
                else:
                    _fdot(buf, s0, k, numba.carray(_ptr_f32(a), (H,)), H, out)
                for j in range(k):
                    xy_out[s0 + j, g, t] = out[j]
                yy_out[g, t] = out[k]
                s0 += k


# --------------------------------------------------------------------- refine: fp32 differences
@intrinsic
def _diff_bf16(typingctx, xaddr, yaddr, nb):
    """``(x, y, nblocks) -> (sum d^2, sum |d|, max |d| as bits)`` over ``32 * nblocks`` bf16 elements
    of two rows, ``d = x - y`` in fp32: each 32-bit lane split into its two bf16 (shifted, masked),
    16 lanes a vector whatever width the compiler prefers. IEEE arithmetic (NaN and Inf reach the
    sums); the maximum is taken on the bits of ``|d|``, so a NaN orders above Inf."""
    sig = types.Tuple((types.float32, types.float32, types.uint32))(xaddr, yaddr, nb)
    f32x16 = ir.VectorType(ir.FloatType(), 16)
    i32 = ir.IntType(32)
    i32x16 = ir.VectorType(i32, 16)
    i64 = ir.IntType(64)

    def codegen(context, builder, sig, args):
        xa, ya, n = args
        mod = builder.module
        fma = cgutils.get_or_insert_function(mod, ir.FunctionType(f32x16, [f32x16] * 3), "llvm.fma.v16f32")
        umax = cgutils.get_or_insert_function(mod, ir.FunctionType(i32x16, [i32x16] * 2), "llvm.umax.v16i32")
        sixteen = ir.Constant(i32x16, [ir.Constant(i32, 16)] * 16)
        high = ir.Constant(i32x16, [ir.Constant(i32, -65536)] * 16)  # 0xFFFF0000
        magnitude = ir.Constant(i32x16, [ir.Constant(i32, 0x7FFFFFFF)] * 16)
        acc_n = cgutils.alloca_once_value(builder, ir.Constant(f32x16, None))
        acc_a = cgutils.alloca_once_value(builder, ir.Constant(f32x16, None))
        acc_m = cgutils.alloca_once_value(builder, ir.Constant(i32x16, None))
        vp = i32x16.as_pointer()
        with cgutils.for_range(builder, n) as loop:
            off = builder.mul(loop.index, ir.Constant(i64, 64))
            xv = builder.load(builder.inttoptr(builder.add(xa, off), vp), align=2)
            yv = builder.load(builder.inttoptr(builder.add(ya, off), vp), align=2)
            an, aa, am = builder.load(acc_n), builder.load(acc_a), builder.load(acc_m)
            for half in (lambda v: builder.shl(v, sixteen), lambda v: builder.and_(v, high)):
                d = builder.fsub(builder.bitcast(half(xv), f32x16), builder.bitcast(half(yv), f32x16))
                bits = builder.and_(builder.bitcast(d, i32x16), magnitude)
                an = builder.call(fma, [d, d, an])
                aa = builder.fadd(aa, builder.bitcast(bits, f32x16))
                am = builder.call(umax, [am, bits])
            builder.store(an, acc_n)
            builder.store(aa, acc_a)
            builder.store(am, acc_m)
        vn, va, vm = builder.load(acc_n), builder.load(acc_a), builder.load(acc_m)
        sn = builder.extract_element(vn, ir.Constant(i32, 0))
        sa = builder.extract_element(va, ir.Constant(i32, 0))
        mx = builder.extract_element(vm, ir.Constant(i32, 0))
        for j in range(1, 16):
            k = ir.Constant(i32, j)
            sn = builder.fadd(sn, builder.extract_element(vn, k))
            sa = builder.fadd(sa, builder.extract_element(va, k))
            e = builder.extract_element(vm, k)
            mx = builder.select(builder.icmp_unsigned(">", e, mx), e, mx)
        return context.make_tuple(builder, sig.return_type, [sn, sa, mx])

    return sig, codegen


@njit(nogil=True, fastmath=FM, cache=True)
def _diff_row_bf16(xaddr, yaddr, H):
    """``_diff_row`` of two bf16 rows (addresses): 32 elements a step, the rest one at a time."""
    nb = H // 32
    n, sa, mx = _diff_bf16(xaddr, yaddr, nb)
    x = numba.carray(_ptr_u16(xaddr), (H,))
    y = numba.carray(_ptr_u16(yaddr), (H,))
    for i in range(nb * 32, H):
        d = _cv(x[i]) - _cv(y[i])
        n += d * d
        sa += abs(d)
        mx = _abs_max_bits(mx, d)
    return n, sa, _bits_f32(mx)


@njit(nogil=True, fastmath=FM, cache=True)
def _diff_row(x, y, H):
    n = np.float32(0.0)
    sa = np.float32(0.0)
    mx = np.uint32(0)
    for i in range(H):
        d = _cv(x[i]) - _cv(y[i])
        n += d * d
        sa += abs(d)
        mx = _abs_max_bits(mx, d)  # on the bits: NaN orders above Inf
    return n, sa, _bits_f32(mx)


@njit(nogil=True, fastmath=FM, cache=True)
def exact_rows(xa, xs, xc, xr, H, p_slot, p_cand, ya, yc, ys, yr, cols, ranges, counter, n_out, sa_out, mx_out):
    """Pairs (slot ``p_slot[p]``, candidate ``p_cand[p]``): per token, every pair's candidate row
    differenced against its slot row, both read where they lie (bf16 widened in the loop, exactly:
    no fp32 copy of the slot rows to write and read back)."""
    while True:
        r = _take(counter)
        if r >= ranges.shape[0]:
            return
        _exact_rows(
            xa, xs, xc, xr, H, p_slot, p_cand, ya, yc, ys, yr, cols, ranges[r, 0], ranges[r, 1], n_out, sa_out, mx_out
        )


@njit(nogil=True, fastmath=FM, inline="always")
def _exact_rows(xa, xs, xc, xr, H, p_slot, p_cand, ya, yc, ys, yr, cols, i0, i1, n_out, sa_out, mx_out):
    P = p_slot.shape[0]
    for i in range(i0, i1):
        t = cols[i]
        for p in range(P):
            s, m = p_slot[p], p_cand[p]
            xa_t = xa[s] + xr[t] * xs[s]
            a = ya[m] + yr[t] * ys[m]
            if xc[s] == BF16:
                if yc[m] == BF16:
                    r = _diff_row_bf16(xa_t, a, H)
                else:
                    r = _diff_row(numba.carray(_ptr_u16(xa_t), (H,)), numba.carray(_ptr_f32(a), (H,)), H)
            elif yc[m] == BF16:
                r = _diff_row(numba.carray(_ptr_f32(xa_t), (H,)), numba.carray(_ptr_u16(a), (H,)), H)
            else:
                r = _diff_row(numba.carray(_ptr_f32(xa_t), (H,)), numba.carray(_ptr_f32(a), (H,)), H)
            n_out[p, t], sa_out[p, t], mx_out[p, t] = r


# ------------------------------------------------------------------------ statistics of the pairs
# A pass's statistics of every pair are taken per token as it is screened (``with_sums``), the
# token's sums still in registers' reach: no pass of their own over ``[S, G, T]`` afterwards (on
# the H200 host's 16 threads that pass cost 0.84 ms, most of it starting the threads). Each token
# range adds into partial sums of its own (``part [R, 3, S, G]``, ``ypart [R, G]``, float64), summed
# in range order after the pass: the same sums whichever thread takes which range.
@njit(nogil=True, cache=True)  # IEEE arithmetic: no fast-math (NaN tests, the sums' order)
def _token_sums(xx, xy, yy, cols, i0, i1, finite, per_token, part, ypart):
    """Tokens ``cols[i0:i1]``'s statistics of every pair from their screen (``xx [S, T]``,
    ``xy [S, G, T]``, ``yy [G, T]``, fp32), in float64, in token order: ``finite [G, T]`` (yy
    finite) and ``per_token [S, G, T]`` (rel_diff) written, ``part [3, S, G]`` (sum of
    ``max(xx + yy - 2xy, 0)``, of ``xx + yy``, of ``xy``) and ``ypart [G]`` (sum of yy) added to. A
    token where a slot or the candidate is not finite is left out: per_token 0, yy zeroed in place,
    nothing added. (A call a block of tokens: a call a token and candidate cost more than the sums.)"""
    for i in range(i0, i1):
        _one_token(xx, xy, yy, cols[i], finite, per_token, part, ypart)


@njit(nogil=True, cache=True, inline="always")
def _one_token(xx, xy, yy, t, finite, per_token, part, ypart):
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
            if n < 0.0:  # (a NaN stays NaN, as numpy's maximum keeps it)
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
def sums_rows(xx, xy, yy, cols, ranges, counter, finite, per_token, part, ypart):
    """``_token_sums`` of every candidate over tokens ``cols``, ranges taken from ``counter``: the
    statistics of a screen that did not take them in its pass (``dots_any``)."""
    while True:
        r = _take(counter)
        if r >= ranges.shape[0]:
            return
        _clear(part[r], ypart[r])
        _token_sums(xx, xy, yy, cols, ranges[r, 0], ranges[r, 1], finite, per_token, part[r], ypart[r])


# ----------------------------------------------------------------------- a pass on numba's threads
# Each kernel once on each of n threads of numba's parallel layer (``workbench.hidden.team``);
# the calls take their ranges from the counter as the gang's do. Written out one by one: launchers
# made by a factory closing over the kernel miss numba's disk cache in every new process (numba
# 0.68: the cache key hashes the pickled closure, which differs per process), so each would compile
# again at every start.
@njit(parallel=True, cache=True)
def _team_dots_bf16(n, *args):
    for _ in prange(n):
        dots_bf16(*args)


@njit(parallel=True, cache=True)
def _team_dots_bf16_fma(n, *args):
    for _ in prange(n):
        dots_bf16_fma(*args)


@njit(parallel=True, cache=True)
def _team_dots_bf16_fma256(n, *args):
    for _ in prange(n):
        dots_bf16_fma256(*args)


@njit(parallel=True, cache=True)
def _team_dots_any(n, *args):
    for _ in prange(n):
        dots_any(*args)


@njit(parallel=True, cache=True)
def _team_exact_rows(n, *args):
    for _ in prange(n):
        exact_rows(*args)


@njit(parallel=True, cache=True)
def _team_sums_rows(n, *args):
    for _ in prange(n):
        sums_rows(*args)


_UNBUILT: set[Any] = set()  # launchers that did not build here
LAUNCHERS = {
    dots_bf16: _team_dots_bf16,
    dots_bf16_fma: _team_dots_bf16_fma,
    dots_bf16_fma256: _team_dots_bf16_fma256,
    dots_any: _team_dots_any,
    exact_rows: _team_exact_rows,
    sums_rows: _team_sums_rows,
}


# ------------------------------------------------------------------------------------- the driver
@functools.lru_cache(maxsize=1)
def l2_bytes() -> int:
    """One core's L2 cache in bytes (1 MiB where the system does not say); read once."""
    try:
        n = int(os.sysconf("SC_LEVEL2_CACHE_SIZE"))
    except (ValueError, OSError, AttributeError):
        n = 0
    if n <= 0:
        try:
            with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as fh:
                text = fh.read().strip().upper()
            n = int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]] if text[-1] in "KM" else int(text)
        except (OSError, ValueError, KeyError, IndexError):
            n = 0
    return n if n > 0 else 1 << 20


def block_tokens(S: int, H: int, esize: int = 2, l2: int | None = None) -> int:
    """Tokens per block of the bf16 screen: ``MAX_BLOCK``, or fewer where the block's slot rows
    (read again for every four candidates) would take more than half of a core's L2 cache (the
    candidate rows stream through the rest); a power of two, at least 4. Measured with 3 slots x
    7168 (43 KB a token), the pass over the tokens after the sample, fastest of 6-10 runs with the
    sizes interleaved (``benchmarks/results/align_h200_host_blocks_kernels.json``): on the H200
    host's Xeon (2 MB of L2), 16 threads, 13.1-17.0 ms with blocks of 8 against 13.9-18.1 ms with
    16 (8 the faster in each of six series on three leases), 15.9-17.0 ms with 4 (with 64, 29 ms);
    2 threads, 78.8 against 77.4 ms (medians 80.5 and 88.3). On a 2-core AMD EPYC (Zen 5, 1 MB),
    73.4 ms with 8 against 76.2 (4) and 78.7 (16)."""
    n = max(1, (l2 if l2 is not None else l2_bytes()) // 2 // max(1, S * H * esize))
    return max(4, min(MAX_BLOCK, 1 << (n.bit_length() - 1)))


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
        self.xa = np.array([x.data_ptr() for x in self.slots], np.int64)
        self.xs = np.array([x.stride(0) * x.element_size() for x in self.slots], np.int64)
        self.xc = np.array([_code(x) for x in self.slots], np.int64)
        self.max_threads = max(1, int(threads))
        self.thread_tokens = thread_tokens
        self._all = self._plan(np.arange(self.T, dtype=np.int64), thread_tokens)
        self.threads = self._all[2]
        self.block = BLOCK or block_tokens(self.S, self.H)
        self.kernel = screen_kernel(bool((self.xc == BF16).all()))

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """The token ranges of a pass over every token."""
        return [(int(a), int(b)) for a, b in self._all[1]]

    @property
    def differences_in_pass(self) -> bool:
        """Whether ``dots`` differences the asked pairs in its own pass (the bf16 screen), not in
        a pass of ``exact`` after it."""
        return self.kernel in BF16_SCREENS

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

    def _run(
        self, fn: Callable[..., Any], before: tuple[Any, ...], after: tuple[Any, ...], plan: _Plan, more: int = 0
    ) -> None:
        """``fn(*before, cols, ranges, counter, *after)`` once on each of the plan's threads (numba's,
        ``workbench.hidden.team``, or else this one and its gang's): each call takes the next range
        from the shared counter until none is left, so a thread that falls behind takes fewer and
        no range waits on a busy thread (``more``: ranges of ``before``'s the counter hands out
        first). A launcher that does not build leaves its kernel to the gang (which raises the
        kernel's own error, if it has one)."""
        cols, ranges, threads = plan
        args = (*before, cols, ranges, np.zeros(1, np.int64), *after)
        n = min(threads, len(ranges) + more)
        if n <= 1:
            fn(*args)
            return
        launch = LAUNCHERS.get(fn)
        if launch is not None and launch not in _UNBUILT:
            try:
                if team.run(launch, n, args):
                    return
            except numba.core.errors.NumbaError:
                _UNBUILT.add(launch)
        gang(threads).run([functools.partial(fn, *args)] * n)

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

    def _x(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
        return (self.xa, self.xs, self.xc, self.xr, self.H)

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

    def dots(
        self,
        ys: Group | Sequence[torch.Tensor],
        xx: npt.NDArray[np.float32] | None = None,
        pairs: Sequence[tuple[int, int]] = (),
        cols: np.ndarray | None = None,
        out: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]] | None = None,
        thread_tokens: int | None = None,
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
        xy, yy = (
            out if out is not None else (np.empty((self.S, G, self.T), np.float32), np.empty((G, self.T), np.float32))
        )
        if xy.shape != (self.S, G, self.T) or yy.shape != (G, self.T):
            raise ValueError(
                f"out: arrays of shape {xy.shape}, {yy.shape} for {self.S} slots, {G} candidates, {self.T} tokens"
            )
        if sums is not None and xx is not None and sums.xx is not xx:
            raise ValueError("sums: its xx must be the pass's own xx where the pass writes the norms")
        if sums is not None and (
            sums.xx.shape != (self.S, self.T)
            or sums.finite.shape != (G, self.T)
            or sums.per_token.shape != (self.S, G, self.T)
        ):
            raise ValueError(
                f"sums: arrays of shape {sums.xx.shape}, {sums.finite.shape}, {sums.per_token.shape} "
                f"for {self.S} slots, {G} candidates, {self.T} tokens"
            )
        with_xx = xx is not None
        xx_ = xx if xx is not None else sums.xx if sums is not None else np.empty((1, 1), np.float32)
        pidx = np.full((self.S, G), -1, np.int64)
        for p, (s, g) in enumerate(pairs):
            pidx[s, g] = p
        n, sa, mx = diffs if diffs is not None else (np.empty((len(pairs), self.T), np.float32) for _ in range(3))
        if any(a.shape != (len(pairs), self.T) for a in (n, sa, mx)):
            raise ValueError(
                f"diffs: arrays of shape {n.shape}, {sa.shape}, {mx.shape} for {len(pairs)} pairs, {self.T} tokens"
            )
        ecols, eranges, _ = self._pass(
            exact_cols if exact_cols is not None and len(pairs) else np.empty(0, np.int64), RANGE_TOKENS
        )
        finite, per_token = (
            (sums.finite, sums.per_token)
            if sums is not None
            else (np.empty((1, 1), np.bool_), np.empty((1, 1, 1), np.float32))
        )
        ya, yc, ys_ = grp.ya, grp.yc, grp.ys
        while self.kernel in BF16_SCREENS and (yc == BF16).all():
            fn = globals()[SCREEN_FUNCS[self.kernel]]
            part, ypart = _partials(len(plan[1]) if sums is not None else 0, self.S, G)
            try:
                self._run(
                    fn,
                    (self.xa, self.xs, self.xr, self.H, ya, ys_, self.yr, self.block, ecols, eranges),
                    (xy, yy, xx_, with_xx, pidx, n, sa, mx, sums is not None, finite, per_token, part, ypart),
                    plan,
                    len(eranges),
                )
                return Screened(xy, yy, n, sa, mx, _summed(part, ypart) if sums is not None else None)
            except Exception:
                if fn.signatures:  # it was built: a real error
                    raise
                global HAS_BF16_DOT, HAS_BF16_SCREEN  # this numba/LLVM cannot build it: the next kernel
                if fn is dots_bf16:
                    HAS_BF16_DOT = False
                else:
                    HAS_BF16_SCREEN = False
                self.kernel = screen_kernel(True)
        self._run(dots_any, (*self._x(), ya, yc, ys_, self.yr), (xy, yy, xx_, with_xx), plan)
        if len(pairs):
            self.exact(pairs, grp, cols, (n, sa, mx), thread_tokens)
            if len(ecols):
                self.exact(pairs, grp, ecols, (n, sa, mx), RANGE_TOKENS)
        return Screened(
            xy, yy, n, sa, mx, self.pair_sums(xy, yy, sums, cols, thread_tokens) if sums is not None else None
        )

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
        self._run(sums_rows, (out.xx, xy, yy), (out.finite, out.per_token, part, ypart), plan)
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
        n, sa, mx = out if out is not None else (np.empty((len(pairs), self.T), np.float32) for _ in range(3))
        ps_ = np.array([int(p[0]) for p in pairs], np.int64)
        pc = np.array([int(p[1]) for p in pairs], np.int64)
        grp = self._group(ys)
        if len(pairs):
            self._run(
                exact_rows,
                (*self._x(), ps_, pc, grp.ya, grp.yc, grp.ys, self.yr),
                (n, sa, mx),
                self._pass(cols, thread_tokens),
            )
        return n, sa, mx
