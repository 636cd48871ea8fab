"""``lab build``: the whole miniature world, cached by a content hash of its settings.

Layout of ``{cache}/{size}-{hash}/``:

- ``target/``        HF checkpoint (``config.json``, ``model.safetensors``, tokenizer files);
- ``training_data/`` SpecForge offline rows (``rows_0-2000/data_{i}.ckpt``) + ``vocab_mapping/``;
- ``heldout_data/``  the same format, the measured prompts (never trained on) with responses as long as
  the measured decodes (offline accuracy and the predicted accept length);
- ``draft/``         the trained EAGLE-3 drafter, SGLang format, ``eagle_config`` ids = the trained
  layers (output-of-layer, SpecForge's default ``[1, N//2-1, N-4]``);
- ``draft_broken/``  the same weights, ids ``[-1, a, b]`` (the story: embedding included, rest shifted);
- ``draft_shifted/`` the same weights, ids ``[a+1, b+1, c+1]`` (a one-layer shift);
- ``vllm/``          the target and the drafts laid out at a head size vLLM's CPU attention serves (the same
  function, ``workbench.lab.vllm_layout``): ``target/``, ``draft/`` (the lab's ids, SGLang's convention),
  ``draft_vllm/`` (the trained layers in vLLM's convention, translated by vLLM's rule from the capture
  package), ``draft_broken/``;
- ``lab.json``       the manifest (what ``build`` returns).

Accept lengths in the manifest are measured by real speculative decoding (``LabEngine``, served
dtype bf16, engine rule ``sglang==0.5.23``, which captures the embedding at index 0) on prompts
the drafter never saw, with the tests' protocol (3 steps) and the demo's (5 steps, correct and
broken); ``predicted`` comes from the held-out conditional accuracies.

Calibration (``workbench.lab.calibration``): the drafter's training stops at the first held-out
check inside the bands whose figures, measured by real decoding, are inside them too
(``HeldoutCheck``); an attempt that ends outside the bands is rebuilt with the next seed, at most
``max_retries`` times. ``lab.json`` records it:
``calibration`` (bands, figures, ``ok``, ``seed`` asked, ``seed_used``, ``retries``, every attempt's
figures and misses) and ``machine`` (torch version, thread count, CPU model); ``settings`` are the
settings of the world on disk (its ``seed`` is ``seed_used``), ``hash`` names the folder (the
settings asked for).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from workbench.lab.settings import LabSettings, corpus_style, settings_for

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM

    from workbench.drafter.model import Eagle3Drafter
    from workbench.progress import ProgressCallback

    # ``confirm(drafter)``: the build's real decoding of a drafter, ``{"figures": ..., ...}``
    Confirm = Callable[[Eagle3Drafter], dict[str, Any]]
    # what ``measure_many`` runs: ``(name, prompts, steps)``
    Job = tuple[str, list[list[int]], int]

MANIFEST = "lab.json"
MEASURE_ENGINE = "sglang==0.5.23"
#: the vLLM release whose rule translates the trained layers into vLLM's ids (the CPU build the tests run)
VLLM_ENGINE = "vllm==0.32.0"


def default_cache_root() -> Path:
    env = os.environ.get("EAGLE_WORKBENCH_LAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eagle-workbench" / "lab"


def world_dir(settings: LabSettings, root: Path | None = None) -> Path:
    return Path(root or default_cache_root()) / f"{settings.size}-{settings.content_hash()}"


def trained_layers(num_layers: int) -> list[int]:
    """SpecForge's default capture, output-of-layer ids ``[1, N//2-1, N-4]``."""
    n = num_layers
    return [1, n // 2 - 1, n - 4]


def load_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    p = p / MANIFEST if p.is_dir() else p
    manifest: dict[str, Any] = json.loads(p.read_text())
    return manifest


def build(
    size: str = "tiny",
    root: str | os.PathLike[str] | None = None,
    progress: ProgressCallback | None = None,
    force: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """Build (or reuse) a lab world; returns the manifest dict."""
    import fcntl

    s = settings_for(size, **overrides)
    final = world_dir(s, Path(root) if root else None)
    final.parent.mkdir(parents=True, exist_ok=True)
    lock_path = final.parent / f".{final.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder per world; others wait and reuse
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


def _relocate(m: dict[str, Any], old: Path, new: Path) -> dict[str, Any]:
    def fix(v: Any) -> Any:
        if isinstance(v, str) and v.startswith(str(old)):
            return str(new) + v[len(str(old)) :]
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    moved: dict[str, Any] = fix(m)
    return moved


def _step(
    progress: ProgressCallback | None,
    stage: str,
    done: float = 0.0,
    total: float | None = None,
    message: str = "",
) -> None:
    if progress:
        from workbench.progress import Progress

        progress(Progress(stage, done, total, message))


def _build_into(s: LabSettings, out: Path, progress: ProgressCallback | None = None) -> dict[str, Any]:
    """Build attempts with seeds ``s.seed, s.seed + 1, ...`` until one lands inside the calibration
    bands (``workbench.lab.calibration``), at most ``s.max_retries`` retries; every attempt is
    recorded. A world that misses after the last retry is kept, marked ``calibration.ok = false``."""
    from dataclasses import replace

    from workbench.lab import calibration as K

    attempts: list[dict[str, Any]] = []
    t0, c0 = time.time(), time.process_time()
    for retry in range(s.max_retries + 1):
        if out.exists():
            shutil.rmtree(out)
        out.mkdir()
        m = _build_once(replace(s, seed=s.seed + retry), out, progress)
        missed = K.misses(m["calibration"]["figures"])
        attempts.append(
            {
                "seed": s.seed + retry,
                "figures": m["calibration"]["figures"],
                "misses": missed,
                "seconds": m["timings"]["total"],
                "drafter_steps": m["drafter_training"]["steps"],
                "checks": m["drafter_training"]["checks"],
            }
        )
        if not missed:
            break
        last = retry == s.max_retries
        _step(
            progress,
            "retry",
            retry + 1,
            s.max_retries,
            f"seed {s.seed + retry} outside the bands ({'; '.join(missed)}): "
            + ("kept, marked calibration.ok = false" if last else "next seed"),
        )
    m["calibration"].update(ok=not missed, seed=s.seed, seed_used=s.seed + retry, retries=retry, attempts=attempts)
    m["hash"] = s.content_hash()  # the folder's name: the settings asked for
    m["timings"]["total"] = round(time.time() - t0, 2)
    m["timings"]["cpu"] = round(time.process_time() - c0, 2)  # this process's CPU seconds (load-free)
    m["machine"] = machine()
    return m


def machine() -> dict[str, Any]:
    """What a world's numerics depend on: torch, its thread count, the CPU."""
    import platform

    import torch

    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _build_once(s: LabSettings, out: Path, progress: ProgressCallback | None = None) -> dict[str, Any]:
    import torch

    from workbench.drafter.checkpoint import save_drafter
    from workbench.lab import calibration as K
    from workbench.lab import capture as C
    from workbench.lab import target as T
    from workbench.lab import train_drafter as D

    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    times: dict[str, float] = {}
    t0 = time.time()
    layers = trained_layers(s.layers)
    broken_ids = [-1, *layers[:-1]]
    shifted_ids = [i + 1 for i in layers]
    variants = {"draft": layers, "draft_broken": broken_ids, "draft_shifted": shifted_ids}
    # first, so that a machine without the measuring release's code says so before any training
    points = measured_points(variants, s.layers)

    def prog(stage: str, done: float, total: float | None, msg: str) -> None:
        _step(progress, stage, done, total, msg)

    _step(progress, "target", 0, s.target_steps, f"training the target (seed {s.seed})")
    tlog = T.build_target(s, out / "target", progress=prog)
    times["target"] = round(time.time() - t0, 2)

    t1 = time.time()
    _step(progress, "data", 0, None, "self-distilling responses")
    target = T.load_target(out / "target")
    N = target.config.num_hidden_layers
    prompts = C.make_prompts(s.prompt_len, s.prompts, s.seed + 1, s.seed, corpus_style(s))
    # the held-out rows are the measured prompts (the tests' protocol), with responses as long as the
    # measured decodes: the predicted accept length reads the very text the measurement decodes. (16
    # prompts of another draw can be easier or harder than these by 10-15 %: a prediction from them
    # would measure the prompt sample, not the prediction.)
    eval_prompts = C.make_prompts(s.prompt_len, s.eval_prompts, s.seed + 2, s.seed, corpus_style(s))
    seqs = C.greedy(target, prompts, s.response_len)
    hseqs = C.greedy(target, eval_prompts, s.eval_new_tokens)
    finals, auxes = C.capture_rows(target, seqs, layers)
    hfinals, hauxes = C.capture_rows(target, hseqs, layers)
    C.write_rows(out / "training_data", seqs, s.prompt_len, finals, auxes, s.rows_per_group)
    C.write_rows(out / "heldout_data", hseqs, s.prompt_len, hfinals, hauxes, s.rows_per_group)
    distinct = len({tuple(r) for r in seqs[:, s.prompt_len :].tolist()})
    times["data"] = round(time.time() - t1, 2)

    t2 = time.time()

    def as_rows(ids: torch.Tensor, hidden: torch.Tensor, aux: torch.Tensor) -> dict[str, torch.Tensor]:
        mask = torch.zeros_like(ids)
        mask[:, s.prompt_len :] = 1
        return {"input_ids": ids, "loss_mask": mask, "hidden_state": hidden, "aux_hidden_state": aux}

    rows, held = as_rows(seqs, finals, auxes), as_rows(hseqs, hfinals, hauxes)
    vm = out / "training_data" / "vocab_mapping"
    vm.mkdir(parents=True, exist_ok=True)
    # the tests' protocol (``tests/lab/test_accept_length.py``) and the demo's (5 steps, its prompts)
    measured_prompts = eval_prompts.tolist()
    demo_prompts = C.make_prompts(s.prompt_len, s.eval_prompts, s.seed + 7, s.seed, corpus_style(s)).tolist()
    depth = max(s.eval_steps, s.ttt_steps) + 2

    def evaluate(drafter: Eagle3Drafter) -> dict[str, Any]:
        """Write the three drafts and measure every calibration figure by real decoding."""
        _step(progress, "evaluate", 0, None, "measuring accept lengths by real decoding")
        save_drafter(drafter, out / "draft")
        for name, ids in (("draft_broken", broken_ids), ("draft_shifted", shifted_ids)):
            cfg = dict(drafter.config)
            cfg["eagle_config"] = dict(cfg["eagle_config"], eagle_aux_hidden_state_layer_ids=ids)
            save_drafter(drafter, out / name, cfg)
        metrics = D.offline_metrics(drafter, target, held, depth)
        predicted = predict_al(metrics["cond"], s.eval_steps)
        jobs = [(name, measured_prompts, s.eval_steps) for name in ("draft", "draft_broken", "draft_shifted")]
        jobs += [(f"demo:{name}", demo_prompts, K.DEMO_STEPS) for name in ("draft", "draft_broken")]
        results = measure_many(out, jobs, s.eval_new_tokens, s.threads)
        measured = {k: v for k, v in results.items() if not k.startswith("demo:")}
        demo = {k[5:]: v for k, v in results.items() if k.startswith("demo:")}
        fig = K.figures(metrics["acc"][0], predicted, measured, demo)
        missed = K.misses(fig)
        _step(
            progress,
            "evaluate",
            1,
            1,
            f"accept length {fig['accept_length']:.2f} (predicted {predicted:.2f}), "
            f"broken x{fig['broken_ratio']:.2f}, shifted x{fig['shifted_ratio']:.2f}: "
            + ("; ".join(missed) if missed else "in the bands"),
        )
        return {"metrics": metrics, "predicted": predicted, "measured": measured, "demo": demo, "figures": fig}

    check = HeldoutCheck(s, target, held, hseqs, points, confirm=evaluate)
    drafter, dlog = D.train_drafter(s, target, rows, layers, progress=prog, check=check)
    # fixed when the drafter is made (token counts), so written once, whichever check measured
    torch.save({"d2t": drafter.d2t.clone(), "t2d": drafter.t2d.clone()}, vm / "vocab_mapping.pt")
    times["drafter"] = round(time.time() - t2 - check.stop.confirm_seconds, 2)

    t3 = time.time() - check.stop.confirm_seconds  # the measurements during training count as evaluation
    if dlog["stopped_by_check"] and check.stop.last is not None:
        ev = check.stop.last  # measured at the check that stopped training
    else:
        ev = evaluate(drafter)
    metrics, predicted, measured, demo = ev["metrics"], ev["predicted"], ev["measured"], ev["demo"]
    times["evaluate"] = round(time.time() - t3, 2)
    vllm = vllm_world(out, layers, broken_ids, N)
    times["total"] = round(time.time() - t0, 2)
    acc = {f"acc_{k}": v for k, v in enumerate(metrics["acc"][: s.ttt_steps])}
    fig = ev["figures"]
    return {
        "dir": str(out),
        "size": s.size,
        "hash": s.content_hash(),
        "target": str(out / "target"),
        "draft": str(out / "draft"),
        "draft_broken": str(out / "draft_broken"),
        "draft_shifted": str(out / "draft_shifted"),
        "training_data": str(out / "training_data"),
        "heldout_data": str(out / "heldout_data"),
        "acc": acc,
        "layers": {
            "num_layers": N,
            "convention": "output-of-layer",
            "trained": layers,
            "points": [f"out({i})" for i in layers],
            "draft": layers,
            "draft_broken": broken_ids,
            "draft_shifted": shifted_ids,
        },
        "heldout": metrics,
        "accept_length": {
            "steps": s.eval_steps,
            "topk": 1,
            "draft_tokens": s.eval_steps + 1,
            "engine": MEASURE_ENGINE,
            "dtype": "bfloat16",
            "predicted": round(predicted, 4),
            "prompts": {"count": s.eval_prompts, "seed": s.seed + 2, "new_tokens": s.eval_new_tokens},
            "measured": {k: round(v, 4) for k, v in measured.items()},
        },
        "demo": {
            "steps": K.DEMO_STEPS,
            "prompts": {"count": s.eval_prompts, "seed": s.seed + 7, "new_tokens": s.eval_new_tokens},
            "measured": {k: round(v, 4) for k, v in demo.items()},
        },
        "calibration": {"bands": K.bands(), "figures": fig, "in_band": K.in_band(fig)},
        "vllm": vllm,
        "target_training": tlog,
        "drafter_training": dlog,
        "distinct_responses": distinct,
        "timings": times,
        "settings": s.to_dict(),
    }


def vllm_world(out: Path, trained: list[int], broken: list[int], num_layers: int) -> dict[str, Any]:
    """``out/vllm``: the world at a head size vLLM's CPU attention serves, its drafts with the lab's ids,
    the trained layers in vLLM's convention, and the broken ids (``workbench.lab.vllm_layout``)."""
    from workbench.lab.vllm_layout import VLLM_CPU_HEAD_DIM, lay_out

    points = [f"out({i})" for i in trained]
    vids = ids_for_points(VLLM_ENGINE, points, num_layers)
    base = out / "vllm"
    lay_out(out / "target", base / "target")
    lay_out(out / "draft", base / "draft")
    lay_out(out / "draft", base / "draft_vllm", ids=vids)
    lay_out(out / "draft", base / "draft_broken", ids=broken)
    return {
        "engine": VLLM_ENGINE,
        "head_dim": VLLM_CPU_HEAD_DIM,
        "target": str(base / "target"),
        "draft": str(base / "draft"),
        "draft_vllm": str(base / "draft_vllm"),
        "draft_broken": str(base / "draft_broken"),
        "ids": {"draft": trained, "draft_vllm": vids, "draft_broken": broken},
        "points": points,
    }


def ids_for_points(engine: str, points: Sequence[str], num_layers: int, arch: str = "LlamaForCausalLM") -> list[int]:
    """The config ids under which ``engine`` captures ``points`` (one id each), found by asking the
    engine's rule (read from its code) what each candidate id captures."""
    from workbench.engine import capture

    found: dict[str, int] = {}
    for i in range(-1, num_layers + 2):
        got = capture(engine, arch=arch, num_layers=num_layers, ids=[i]).points
        if got and got[0] in points:
            found.setdefault(got[0], i)
    missing = [p for p in points if p not in found]
    if missing:
        raise ValueError(f"{engine} captures none of {', '.join(missing)} for any id")
    return [found[p] for p in points]


def measured_points(
    variants: dict[str, list[int]], num_layers: int, arch: str = "LlamaForCausalLM"
) -> dict[str, list[str]]:
    """The stream points ``MEASURE_ENGINE`` captures for each variant's ids, read from that
    release's code (the installed SGLang or its wheel, ``workbench.engine.code``), as the measuring
    engine reads them; a point that never fires is left out, as the engine leaves it out."""
    from workbench.engine.code import code_capture

    return {
        name: [
            str(p)
            for p in code_capture(MEASURE_ENGINE, archs=[arch], num_layers=num_layers, ids=ids)[0].points
            if p != "missing"
        ]
        for name, ids in variants.items()
    }


class HeldoutCheck:
    """The calibration figures of a drafter in training, predicted from held-out rows (no decoding).

    Each variant (correct, broken, shifted ids) gets the features the measuring engine captures
    for its ids (``points``: ``measured_points``) on the held-out rows; the drafter's teacher-forced
    conditional rates on them predict each variant's chain accept length at 3 steps and (correct,
    broken) at the demo's 5. ``stop`` (a ``ConfirmedStop``) decides from them.
    ``check(drafter) -> (figures, stop)``."""

    def __init__(
        self,
        s: LabSettings,
        target: LlamaForCausalLM,
        held: dict[str, torch.Tensor],
        seqs: torch.Tensor,
        points: dict[str, list[str]],
        confirm: Confirm | None = None,
    ) -> None:
        from workbench.lab import calibration as K
        from workbench.lab.capture import capture_points

        self.s, self.target, self.K = s, target, K
        feats = capture_points(target, seqs, sorted({p for ps in points.values() for p in ps}))
        self.rows = {
            name: dict(held, aux_hidden_state=torch_cat([feats[p] for p in ps])) for name, ps in points.items()
        }
        self.depth = max(s.eval_steps, K.DEMO_STEPS)
        self.stop = ConfirmedStop(s, confirm)

    def figures(self, drafter: Eagle3Drafter) -> dict[str, Any]:
        from workbench.lab import train_drafter as D

        K, s = self.K, self.s
        m = {
            n: D.offline_metrics(drafter, self.target, r, self.depth, batch=len(r["input_ids"]))
            for n, r in self.rows.items()
        }
        al = {n: predict_al(x["cond"], s.eval_steps) for n, x in m.items()}
        demo = {n: predict_al(m[n]["cond"], K.DEMO_STEPS) for n in ("draft", "draft_broken")}
        fig: dict[str, Any] = K.figures(m["draft"]["acc"][0], al["draft"], al, demo)
        fig.pop("predicted_error")  # predicted against itself: only a decode measures it
        return fig

    def __call__(self, drafter: Eagle3Drafter) -> tuple[dict[str, Any], bool]:
        return self.stop(self.figures(drafter), drafter)


class ConfirmedStop:
    """When a drafter's training stops, from its predicted figures and, inside the bands, measured ones.

    A check whose predictions are inside the bands shrunk by ``calibration.MARGINS`` is confirmed by
    ``confirm(drafter)`` (the build's real decoding with the tests' and the demo's protocols; it
    returns ``{"figures": ...}``), at most ``settings.confirms`` times: training stops at the first
    confirmed check (``last`` holds its measurement) and goes on past one that misses while every miss
    is one more training fixes (``calibration.TRAINING_FIXES``); otherwise the attempt ends there,
    measured. A check past the top of a band ends the attempt unmeasured (``last`` is None), and one
    below it trains on. ``stop(figures, drafter) -> (figures, stop)``."""

    def __init__(self, s: LabSettings, confirm: Confirm | None = None) -> None:
        from workbench.lab import calibration as K

        self.s, self.K, self.confirm = s, K, confirm
        self.confirmed = 0
        self.confirm_seconds = 0.0
        self.last: dict[str, Any] | None = None  # the measurement of this check's drafter, if it was measured

    def __call__(self, fig: dict[str, Any], drafter: Eagle3Drafter) -> tuple[dict[str, Any], bool]:
        self.last = None
        offline = dict(fig, predicted_error=0.0)
        if self.s.stop_rule != "bands":
            return fig, False
        if self.K.misses(offline, self.K.MARGINS):
            return fig, self.K.past_the_top(offline, self.K.MARGINS)
        if self.confirm is None:
            return fig, True
        t0 = time.time()
        ev = self.last = self.confirm(drafter)
        self.confirm_seconds += time.time() - t0
        self.confirmed += 1
        missed = self.K.misses(ev["figures"])
        go_on = bool(missed) and self.confirmed < self.s.confirms and self.K.training_may_fix(ev["figures"])
        return dict(fig, measured=ev["figures"], misses=missed), not go_on


def torch_cat(parts: list[torch.Tensor]) -> torch.Tensor:
    """Features side by side, as the engine concatenates its captured states."""
    import torch

    return torch.cat(parts, dim=-1)


def predict_al(cond: Iterable[float], steps: int) -> float:
    """Chain accept length from conditional rates (``workbench.predict``; bonus token included)."""
    from workbench import predict as P

    return float(P.predict("conditional", list(cond), steps, 1, steps + 1).accept_length)


PIECE_PROMPTS = 4  # prompts a measuring worker decodes at a time (see measure_many)


def measure_many(world: Path, jobs: Sequence[Job], new_tokens: int, threads: int = 1) -> dict[str, float]:
    """``{name: accept length}`` for ``jobs`` = ``[(name, prompts, steps)]``; ``name`` (or the part
    after ``demo:``) is the draft folder in ``world``. Decoding goes one token row at a time
    (Python-bound, a thread pool barely helps), so the jobs run in up to ``threads`` forked workers
    of one torch thread each, ``PIECE_PROMPTS`` prompts at a time, whichever worker is free taking
    the next piece and keeping the engines it made: a job's accept length is its accepted tokens
    over its verify rounds summed over its pieces, the same figure as one engine decoding all its
    prompts in turn, and the workers end together (whole jobs, of unequal length -- a broken draft
    decodes in more rounds -- left one worker alone at the end)."""
    global _JOBS
    pieces = [(j, i) for j, (_, prompts, _) in enumerate(jobs) for i in range(0, len(prompts), PIECE_PROMPTS)]
    workers = max(1, min(int(threads), len(pieces)))
    _JOBS = (Path(world), list(jobs), int(new_tokens))
    try:
        if workers == 1:
            try:
                got = [_measure_piece(p) for p in pieces]
            finally:
                _close_engines()
        else:
            import multiprocessing as mp

            with mp.get_context("fork").Pool(workers, initializer=_one_thread) as pool:
                got = pool.map(_measure_piece, pieces, chunksize=1)
    finally:
        _JOBS = None
    accepted, rounds = [0] * len(jobs), [0] * len(jobs)
    for j, a, r in got:
        accepted[j] += a
        rounds[j] += r
    return {name: (accepted[j] / rounds[j] if rounds[j] else 0.0) for j, (name, _, _) in enumerate(jobs)}


_JOBS: tuple[Path, list[Any], int] | None = None  # what forked measurement workers read (inherited, never pickled)
_ENGINES: dict[tuple[str, int], Any] = {}  # a measuring process's engines, per (draft, steps)


def _measure_piece(piece: tuple[int, int]) -> tuple[int, int, int]:
    """(job, accepted tokens, verify rounds) of one piece of a job's prompts."""
    from workbench.lab.engine import LabEngine, Stats

    world, jobs, new_tokens = cast("tuple[Path, list[Any], int]", _JOBS)  # measure_many set it
    j, start = piece
    name, prompts, steps = jobs[j]
    draft = name.split(":")[-1]
    eng = _ENGINES.get((draft, steps))
    if eng is None:
        eng = _ENGINES[draft, steps] = LabEngine(
            world / "target", world / draft, dtype="bfloat16", engine=MEASURE_ENGINE, num_steps=steps
        )
    eng.stats = Stats()
    for p in prompts[start : start + PIECE_PROMPTS]:
        eng.generate(p, new_tokens, ignore_eos=True)
    return j, eng.stats.accept_tokens, eng.stats.verify_ct


def _close_engines() -> None:
    while _ENGINES:
        _ENGINES.popitem()[1].close()


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)
