"""Self-distilled training data in SpecForge's offline format.

Prompts are document openings from a held-out stream; responses are the target's own greedy
continuations. The whole (prompt + response) row is then run once more in fp32 with forward hooks:

``{out}/rows_{g}-{g+G}/data_{i}.ckpt`` = ``torch.save`` of
``{"input_ids": [L] int64, "loss_mask": [L] int64 (1 on response tokens),
"hidden_state": [1, L, H] (final post-norm), "aux_hidden_state": [1, L, 3H] (out(a)|out(b)|out(c))}``
plus ``vocab_mapping/vocab_mapping.pt`` (``{"d2t", "t2d"}``) written by the drafter step.

API: ``greedy(model, ids, n)``, ``make_prompts(settings, count, seed)``,
``write_rows(model, ids, prompt_len, layer_ids, out_dir, group)``, ``read_rows(dir)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from workbench.lab import corpus

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM

    from workbench.lab.lean import KV, LeanLlama


def make_prompts(
    prompt_len: int, count: int, seed: int, world: int, style: dict[str, Any] | None = None
) -> torch.Tensor:
    """``count`` prompts of ``prompt_len`` tokens, each starting at a document's ``<bos>``;
    ``style``: the world's corpus style (``settings.corpus_style``)."""
    import torch

    vocab_index = {w: i for i, w in enumerate(corpus.vocabulary())}
    gen = corpus.Generator(seed, world, **(style or {}))
    rows: list[list[int]] = []
    while len(rows) < count:
        toks: list[int] = []
        while len(toks) < prompt_len:
            toks += [vocab_index[w] for w in gen.document()]
        rows.append(toks[:prompt_len])
    return torch.tensor(rows[:count], dtype=torch.long)


def greedy(model: LlamaForCausalLM, ids: torch.Tensor, n: int, batch: int = 1024) -> torch.Tensor:
    """Plain greedy continuation of every row of ``ids`` ([B, P]) by ``n`` tokens, KV cache, no stop.
    Rows go ``batch`` at a time: a decode step of the lab's target costs about as much for 64 rows
    as for 640 (its matrices are small; the per-call work is not), so the 640 rows of the tiny
    world take one batch (the same tokens as in batches of 64, sooner).
    The forward is ``workbench.lab.lean``'s where it is the model's own arithmetic: its cache grows
    in place, where transformers' concatenates all of it every token (40 % of the pass at 640 rows)."""
    import torch

    from workbench.lab.lean import lean_for

    lean = lean_for(model)
    with torch.no_grad():
        return torch.cat([_greedy_batch(model, lean, ids[b : b + batch], n) for b in range(0, ids.shape[0], batch)])


def _greedy_batch(model: LlamaForCausalLM, lean: LeanLlama | None, x: torch.Tensor, n: int) -> torch.Tensor:
    import torch
    from transformers import DynamicCache

    kv = lean.kv() if lean is not None else DynamicCache()

    def step(t: torch.Tensor) -> torch.Tensor:
        if lean is not None:
            return lean.forward(t, cast("KV", kv))[0]
        logits: torch.Tensor = model(input_ids=t, past_key_values=kv, use_cache=True).logits
        return logits

    logits = step(x)
    toks: list[torch.Tensor] = []
    for _ in range(n):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        toks.append(nxt)
        logits = step(nxt)
    return torch.cat([x, *toks], dim=1)


def capture_rows(
    model: LlamaForCausalLM, ids: torch.Tensor, layer_ids: Sequence[int], batch: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 capture: (hidden_state post-norm [R, L, H], aux [R, L, k*H]) for output-of-layer ids."""
    import torch

    names = [f"out({k})" if k >= 0 else "embed" for k in layer_ids]
    got = capture_points(model, ids, [*names, "final-postnorm"], batch)
    return got["final-postnorm"], torch.cat([got[n] for n in names], dim=-1)


def capture_points(
    model: LlamaForCausalLM, ids: torch.Tensor, names: Sequence[str], batch: int = 64
) -> dict[str, torch.Tensor]:
    """fp32 capture of named stream points (``embed``, ``out(k)``, ...): ``{name: [R, L, H]}``.
    (Through the model's own forward: at 64 rows a pass is arithmetic, ``workbench.lab.lean``
    saves nothing here.)"""
    import torch

    from workbench.lab.streams import StreamTap

    tap = StreamTap(model)
    got: dict[str, list[torch.Tensor]] = {n: [] for n in names}
    try:
        with torch.no_grad():
            for b in range(0, ids.shape[0], batch):
                store = tap.grab(names)
                model(input_ids=ids[b : b + batch], use_cache=False)
                for n in names:
                    got[n].append(store[n].float())
    finally:
        tap.close()
    return {n: torch.cat(v) for n, v in got.items()}


def group_dir(i: int, group: int) -> str:
    g = (i // group) * group
    return f"rows_{g}-{g + group}"


def write_rows(
    out_dir: Path, ids: torch.Tensor, prompt_len: int, finals: torch.Tensor, auxes: torch.Tensor, group: int = 2000
) -> int:
    import torch

    out_dir.mkdir(parents=True, exist_ok=True)
    for i in range(ids.shape[0]):
        d = out_dir / group_dir(i, group)
        d.mkdir(exist_ok=True)
        mask = torch.zeros(ids.shape[1], dtype=torch.long)
        mask[prompt_len:] = 1
        torch.save(
            {
                "input_ids": ids[i].clone(),
                "loss_mask": mask,
                "hidden_state": finals[i : i + 1].clone(),
                "aux_hidden_state": auxes[i : i + 1].clone(),
            },
            d / f"data_{i}.ckpt",
        )
    return ids.shape[0]


def read_rows(data_dir: Path) -> dict[str, torch.Tensor]:
    """All rows of a SpecForge offline dir, in index order: dict of stacked tensors."""
    import re

    import torch

    files = sorted(
        Path(data_dir).glob("rows_*/data_*.ckpt"),
        key=lambda p: int(cast("re.Match[str]", re.search(r"data_(\d+)", p.name)).group(1)),
    )
    rows = [torch.load(str(f), map_location="cpu", weights_only=True) for f in files]
    return {
        "input_ids": torch.stack([r["input_ids"] for r in rows]),
        "loss_mask": torch.stack([r["loss_mask"] for r in rows]),
        "hidden_state": torch.cat([r["hidden_state"] for r in rows]),
        "aux_hidden_state": torch.cat([r["aux_hidden_state"] for r in rows]),
    }
