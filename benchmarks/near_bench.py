"""Compute near the data: bytes moved per alignment job against the tensor bytes it compares.

Writes what a GPU host holds after a doctor run into a temporary folder: SpecForge training rows
(3 fp32 slots per sample) and an SGLang per-pass tensor dump (bf16, every residual-stream point of
the same samples: a random walk over layers, so adjacent layers are close, as in real models).
Then runs the ``align`` job through ``NearCompute`` as a separate process with the job bundle in
its own cache folder (the path an SSH host takes, minus the network): once cold (the bundle is
shipped) and once warm. Over SSH the workbench counts the bytes on the socket; here the payloads
(bundle, command line, job arguments, everything the job printed) are counted.

Prints one JSON line: tensor_bytes, moved bytes cold and warm, their ratios, and the floor
(moved / tensor bytes <= 1%).
    python benchmarks/near_bench.py [--hidden 1024] [--layers 32] [--tokens 1024] [--samples 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FLOOR = 0.01


def write_host_data(root: Path, hidden: int, layers: int, tokens: int, samples: int) -> tuple[Path, Path, list]:
    import torch

    g = torch.Generator().manual_seed(0)
    trained = [1, layers // 2 - 1, layers - 4]
    rows = root / "training" / "rows_0-2000"
    rows.mkdir(parents=True)
    run = root / "dump" / "target" / "TP0_PP0_Rank0_pid1"
    run.mkdir(parents=True)
    for s in range(samples):
        ids = torch.randint(1, 32000, (tokens,), generator=g)
        x = torch.randn(tokens, hidden, generator=g)
        stream = [x]
        for _ in range(layers):
            x = x + 0.15 * torch.randn(tokens, hidden, generator=g)
            stream.append(x)  # stream[k + 1] = out(k)
        torch.save(
            {
                "input_ids": ids,
                "loss_mask": torch.ones(tokens, dtype=torch.long),
                "hidden_state": stream[-1][None],
                "aux_hidden_state": torch.cat([stream[k + 1] for k in trained], -1)[None],
            },
            rows / f"data_{s}.ckpt",
        )
        bf = [t.bfloat16() for t in stream]
        d = {
            "model.forward_batch_info.input_ids": ids,
            "model.forward_batch_info.positions": torch.arange(tokens),
            "model.embed_tokens": bf[0],
            "model.norm": [bf[-1], bf[-1]],
        }
        for k in range(1, layers):
            d[f"model.layers.{k}.input_layernorm"] = [bf[k], bf[k]]
        torch.save(d, run / f"Pass{s:05d}.pt")
    return root / "training", root / "dump", trained


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--samples", type=int, default=2)
    a = ap.parse_args()

    from workbench.hosts.local import LocalHost
    from workbench.remote import NearCompute
    from workbench.remote.bundle import current

    with tempfile.TemporaryDirectory(prefix="near-bench-") as tmp:
        root = Path(tmp)
        train, dump, trained = write_host_data(root, a.hidden, a.layers, a.tokens, a.samples)
        near = NearCompute(LocalHost(), cache_root=str(root / "cache"), in_process=False)
        job = {
            "train": str(train),
            "infer": str(dump),
            "count": a.samples,
            "engine": "sglang==0.5.23",
            "arch": "LlamaForCausalLM",
            "num_layers": a.layers,
        }
        out = {}
        for phase in ("cold", "warm"):
            t0 = time.perf_counter()
            result, tr = near.run("align", job)
            best = [b["physical"] for b in result["align"]["best"]]
            assert best == [f"out({k})" for k in trained], best
            out[phase] = {
                "moved_bytes": tr.moved_bytes,
                "shipped_bytes": tr.shipped_bytes,
                "ratio": tr.ratio,
                "seconds": round(time.perf_counter() - t0, 2),
                "device": result["device"],
                "align_s": round(result["align"]["seconds"], 3),
            }
        tensor_bytes = tr.tensor_bytes
    print(
        json.dumps(
            {
                "bench": "near",
                "tensor_bytes": tensor_bytes,
                "bundle_bytes": len(current().tarball()),
                **out,
                "floor": FLOOR,
                "ok": out["cold"]["ratio"] <= FLOOR,
                "shape": {"hidden": a.hidden, "layers": a.layers, "tokens": a.tokens, "samples": a.samples},
            }
        )
    )
    return 0 if out["cold"]["ratio"] <= FLOOR else 1


if __name__ == "__main__":
    sys.exit(main())
