"""Train the lab's EAGLE-3 drafter on SpecForge-format rows with training-time test (TTT).

Pairing (SpecForge/EAGLE): position t pairs the aux feature g_t with token x_{t+1}; step k of the
unroll reads token x_{t+1+k} and the previous step's output, and is trained against the target's
distribution at position t+1+k (soft cross-entropy over the draft vocab, renormalised), weighted
``decay**k``. Positions whose target argmax is outside the draft vocab get no loss.

Metrics per depth k (teacher-forced, only where the step's input token is a response token):

- ``acc_k``  = P(draft top-1 == target top-1) (SpecForge's ``acc_k``; out-of-vocab = wrong);
- ``cond_k`` = P(correct at k | correct at 0..k-1) (what greedy chain acceptance uses);
- ``full_k`` = P(correct at 0..k) (speculators' ``full_acc``).

Token drop: a share ``settings.token_drop`` of the input tokens is hidden (``<pad>``) in training, so
the drafter leans on the target's features as drafters of real models do; on the lab's small language
a drafter left alone predicts most tokens from the tokens and barely notices wrong features.

Stopping: every ``settings.eval_every`` steps ``check(drafter)`` (the build's: held-out figures,
confirmed by real decoding inside the bands, see ``workbench.lab.build.HeldoutCheck``) returns
``(figures, stop)``; training stops at the first check that says stop, so a world lands where the
check wants it on any CPU, thread count and seed, where a fixed step budget lands wherever the float
kernels take it. ``draft_steps`` is the cap.

API: ``train_drafter(settings, target, rows, layer_ids, progress, check) -> (drafter, log)``;
``offline_metrics(drafter, target, rows, steps) -> dict``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM

    from workbench.drafter.model import Eagle3Drafter
    from workbench.lab.settings import LabSettings, StepProgress

    # ``check(drafter) -> (figures, stop)`` (``workbench.lab.build.HeldoutCheck``)
    Check = Callable[[Eagle3Drafter], tuple[dict[str, Any], bool]]


def _target_logits(target: LlamaForCausalLM, hidden_state: torch.Tensor) -> torch.Tensor:
    logits: torch.Tensor = target.lm_head(hidden_state)
    return logits


def _shift(x: torch.Tensor, k: int) -> torch.Tensor:
    """x[:, k:] padded with zeros at the end to the same length."""
    import torch

    if k == 0:
        return x
    pad = torch.zeros_like(x[:, :k])
    return torch.cat([x[:, k:], pad], dim=1)


def _batch_views(
    ids: torch.Tensor, mask: torch.Tensor, tlogits: torch.Tensor, steps: int
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    from workbench.drafter.model import ttt_tokens

    next_ids = _shift(ids, 1)
    tokens = ttt_tokens(next_ids, steps)
    targets = [_shift(tlogits, 1 + k) for k in range(steps)]
    valid = [_shift(mask, 1 + k).bool() for k in range(steps)]
    return tokens, targets, valid


def offline_metrics(
    drafter: Eagle3Drafter, target: LlamaForCausalLM, rows: dict[str, torch.Tensor], steps: int, batch: int = 32
) -> dict[str, Any]:
    """Teacher-forced per-depth metrics on ``rows`` (see the module docstring)."""
    import torch

    n = rows["input_ids"].shape[0]
    correct_cnt = [0] * steps
    valid_cnt = [0] * steps
    chain_ok = [0] * steps  # correct at 0..k
    chain_prev = [0] * steps  # correct at 0..k-1 (and valid at k)
    with torch.no_grad():
        for b in range(0, n, batch):
            ids = rows["input_ids"][b : b + batch]
            mask = rows["loss_mask"][b : b + batch]
            tl = _target_logits(target, rows["hidden_state"][b : b + batch].float())
            aux = rows["aux_hidden_state"][b : b + batch].float()
            tokens, targets, valid = _batch_views(ids, mask, tl, steps)
            outs = drafter.unroll(aux.to(drafter.fc.weight.dtype), tokens)
            prev = torch.ones_like(valid[0])
            for k in range(steps):
                ok = drafter.to_target(outs[k].argmax(-1)) == targets[k].argmax(-1)
                v = valid[k]
                correct_cnt[k] += int((ok & v).sum())
                valid_cnt[k] += int(v.sum())
                chain_prev[k] += int((prev & v).sum())
                prev = prev & ok
                chain_ok[k] += int((prev & v).sum())
    acc = [c / max(1, v) for c, v in zip(correct_cnt, valid_cnt)]
    cond = [c / max(1, p) for c, p in zip(chain_ok, chain_prev)]
    full = [c / max(1, v) for c, v in zip(chain_ok, valid_cnt)]
    return {
        "acc": [round(a, 4) for a in acc],
        "cond": [round(c, 4) for c in cond],
        "full": [round(f, 4) for f in full],
        "positions": valid_cnt[0],
    }


def train_drafter(
    s: LabSettings,
    target: LlamaForCausalLM,
    rows: dict[str, torch.Tensor],
    layer_ids: list[int],
    progress: StepProgress | None = None,
    check: Check | None = None,
) -> tuple[Eagle3Drafter, dict[str, Any]]:
    import torch
    import torch.nn.functional as F

    from workbench.drafter.checkpoint import make_config
    from workbench.drafter.model import Eagle3Drafter, vocab_mapping

    torch.manual_seed(s.seed + 1)
    V = target.config.vocab_size
    ids, mask = rows["input_ids"], rows["loss_mask"]
    counts = torch.bincount(ids[mask.bool()], minlength=V)
    d2t, t2d = vocab_mapping(counts, s.draft_vocab)
    tcfg = target.config.to_dict()
    config = make_config(tcfg, layer_ids, s.draft_vocab, max_position_embeddings=int(tcfg["max_position_embeddings"]))
    drafter = Eagle3Drafter(config, embed=target.model.embed_tokens.weight)
    used = d2t + torch.arange(s.draft_vocab)
    with torch.no_grad():
        drafter.d2t.copy_(d2t)
        drafter.t2d.copy_(t2d)
        # start the head from the target's rows for the draft vocab (trained further below)
        drafter.lm_head.weight.copy_(target.lm_head.weight[used])
        drafter.norm.weight.copy_(target.model.norm.weight)
    for param in target.parameters():
        param.requires_grad_(False)
    opt = torch.optim.AdamW(
        [p for p in drafter.parameters() if p.requires_grad], lr=s.draft_lr, weight_decay=0.0, betas=(0.9, 0.95)
    )
    gen = torch.Generator().manual_seed(s.seed + 2)
    n = ids.shape[0]
    log: list[dict[str, float]] = []
    checks: list[dict[str, Any]] = []
    t0 = time.time()
    stopped = None
    drafter.train()
    for step in range(s.draft_steps):
        lr = s.draft_lr * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / s.draft_steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        pick = torch.randint(0, n, (s.draft_batch,), generator=gen)
        with torch.no_grad():
            tl = _target_logits(target, rows["hidden_state"][pick].float())
        tokens, targets, valid = _batch_views(ids[pick], mask[pick], tl, s.ttt_steps)
        if s.token_drop > 0:
            # hide a share of the input tokens (as <pad>): the drafter learns to lean on the target's
            # features, as drafters of real models do, instead of on a tiny language's grammar
            tokens = [tok.masked_fill(torch.rand(tok.shape, generator=gen) < s.token_drop, 0) for tok in tokens]
        outs = drafter.unroll(rows["aux_hidden_state"][pick].float(), tokens)
        loss = torch.zeros(())  # the steps' weighted losses, summed (0.0 + ... as a tensor)
        accs: list[float] = []
        for k, (logits, tgt, v) in enumerate(zip(outs, targets, valid)):
            p = torch.softmax(tgt[..., t2d], dim=-1)
            pmask = v & t2d[tgt.argmax(-1)]
            ploss = -(p * F.log_softmax(logits, dim=-1)).sum(-1)
            ploss = (ploss * pmask).sum() / pmask.sum().clamp(min=1)
            loss = loss + (s.loss_decay**k) * ploss
            with torch.no_grad():
                ok = (drafter.to_target(logits.argmax(-1)) == tgt.argmax(-1)) & v
                accs.append(float(ok.sum()) / max(1, int(v.sum())))
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # unannotated in torch (Tensor.backward)
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 0.5)
        opt.step()
        if step % 25 == 0 or step == s.draft_steps - 1:
            entry: dict[str, float] = {"step": step, "loss": round(loss.item(), 4)}
            entry.update({f"acc_{k}": round(a, 4) for k, a in enumerate(accs)})
            log.append(entry)
            if progress:
                progress("drafter", step + 1, s.draft_steps, " ".join(f"acc_{k} {a:.2f}" for k, a in enumerate(accs)))
        if check is not None and step + 1 >= s.check_from and (step + 1) % s.eval_every == 0:
            drafter.eval()
            figures, stop = check(drafter)
            checks.append({"step": step + 1, **figures})
            if stop:
                stopped = step + 1
                break
            drafter.train()
    drafter.eval()
    return drafter, {
        "steps": stopped or s.draft_steps,
        "max_steps": s.draft_steps,
        "stopped_by_check": stopped is not None,
        "checks": checks,
        "seconds": round(time.time() - t0, 2),
        "log": log,
        "coverage": round(float(counts[used].sum()) / max(1, int(counts.sum())), 4),
    }
