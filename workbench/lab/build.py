"""``lab build``: the whole miniature world, cached by a content hash of its settings.

Layout of ``{cache}/{size}-{hash}/``:

- ``target/``        HF checkpoint (``config.json``, ``model.safetensors``, tokenizer files);
- ``training_data/`` SpecForge offline rows (``rows_0-2000/data_{i}.ckpt``) + ``vocab_mapping/``;
- ``heldout_data/``  the same format, held-out prompts (for offline accuracy);
- ``draft/``         the trained EAGLE-3 drafter, SGLang format, ``eagle_config`` ids = the trained
  layers (output-of-layer, SpecForge's default ``[1, N//2-1, N-4]``);
- ``draft_broken/``  the same weights, ids ``[-1, a, b]`` (the story: embedding included, rest shifted);
- ``draft_shifted/`` the same weights, ids ``[a+1, b+1, c+1]`` (a one-layer shift);
- ``lab.json``       the manifest (what ``build`` returns).

Accept lengths in the manifest are measured by real speculative decoding (``LabEngine``, served
dtype bf16, engine rule ``sglang==0.5.23``, which captures the embedding at index 0) on prompts
the drafter never saw; ``predicted`` comes from the held-out conditional accuracies.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Optional

from workbench.lab.settings import LabSettings, corpus_style, settings_for

MANIFEST = "lab.json"
MEASURE_ENGINE = "sglang==0.5.23"


def default_cache_root() -> Path:
    env = os.environ.get("EAGLE_WORKBENCH_LAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eagle-workbench" / "lab"


def world_dir(settings: LabSettings, root: Optional[Path] = None) -> Path:
    return Path(root or default_cache_root()) / f"{settings.size}-{settings.content_hash()}"


def trained_layers(num_layers: int) -> list:
    """SpecForge's default capture, output-of-layer ids ``[1, N//2-1, N-4]``."""
    n = num_layers
    return [1, n // 2 - 1, n - 4]


def load_manifest(path) -> dict:
    p = Path(path)
    p = p / MANIFEST if p.is_dir() else p
    return json.loads(p.read_text())


def build(size: str = "tiny", root=None, progress=None, force: bool = False, **overrides) -> dict:
    """Build (or reuse) a lab world; returns the manifest dict."""
    import fcntl

    s = settings_for(size, **overrides)
    final = world_dir(s, Path(root) if root else None)
    final.parent.mkdir(parents=True, exist_ok=True)
    lock_path = final.parent / f".{final.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # one builder per world; others wait and reuse
        try:
            if (final / MANIFEST).exists() and not force:
                m = load_manifest(final)
                m["cached"] = True
                return m
            tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
            try:
                manifest = _build_into(s, tmp, progress)
                if final.exists():
                    shutil.rmtree(final)
                os.replace(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            manifest = _relocate(manifest, tmp, final)
            (final / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            manifest["cached"] = False
            return manifest
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _relocate(m: dict, old: Path, new: Path) -> dict:
    def fix(v):
        if isinstance(v, str) and v.startswith(str(old)):
            return str(new) + v[len(str(old)):]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v
    return fix(m)


def _step(progress, stage, done=0.0, total=None, message=""):
    if progress:
        from workbench.progress import Progress

        progress(Progress(stage, done, total, message))


def _build_into(s: LabSettings, out: Path, progress=None) -> dict:
    import torch

    from workbench.drafter.checkpoint import save_drafter
    from workbench.lab import capture as C
    from workbench.lab import target as T
    from workbench.lab import train_drafter as D

    torch.set_num_threads(s.threads)
    times = {}
    t0 = time.time()

    def prog(stage, done, total, msg):
        _step(progress, stage, done, total, msg)

    _step(progress, "target", 0, s.target_steps, "training the target")
    tlog = T.build_target(s, out / "target", progress=prog)
    times["target"] = round(time.time() - t0, 2)

    t1 = time.time()
    _step(progress, "data", 0, None, "self-distilling responses")
    target = T.load_target(out / "target")
    N = target.config.num_hidden_layers
    layers = trained_layers(N)
    prompts = C.make_prompts(s.prompt_len, s.prompts + s.heldout, s.seed + 1, s.seed, corpus_style(s))
    seqs = C.greedy(target, prompts, s.response_len)
    finals, auxes = C.capture_rows(target, seqs, layers)
    C.write_rows(out / "training_data", seqs[:s.prompts], s.prompt_len, finals[:s.prompts], auxes[:s.prompts],
                 s.rows_per_group)
    C.write_rows(out / "heldout_data", seqs[s.prompts:], s.prompt_len, finals[s.prompts:], auxes[s.prompts:],
                 s.rows_per_group)
    distinct = len({tuple(r) for r in seqs[:, s.prompt_len:].tolist()})
    times["data"] = round(time.time() - t1, 2)

    t2 = time.time()
    mask = torch.zeros_like(seqs)
    mask[:, s.prompt_len:] = 1
    rows = {"input_ids": seqs[:s.prompts], "loss_mask": mask[:s.prompts],
            "hidden_state": finals[:s.prompts], "aux_hidden_state": auxes[:s.prompts]}
    held = {"input_ids": seqs[s.prompts:], "loss_mask": mask[s.prompts:],
            "hidden_state": finals[s.prompts:], "aux_hidden_state": auxes[s.prompts:]}
    drafter, dlog = D.train_drafter(s, target, rows, layers, progress=prog)
    vm = out / "training_data" / "vocab_mapping"
    vm.mkdir(parents=True, exist_ok=True)
    torch.save({"d2t": drafter.d2t.clone(), "t2d": drafter.t2d.clone()}, vm / "vocab_mapping.pt")
    save_drafter(drafter, out / "draft")
    broken_ids = [-1] + layers[:-1]
    shifted_ids = [i + 1 for i in layers]
    for name, ids in (("draft_broken", broken_ids), ("draft_shifted", shifted_ids)):
        cfg = dict(drafter.config)
        cfg["eagle_config"] = dict(cfg["eagle_config"], eagle_aux_hidden_state_layer_ids=ids)
        save_drafter(drafter, out / name, cfg)
    times["drafter"] = round(time.time() - t2, 2)

    t3 = time.time()
    _step(progress, "evaluate", 0, None, "offline accuracy and measured accept length")
    depth = max(s.eval_steps, s.ttt_steps) + 2
    metrics = D.offline_metrics(drafter, target, held, depth)
    predicted = predict_al(metrics["cond"], s.eval_steps)
    eval_prompts = C.make_prompts(s.prompt_len, s.eval_prompts, s.seed + 2, s.seed, corpus_style(s)).tolist()
    measured = {name: measure_accept_length(out / "target", out / name, eval_prompts, s.eval_new_tokens,
                                            s.eval_steps)
                for name in ("draft", "draft_broken", "draft_shifted")}
    times["evaluate"] = round(time.time() - t3, 2)
    times["total"] = round(time.time() - t0, 2)
    acc = {f"acc_{k}": v for k, v in enumerate(metrics["acc"][:s.ttt_steps])}
    return {
        "dir": str(out), "size": s.size, "hash": s.content_hash(),
        "target": str(out / "target"), "draft": str(out / "draft"), "draft_broken": str(out / "draft_broken"),
        "draft_shifted": str(out / "draft_shifted"), "training_data": str(out / "training_data"),
        "heldout_data": str(out / "heldout_data"),
        "acc": acc,
        "layers": {"num_layers": N, "convention": "output-of-layer", "trained": layers,
                   "points": [f"out({i})" for i in layers], "draft": layers, "draft_broken": broken_ids,
                   "draft_shifted": shifted_ids},
        "heldout": metrics,
        "accept_length": {"steps": s.eval_steps, "topk": 1, "draft_tokens": s.eval_steps + 1,
                          "engine": MEASURE_ENGINE, "dtype": "bfloat16", "predicted": round(predicted, 4),
                          "measured": {k: round(v, 4) for k, v in measured.items()}},
        "target_training": tlog, "drafter_training": dlog, "distinct_responses": distinct,
        "timings": times, "settings": s.to_dict(),
    }


def predict_al(cond, steps: int) -> float:
    """Chain accept length from conditional rates (``workbench.predict``; bonus token included)."""
    from workbench import predict as P

    return float(P.predict("conditional", list(cond), steps, 1, steps + 1).accept_length)


def measure_accept_length(target_dir, draft_dir, prompts, new_tokens: int, steps: int,
                          engine: str = MEASURE_ENGINE, dtype: str = "bfloat16") -> float:
    """Average accept length of real chain speculation over ``prompts`` (SGLang's definition)."""
    from workbench.lab.engine import LabEngine

    eng = LabEngine(target_dir, draft_dir, dtype=dtype, engine=engine, num_steps=steps)
    try:
        for p in prompts:
            eng.generate(p, new_tokens, ignore_eos=True)
        return float(eng.stats.avg_accept_length or 0.0)
    finally:
        eng.close()
