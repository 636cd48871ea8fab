"""The alignment engine: which capture point is each training slot?

Every reference slot x (e.g. the K drafter-input slots of a training sample) is compared with
every candidate y (each tensor of the same width in an inference capture; packed [T, K*H]
tensors are split) over the tokens both sides hold (``workbench.hidden.tokens``):

- ``rel_diff = 1 - 2*sum(xy) / sum(x^2 + y^2) = sum((x-y)^2) / sum(x^2 + y^2)`` (SGLang's
  comparator metric): 0 for identical tensors, 1 for orthogonal or zero-vs-nonzero;
- cosine, max and mean absolute difference; per-token rel_diff for drill-down.

Streaming: only a group of candidates is in memory at a time, and every candidate is read once.
Per token, the dot products of every (slot, candidate) pair and each candidate's squared norm
give the screen: a rel_diff per pair and per token, sums over tokens in float64.

- On a CPU with numba (``workbench.hidden.pairstats``): compiled kernels read the slots and the
  candidates where they lie (memory-mapped, no gathered copies), a group of ``CPU_GROUP`` at a
  time; the products of bf16 values are exact in fp32 and are accumulated in fp32 (fused
  multiply-adds of the widened halves), so the screen is good to about 1e-6 per token.
- Otherwise (CUDA, or a CPU without numba) the candidates go into a group buffer
  ``W = [X_1..X_S, Y_1..Y_G]`` and one batched matmul gives the group's per-token products (fp32
  output on CUDA; on such a CPU with bf16 data and many candidates a bf16 matmul whose per-token
  outputs are rounded to bf16: a screen good to about +-1e-4 on an aggregate rel_diff).

The screen's ``refine_top`` best candidates of every slot, and always its best at another
physical point than the leader's (the runner-up the verdict reads per token), are recomputed
exactly (fp32 differences, no cancellation); only those exact values decide best, runner-up and
verdict. The compiled CPU pass foretells those pairs from a sample of tokens and differences them
in the screen's own pass, while their rows are in cache; a pair it did not foretell is differenced
afterwards from the candidate kept mapped (never read twice from the file). ``precision`` in the
result says which path ran (``timing["kernel"]`` which CPU kernel); ``exact[s][c]`` marks refined
pairs, which also carry max/mean absolute difference (``abs_stats="all"`` refines every pair: a
second read).

Verdict per slot, from the best candidate b and the runner-up r (the best candidate at another
physical point; thresholds in ``Thresholds``):

- ``match``: ``b <= exact``; or ``b <= match_max`` and ``r - b >= min_gap`` and the margin
  ``max(r/b, median_t r_t / median_t b_t) >= min_ratio`` and the best wins on at least
  ``min_win_rate`` of the tokens (the per-token terms keep a few high-norm tokens, e.g. an
  attention sink, from deciding the aggregate);
- ``no-match``: ``b > no_match_min``;
- ``ambiguous``: anything else, and every slot when fewer than ``min_tokens`` tokens were compared.

A single candidate has no runner-up: its verdict rests on the absolute value alone (and says so).
Non-finite values are counted (first positions reported) and their tokens left out of the sums.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, SupportsFloat, TypeVar, cast

import numpy as np
import torch

from workbench.errors import InputError
from workbench.hidden import mapping
from workbench.hidden.results import AMBIGUOUS, MATCH, NO_MATCH, AlignResult, NonFinite, SlotBest, Thresholds
from workbench.hidden.tokens import TokenAlignment, align_tokens
from workbench.hidden.view import FINAL, ITEMSIZE, LOGITS, Capture, FileSpan, HiddenTensor
from workbench.progress import Progress, ProgressCallback, noop

if TYPE_CHECKING:
    import numpy.typing as npt

    from workbench.hidden.pairstats import Group, PairStats, PairSums
    from workbench.hidden.placement import Choice, Stager

    _F64 = npt.NDArray[np.float64]
    # what a stream pass gives: per-token products XY [S, C, T] and YY [C, T], per slot the
    # screen's best [(value, candidate)], the candidates' rows kept for the exact pass, timings
    _Streamed = tuple[
        torch.Tensor, torch.Tensor, list[list[tuple[float, int]]], dict[int, torch.Tensor], dict[str, Any]
    ]

GROUP = 8  # candidates per batched matmul on a CPU (S + 8 = 11 wide runs best)
BUFFER_BYTES = 384 << 20  # group buffer budget (x8 on CUDA); longer sequences go in row blocks
REFINE_ROWS = 256  # rows per chunk in the exact pass
SAMPLE_TOKENS = 64  # tokens whose screen foretells, per group, the pairs the exact pass needs
SAMPLE_THREAD_TOKENS = 4  # the sample's passes: a few of its tokens a thread, spread over every thread
CPU_GROUP = 64  # candidates per pass of the compiled CPU kernels: each stays mapped
# while its group runs (the page cache's pages, mapped: 62 Kimi-sized candidates are 1.82 GB), and a
# token block's slot rows are read from memory once per group (with 16 a group, the slot rows were
# a fifth of the bytes read at Kimi scale)


def pick_device(device: str | None = None) -> torch.device:
    """A torch device for a name; ``None``/``auto``: CUDA where there is one (the alignment itself
    chooses by where the bytes lie: ``workbench.hidden.placement``)."""
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise InputError(f"device: {device!r} is not a torch device (cpu, cuda, cuda:1)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device: cuda requested but no CUDA device is available")
    return dev


def _pairstats() -> ModuleType | None:
    """The compiled CPU kernels, or None where numba is missing."""
    try:
        from workbench.hidden import pairstats
    except ImportError:
        return None
    return pairstats


def reference_slots(train: Capture, include_final: bool = False) -> list[HiddenTensor]:
    slots = train.slots()
    if not slots:
        slots = [t for t in train.tensors if t.role not in (LOGITS, FINAL)]
    if include_final:
        slots = slots + [t for t in train.tensors if t.role == FINAL]
    if not slots:
        raise InputError(f"{train.path}: no reference tensors to align")
    widths = {t.width for t in slots}
    if len(widths) != 1:
        raise InputError(f"{train.path}: reference slots differ in width ({sorted(widths)})")
    return slots


def align(
    train: Capture,
    infer: Capture,
    *,
    device: str | None = None,
    thresholds: Thresholds | None = None,
    refine_top: int = 2,
    abs_stats: str = "top",
    include_final: bool = False,
    screen: str = "auto",
    group: int = GROUP,
    progress: ProgressCallback | None = None,
) -> AlignResult:
    """Compare every reference slot of ``train`` with every candidate of ``infer``."""
    if abs_stats not in ("top", "all"):
        raise InputError(f"abs_stats: {abs_stats!r} is not 'top' or 'all'")
    if screen not in ("auto", "kernel", "fp32", "bf16"):
        raise InputError(f"screen: {screen!r} is not auto, kernel, fp32 or bf16")
    run = _Alignment(train, infer, device=device, include_final=include_final, screen=screen)
    run.refine_k = run.C if abs_stats == "all" else max(1, refine_top)
    run.reference()
    run.stream(group, progress or noop)
    run.statistics()
    run.refine()
    return run.result(thresholds or Thresholds())


class _Acc(NamedTuple):
    """Every pair's statistics as the result reports them (float64 sums over the kept tokens)."""

    num: _F64  # [S, C] sum (xx + yy - 2 xy)
    den: _F64  # [S, C] sum (xx + yy)
    dot: _F64  # [S, C] sum xy
    yy_sum: _F64  # [C] sum yy
    per_token: npt.NDArray[np.float32]  # [S, C, T] rel_diff
    exact: npt.NDArray[np.bool_]  # [S, C] refined from fp32 differences
    max_abs: _F64  # [S, C] (refined pairs)
    mean_abs: _F64  # [S, C] (refined pairs)


class _Alignment:
    """One alignment, step by step (``align``): the reference slots, the stream of candidates, the
    statistics of every pair, the exact pass over the best, and the result."""

    def __init__(self, train: Capture, infer: Capture, *, device: str | None, include_final: bool, screen: str) -> None:
        self.t0 = time.perf_counter()
        self.train, self.infer = train, infer
        self.slots = reference_slots(train, include_final)
        self.H = self.slots[0].width
        self.cands, self.notes = _candidates(train, infer, self.slots)
        self.tok = align_tokens(train, infer, ref_rows=self.slots[0].rows, infer_rows=infer.rows)
        self.T, self.S, self.C = self.tok.compared, len(self.slots), len(self.cands)
        if self.T < 100:
            self.notes.append(f"only {self.T} tokens compared: verdicts need about 100 to be firm")
        # Compute dtype: bf16 stays bf16 in the group buffer (its products are exact in fp32).
        dtypes = {s.dtype for s in self.slots} | {c.dtype for c in self.cands}
        self.cand_bytes = sum(c.rows * c.width * _itemsize(c.dtype) for c in self.cands)
        all_bf16 = dtypes == {"bfloat16"}
        self.choice = _choose(device, self.cands, self.cand_bytes, all_bf16, screen)
        self.dev = pick_device(self.choice.device)
        self.ps_mod = _pairstats() if self.dev.type == "cpu" and screen in ("auto", "kernel") else None
        if screen == "kernel" and self.ps_mod is None:
            raise InputError("screen: 'kernel' needs numba (pip install numba) and a CPU device")
        self.work, self.precision = _work(self.dev, self.ps_mod, all_bf16, screen, self.cand_bytes)
        self.refine_k = 1
        self.ps: PairStats | None = None
        self.X: torch.Tensor | None = None  # the gathered reference rows [S, T, H] (no compiled pass)
        self.stager: Stager | None = None
        self.xx: torch.Tensor | None = None  # the slots' per-token squared norms, fp32 [S, T]
        self.bad_tok: torch.Tensor | None = None  # tokens non-finite in a slot
        self.warm = False
        self.timing: dict[str, Any] = {}
        self.best: list[list[tuple[float, int]]] = []
        self.kept: dict[int, torch.Tensor] = {}
        self.fused: _Fused = {}
        self.nonfinite: list[NonFinite] = []

    def rows_of(self, c: int) -> torch.Tensor:
        return _rows(self.cands[c].load(), self.tok.infer_index)

    def reference(self) -> None:
        """The reference: gathered rows on the device plus exact per-token squared norms; or, for the
        compiled CPU pass, the slots where they lie (their norms come with the first group's screen)."""
        self.ts = time.perf_counter()
        S, T, H, tok = self.S, self.T, self.H, self.tok
        if self.ps_mod is not None:
            self.ps = self.ps_mod.PairStats(
                [s.load() for s in self.slots], tok.ref_positions(), _infer_rows(tok), threads=torch.get_num_threads()
            )
        else:
            X = self.X = torch.empty((S, T, H), dtype=self.work, device=self.dev)
            stager = self.stager = _stager(self.dev)
            for i, s in enumerate(self.slots):
                src = _rows(s.load(), tok.ref_index)
                if stager is not None and not src.is_cuda:
                    stager.put(src.to(self.work), X[i])
                else:
                    X[i].copy_(src)
            if stager is not None:
                stager.ready()
            self.xx = torch.stack([_sq_rows(X[i]) for i in range(S)])
            self.bad_tok = _bad_tokens(self.xx)

    def stream(self, group: int, progress: ProgressCallback) -> None:
        """Every candidate read once: the per-token sums of every pair, and the screen's best."""
        tl = time.perf_counter()
        dev = self.dev
        self.warm = dev.type == "cuda" and _CUDA_WARM.get(str(dev), False)
        _CUDA_WARM[str(dev)] = dev.type == "cuda"
        self.sums: _PairSums | None = None  # the pairs' statistics, where the stream gave them
        if self.ps is not None:
            ps, ps_mod = self.ps, cast(ModuleType, self.ps_mod)  # ps came from it
            self.warm = _compiled(ps_mod)
            XY, YY, self.best, self.kept, timing, xx, self.fused, self.sums = _stream_cpu(
                ps, ps_mod, self.cands, self.refine_k, progress
            )
            self.xx = xx
            self.bad_tok = torch.from_numpy(_bad_tokens(xx.numpy()))
            if self.warm:
                from workbench.hidden.placement import note_kernel_rate

                note_kernel_rate(ps.kernel, torch.get_num_threads(), int(self.cand_bytes), time.perf_counter() - tl)
        else:  # no compiled pass: the reference was gathered into X, in the work dtype
            X, work = cast(torch.Tensor, self.X), cast(torch.dtype, self.work)
            xx, bad_tok = cast(torch.Tensor, self.xx), cast(torch.Tensor, self.bad_tok)
            if dev.type == "cuda" and _fits_on_device(dev, self.C * self.T * self.H * _esize(work)):
                XY, YY, self.best, self.kept, timing = _stream_cuda(
                    X, xx, bad_tok, self.cands, self.tok, self.refine_k, work, stager=self.stager, progress=progress
                )
            else:
                XY, YY, self.best, self.kept, timing = _stream_torch(
                    X, xx, bad_tok, self.cands, self.rows_of, self.refine_k, work, group=group, progress=progress
                )
        if self.stager is not None:
            self.stager.finish()
        timing["setup_s"] = tl - self.ts
        timing["stream_s"] = time.perf_counter() - tl
        self.timing = timing
        self.XY, self.YY = XY, YY

    def statistics(self) -> None:
        """Every pair's statistics, once, on the host in float64 ([S, C, T] is small next to the
        stream), and the non-finite values of each side counted."""
        # The slots' norms on the host in float64 ([S, T]: numpy's small operations cost less than torch's)
        xx, tok = cast(torch.Tensor, self.xx), self.tok
        self.xx_n, self.bad_n = xx.double().cpu().numpy(), cast(torch.Tensor, self.bad_tok).cpu().numpy()
        for i in np.flatnonzero(~np.isfinite(self.xx_n).all(1)).tolist():
            xi = self.X[i] if self.X is not None else _rows(cast("PairStats", self.ps).slots[i], tok.ref_index)
            self.nonfinite.append(_count_nonfinite("train", self.slots[i].name, xi, tok.ref_positions()))
        td = time.perf_counter()
        st = self.sums
        if st is None:
            st = _pair_sums(self.XY.cpu().numpy(), self.YY.cpu().numpy(), self.xx_n, self.bad_n)
        del self.XY, self.YY
        self.finite, self.yy_n = st.finite, st.yy
        self.ok_ct = ~self.bad_n[None, :] & st.finite  # [C, T]
        self.timing["stats_s"] = self.timing.get("stats_s", 0.0) + time.perf_counter() - td
        S, C = self.S, self.C
        self.acc = _Acc(
            st.num,
            st.den,
            st.dot,
            st.yy_sum,
            st.per_token,
            np.zeros((S, C), dtype=bool),
            np.full((S, C), np.nan),
            np.full((S, C), np.nan),
        )
        self.fin_rows = {
            int(c): torch.as_tensor(st.finite[c], device=self.dev) for c in np.flatnonzero(~st.finite.all(-1))
        }
        for c in self.fin_rows:
            if self.ps is not None:  # kept whole (rows read in place): gather the compared rows
                y = _rows(self.kept[c], tok.infer_index) if c in self.kept else self.rows_of(c)
            else:
                y = self.kept[c] if c in self.kept else self.rows_of(c)
            self.nonfinite.append(_count_nonfinite("infer", self.cands[c].name, y, _infer_rows(tok)))

    def refine(self) -> None:
        """The exact pass over the few best candidates of each slot, kept from the stream (no
        second read)."""
        tr = time.perf_counter()
        if self.ps is not None:
            self._refine_compiled(self.ps)
        else:
            self._refine_torch()
        self.kept.clear()
        self.timing["refine_s"] = time.perf_counter() - tr

    def _refine_compiled(self, ps: PairStats) -> None:
        """The pairs the stream differenced, then every other in one pass a group at a time."""
        S = self.S
        wanted = [(s_i, c) for s_i in range(S) for _, c in self.best[s_i]]
        missed = {(s_i, c) for s_i, c in wanted if (s_i, c) not in self.fused}
        done = [p for p in wanted if p in self.fused]
        if done:
            diffs = tuple(np.stack([self.fused[p][k] for p in done]) for k in range(3))
            _exact_stats(ps.H, (self.xx_n, self.yy_n, self.ok_ct), done, diffs, self.acc)
        todo = sorted({c for _, c in missed})
        self.timing["fused_pairs"], self.timing["read_again"] = len(wanted) - len(missed), len(todo)
        for i in range(0, len(todo), CPU_GROUP):
            part = todo[i : i + CPU_GROUP]
            with mapping.shared():
                ys = [self.kept.pop(c) if c in self.kept else ps.prepare(self.cands[c].load()) for c in part]
            pairs = [(s_i, j) for j, c in enumerate(part) for s_i in range(S) if (s_i, c) in missed]
            diffs = ps.exact(pairs, ys)
            _exact_stats(
                ps.H, (self.xx_n, self.yy_n, self.ok_ct), [(s_i, part[j]) for s_i, j in pairs], diffs, self.acc
            )
            del ys

    def _refine_torch(self) -> None:
        """Each best candidate's pairs from fp32 differences of the gathered rows (on the device)."""
        refine = _refine_whole if self.dev.type == "cuda" and self.T * self.H * 4 <= (1 << 29) else _refine
        X, xx, bad_tok = cast(torch.Tensor, self.X), cast(torch.Tensor, self.xx), cast(torch.Tensor, self.bad_tok)
        for c in sorted({c for b_ in self.best for _, c in b_}):
            slots_for = [s_i for s_i in range(self.S) if any(cc == c for _, cc in self.best[s_i])]
            ok_c = ~bad_tok & self.fin_rows[c] if c in self.fin_rows else ~bad_tok
            y = self.kept.pop(c) if c in self.kept else self.rows_of(c)  # read again only when rows were blocked
            refine(X, xx, y, c, slots_for, ok_c, self.acc)

    def result(self, th: Thresholds) -> AlignResult:
        """The matrix, the verdicts and the notes."""
        acc, T, cands, timing = self.acc, self.T, self.cands, self.timing
        timing["candidate_bytes"] = int(self.cand_bytes)
        timing["device_choice"] = self.choice.to_dict()
        if self.warm:  # what this path achieved, for later choices (not a first compile)
            from workbench.hidden.placement import note_path_rate

            note_path_rate(self.dev.type, torch.get_num_threads(), int(self.cand_bytes), time.perf_counter() - self.t0)
        timing["total_s"] = time.perf_counter() - self.t0
        rel = _ratio(acc.num, acc.den)
        if not self.ok_ct.all():  # a left-out token has no value (0 would read as identical)
            acc.per_token[:, ~self.ok_ct] = np.nan
        # Tokens where both sides are finite, per candidate (a token non-finite in any slot is left out
        # of every pair): a pair with none has no value at all, never "identical" (0 / 0).
        n_ok = self.ok_ct.sum(-1)
        rel[:, n_ok == 0] = np.nan
        notes = self.notes + _nonfinite_notes(self.nonfinite, n_ok, T, int(self.bad_n.sum()), cands)
        xx_sum = np.where(self.bad_n[None], 0.0, self.xx_n).sum(1)
        cos = np.where(
            (xx_sum[:, None] > 0) & (acc.yy_sum[None, :] > 0),
            acc.dot / np.sqrt(np.maximum(xx_sum[:, None] * acc.yy_sum[None, :], 1e-300)),
            np.nan,
        )
        bests = [
            _judge(
                self.slots[s],
                cands,
                _SlotRow(rel[s], acc.per_token[s], acc.exact[s], cos[s], acc.max_abs[s], acc.mean_abs[s]),
                T,
                th,
                n_ok,
            )
            for s in range(self.S)
        ]
        slot_bytes = sum(s.rows * s.width * _itemsize(s.dtype) for s in self.slots)
        return AlignResult(
            train=self.train.path,
            infer=self.infer.path,
            rows=[s.name for s in self.slots],
            rows_physical=[s.physical for s in self.slots],
            row_roles=[s.role for s in self.slots],
            cols=[c.name for c in cands],
            cols_physical=[c.physical for c in cands],
            metric="rel_diff",
            matrix=_clean(rel),
            cosine=_clean(cos),
            max_abs=_clean(acc.max_abs),
            mean_abs=_clean(acc.mean_abs),
            exact=acc.exact.tolist(),
            best=bests,
            tokens_compared=T,
            tokens=self.tok.to_dict(),
            recommendation=None,
            nonfinite=self.nonfinite,
            thresholds=th,
            device=str(self.dev),
            precision=self.precision,
            seconds=time.perf_counter() - self.t0,
            bytes_read=int(slot_bytes + self.cand_bytes),
            notes=notes + list(self.tok.notes),
            timing=timing,
            per_token_values=acc.per_token,
            token_positions=self.tok.ref_positions(),
        )


def _candidates(train: Capture, infer: Capture, slots: Sequence[HiddenTensor]) -> tuple[list[HiddenTensor], list[str]]:
    """The capture's tensors as wide as the slots, of its row count, and the notes on what was left
    out (other row counts) or looks off (a packed tensor of another slot count)."""
    H = slots[0].width
    cands = list(infer.candidates(H))
    if not cands:
        widths = sorted({t.width for t in infer.tensors})
        raise InputError(
            f"{infer.path}: no tensor {H} wide to compare with the {len(slots)} reference slots "
            f"(widths here: {widths}; hidden-size or slot-count mismatch)"
        )
    notes = list(train.notes) + list(infer.notes)
    n_rows = infer.rows
    odd = [c.name for c in cands if c.rows != n_rows]
    if odd:
        notes.append(
            f"skipped {len(odd)} candidate(s) whose row count differs from the capture's {n_rows}: {', '.join(odd[:4])}"
        )
        cands = [c for c in cands if c.rows == n_rows]
    refs = len([s for s in slots if s.role != FINAL])
    for t in infer.tensors:
        if t.width != H and t.width % H == 0 and t.role != LOGITS and t.width // H != refs:
            notes.append(f"{t.name} packs {t.width // H} slots of {H}; the reference has {refs}")
    return cands, notes


def _work(
    dev: torch.device, ps_mod: ModuleType | None, all_bf16: bool, screen: str, cand_bytes: int
) -> tuple[torch.dtype | None, str]:
    """The dtype the rows are gathered in (None: the compiled CPU pass reads them where they lie)
    and the precision the result reports."""
    if dev.type == "cuda":
        return (torch.bfloat16 if all_bf16 else torch.float32), "fp32"
    if ps_mod is not None:  # the compiled CPU pass: fp32 sums of exact products, refine exact
        return None, "fp32"
    use_bf16 = all_bf16 and (screen == "bf16" or (screen == "auto" and cand_bytes > (256 << 20)))
    return (torch.bfloat16 if use_bf16 else torch.float32), ("bf16-screen" if use_bf16 else "fp32")


# ------------------------------------------------------------------------------------------- parts
class _PairSums(NamedTuple):
    finite: npt.NDArray[np.bool_]  # [C, T] the candidate's per-token sum is finite
    yy: np.ndarray  # [C, T] per-token sum y^2, 0 where a token is left out
    per_token: npt.NDArray[np.float32]  # [S, C, T] rel_diff, 0 where left out
    num: _F64  # [S, C] sum (xx + yy - 2 xy)
    den: _F64  # [S, C] sum (xx + yy)
    dot: _F64  # [S, C] sum xy
    yy_sum: _F64  # [C] sum yy


def _pair_sums(xy: np.ndarray, yy: np.ndarray, xx: _F64, bad: npt.NDArray[np.bool_]) -> _PairSums:
    """Every pair's statistics from the screen's per-token sums (``xy [S, C, T]``, ``yy [C, T]``
    float32, ``xx [S, T]`` float64), in float64, leaving out the tokens where a slot (``bad``) or
    the candidate is not finite. (The compiled CPU pass takes the same per token in its own pass:
    ``pairstats._token_sums``.)"""
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(yy)  # [C, T]
        ok = ~bad[None, :] & finite  # [C, T]
        d_t = xx[:, None, :] + yy[None]  # [S, C, T]
        n_t = np.maximum(d_t - 2.0 * xy, 0.0)
        if not ok.all():  # leave out the tokens where either side is not finite
            d_t = np.where(ok[None], d_t, 0.0)
            n_t = np.where(ok[None], n_t, 0.0)
            xy = np.where(ok[None], xy, 0.0)
            yy = np.where(ok, yy, 0.0)
        per_token = (n_t / np.maximum(d_t, 1e-30)).astype(np.float32)
        return _PairSums(
            finite, yy, per_token, n_t.sum(-1), d_t.sum(-1), xy.sum(-1, dtype=np.float64), yy.sum(-1, dtype=np.float64)
        )


def _choose(device: str | None, cands: Sequence[HiddenTensor], cand_bytes: int, all_bf16: bool, screen: str) -> Choice:
    """CPU kernels or the GPU (``workbench.hidden.placement``); which CPU kernel would run."""
    from workbench.hidden import placement

    if device not in (None, "", "auto"):
        return placement.Choice(str(device), "asked for")
    ps_mod = _pairstats() if screen in ("auto", "kernel") else None
    kernel = "torch" if ps_mod is None else ps_mod.screen_kernel(all_bf16)
    if screen == "kernel":
        return placement.Choice("cpu", "the compiled CPU kernels were asked for")
    return placement.choose(None, cands, cand_bytes, kernel=kernel)


_CUDA_WARM: dict[str, bool] = {}  # devices an alignment already ran on in this process (kernels loaded)


def _compiled(ps_mod: ModuleType) -> bool:
    """The CPU kernels were compiled or loaded before (a first call's time is mostly that)."""
    return bool(ps_mod.compiled())


def _stager(dev: torch.device) -> Stager | None:
    if dev.type != "cuda":
        return None
    from workbench.hidden.placement import Stager

    return Stager(dev)


def _esize(dtype: torch.dtype) -> int:
    return torch.tensor([], dtype=dtype).element_size()


def _fits_on_device(dev: torch.device, nbytes: int) -> bool:
    """Every candidate's compared rows fit in half the device's free memory."""
    try:
        free, _ = torch.cuda.mem_get_info(dev)
    except (RuntimeError, AssertionError):
        return False
    return nbytes <= free // 2


def _bmm32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` batched, fp32 output (bf16 inputs: fp32 accumulate)."""
    if a.dtype == torch.float32:
        return torch.bmm(a, b)
    key = a.device.index
    if _OUT_DTYPE_OK.get(key, True):
        try:
            return torch.bmm(a, b, out_dtype=torch.float32)
        except (TypeError, RuntimeError, NotImplementedError):
            _OUT_DTYPE_OK[key] = False
    return torch.bmm(a.float(), b.float())


def _stream_cuda(
    X: torch.Tensor,
    xx: torch.Tensor,
    bad_tok: torch.Tensor,
    cands: Sequence[HiddenTensor],
    tok: TokenAlignment,
    refine_k: int,
    work: torch.dtype,
    *,
    stager: Stager | None,
    progress: ProgressCallback,
) -> _Streamed:
    """Every candidate onto the device once (pinned ring, the host copy of one piece overlapping
    the bus transfer of the last and the kernels of the candidate before; rows already on the
    device are read where they are), its per-token products computed as it lands. The candidates
    stay resident, so the exact pass reads them again from device memory, not from the host."""
    S, T, H = X.shape
    C, dev = len(cands), X.device
    XY = torch.empty((S, C, T), dtype=torch.float32, device=dev)
    YY = torch.empty((C, T), dtype=torch.float32, device=dev)
    Y: torch.Tensor | None = None
    ys: list[torch.Tensor] = []  # candidate c's rows on the device, c = 0..C-1
    X_t = X.transpose(0, 1).contiguous()  # [T, S, H]
    timing: dict[str, Any] = {
        "load_s": 0.0,
        "device_s": 0.0,
        "refine_s": 0.0,
        "groups": C,
        "group_size": 1,
        "row_block": T,
        "path": "cuda-resident",
        "stage": stager.mode if stager is not None else None,
    }
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # unannotated in torch
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # unannotated in torch
    t0 = time.perf_counter()
    start.record()
    for c in range(C):
        src = cands[c].load()
        if src.is_cuda:
            y = _rows(
                src,
                tok.infer_index
                if isinstance(tok.infer_index, slice)
                else torch.as_tensor(tok.infer_index, device=src.device),
            )
            y = y if y.dtype == work else y.to(work)
        else:
            if Y is None:
                Y = torch.empty((C, T, H), dtype=work, device=dev)
            src = _rows(src, tok.infer_index)
            st = cast("Stager", stager)  # a CUDA device always has one (``_stager``)
            st.put(src if src.dtype == work else src.to(work), Y[c])
            st.ready()
            y = Y[c]
        ys.append(y)
        XY[:, c] = _bmm32(X_t, y.unsqueeze(-1)).squeeze(-1).T
        YY[c] = _bmm32(y.unsqueeze(1), y.unsqueeze(-1)).reshape(T)
        if c % 8 == 7 or c == C - 1:
            progress(Progress("align", c + 1, C, cands[c].name))
    end.record()
    rel = _screen_rel(xx, bad_tok, XY, YY).cpu().numpy()  # waits for the last kernels
    if stager is not None:
        stager.finish()
    timing["load_s"] = stager.host_s if stager is not None else 0.0
    timing["stream_wall_s"] = time.perf_counter() - t0
    timing["device_s"] = start.elapsed_time(end) / 1000.0
    timing["h2d_bytes"] = stager.bytes if stager is not None else 0
    top = _Top(S, refine_k, cands)
    live = top.add(rel, list(range(C)))
    kept = {c: ys[c] for c in live}
    return XY, YY, top.lists, kept, timing


def _refine_whole(
    X: torch.Tensor,
    xx: torch.Tensor,
    y: torch.Tensor,
    c: int,
    slot_ids: Sequence[int],
    ok: torch.Tensor,
    acc: _Acc,
) -> None:
    """``_refine`` over all rows at once, every sum kept on the device until one copy back (on a
    GPU each host read of a scalar is a synchronisation)."""
    num, den, dot, yy_sum, per_token, exact, max_abs, mean_abs = acc
    dev = X.device
    y = y.to(dev)
    ok = ok.to(dev)
    zero = torch.zeros((), device=dev)
    yf = torch.where(ok[:, None], y.float(), zero)
    y_t = torch.linalg.vecdot(yf, yf)
    xx_ok = torch.where(ok[None], xx, zero)  # [S, T]
    rows, sums = [], []
    for s in slot_ids:
        d = torch.where(ok[:, None], X[s].float() - yf, zero)
        n_t = torch.linalg.vecdot(d, d)
        den_t = xx_ok[s] + y_t
        rows.append(torch.where(den_t > 0, n_t / den_t.clamp_min(1e-30), zero))
        sums.append(
            torch.stack(
                [
                    n_t.double().sum(),
                    den_t.double().sum(),
                    torch.linalg.vector_norm(d, ord=float("inf")).double(),
                    torch.linalg.vector_norm(d, ord=1).double(),
                    xx_ok[s].double().sum(),
                ]
            )
        )
    rel_t = torch.stack(rows).cpu().numpy()
    got = torch.stack(sums).cpu().numpy()
    yy_acc = float(y_t.double().sum())
    cnt = int(ok.sum()) * X.shape[2]
    yy_sum[c] = yy_acc
    for i, s in enumerate(slot_ids):
        n_acc, d_acc, mx, sabs, xs = got[i]
        per_token[s, c] = rel_t[i]
        num[s, c], den[s, c] = n_acc, d_acc
        dot[s, c] = (xs + yy_acc - n_acc) / 2.0
        exact[s, c] = True
        max_abs[s, c] = mx
        mean_abs[s, c] = sabs / cnt if cnt else np.nan


_Fused = dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]  # (slot, c) -> exact n, sa, mx [T]


def _stream_cpu(
    ps: PairStats, ps_mod: ModuleType, cands: Sequence[HiddenTensor], refine_k: int, progress: ProgressCallback
) -> tuple[
    torch.Tensor,
    torch.Tensor,
    list[list[tuple[float, int]]],
    dict[int, torch.Tensor],
    dict[str, Any],
    torch.Tensor,
    _Fused,
    _PairSums,
]:
    """Candidates read in place by the compiled kernels, a group at a time: per-token dot products
    of every pair (fp32 sums of exact products), their statistics (``_PairSums``, returned last:
    per token in the same pass) and by them a ranking, per group; the first group's pass also
    gives the slots' squared norms (fp32 [S, T]). A sample of tokens is screened first; the pairs
    its ranking foretells the exact pass will want are differenced while the rest of the tokens
    are screened, the sample's tokens in the same pass (``(slot, candidate) -> (n, sa, mx)``).
    Every token is screened once. Candidates with a wanted pair the pass did not difference are
    kept for the exact pass (a loaded candidate as it is, with the mapping its group shares; one
    read by address as a view of its group's mapping, ``_mapped_view``); the others go with their
    group."""
    S, T, C = ps.S, ps.T, len(cands)
    G = max(1, min(CPU_GROUP, C))
    XY = np.empty((S, C, T), dtype=np.float32)
    YY = np.empty((C, T), dtype=np.float32)
    top = _Top(S, refine_k, cands)
    kept: dict[int, torch.Tensor] = {}
    xx_np = np.empty((S, T), dtype=np.float32)
    sums = _PairSums(
        np.empty((C, T), np.bool_),
        YY,
        np.empty((S, C, T), np.float32),
        np.empty((S, C)),
        np.empty((S, C)),
        np.empty((S, C)),
        np.empty(C),
    )
    fused: _Fused = {}
    fuse = refine_k < C and T >= 4 * SAMPLE_TOKENS and ps.differences_in_pass
    sample = rest = None
    if fuse:
        sample, rest = _sample_tokens(T)
    timing: dict[str, Any] = {
        "load_s": 0.0,
        "device_s": 0.0,
        "unmap_s": 0.0,
        "refine_s": 0.0,
        "groups": 0,
        "group_size": G,
        "row_block": T,
        "kernel": ps.kernel,
        "threads": ps.threads,
        "block": ps.block,
        "sample_s": 0.0,
        "stats_s": 0.0,
    }
    for g0 in range(0, C, G):
        group_c = list(range(g0, min(C, g0 + G)))
        g1 = g0 + len(group_c)
        tl = time.perf_counter()
        with mapping.shared():  # a file's candidates in one mapping: one munmap when they go
            ys = _cpu_group(ps, [cands[c] for c in group_c])
        td = time.perf_counter()
        timing["load_s"] += td - tl
        xx = xx_np if g0 == 0 else None  # (the first group's passes give the slots' norms)
        whole = G == C
        out = (
            (XY, YY) if whole else (np.empty((S, len(group_c), T), np.float32), np.empty((len(group_c), T), np.float32))
        )
        sout = ps_mod.SumsOut(
            xx_np,
            *(
                (sums.finite, sums.per_token)
                if whole
                else (np.empty((len(group_c), T), np.bool_), np.empty((S, len(group_c), T), np.float32))
            ),
        )
        pairs: list[tuple[int, int]] = []
        diffs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        before: PairSums | None = None
        if sample is not None:
            before = ps.dots(ys, xx, (), sample, out, SAMPLE_THREAD_TOKENS, sums=sout).sums
            pairs = _foretell(cast("PairSums", before), [cands[c] for c in group_c], refine_k)
            if pairs:  # differenced in the pass over the rest, the sample's tokens too
                diffs = tuple(np.empty((len(pairs), T), np.float32) for _ in range(3))  # type: ignore[assignment]
        ts = time.perf_counter()
        timing["sample_s"] += ts - td
        got = ps.dots(ys, xx, pairs, rest, out, diffs=diffs, exact_cols=sample, sums=sout)
        timing["device_s"] += time.perf_counter() - ts
        tt = time.perf_counter()
        part = cast("PairSums", got.sums)
        for k, dst in enumerate((sums.num, sums.den, sums.dot)):
            dst[:, g0:g1] = (part[k] + before[k]) if before is not None else part[k]
        sums.yy_sum[g0:g1] = (part.yy + before.yy) if before is not None else part.yy
        if not whole:
            XY[:, g0:g1], YY[g0:g1] = out
            sums.finite[g0:g1], sums.per_token[:, g0:g1] = sout.finite, sout.per_token
        for p, (s_i, g) in enumerate(pairs):
            fused[s_i, group_c[g]] = (got.n[p], got.sa[p], got.mx[p])
        top.add(_ratio(sums.num[:, g0:g1], sums.den[:, g0:g1]), group_c)
        timing["stats_s"] += time.perf_counter() - tt
        unfused = {c for s_i, lst in enumerate(top.lists) for _, c in lst if (s_i, c) not in fused}
        for g, c in enumerate(group_c):
            if c in unfused and refine_k < C:  # (every pair refined: read again, a group at a time)
                kept[c] = ys.tensors[g] if ys.tensors else _mapped_view(ys, g, cands[c])
        tu = time.perf_counter()
        for c in [c for c in kept if c not in unfused]:
            del kept[c]
        del ys  # the group's mappings go (unless kept)
        timing["unmap_s"] += time.perf_counter() - tu
        timing["groups"] += 1
        progress(Progress("align", group_c[-1] + 1, C, cands[group_c[-1]].name))
    return torch.from_numpy(XY), torch.from_numpy(YY), top.lists, kept, timing, torch.from_numpy(xx_np), fused, sums


def _sample_tokens(T: int) -> tuple[np.ndarray, np.ndarray]:
    """The sample's token indices, ``SAMPLE_TOKENS`` spread evenly from the capture's first token
    to its last, and the rest (both ascending). (Runs of 4-16 neighbours, touching fewer pages,
    made the sample no faster: ``benchmarks/results/align_h200_host_sample.json``.)"""
    in_sample = np.zeros(T, np.bool_)
    in_sample[(np.arange(SAMPLE_TOKENS) * ((T - 1) / (SAMPLE_TOKENS - 1))).round().astype(np.int64)] = True
    return np.flatnonzero(in_sample), np.flatnonzero(~in_sample)


def _cpu_group(ps: PairStats, group: Sequence[HiddenTensor]) -> Group:
    """A group of candidates for the compiled CPU pass. Where they all lie as they are in one file
    (``HiddenTensor.span``: a safetensors stack), the file is mapped once and the kernels read them
    by address (loading each costs more than the pass over a group's sample, at 16 threads);
    otherwise each is loaded."""
    from workbench.hidden.pairstats import CODES

    spans = [c.span for c in group]
    paths = {s.path for s in spans if s is not None}
    if len(paths) == 1 and all(s is not None for s in spans) and all(c.dtype in CODES and c.rows for c in group):
        sp = cast("list[FileSpan]", spans)
        lo = min(s.begin for s in sp)
        hi = max(s.begin + (c.rows - 1) * s.row_bytes + c.width * ITEMSIZE[c.dtype] for s, c in zip(sp, group))
        owner = torch.frombuffer(mapping.map_range(paths.pop(), lo, hi), dtype=torch.uint8, count=hi - lo)
        base = owner.data_ptr() - lo
        return ps.group_at(
            owner,
            [base + s.begin for s in sp],
            [CODES[c.dtype] for c in group],
            [s.row_bytes for s in sp],
            [c.rows for c in group],
        )
    return ps.group([c.load() for c in group])


def _mapped_view(grp: Group, g: int, cand: HiddenTensor) -> torch.Tensor:
    """Candidate ``g`` of a group read by address (``_cpu_group``), as a ``[rows, width]`` tensor
    over the group's mapping: kept for the exact pass, it keeps that mapping (its pages already
    mapped) rather than mapping the file again."""
    esize = ITEMSIZE[cand.dtype]
    owner, row_bytes = grp.owner, int(grp.ys[g])
    off = int(grp.ya[g]) - owner.data_ptr()
    flat = owner[off : off + (cand.rows - 1) * row_bytes + cand.width * esize].view(getattr(torch, cand.dtype))
    view: torch.Tensor = flat.as_strided((cand.rows, cand.width), (row_bytes // esize, 1))
    return view


def _foretell(sample: PairSums, group: Sequence[HiddenTensor], refine_k: int) -> list[tuple[int, int]]:
    """The pairs ``[(slot, index into the group)]`` the exact pass will likely want from this group:
    its statistics over a sample of tokens spread over the capture, ranked as the stream ranks,
    one more a slot than the exact pass takes. A pair it misses is read again later; one it adds
    costs a difference of rows already in cache."""
    top = _Top(sample.num.shape[0], refine_k + 1, group)
    top.add(_ratio(sample.num, sample.den), list(range(len(group))))
    return sorted({(s_i, g) for s_i, lst in enumerate(top.lists) for _, g in lst})


_Norms = TypeVar("_Norms", torch.Tensor, np.ndarray)


def _bad_tokens(xx: _Norms) -> _Norms:
    """Tokens where a slot's squared norm is not finite (left out of every pair); a numpy array
    (the CPU pass) stays in numpy, a tensor stays on its device."""
    if isinstance(xx, np.ndarray):
        bad: np.ndarray = ~np.isfinite(xx).all(0)
        return bad
    return ~torch.isfinite(xx).all(0)


def _screen_rel(xx: torch.Tensor, bad_tok: torch.Tensor, xy: torch.Tensor, yy: torch.Tensor) -> torch.Tensor:
    """The screen's aggregate rel_diff ``[S, G]`` of a group from per-token sums (``xx [S, T]``,
    ``xy [S, G, T]``, ``yy [G, T]``) over the tokens the final statistics keep: where every slot
    and the candidate are finite. (Summing everything would make a single non-finite value in a
    slot or a candidate rank a whole row or column last, and the exact pass miss the real best.)"""
    ok = ~bad_tok[None, :] & torch.isfinite(yy)  # [G, T]
    zero = torch.zeros((), dtype=torch.float64, device=yy.device)
    xxm = torch.where(bad_tok[None, :], zero, xx.double())  # [S, T]
    den = xxm @ ok.double().T + torch.where(ok, yy.double(), zero).sum(1)[None]
    xyd = torch.where(ok[None], xy.double(), zero).sum(2)
    return (den - 2 * xyd) / den


class _Top:
    """Per slot, the candidates the screen ranks best, kept for the exact pass: the ``k`` lowest
    values, and always the best one at another physical point than the leader's (the runner-up
    whose per-token values the verdict reads), whatever ``k`` is."""

    def __init__(self, S: int, k: int, cands: Sequence[HiddenTensor]) -> None:
        self.k, self.cands = k, cands
        self.lists: list[list[tuple[float, int]]] = [[] for _ in range(S)]  # per slot: sorted [(value, c)]

    def _same(self, a: int, b: int) -> bool:
        pa, pb = self.cands[a].physical, self.cands[b].physical
        return pa is not None and pa == pb

    def add(self, rel_g: np.ndarray, group_c: Sequence[int]) -> set[int]:
        """Rank a group (``rel_g [S, len(group_c)]``); returns every candidate still kept."""
        vals = np.where(np.isfinite(rel_g), rel_g, np.inf).astype(np.float64).tolist()  # a non-finite value ranks last
        for s_i, lst in enumerate(self.lists):
            lst.extend(zip(vals[s_i], group_c))
            lst.sort()
            # the shortest prefix holding k entries and one at a point other than the leader's:
            # whatever leads later, a kept entry at another point beats everything dropped
            other = next((i for i, (_, c) in enumerate(lst) if i and not self._same(c, lst[0][1])), None)
            del lst[max(self.k, other + 1 if other is not None else 0) :]
        return {c for lst in self.lists for _, c in lst}


def _stream_torch(
    X: torch.Tensor,
    xx: torch.Tensor,
    bad_tok: torch.Tensor,
    cands: Sequence[HiddenTensor],
    rows_of: Callable[[int], torch.Tensor],
    refine_k: int,
    work: torch.dtype,
    *,
    group: int,
    progress: ProgressCallback,
) -> _Streamed:
    """Candidates through a group buffer and batched matmuls (CUDA, or a CPU without numba)."""
    S, T, H = X.shape
    C, dev = len(cands), X.device
    cuda = dev.type == "cuda"
    esize = torch.tensor([], dtype=work).element_size()
    slot_bytes = max(1, T * H * esize)
    if cuda:
        # cuBLAS reads a [T, w, H] bf16 batched Gram at its best when w is a multiple of 8 and >= 24
        # (w = 19: a quarter of that rate), and its time grows with w: as few groups as the budget
        # allows, each as wide as its candidates need, rounded up to a multiple of 8.
        fit = max(S + 1, (8 * BUFFER_BYTES) // slot_bytes)
        n_groups = -(-C // max(1, fit - S))
        per = -(-C // n_groups)
        w = min(max(8, -(-(S + per) // 8) * 8), max(8, fit // 8 * 8))
        G = max(1, w - S)
        T_b = max(1, min(T, (8 * BUFFER_BYTES) // ((S + G) * H * esize)))
    else:
        G = max(1, min(group, C, BUFFER_BYTES // slot_bytes - S))
        T_b = max(1, min(T, BUFFER_BYTES // ((S + G) * H * esize)))
    # CUDA: slot-major [S+G, T_b, H] (a candidate lands contiguously); CPU: token-major.
    W = torch.zeros((S + G, T_b, H) if cuda else (T_b, S + G, H), dtype=work, device=dev)

    # Per-token products of every pair stay on the device ([S, C, T] floats: small); the
    # statistics are computed once at the end. Per group only a ranking sum crosses to the host.
    XY = torch.zeros((S, C, T), dtype=torch.float32, device=dev)
    YY = torch.zeros((C, T), dtype=torch.float32, device=dev)
    top = _Top(S, refine_k, cands)  # per slot: the screen's best, to refine
    kept: dict[int, torch.Tensor] = {}  # those candidates' rows, copied out of the buffer
    timing: dict[str, Any] = {
        "load_s": 0.0,
        "device_s": 0.0,
        "refine_s": 0.0,
        "groups": 0,
        "group_size": G,
        "row_block": T_b,
    }
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    for g0 in range(0, C, G):
        group_c = list(range(g0, min(C, g0 + G)))
        k = len(group_c)
        kk = G  # the whole buffer is multiplied (stale slots ignored): a partial view
        # would make the matmul copy it (on a CPU a second buffer-sized allocation)
        td = time.perf_counter()
        for r0 in range(0, T, T_b):
            r1 = min(T, r0 + T_b)
            n = r1 - r0
            for g, c in enumerate(group_c):  # each candidate mapped, copied in, and let go
                dst = W[S + g, :n] if cuda else W[:n, S + g]
                dst.copy_(rows_of(c)[r0:r1])
            if cuda:
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # unannotated in torch
                start.record()
            if g0 == 0 or T_b < T:
                (W[:S, :n] if cuda else W[:n, :S]).copy_(X[:, r0:r1] if cuda else X[:, r0:r1].transpose(0, 1))
            A = W[: S + kk, :n].transpose(0, 1) if cuda else W[:n, : S + kk]  # [n, S+kk, H]
            gram = _gram(A)  # fp32 [n, S+kk, S+kk]
            XY[:, g0 : g0 + k, r0:r1] = gram[:, :S, S : S + k].permute(1, 2, 0)
            YY[g0 : g0 + k, r0:r1] = torch.diagonal(gram[:, S : S + k, S : S + k], dim1=1, dim2=2).transpose(0, 1)
            if cuda:
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # unannotated in torch
                end.record()
                events.append((start, end))
        # Rank this group by the aggregate rel_diff over the tokens where both sides are finite.
        rel_g = _screen_rel(xx, bad_tok, XY[:, g0 : g0 + k], YY[g0 : g0 + k]).cpu().numpy()
        timing["device_s"] += time.perf_counter() - td  # CUDA: replaced by the event times below
        live = top.add(rel_g, group_c)
        for g, c in enumerate(group_c):
            # CUDA: keep a device copy for the exact pass; a CPU maps the file again (no resident copy)
            if c in live and cuda and T_b == T:
                kept[c] = W[S + g, :T].clone()
        for c in [c for c in kept if c not in live]:
            del kept[c]
        timing["groups"] += 1
        progress(Progress("align", group_c[-1] + 1, C, cands[group_c[-1]].name))
    del W

    if cuda and events:
        torch.cuda.synchronize(dev)
        timing["device_s"] = sum(a_.elapsed_time(b_) for a_, b_ in events) / 1000.0
    return XY, YY, top.lists, kept, timing


def _itemsize(dtype: str) -> int:
    return ITEMSIZE.get(dtype, 4)


def _rows(t: torch.Tensor, index: slice | np.ndarray | torch.Tensor) -> torch.Tensor:
    return t[index] if isinstance(index, slice) else t[torch.as_tensor(index, dtype=torch.long)]


def _sq_rows(x: torch.Tensor) -> torch.Tensor:
    """Per-row sum of squares in fp32, in row chunks (no full-size fp32 copy)."""
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    for r0 in range(0, x.shape[0], REFINE_ROWS):
        c = x[r0 : r0 + REFINE_ROWS].float()
        out[r0 : r0 + REFINE_ROWS] = (c * c).sum(-1)
    return out


_OUT_DTYPE_OK: dict[int | None, bool] = {}  # per CUDA device index: bmm takes out_dtype


def _gram(A: torch.Tensor) -> torch.Tensor:
    """Per-row Gram matrices ``A @ A^T`` in fp32 (bf16 inputs: fp32 output on CUDA; on CPU the
    bf16 matmul output is the screen, see the module docstring)."""
    if A.dtype == torch.float32:
        return torch.bmm(A, A.transpose(1, 2))
    if A.is_cuda:
        key = A.device.index
        if _OUT_DTYPE_OK.get(key, True):
            try:
                return torch.bmm(A, A.transpose(1, 2), out_dtype=torch.float32)
            except (TypeError, RuntimeError, NotImplementedError):
                _OUT_DTYPE_OK[key] = False
        A_f = A.float()
        return torch.bmm(A_f, A_f.transpose(1, 2))
    return torch.bmm(A, A.transpose(1, 2)).float()


def _refine(
    X: torch.Tensor,
    xx: torch.Tensor,
    y: torch.Tensor,
    c: int,
    slot_ids: Sequence[int],
    ok: torch.Tensor,
    acc: _Acc,
) -> None:
    """Exact statistics of (slot, candidate c) pairs from fp32 differences (no cancellation),
    in row chunks; rows where ``ok`` is False (non-finite) are left out; into ``acc``."""
    num, den, dot, yy_sum, per_token, exact, max_abs, mean_abs = acc
    dev = X.device
    T = X.shape[1]
    y = y.to(dev)
    ok = ok.to(dev)
    all_ok = bool(ok.all())
    sums: dict[int, list[float]] = {s: [0.0, 0.0, 0.0, 0.0, 0] for s in slot_ids}  # num, den, max|d|, sum|d|, count
    yy_acc = 0.0
    for r0 in range(0, T, REFINE_ROWS):
        r1 = min(T, r0 + REFINE_ROWS)
        m = ok[r0:r1]
        yf = y[r0:r1].float()
        if not all_ok:
            yf = torch.where(m[:, None], yf, torch.zeros((), device=dev))
        y_t = torch.linalg.vecdot(yf, yf)
        yy_acc += float(y_t.double().sum())
        for s in slot_ids:
            xs = X[s, r0:r1]
            d = xs - yf if xs.dtype == torch.float32 else xs.float() - yf
            if not all_ok:
                d = torch.where(m[:, None], d, torch.zeros((), device=dev))
            n_t = torch.linalg.vecdot(d, d)
            den_t = torch.where(m, xx[s, r0:r1], torch.zeros((), device=dev)) + y_t
            rel_t = torch.where(den_t > 0, n_t / den_t.clamp_min(1e-30), torch.zeros((), device=dev))
            per_token[s, c, r0:r1] = rel_t.cpu().numpy()
            a = sums[s]
            a[0] += float(n_t.double().sum())
            a[1] += float(den_t.double().sum())
            a[2] = max(a[2], float(torch.linalg.vector_norm(d, ord=float("inf"))))
            a[3] += float(torch.linalg.vector_norm(d, ord=1))
            a[4] += int(m.sum()) * d.shape[1]
    yy_sum[c] = yy_acc
    xx_m = {s: float(torch.where(ok, xx[s], torch.zeros((), device=dev)).double().sum()) for s in slot_ids}
    for s, (n_acc, d_acc, mx, sabs, cnt) in sums.items():
        num[s, c], den[s, c] = n_acc, d_acc
        dot[s, c] = (xx_m[s] + yy_acc - n_acc) / 2.0
        exact[s, c] = True
        max_abs[s, c] = mx
        mean_abs[s, c] = sabs / cnt if cnt else np.nan


def _exact_stats(
    H: int,
    norms: tuple[np.ndarray, np.ndarray, npt.NDArray[np.bool_]],
    pairs: Sequence[tuple[int, int]],
    diffs: tuple[np.ndarray, ...],
    acc: _Acc,
) -> None:
    """``_refine``'s statistics of ``pairs`` ``[(slot, candidate)]`` at once, into ``acc``, from the
    compiled kernels' fp32 differences (``diffs``, ``[P, T]`` per token: ``n`` sum of squares,
    ``sa`` of absolute values, ``mx`` their max) and ``norms = (xx_n, yy_n, ok_ct)``, over the
    tokens ``ok_ct [C, T]`` keeps of each candidate. ``yy_n`` (the stream's per-token squared
    norms, non-finite tokens zeroed) needs no refining: no cancellation there."""
    xx_n, yy_n, ok_ct = norms
    n, sa, mx = diffs
    num, den, dot, yy_sum, per_token, exact, max_abs, mean_abs = acc
    s = np.array([p[0] for p in pairs], np.int64)
    c = np.array([p[1] for p in pairs], np.int64)
    okn = ok_ct[c]  # [P, T]
    with np.errstate(invalid="ignore", over="ignore"):
        xs = np.where(okn, xx_n[s], 0.0)
        n_t = np.where(okn, n, 0.0)
        den_t = xs + np.where(okn, yy_n[c], 0.0)
        per_token[s, c] = np.where(den_t > 0, n_t / np.maximum(den_t, 1e-30), 0.0)
        num[s, c], den[s, c] = n_t.sum(1), den_t.sum(1)
        dot[s, c] = (xs.sum(1) + yy_sum[c] - num[s, c]) / 2.0
        exact[s, c] = True
        cnt = okn.sum(1) * H
        max_abs[s, c] = np.where(okn, mx, 0.0).max(1) if okn.shape[1] else 0.0
        mean_abs[s, c] = np.where(cnt > 0, np.where(okn, sa, 0.0).sum(1) / np.maximum(cnt, 1), np.nan)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, 1.0, 0.0))


def _clean(a: np.ndarray) -> list[list[float | None]]:
    return [[None if not math.isfinite(float(v)) else float(v) for v in row] for row in a]


def _infer_rows(tok: TokenAlignment) -> npt.NDArray[np.int64]:
    rows: npt.NDArray[np.int64] = np.arange(tok.infer_rows)[tok.infer_index]
    return rows


def _count_nonfinite(side: str, name: str, t: torch.Tensor, rows: np.ndarray) -> NonFinite:
    nan = torch.isnan(t)
    inf = torch.isinf(t)
    bad = nan | inf
    where = torch.nonzero(bad)[:5].cpu().numpy()
    first = [[int(rows[r]) if r < len(rows) else int(r), int(col)] for r, col in where]
    return NonFinite(side, name, int(nan.sum()), int(inf.sum()), int(bad.any(-1).sum()), first)


def _nonfinite_notes(
    nonfinite: list[NonFinite], n_ok: np.ndarray, T: int, bad_ref: int, cands: Sequence[HiddenTensor]
) -> list[str]:
    """What the non-finite values cost, said where the verdicts are read."""
    out: list[str] = []
    for nf in nonfinite:
        out.append(
            f"{nf.side} {nf.tensor}: {nf.nan} NaN and {nf.inf} Inf value(s) on {nf.tokens} token(s); "
            "those tokens are left out of its comparisons"
        )
    if bad_ref:
        out.append(f"{bad_ref} of {T} tokens are non-finite in a reference slot: left out of every pair")
    dead = [cands[int(c)].name for c in np.flatnonzero(n_ok == 0)]
    if dead and T:
        out.append(
            f"{len(dead)} candidate(s) have no token where both sides are finite, so no value: "
            f"{', '.join(dead[:4])}{' ...' if len(dead) > 4 else ''}"
        )
    return out


class _SlotRow(NamedTuple):
    """A slot's row of the statistics, one value per candidate."""

    rel: np.ndarray
    per_tok: np.ndarray  # [C, T]
    exact: np.ndarray
    cos: np.ndarray
    max_abs: np.ndarray
    mean_abs: np.ndarray


def _judge(
    slot: HiddenTensor,
    cands: Sequence[HiddenTensor],
    row: _SlotRow,
    T: int,
    th: Thresholds,
    n_ok: np.ndarray | None = None,
) -> SlotBest:
    rel, per_tok, exact, cos, max_abs, mean_abs = row
    idx = np.argsort(rel, kind="stable")
    order = idx[np.isfinite(rel[idx])].tolist()
    if not order:
        why = (
            "no token where this slot and a candidate are both finite (NaN/Inf): nothing was compared"
            if T and n_ok is not None and not n_ok.any()
            else "no finite comparison"
        )
        return SlotBest(
            slot.name,
            slot.physical,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            AMBIGUOUS if T else NO_MATCH,
            why,
        )
    b = int(order[0])
    T_all, T = T, (int(n_ok[b]) if n_ok is not None else T)  # the best's compared tokens decide
    bc = cands[b]
    r = None
    for c in order[1:]:
        cc = cands[int(c)]
        if bc.physical is not None and cc.physical is not None and cc.physical == bc.physical:
            continue  # the same point captured twice is not a competitor
        r = int(c)
        break
    bv = float(rel[b])
    out = SlotBest(
        slot.name,
        slot.physical,
        bc.name,
        bc.physical,
        bv,
        None,
        None,
        None,
        None,
        None,
        None,
        AMBIGUOUS,
        "",
        exact=bool(exact[b]),
        cosine=_num(cos[b]),
        max_abs=_num(max_abs[b]),
        mean_abs=_num(mean_abs[b]),
    )
    pb = per_tok[b][np.isfinite(per_tok[b])]  # left-out tokens carry NaN
    if pb.size:
        pb_sorted = np.sort(pb)
        out.median_token = _quantile(pb_sorted, 0.5)
        out.p95_token = _quantile(pb_sorted, 0.95)
    if r is not None:
        rv = float(rel[r])
        out.runner_up, out.runner_up_physical, out.runner_up_value = cands[r].name, cands[r].physical, rv
        out.margin = float("inf") if bv == 0 else rv / bv
        both = np.isfinite(per_tok[b]) & np.isfinite(per_tok[r])
        xb, xr = per_tok[b][both], per_tok[r][both]
        if xb.size:  # (every token the best has is compared: xb is pb, its median known)
            mb = (
                out.median_token if xb.size == pb.size and out.median_token is not None else _quantile(np.sort(xb), 0.5)
            )
            mr = _quantile(np.sort(xr), 0.5)
            out.token_margin = float("inf") if mb == 0 and mr > 0 else (mr / mb if mb > 0 else 1.0)
            out.win_rate = float(np.mean(xb < xr))
    out.verdict, out.reason = _verdict(out, T, th)
    if T_all > T:
        out.reason += f" ({T_all - T} of {T_all} tokens left out: NaN/Inf)"
    return out


def _quantile(a: np.ndarray, q: float) -> float:
    """The ``q`` quantile of sorted, non-empty ``a``, interpolated linearly between its neighbours
    (numpy's default, and the mean of the middle two for the median), in float64: one sort serves
    every quantile, where each ``np.median`` or ``np.percentile`` costs several sorts' time on the
    few thousand values of a slot."""
    pos = q * (len(a) - 1)
    i = min(int(pos), len(a) - 1)
    lo, hi, frac = float(a[i]), float(a[min(i + 1, len(a) - 1)]), pos - i
    return lo if frac == 0 or hi == lo else lo + (hi - lo) * frac


def _num(v: SupportsFloat) -> float | None:
    f = float(v)
    return f if math.isfinite(f) else None


def _verdict(b: SlotBest, T: int, th: Thresholds) -> tuple[str, str]:
    v = b.value
    if v is None:
        return NO_MATCH, "no finite comparison"
    if v > th.no_match_min:
        return NO_MATCH, f"best rel_diff {v:.3g} > {th.no_match_min:g}: no candidate is this slot"
    if th.min_tokens > T:
        return AMBIGUOUS, f"only {T} tokens compared (need {th.min_tokens})"
    if v <= th.exact:
        if b.runner_up_value is not None and b.runner_up_value <= th.exact:
            return AMBIGUOUS, (
                f"{b.candidate} and {b.runner_up} are both identical to this slot (same tensor at two points?)"
            )
        return MATCH, f"identical to {b.candidate} (rel_diff {v:.1e})"
    if v > th.match_max:
        return AMBIGUOUS, f"best rel_diff {v:.3g} is above {th.match_max:g} (an adjacent layer?)"
    return _verdict_on_margin(b, v, th)


def _verdict_on_margin(b: SlotBest, v: float, th: Thresholds) -> tuple[str, str]:
    """The verdict of a best within the match range (``v``), by how far the runner-up is behind."""
    if b.runner_up_value is None:
        return MATCH, f"rel_diff {v:.2e} <= {th.match_max:g}; a single candidate, so no margin to check"
    gap = b.runner_up_value - v
    margin = max(b.margin or 0.0, b.token_margin or 0.0)
    if gap < th.min_gap:
        return AMBIGUOUS, f"runner-up {b.runner_up} within {gap:.1e} (< {th.min_gap:g})"
    if margin < th.min_ratio:
        return AMBIGUOUS, f"margin x{margin:.2f} < x{th.min_ratio:g} over {b.runner_up}"
    if b.win_rate is not None and b.win_rate < th.min_win_rate:
        return AMBIGUOUS, (
            f"best on only {b.win_rate:.0%} of tokens against {b.runner_up} (aggregate dominated by a few tokens)"
        )
    return MATCH, f"rel_diff {v:.2e}, x{margin:.3g} below {b.runner_up}, best on {b.win_rate:.0%} of tokens"
