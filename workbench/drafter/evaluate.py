"""Standalone drafter evaluation on training data, the way training measures it.

For every sample (SpecForge ``data_{i}.ckpt[.gz]`` or speculators ``hs_{i}.safetensors``) the
drafter runs the training-time-test unroll (``Eagle3Drafter.unroll``): step 0 reads the target
features ``g_t`` and token ``x_{t+1}``; step k reads step k-1's output at the same index and token
``x_{t+1+k}`` at RoPE position ``t+k``. Let ``a_t`` be the target's greedy token after reading
``x_0..x_t`` (argmax of ``lm_head(h_t)``: the file's post-norm ``hidden_state``, or the pre-norm
last state through the target's final norm, or the stored logits of the logits variant). Step k at
index t predicts ``a_{t+1+k}``.

Each number is named by its definition; a tool's name is on it only when it is that tool's metric
computed that tool's way.

SpecForge 0.2.0 (``OnlineEagle3Model``; offline alignment ``loss_mask[-1] = 0``, the mask shifted
left by one per step, ``m_k[t] = loss_mask[t+k]``; teacher = argmax over the full target vocab):

- ``acc`` = SpecForge ``acc_k``: ``sum_t m_k[t] * [draft top-1 == a_{t+1+k}] / sum_t m_k[t]``
  (unconditional, teacher-forced; a target token outside the draft vocabulary counts as wrong).

speculators 0.9.0 (``Eagle3DraftModel.forward`` + ``compute_accuracy_single_step`` after
``shift_batch``: teacher = argmax over the draft vocabulary, ``verifier_lm_head = lm_head[t2d]``;
the loss mask aligned one position later, ``l_k[t] = loss_mask[t+1+k]``; every position when the
data has no mask), summed over samples before the ratio:

- ``speculators_full_acc`` = ``full_acc_k``: ``sum_t l_k[t] * [steps 0..k right and loss_mask[t+1]]
  / sum_t l_k[t]``;
- ``speculators_cond_acc`` = ``cond_acc_k``: the same numerator over ``sum_t [loss_mask[t+1] and
  steps 0..k-1 right]`` (not restricted to ``l_k``, as speculators counts it).

The workbench's chain metrics (SpecForge's mask and teacher; no tool computes them this way):

- ``full_acc`` (chain): steps 0..k all right, over ``sum_t m_k[t]``;
- ``cond_acc`` (chain): right at k given steps 0..k-1 right;
- ``topk_acc[k][i-1]``: the target token among the draft's top-i (unconditional), and
  ``topk_cond`` the same given steps 0..k-1 right (the predictor's tree input);
- vocabulary coverage: the share of step-0 target tokens inside the draft vocabulary (an upper
  bound on acceptance at every depth).

The predicted accept length comes from ``workbench.predict`` (chain, bonus token included) on the
marginal rates ``P_k = full_acc_{k-1}`` (the block estimate, ``1 + sum full_acc``); the
SpecForge-style estimate from ``acc_k`` and the one from ``cond_acc_k`` sit beside it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from workbench.errors import InputError
from workbench.progress import Progress, ProgressCallback, noop
from workbench.results import Result

if TYPE_CHECKING:
    import torch

    from workbench.drafter.checkpoint import WeightReport
    from workbench.drafter.model import Eagle3Drafter
    from workbench.drafter.target import TargetHead
    from workbench.hidden.view import Capture

_Rates = list[float | None]  # one rate per depth (None: nothing to count)

DEFAULT_DEPTH = 3
DEFAULT_TOPK = 4


@dataclass
class DrafterEval(Result):
    draft: str
    data: str
    target: str
    depth: int
    samples: int
    positions: int  # loss-masked positions at step 0
    positions_per_depth: list[int]
    acc: _Rates  # SpecForge acc_k, k = 0..depth-1
    full_acc: _Rates  # workbench chain: steps 0..k right (SpecForge mask and teacher)
    cond_acc: _Rates  # workbench chain: right at k given 0..k-1 right
    topk: list[int]  # the k of the top-k columns
    topk_acc: list[_Rates]  # [depth][i] cumulative top-(i+1) hit rate
    topk_cond: list[_Rates]
    vocab_coverage: float | None
    predicted: dict[str, Any]
    weights: dict[str, Any]
    speculators_full_acc: _Rates = field(default_factory=list)  # speculators full_acc_k, its way
    speculators_cond_acc: _Rates = field(default_factory=list)  # speculators cond_acc_k, its way
    speculators_positions: list[int] = field(default_factory=list)  # speculators' full_acc_k totals
    variant: dict[str, Any] = field(default_factory=dict)  # the forward's switches (variants.Variant)
    explanations: list[str] = field(default_factory=list)  # variants.explain: one line per variant
    labels: dict[str, str] = field(default_factory=lambda: dict(LABELS))
    device: str = "cpu"
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [
            f"drafter {self.draft} on {self.data}: {self.samples} samples, {self.positions} positions, "
            f"depth {self.depth}"
        ]
        for e in self.explanations:
            lines.append(f"  variant: {e}")
        lines.append(
            "  depth  SpecForge  chain     chain     speculators  speculators  "
            + "  ".join(f"top{k}" for k in self.topk)
        )
        lines.append("         acc_k      full      cond      full_acc     cond_acc")
        sf = self.speculators_full_acc or [None] * self.depth
        sc = self.speculators_cond_acc or [None] * self.depth
        for d in range(self.depth):
            lines.append(
                f"  {d:>5}  {_pct(self.acc[d])}     {_pct(self.full_acc[d])}    {_pct(self.cond_acc[d])}    "
                f"{_pct(sf[d])}       {_pct(sc[d])}       " + "  ".join(_pct(v) for v in self.topk_acc[d])
            )
        lines.append(
            "  SpecForge acc_k and speculators full/cond_acc are computed as those tools compute them; "
            "chain = the workbench's (SpecForge mask and teacher)"
        )
        if self.vocab_coverage is not None:
            lines.append(f"  draft vocabulary covers {_pct(self.vocab_coverage)} of the target's tokens")
        p = self.predicted
        if p.get("accept_length") is not None:
            lines.append(
                f"  predicted accept length {p['accept_length']:.3f} ({p['steps']} steps, chain, bonus "
                f"included, from full_acc); from acc_k {p.get('from_acc', float('nan')):.3f}"
            )
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


LABELS: dict[str, str] = {
    "acc": "SpecForge acc_k (teacher-forced top-1; full-vocab teacher; out-of-vocab = wrong)",
    "full_acc": "chain full (workbench: steps 0..k right; SpecForge mask and teacher)",
    "cond_acc": "chain cond (workbench: right at k given 0..k-1 right)",
    "speculators_full_acc": "speculators full_acc_k (draft-vocab teacher lm_head[t2d], mask one later)",
    "speculators_cond_acc": "speculators cond_acc_k (as speculators counts it)",
}


def _pct(v: float | None) -> str:
    return "  -  " if v is None else f"{100 * v:5.1f}%"


class Counts:
    """Sums over samples; every rate is a ratio of two of these."""

    def __init__(self, depth: int, kmax: int):
        self.den = np.zeros(depth)
        self.acc = np.zeros(depth)
        self.full = np.zeros(depth)
        self.cond_den = np.zeros(depth)
        self.hits = np.zeros((depth, kmax))
        self.hits_cond = np.zeros((depth, kmax))
        self.cov_num = 0.0

    def add(self, topk_ids: np.ndarray, greedy: np.ndarray, loss_mask: np.ndarray, in_vocab: np.ndarray) -> None:
        """One sample. ``topk_ids [K, L, kmax]``: the draft's top-k as target ids per step and index;
        ``greedy [L]``: a_t (-1 where unknown); ``loss_mask [L]``; ``in_vocab [V]`` (t2d)."""
        K, L, _ = topk_ids.shape
        m = loss_mask.astype(bool).copy()
        if L:
            m[-1] = False  # offline SpecForge: loss_mask[-1] = 0
        chain = np.ones(L, dtype=bool)  # steps 0..k-1 right at this index
        for k in range(K):
            mk = np.zeros(L, dtype=bool)
            mk[: max(0, L - k)] = m[k:]
            want = np.full(L, -1, dtype=np.int64)
            n = max(0, L - 1 - k)
            want[:n] = greedy[1 + k : 1 + k + n]
            mk &= want >= 0
            hit = topk_ids[k] == want[:, None]  # [L, kmax]
            cum = np.cumsum(hit, axis=1) > 0
            top1 = hit[:, 0]
            self.den[k] += mk.sum()
            self.acc[k] += (mk & top1).sum()
            self.cond_den[k] += (mk & chain).sum()
            self.hits[k] += (cum & mk[:, None]).sum(0)
            self.hits_cond[k] += (cum & (mk & chain)[:, None]).sum(0)
            chain = chain & top1
            self.full[k] += (mk & chain).sum()
            if k == 0:
                self.cov_num += (mk & in_vocab[np.clip(want, 0, None)]).sum()

    @staticmethod
    def _div(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.float64]:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)
        return out

    def rates(self) -> dict[str, Any]:
        return {
            "acc": _list(self._div(self.acc, self.den)),
            "full_acc": _list(self._div(self.full, self.den)),
            "cond_acc": _list(self._div(self.full, self.cond_den)),
            "topk_acc": [_list(self._div(self.hits[k], self.den[k])) for k in range(len(self.den))],
            "topk_cond": [_list(self._div(self.hits_cond[k], self.cond_den[k])) for k in range(len(self.den))],
            "vocab_coverage": None if not self.den[0] else float(self.cov_num / self.den[0]),
        }


class SpeculatorsCounts:
    """speculators 0.9.0's ``full_acc_k`` / ``cond_acc_k`` counts, summed over samples.

    Written from speculators' definition (``shift_batch``, ``align_for_step``,
    ``compute_accuracy_single_step``) in our unshifted indexing: speculators' position i holds
    ``g_i``, token ``x_{i+1}``, mask ``loss_mask[i+1]``; step k at i is compared with the
    draft-vocab teacher of position ``i+1+k`` under ``loss_mask[i+1+k]``; ``prev_correct`` starts
    as ``loss_mask[i+1]`` and keeps only positions right at every step so far."""

    def __init__(self, depth: int):
        self.full = np.zeros(depth)
        self.total = np.zeros(depth)
        self.cond_total = np.zeros(depth)

    def add(self, pred: np.ndarray, teacher: np.ndarray, loss_mask: np.ndarray | None) -> None:
        """``pred [K, L]`` draft ids per step; ``teacher [L]`` draft-vocab argmax of the target at
        each position; ``loss_mask [L]`` or None (every position)."""
        K, L = pred.shape
        n = L - 1
        if n <= 0:
            return
        tgt = teacher[1:]
        lm = np.ones(n, dtype=bool) if loss_mask is None else np.asarray(loss_mask[1:]).astype(bool)
        prev = lm.copy()
        for k in range(min(K, n)):
            m = n - k
            correct = pred[k][:m] == tgt[k : k + m]
            self.cond_total[k] += prev[:m].sum()
            prev[:m] &= correct
            mk = lm[k : k + m]
            self.full[k] += prev[:m][mk].sum()
            self.total[k] += mk.sum()

    def rates(self) -> dict[str, _Rates]:
        return {
            "speculators_full_acc": _list(Counts._div(self.full, self.total)),
            "speculators_cond_acc": _list(Counts._div(self.full, self.cond_total)),
        }


def _list(a: npt.ArrayLike) -> _Rates:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, dtype=float)]


def samples(data: str | os.PathLike[str]) -> tuple[str, list[Path]]:
    from workbench.hidden import specforge, speculators

    p = Path(data)
    if specforge.is_specforge(p):
        return "specforge", specforge.sample_files(p)
    if speculators.is_speculators(p):
        return "speculators", speculators.sample_files(p)
    raise InputError(f"{p}: no SpecForge data_{{i}}.ckpt or speculators hs_{{i}}.safetensors files")


def _drafter_on(
    draft: str | os.PathLike[str],
    head: TargetHead,
    target: str | os.PathLike[str],
    dev: torch.device,
    *,
    strict: bool,
    convention: str | None,
) -> tuple[Eagle3Drafter, WeightReport, list[str]]:
    """The drafter loaded (and its weight check), given the target's embedding where it has none, on ``dev`` (fp32 on a
    CPU), and the notes its weights and mapping call for."""
    from workbench.drafter.checkpoint import load_drafter

    model, report = load_drafter(draft, strict=strict, convention=convention)
    d = model.dims
    if (head.vocab, head.hidden) != (d.vocab, d.hidden) and model.embed_tokens is None:
        raise InputError(
            f"{target}: embedding is {head.vocab}x{head.hidden}, the draft expects "
            f"{d.vocab}x{d.hidden} (vocab_size x hidden_size)"
        )
    if model.embed_tokens is None:
        model.set_embed(head.embed)
    notes: list[str] = []
    if report.unexpected or report.missing or report.mismatched:
        notes.append(f"weight check: {report.first_problem()}")
    if not bool(model.t2d.any()):
        notes.append("the draft has no d2t/t2d mapping: draft ids read as the first target ids")
    model = model.to(dev)
    if dev.type == "cpu":
        model = model.float()
        model.d2t = model.d2t.long()
    return model, report, notes


def evaluate(
    draft: str | os.PathLike[str],
    data: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    depth: int | None = None,
    topk: int = DEFAULT_TOPK,
    max_samples: int | None = None,
    device: str | None = None,
    strict: bool = True,
    progress: ProgressCallback | None = None,
    convention: str | None = None,
) -> DrafterEval:
    """``convention``: how the draft's flags are read (``variants.CONVENTIONS``; default: the
    training tool of the checkpoint's layout)."""
    import torch

    from workbench.drafter import variants as V
    from workbench.drafter.model import UnsupportedError, ttt_tokens
    from workbench.drafter.target import read_target_head
    from workbench.hidden.align import pick_device

    t0 = time.perf_counter()
    progress = progress or noop
    K = DEFAULT_DEPTH if depth is None else int(depth)
    if not 1 <= K <= 16:
        raise InputError(f"depth: {K} is not in 1..16")
    if not 1 <= topk <= 64:
        raise InputError(f"topk: {topk} is not in 1..64")
    dev = pick_device(device)
    fmt, files = samples(data)
    if max_samples is not None:
        files = files[: max(1, int(max_samples))]
    head = read_target_head(target)
    model, report, notes = _drafter_on(draft, head, target, dev, strict=strict, convention=convention)
    d = model.dims
    in_vocab = torch.zeros(head.vocab, dtype=torch.bool)
    hot = (torch.arange(d.draft_vocab) + model.d2t.cpu()).clamp(0, head.vocab - 1)
    in_vocab[hot] = True
    in_vocab_np = in_vocab.numpy()
    lm = head.lm_head.to(dev)
    lm = lm.float() if dev.type == "cpu" else lm
    norm_w = head.norm.to(dev).float() if head.norm is not None else None
    kmax = min(topk, d.draft_vocab)
    counts = Counts(K, kmax)
    spec_counts = SpeculatorsCounts(K)
    hot_rows = hot.to(dev)  # draft id i <-> target id i + d2t[i]
    width = d.num_aux * d.target_hidden
    n_samples = 0

    for i, f in enumerate(files):
        cap = _open(fmt, f, d.num_aux)
        slots = cap.slots()
        if len(slots) != d.num_aux or slots[0].width != d.target_hidden:
            raise InputError(
                f"{f}: {len(slots)} slots of {slots[0].width if slots else 0} for a draft whose fc "
                f"takes {d.num_aux} x {d.target_hidden} = {width}"
            )
        L = cap.rows
        if L < 2:
            continue
        aux = torch.cat([s.load().float() for s in slots], dim=-1).to(dev)
        greedy, teacher_d = _greedy(cap, lm, norm_w, head.eps, dev, L, hot_rows)
        mask = cap.loss_mask if cap.loss_mask is not None else np.ones(L, dtype=np.int64)
        ids = torch.as_tensor(cap.token_ids, dtype=torch.long, device=dev)
        nxt = torch.cat([ids[1:], ids.new_zeros(1)])[None]
        with torch.no_grad():
            try:
                logits = model.unroll(aux[None].to(model.fc.weight.dtype), ttt_tokens(nxt, K))
            except UnsupportedError as exc:
                raise InputError(f"{f}: {exc}") from None
            tk = torch.stack([model.to_target(lg[0].topk(kmax, dim=-1).indices) for lg in logits])
            pred_d = torch.stack([lg[0].argmax(-1) for lg in logits])
        counts.add(tk.cpu().numpy(), greedy, np.asarray(mask), in_vocab_np)
        spec_counts.add(pred_d.cpu().numpy(), teacher_d, None if cap.loss_mask is None else np.asarray(cap.loss_mask))
        n_samples += 1
        progress(Progress("drafter-eval", i + 1, len(files), f.name))
    if fmt == "speculators":
        notes.append("speculators files carry no loss mask: every position counted")
    if not n_samples:
        raise InputError(f"{data}: no sample with at least 2 tokens")

    r = counts.rates()
    rs = spec_counts.rates()
    predicted = _predict(r, K)
    return DrafterEval(
        draft=str(draft),
        data=str(data),
        target=str(target),
        depth=K,
        samples=n_samples,
        positions=int(counts.den[0]),
        positions_per_depth=[int(x) for x in counts.den],
        acc=r["acc"],
        full_acc=r["full_acc"],
        cond_acc=r["cond_acc"],
        topk=list(range(1, kmax + 1)),
        topk_acc=r["topk_acc"],
        topk_cond=r["topk_cond"],
        vocab_coverage=r["vocab_coverage"],
        predicted=predicted,
        weights=report.to_dict(),
        device=str(dev),
        speculators_full_acc=rs["speculators_full_acc"],
        speculators_cond_acc=rs["speculators_cond_acc"],
        speculators_positions=[int(x) for x in spec_counts.total],
        variant=model.variant.to_dict(),
        explanations=V.explain(model.config, model.variant.convention),
        seconds=time.perf_counter() - t0,
        notes=notes,
    )


def _open(fmt: str, f: Path, num_aux: int) -> Capture:
    if fmt == "specforge":
        from workbench.hidden.specforge import read_file

        return read_file(f, slots=num_aux)
    from workbench.hidden.speculators import read_speculators

    return read_speculators(f)


def _greedy(
    cap: Capture,
    lm: torch.Tensor,
    norm_w: torch.Tensor | None,
    eps: float,
    dev: torch.device,
    L: int,
    hot_rows: torch.Tensor | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(a, a_d)`` for t = 0..L-1: the target's greedy token over its full vocabulary (-1 where the
    file cannot tell) and the draft id of its argmax over the draft vocabulary only (``lm_head``
    rows ``hot_rows``, speculators' ``verifier_lm_head``)."""
    import torch

    from workbench.hidden.view import FINAL, LOGITS

    out = np.full(L, -1, dtype=np.int64)
    out_d = np.full(L, -1, dtype=np.int64)
    logit_t = [t for t in cap.tensors if t.role == LOGITS]
    if logit_t:  # stored[t] = target logits at t+1 (left-shifted)
        stored = logit_t[0].load()
        n = min(L - 1, stored.shape[0])
        full = stored[:n].float()
        out[1 : 1 + n] = full.argmax(-1).numpy()
        if hot_rows is not None:
            out_d[1 : 1 + n] = full[:, hot_rows.cpu()].argmax(-1).numpy()
        return out, out_d
    final = [t for t in cap.tensors if t.role == FINAL]
    if not final:
        raise InputError(f"{cap.path}: no final hidden state or logits to build the teacher from")
    f = final[0]
    h_all = f.load()
    for r0 in range(0, L, 512):
        h = h_all[r0 : r0 + 512].to(dev).float()
        if f.physical == "final-prenorm":
            if norm_w is None:
                raise InputError(f"{cap.path}: the last state is pre-norm and the target has no final norm weight")
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * norm_w
        h = h.to(lm.dtype)
        out[r0 : r0 + h.shape[0]] = (h @ lm.T).float().argmax(-1).cpu().numpy()
        if hot_rows is not None:
            out_d[r0 : r0 + h.shape[0]] = (h @ lm[hot_rows].T).float().argmax(-1).cpu().numpy()
    return out, out_d


def _predict(r: dict[str, Any], K: int) -> dict[str, Any]:
    """Chain accept length (bonus included) from the marginal rates P_k = full_acc_{k-1} (the
    block estimate: it keeps the correlation between depths), beside the SpecForge-style estimate
    from acc_k used as conditional rates, and the conditional rates where every depth has some."""
    from workbench.predict import predict

    out: dict[str, Any] = {
        "steps": K,
        "topk": 1,
        "draft_tokens": K + 1,
        "convention": "marginal",
        "accept_length": None,
    }
    full = [v for v in r["full_acc"] if v is not None]
    if len(full) == K:
        marg = list(np.minimum.accumulate(np.clip(full, 0.0, 1.0)))  # P_k cannot grow with k
        p = predict("marginal", marg, K, 1, K + 1)
        out.update(accept_length=p.accept_length, formula=p.formula)
    acc = [v for v in r["acc"] if v is not None]
    if len(acc) == K:
        out["from_acc"] = predict("acc", acc, K, 1, K + 1).accept_length
    cond = [v for v in r["cond_acc"] if v is not None]
    if len(cond) == K:
        out["from_cond_acc"] = predict("conditional", cond, K, 1, K + 1).accept_length
    return out


def predict_inputs(result: DrafterEval) -> dict[str, Any]:
    """The drafter's rates as the Predictor takes them: marginal rates P_k (= full_acc, made
    non-increasing) and, for trees, the per-depth conditional top-k hit rates."""
    full = [v for v in result.full_acc if v is not None]
    marg = [float(x) for x in np.minimum.accumulate(np.clip(full, 0.0, 1.0))] if full else []
    hits = [[v for v in row if v is not None] for row in result.topk_cond]
    hits = [h for h in hits if h]
    return {"marginal": marg, "topk_hits": hits or None, "steps": result.depth}
