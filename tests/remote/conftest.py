"""Data a GPU host would hold, made by a small real Llama (transformers, random weights, fixed
seed): SpecForge training rows captured in fp32 with forward hooks (slots out(1), out(5), out(8)),
and a per-pass SGLang tensor dump of a bf16 copy prefilling the same samples (every residual-stream
point), big enough that a byte budget of 1% means something (about 20 MB of tensors)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

N_LAYERS, HIDDEN, VOCAB = 12, 256, 512
SAMPLES, SEQ = 4, 512
TRAIN_IDS = [1, N_LAYERS // 2 - 1, N_LAYERS - 4]  # out(1), out(5), out(8)


@dataclass
class HostData:
    root: Path
    training: Path  # rows_0-2000/data_{i}.ckpt
    dump: Path  # target/TP0_PP0_Rank0_pid11/Pass{i}.pt, one prefill pass per sample
    num_layers: int = N_LAYERS
    trained: tuple = tuple(TRAIN_IDS)


def build(root: Path, seed: int = 0) -> HostData:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.fixtures.capture_files import write_specforge

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # per-layer updates about as large as a trained model's
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.35)
            layer.mlp.down_proj.weight.mul_(0.35)
    ids = torch.randint(1, VOCAB, (SAMPLES, SEQ), generator=torch.Generator().manual_seed(seed + 1))
    caps: dict = {}
    hooks = [
        layer.register_forward_hook(
            lambda m, i, o, k=k: caps.__setitem__(k, (o[0] if isinstance(o, tuple) else o).detach().clone())
        )
        for k, layer in enumerate(model.model.layers)
    ]
    hooks.append(model.model.norm.register_forward_hook(lambda m, i, o: caps.__setitem__("final", o.detach())))
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()
    rows = root / "training" / "rows_0-2000"
    for s in range(SAMPLES):
        write_specforge(
            rows / f"data_{s}.ckpt",
            ids[s],
            torch.ones(SEQ, dtype=torch.long),
            caps["final"][s],
            [caps[k][s] for k in TRAIN_IDS],
        )
    bf = LlamaForCausalLM(cfg)
    bf.load_state_dict(model.state_dict())
    bf = bf.to(torch.bfloat16).eval()
    out: dict = {}
    hooks = [
        layer.register_forward_hook(
            lambda m, i, o, k=k: out.__setitem__(k, (o[0] if isinstance(o, tuple) else o).detach().clone())
        )
        for k, layer in enumerate(bf.model.layers)
    ]
    hooks.append(bf.model.embed_tokens.register_forward_hook(lambda m, i, o: out.__setitem__("embed", o.detach())))
    hooks.append(bf.model.norm.register_forward_hook(lambda m, i, o: out.__setitem__("final", o.detach())))
    with torch.no_grad():
        bf(ids)
    for h in hooks:
        h.remove()
    run = root / "dump" / "target" / "TP0_PP0_Rank0_pid11"
    run.mkdir(parents=True)
    with torch.no_grad():
        for s in range(SAMPLES):
            d = {
                "model.forward_batch_info.input_ids": ids[s].clone(),
                "model.forward_batch_info.positions": torch.arange(SEQ),
                "model.forward_batch_info.seq_lens": torch.tensor([SEQ]),
                "model.embed_tokens": out["embed"][s].clone(),
                "model.norm": [out["final"][s].clone(), out[N_LAYERS - 1][s].clone()],
            }
            for k in range(1, N_LAYERS):  # the norm before layer k returns [normed, residual = out(k-1)]
                res = out[k - 1][s].clone()
                d[f"model.layers.{k}.input_layernorm"] = [bf.model.layers[k].input_layernorm(res), res]
            torch.save(d, run / f"Pass{s:05d}.pt")
    return HostData(root, root / "training", root / "dump")


@pytest.fixture(scope="session")
def host_data(tmp_path_factory) -> HostData:
    return build(tmp_path_factory.mktemp("host-data"))
