"""The jobs a host runs near its data. Each takes JSON-able keyword arguments and returns a JSON-able
dict; only numpy, torch and safetensors (and the shipped workbench core) are imported.

- ``probe``: the host's python, library versions and accelerators;
- ``align``: training samples against an inference capture already on the host (a tensor dump, a
  saved payload, a layer stack), with the engine's recommendation; ``device`` None or "auto" lets
  the engine choose the CPU kernels or the GPU there (``workbench.hidden.placement``), and the
  answer says which and why (``device_choice``);
- ``live``: training samples sent to a live server on the host (``return_hidden_states``, an SGLang
  tensor dump, or a vLLM server extracting hidden states), aligned with the training slots;
  optionally the drafter evaluated on the training features and on the features the server feeds
  it, so the difference says how much accept length the server's features cost.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from workbench.errors import InputError

if TYPE_CHECKING:
    import numpy.typing as npt
    import torch

    from workbench.drafter.evaluate import DrafterEval
    from workbench.hidden.view import Capture, HiddenTensor


def _with_rules(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """The job runs with the rule entries it was given (``rules=``): the host answers with the laptop's
    rules (its tables are not shipped), for this job alone (a host process runs many)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        from workbench.engine import table

        with table.installed(kwargs.get("rules")):
            return fn(*args, **kwargs)

    return run


def probe() -> dict[str, Any]:
    import platform
    import sys

    out: dict[str, Any]
    out = {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "libs": {},
        "cuda": False,
        "devices": [],
    }
    for mod in ("numpy", "torch", "safetensors"):
        try:
            m = __import__(mod)
            out["libs"][mod] = getattr(m, "__version__", "?")
        except ImportError:
            out["libs"][mod] = None
    try:
        import torch

        if torch.cuda.is_available():
            out["cuda"] = True
            out["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as exc:  # a broken CUDA install still lets the CPU path run
        out["cuda_error"] = str(exc)[:200]
    return out


# ----------------------------------------------------------------------------------- training side
def sample_files(data: str, samples: Sequence[int] | None = None, count: int = 1) -> list[Path]:
    """Training files by index in the folder's order (``samples``), else the first ``count``."""
    from workbench.hidden.specforge import sample_files as sf

    files = sf(data)
    if samples is None:
        return files[: max(1, int(count))]
    out: list[Path] = []
    for i in samples:
        if not 0 <= int(i) < len(files):
            raise InputError(f"{data}: sample {i} out of range (have {len(files)} files)")
        out.append(files[int(i)])
    return out


def _train_captures(files: Sequence[Path], layer_ids: Sequence[int] | None = None) -> list[Capture]:
    from workbench.hidden.specforge import read_file

    return [read_file(f, layer_ids=layer_ids) for f in files]


def _ids(cap: Capture) -> npt.NDArray[Any]:
    """A training capture's token ids (a SpecForge file always holds its input_ids)."""
    return cast("npt.NDArray[Any]", cap.token_ids)


def _trim(cap: Capture, rows: int) -> Capture:
    """The first ``rows`` tokens of a training capture (the part a server prefilled)."""
    import numpy as np

    from workbench.hidden.view import Capture, HiddenTensor

    if rows >= cap.rows:
        return cap
    ts = [
        HiddenTensor(
            t.name, rows, t.width, t.dtype, t.role, t.physical, t.source, _head_loader(t, rows), t.part_physical
        )
        for t in cap.tensors
    ]
    return Capture(
        cap.path,
        cap.format,
        ts,
        token_ids=np.asarray(_ids(cap)[:rows]),
        positions=None if cap.positions is None else cap.positions[:rows],
        loss_mask=None if cap.loss_mask is None else cap.loss_mask[:rows],
        notes=cap.notes,
        meta=cap.meta,
    )


def _head_loader(t: HiddenTensor, rows: int) -> Callable[[], torch.Tensor]:
    """Loads the first ``rows`` rows of ``t``."""
    return lambda: t.load()[:rows]


# ------------------------------------------------------------------------------------- alignment
def _align(
    train: Capture,
    infer: Capture,
    *,
    engine: str | None = None,
    arch: str | None = None,
    num_layers: int | None = None,
    draft_config: dict[str, Any] | None = None,
    draft_config_path: str | None = None,
    device: str | None = None,
    include_final: bool = False,
) -> dict[str, Any]:
    from workbench.hidden.align import align, reference_slots
    from workbench.remote.captures import tensor_bytes

    res = align(train, infer, device=device, include_final=include_final)
    slots = reference_slots(train, include_final)
    cands = [c for c in infer.candidates(slots[0].width) if c.rows == infer.rows]
    if engine and num_layers:
        from workbench.hidden.recommend import recommend

        rec, findings = recommend(
            res,
            engine,
            arch=arch,
            num_layers=num_layers,
            draft_config=draft_config,
            draft_config_path=draft_config_path,
        )
        res.recommendation = rec
        res.findings.extend(findings)
    # device None/"auto": the engine's choice on this host (where the bytes are, measured bandwidths)
    return {
        "align": res.to_dict(),
        "tensor_bytes": tensor_bytes(slots, cands),
        "device": res.device,
        "device_choice": res.timing.get("device_choice"),
    }


@_with_rules
def align_files(
    train: str,
    infer: str,
    *,
    samples: list[int] | None = None,
    count: int = 1,
    infer_format: str | None = None,
    train_layer_ids: list[int] | None = None,
    engine: str | None = None,
    arch: str | None = None,
    num_layers: int | None = None,
    draft_config: dict[str, Any] | None = None,
    draft_config_path: str | None = None,
    device: str | None = None,
    include_final: bool = False,
    rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Training samples against a capture on this host. With a tensor-dump folder and several
    samples, each sample is paired with the pass that prefilled its tokens. ``rules``: the capture
    rules the laptop shipped (``workbench.remote.engine.shipment``)."""
    from workbench.hidden import detect_format, open_capture
    from workbench.remote.captures import concat, dump_for_ids

    files = sample_files(train, samples, count)
    trains = _train_captures(files, train_layer_ids)
    fmt = infer_format or detect_format(infer)
    if fmt == "sglang-tensor-dump" and len(trains) > 1:
        infers = dump_for_ids(infer, [_ids(t) for t in trains])
        inf = concat(infers, str(infer), fmt)
    else:
        if len(trains) > 1:
            raise InputError(
                f"{infer}: one capture for {len(trains)} training samples; give one sample "
                "or a tensor-dump folder holding every sample's pass"
            )
        inf = open_capture(infer, format=fmt)
    tr = concat(trains, str(train), "specforge")
    out = _align(
        tr,
        inf,
        engine=engine,
        arch=arch,
        num_layers=num_layers,
        draft_config=draft_config,
        draft_config_path=draft_config_path,
        device=device,
        include_final=include_final,
    )
    out["samples"] = [str(f) for f in files]
    return out


# ------------------------------------------------------------------------------------ live server
@_with_rules
def live(
    url: str,
    training_data: str,
    *,
    samples: list[int] | None = None,
    count: int = 2,
    mode: str = "payload",
    dump_dir: str | None = None,
    extract_ids: list[int] | None = None,
    extract_points: list[str | None] | None = None,
    part_points: list[str | None] | None = None,
    engine: str | None = None,
    arch: str | None = None,
    num_layers: int | None = None,
    draft_config: dict[str, Any] | None = None,
    draft_config_path: str | None = None,
    draft: str | None = None,
    target: str | None = None,
    steps: int | None = None,
    eval_samples: int = 0,
    max_tokens: int = 4096,
    device: str | None = None,
    timeout: float = 600.0,
    rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send training samples' token ids to the server at ``url`` (on this host), read what the
    engine captures for them and align it with the training slots.

    ``mode="payload"``: ``return_hidden_states`` answers (the packed aux features, ``part_points``
    naming their parts); ``mode="dump"``: the server writes a tensor dump to ``dump_dir`` and
    every residual-stream point becomes a candidate; ``mode="extract"``: a vLLM server serving
    ``extract_hidden_states`` for ``extract_ids`` writes each prefill's states (``extract_points``: what
    vLLM's rule says each id captures), every one a candidate. With ``draft``, ``target`` and ``steps`` the
    drafter is also evaluated on the samples twice, on the training features and on the features
    the engine feeds it (the dump's ``part_points`` in dump mode), and on ``eval_samples`` more
    training samples for the headline prediction.
    """
    import numpy as np

    from workbench.remote.captures import (
        concat,
        dump_for_ids,
        flush,
        generate_ids,
        payload_capture,
        vllm_capture,
        vllm_extract,
        vllm_reset,
    )

    if mode not in ("payload", "dump", "extract"):
        raise InputError(f"mode: {mode!r} is not payload, dump or extract")
    if mode == "dump" and not dump_dir:
        raise InputError("dump mode needs dump_dir (the server's --debug-tensor-dump-output-folder)")
    if mode == "extract" and (not extract_ids or not extract_points or len(extract_points) != len(extract_ids)):
        raise InputError("extract mode needs extract_ids and one extract_point per id")
    t0 = time.perf_counter()
    files = sample_files(training_data, samples, count)
    trains = [_trim(c, max_tokens) for c in _train_captures(files)]
    infers: list[Capture] = []
    for i, cap in enumerate(trains):
        if mode == "extract":
            vllm_reset(url)  # prefill must cover every token: nothing from the prefix cache
            resp = vllm_extract(url, _ids(cap).tolist(), timeout=timeout)
            src = f"{url} sample {i}"
            infers.append(vllm_capture(_ids(cap), resp, extract_ids or [], extract_points or [], src))
            continue
        flush(url)  # prefill must cover every token: nothing from the prefix cache
        resp = generate_ids(url, _ids(cap).tolist(), hidden=mode == "payload", timeout=timeout)
        if mode == "payload":
            infers.append(payload_capture(np.asarray(cap.token_ids), resp, part_points, f"{url} sample {i}"))
    if mode == "dump":
        infers = dump_for_ids(cast(str, dump_dir), [_ids(c) for c in trains])  # checked above
    request_s = time.perf_counter() - t0
    tr = concat(trains, training_data, "specforge")
    inf = concat(
        infers,
        cast(str, dump_dir) if mode == "dump" else url,
        {"payload": "sglang-payload", "dump": "sglang-tensor-dump", "extract": "vllm-hidden-states"}[mode],
    )
    out = _align(
        tr,
        inf,
        engine=engine,
        arch=arch,
        num_layers=num_layers,
        draft_config=draft_config,
        draft_config_path=draft_config_path,
        device=device,
    )
    out.update(samples=[str(f) for f in files], mode=mode, request_s=request_s, tokens=[int(c.rows) for c in trains])
    if draft and target and steps:
        out["evals"] = _evaluate(
            files, trains, infers, mode, part_points, draft, target, int(steps), training_data, eval_samples, device
        )
    out["seconds"] = time.perf_counter() - t0
    return out


def _live_features(cap: Capture, mode: str, part_points: Sequence[str | None] | None) -> torch.Tensor | None:
    """[T, K*H] features the engine feeds the drafter, in its concatenation order."""
    import torch

    if mode == "payload":
        return cap.tensors[0].load().float()
    by_point = {t.physical: t for t in cap.tensors if t.physical}
    parts: list[torch.Tensor] = []
    for p in part_points or []:
        if p is None or p not in by_point:
            return None
        parts.append(by_point[p].load().float())
    return torch.cat(parts, dim=-1) if parts else None


def _evaluate(
    files: Sequence[Path],
    trains: Sequence[Capture],
    infers: Sequence[Capture],
    mode: str,
    part_points: Sequence[str | None] | None,
    draft: str,
    target: str,
    steps: int,
    training_data: str,
    eval_samples: int,
    device: str | None,
) -> dict[str, Any]:
    """Predicted accept length from the drafter on the training features and on the live ones."""
    import torch

    from workbench.drafter.evaluate import evaluate
    from workbench.hidden.pt_io import load_pt

    out: dict[str, Any] = {"steps": steps, "notes": []}
    with tempfile.TemporaryDirectory(prefix="wb-eval-") as tmp:
        tdir, ldir = Path(tmp) / "train", Path(tmp) / "live"
        tdir.mkdir()
        ldir.mkdir()
        usable = 0
        for i, (f, cap, inf) in enumerate(zip(files, trains, infers)):
            raw = load_pt(f)
            L = cap.rows
            base = {
                "input_ids": raw["input_ids"][:L].clone(),
                "loss_mask": raw["loss_mask"][:L].clone(),
                "hidden_state": raw["hidden_state"].reshape(-1, raw["hidden_state"].shape[-1])[:L][None].clone(),
            }
            torch.save(
                {
                    **base,
                    "aux_hidden_state": raw["aux_hidden_state"]
                    .reshape(-1, raw["aux_hidden_state"].shape[-1])[:L][None]
                    .clone(),
                },
                tdir / f"data_{i}.ckpt",
            )
            feats = _live_features(inf, mode, part_points)
            if feats is None:
                continue
            pos = inf.positions if inf.positions is not None else None
            if feats.shape[0] != L or (pos is not None and int(pos[0]) != 0):
                out["notes"].append(f"sample {i}: the server gave {feats.shape[0]} of {L} rows; not evaluated")
                continue
            if feats.shape[1] != base["hidden_state"].shape[-1] * (
                raw["aux_hidden_state"].shape[-1] // base["hidden_state"].shape[-1]
            ):
                out["notes"].append(
                    f"sample {i}: the server's features are {feats.shape[1]} wide, the drafter "
                    f"takes {raw['aux_hidden_state'].shape[-1]}: the engine captures another "
                    "number of states"
                )
                continue
            torch.save(
                {**base, "aux_hidden_state": feats[None].to(raw["aux_hidden_state"].dtype)}, ldir / f"data_{i}.ckpt"
            )
            usable += 1
        out["train"] = summary(evaluate(draft, str(tdir), target, depth=steps, device=device))
        if usable:
            out["live"] = summary(evaluate(draft, str(ldir), target, depth=steps, device=device))
        elif mode == "dump" and not part_points:
            out["notes"].append("the engine's capture points are unknown: live features not evaluated")
    if eval_samples and eval_samples > len(files):
        out["headline"] = drafter(draft, target, training_data, steps=steps, samples=eval_samples, device=device)[
            "headline"
        ]
    return out


def summary(r: DrafterEval) -> dict[str, Any]:
    return {
        "samples": r.samples,
        "positions": r.positions,
        "acc": r.acc,
        "full_acc": r.full_acc,
        "cond_acc": r.cond_acc,
        "accept_length": r.predicted.get("accept_length"),
        "from_acc": r.predicted.get("from_acc"),
        "steps": r.depth,
        "notes": r.notes,
    }


def drafter(
    draft: str, target: str, training_data: str, *, steps: int, samples: int = 32, device: str | None = None
) -> dict[str, Any]:
    """The drafter on the first ``samples`` training samples at ``steps`` (the predicted accept length)."""
    from workbench.drafter.evaluate import evaluate

    with tempfile.TemporaryDirectory(prefix="wb-eval-") as tmp:
        for i, f in enumerate(sample_files(training_data, None, samples)):
            os.symlink(f, Path(tmp) / f"data_{i}{''.join(f.suffixes)}")
        return {"headline": summary(evaluate(draft, tmp, target, depth=int(steps), device=device))}


# ------------------------------------------------------------------------------------ static checks
@_with_rules
def static(
    draft: str,
    *,
    config_text: str | None = None,
    target_config: str | None = None,
    engine: str | None = None,
    algorithm: str | None = None,
    context_length: int | None = None,
    env: dict[str, str] | None = None,
    cuda_graph: bool = True,
    rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The doctor's static checks of a draft folder on this host. ``config_text``: check this
    config.json (the one a server loaded) next to the folder's weights instead of the file there;
    ``env``: the launch's environment (SGLang reads some of its checks' switches there); ``rules``:
    the capture rules the laptop shipped, so the host's findings are the laptop's."""
    from workbench.doctor import run_static

    kw: dict[str, Any] = dict(
        engine=engine,
        algorithm=algorithm,
        context_length=context_length,
        cuda_graph=cuda_graph,
        env={str(k): str(v) for k, v in (env or {}).items()},
    )
    if config_text is None:
        return run_static(draft, target_config, **kw).to_dict()
    src = Path(draft)
    if src.is_file():
        src = src.parent
    with tempfile.TemporaryDirectory(prefix="wb-static-") as tmp:
        for f in src.iterdir():
            if f.name != "config.json" and f.is_file():
                os.symlink(f.resolve(), Path(tmp) / f.name)
        (Path(tmp) / "config.json").write_text(config_text)
        out = run_static(tmp, target_config, **kw).to_dict()
    return cast("dict[str, Any]", _replace_paths(out, tmp, str(src)))  # a dict stays a dict


def _replace_paths(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _replace_paths(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_paths(v, old, new) for v in value]
    return value


def engine_release(engine: str = "sglang") -> dict[str, Any]:
    """The host's own installed engine read by the extractor (``workbench.engine``)."""
    from workbench.engine.host import release_job

    return release_job(engine)


def engine_capture(
    engine: str,
    archs: list[str] | None = None,
    num_layers: int = 0,
    ids: list[int] | None = None,
    cuda_graph: bool = True,
    rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``engine`` captures here: this host's engine when it is that release, else the shipped rules."""
    from workbench.engine.host import capture_job

    return capture_job(engine, archs or [], int(num_layers), ids, cuda_graph, rules)


JOBS = {
    "probe": probe,
    "align": align_files,
    "live": live,
    "static": static,
    "drafter": drafter,
    "engine_release": engine_release,
    "engine_capture": engine_capture,
}
