"""The lab's target: a tiny ``LlamaForCausalLM`` trained on the synthetic corpus, saved as an HF dir.

``build_target(settings, out_dir, progress)`` writes ``config.json``, ``model.safetensors``,
``generation_config.json`` and a word-level tokenizer (``tokenizer.json`` + configs, no download)
and returns the training log (loss per step sample, tokens, seconds).
``load_target(dir, dtype)`` loads it back (eval mode). Deterministic for a seed.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.lab import corpus
from workbench.lab.settings import LabSettings, corpus_style

if TYPE_CHECKING:
    import os

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from workbench.lab.settings import StepProgress


def build_tokenizer(out_dir: Path) -> PreTrainedTokenizerFast:
    """A word-level fast tokenizer over the corpus vocabulary; encode adds ``<bos>``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(corpus.vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # TokenizersBackend.__init__ is unannotated
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=1024,
    )
    fast.save_pretrained(str(out_dir))
    return fast


def target_config(s: LabSettings) -> LlamaConfig:
    from transformers import LlamaConfig

    vocab = corpus.vocabulary()
    return LlamaConfig(  # type: ignore[call-arg]  # the typed signature omits the **kwargs (torch_dtype)
        vocab_size=len(vocab),
        hidden_size=s.hidden,
        intermediate_size=s.ffn,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.heads,
        max_position_embeddings=s.max_positions,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        torch_dtype="float32",
        initializer_range=s.init_std,
    )


def _lr(step: int, total: int, peak: float, warmup: int = 20) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def build_target(s: LabSettings, out_dir: Path, progress: StepProgress | None = None) -> dict[str, Any]:
    import torch
    from transformers import LlamaForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(s.seed)
    vocab_index = {w: i for i, w in enumerate(corpus.vocabulary())}
    n_tokens = s.target_steps * s.target_batch * s.target_seq // 2 + 10 * s.target_seq
    data = torch.tensor(
        corpus.token_stream(s.seed, n_tokens, vocab_index, world=s.seed, **corpus_style(s)), dtype=torch.long
    )
    model = LlamaForCausalLM(target_config(s))
    opt = torch.optim.AdamW(model.parameters(), lr=s.target_lr, weight_decay=0.01, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(s.seed)
    losses: list[list[float]] = []
    t0 = time.time()
    model.train()
    for step in range(s.target_steps):
        for g in opt.param_groups:
            g["lr"] = _lr(step, s.target_steps, s.target_lr)
        starts = torch.randint(0, len(data) - s.target_seq - 1, (s.target_batch,), generator=gen)
        x = torch.stack([data[i : i + s.target_seq] for i in starts.tolist()])
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 20 == 0 or step == s.target_steps - 1:
            value = loss.item()
            losses.append([step, round(value, 4)])
            if progress:
                progress("target", step + 1, s.target_steps, f"loss {value:.3f}")
    model.eval()  # type: ignore[no-untyped-call]  # unannotated in transformers (PreTrainedModel.eval)
    quiet_transformers()
    model.save_pretrained(str(out_dir), safe_serialization=True)
    build_tokenizer(out_dir)
    return {
        "steps": s.target_steps,
        "tokens": s.target_steps * s.target_batch * s.target_seq,
        "seconds": round(time.time() - t0, 2),
        "loss": losses,
    }


def quiet_transformers() -> None:
    """No progress bars and no deprecation chatter from transformers on the lab's output: the
    KV-cache keyword is spelled the way every supported transformers accepts."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # unannotated in transformers
    warnings.filterwarnings("ignore", message=r".*past_key_values.* is deprecated", category=FutureWarning)


def load_target(path: str | os.PathLike[str], dtype: torch.dtype | None = None) -> LlamaForCausalLM:
    import torch
    from transformers import LlamaForCausalLM

    quiet_transformers()
    model = LlamaForCausalLM.from_pretrained(str(path), dtype=dtype or torch.float32)
    model.eval()  # type: ignore[no-untyped-call]  # unannotated in transformers; it returns the model
    return model
