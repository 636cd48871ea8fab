"""Weight checks from the safetensors headers (names and shapes the engine's drafter expects, from
``workbench.drafter.names``), and the d2t/t2d vocabulary mapping."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.errors import InputError

if TYPE_CHECKING:
    from workbench.doctor.static import _Checker
    from workbench.draftconfig import DraftCheckpoint

_DTYPE_KIND = {"int64": ("I64",), "bool": ("BOOL", "U8")}
_LIST = 20  # names listed in one finding's evidence


def flat_config(d: DraftCheckpoint) -> dict[str, Any]:
    """The draft config as SGLang sees it; the speculators layout keeps the layer fields nested."""
    cfg = dict(d.config)
    if d.layout == "speculators":
        inner = cfg.get("transformer_layer_config")
        merged = dict(inner) if isinstance(inner, dict) else {}
        for key in (
            "draft_vocab_size",
            "target_hidden_size",
            "norm_before_fc",
            "fc_norm",
            "bias",
            "eagle_config",
            "num_aux_hidden_states",
        ):
            if key in cfg:
                merged[key] = cfg[key]
        ids = d.top_level_layer_ids
        if ids and "num_aux_hidden_states" not in merged:
            merged["num_aux_hidden_states"] = len(ids)
        cfg = merged
    return cfg


def check_weights(ck: _Checker) -> int | None:
    """Run the weight checks on a _Checker; returns fc's input width when fc.weight is present."""
    d = ck.d
    if not d.tensors:
        return None
    check_names_and_shapes(ck)
    check_d2t(ck)
    fc = d.tensors.get("fc.weight")
    return fc.shape[1] if fc is not None and len(fc.shape) == 2 else None


def check_names_and_shapes(ck: _Checker) -> None:
    from workbench.drafter import names as N

    d = ck.d
    if d.problems:  # a mistyped field would give wrong expectations: config-invalid says why
        return
    cfg = flat_config(d)
    present = {N.to_sglang(n, int(cfg.get("num_hidden_layers") or 1)): n for n in d.tensors}
    naming = N.detect_naming(d.tensors)
    try:
        expected = N.expected_weights(cfg, N.SGLANG)
    except (KeyError, ValueError, TypeError) as exc:
        ck.add(
            "weights-not-checked",
            "info",
            f"Weight names and shapes not checked: the config lacks what sizes them ({exc}).",
            {"path": d.path, "reason": f"config: {exc}"},
        )
        return
    ev_base = {"naming": naming, "files": d.weight_files}

    missing = [s for name, s in expected.items() if s.required and name not in present]
    if missing:
        names = [s.name for s in missing]
        why = []
        if "lm_head.weight" in names:
            why.append("without lm_head the draft head keeps its random init (accept length 1.00)")
        if "d2t" in names:
            why.append("without d2t draft ids are not mapped to target ids")
        if "fc.weight" in names:
            why.append("without fc the target features are never projected")
        ck.add(
            "missing-weight",
            "error",
            f"{len(names)} weight{'s' if len(names) > 1 else ''} the engine's drafter needs "
            f"{'are' if len(names) > 1 else 'is'} absent ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
            + (f": {'; '.join(why)}." if why else "; SGLang does not report missing weights."),
            {
                **ev_base,
                "missing": names[:_LIST],
                "count": len(names),
                "expected_shapes": {s.name: list(s.shape) for s in missing[:_LIST]},
            },
        )

    unexpected = sorted(orig for sg, orig in present.items() if sg not in expected)
    if unexpected and getattr(ck, "is_vllm", False):
        ck.skip(
            "weight names the loader drops",
            "--engine sglang==X",
            f"{ck.name}'s weight loader is not read; the names were checked against SGLang's",
        )
    elif unexpected:
        ck.add(
            "unexpected-weight",
            "warning",
            f"{len(unexpected)} weight name{'s' if len(unexpected) > 1 else ''} SGLang's loader would "
            f"silently drop ({', '.join(unexpected[:3])}{', ...' if len(unexpected) > 3 else ''}).",
            {**ev_base, "unexpected": unexpected[:_LIST], "count": len(unexpected)},
        )

    wrong = []
    for sg, orig in sorted(present.items()):
        spec = expected.get(sg)
        if spec is None:
            continue
        info = d.tensors[orig]
        if list(spec.shape) != info.shape:
            wrong.append({"name": orig, "shape": info.shape, "expected": list(spec.shape), "dtype": info.dtype})
        elif spec.kind in _DTYPE_KIND and info.dtype not in _DTYPE_KIND[spec.kind]:
            wrong.append(
                {
                    "name": orig,
                    "shape": info.shape,
                    "expected": list(spec.shape),
                    "dtype": info.dtype,
                    "expected_dtype": spec.kind,
                }
            )
    if wrong:
        w0 = wrong[0]
        detail = f"{w0['name']} is {w0['shape']} {w0['dtype']}, the config implies {w0['expected']}" + (
            f" {w0['expected_dtype']}" if "expected_dtype" in w0 else ""
        )
        ck.add(
            "weight-shape-mismatch",
            "error",
            f"{len(wrong)} weight{'s' if len(wrong) > 1 else ''} disagree with the config: {detail}.",
            {**ev_base, "mismatches": wrong[:_LIST], "count": len(wrong)},
        )


def check_d2t(ck: _Checker) -> None:
    d = ck.d
    if "d2t" not in d.tensors:
        return
    import numpy as np

    vocab = (ck.t.vocab_size if ck.t else None) or d.vocab_size
    ev: dict[str, Any] = {"target_vocab_size": vocab, "draft_vocab_size": d.draft_vocab_size}
    problems: list[str] = []
    try:
        d2t = np.asarray(d.tensor("d2t"))
    except InputError as exc:
        problems.append(str(exc))
        d2t = None
    if d2t is not None:
        ev["d2t_shape"] = list(d2t.shape)
        if d2t.ndim != 1 or d2t.dtype.kind not in "iu":
            problems.append(f"d2t must be a 1-D integer tensor, got shape {list(d2t.shape)} {d2t.dtype}")
        else:
            if d.draft_vocab_size and d2t.shape[0] != d.draft_vocab_size:
                problems.append(f"d2t has {d2t.shape[0]} entries, draft_vocab_size is {d.draft_vocab_size}")
            tgt = d2t.astype(np.int64) + np.arange(d2t.shape[0], dtype=np.int64)
            steps = np.diff(tgt)
            if steps.size and (steps <= 0).any():
                first = int(np.argmax(steps <= 0))
                problems.append(
                    f"target ids not strictly increasing at draft id {first + 1} "
                    f"({int(tgt[first])} then {int(tgt[first + 1])})"
                )
            if tgt.size and (tgt.min() < 0 or (vocab and tgt.max() >= vocab)):
                problems.append(f"target ids span {int(tgt.min())}..{int(tgt.max())}, outside 0..{(vocab or 0) - 1}")
            if "t2d" in d.tensors:
                try:
                    t2d = np.asarray(d.tensor("t2d"))
                except InputError as exc:
                    problems.append(str(exc))
                    t2d = None
                if t2d is not None:
                    ev["t2d_shape"] = list(t2d.shape)
                    ev["t2d_true"] = int(t2d.astype(bool).sum())
                    if t2d.ndim != 1 or (vocab and t2d.shape[0] != vocab):
                        problems.append(f"t2d has shape {list(t2d.shape)}, expected [{vocab}]")
                    else:
                        mask = t2d.astype(bool)
                        if int(mask.sum()) != d2t.shape[0]:
                            problems.append(f"t2d marks {int(mask.sum())} tokens, d2t maps {d2t.shape[0]}")
                        inside = tgt[(tgt >= 0) & (tgt < mask.shape[0])]
                        if inside.size and not mask[inside].all():
                            problems.append(f"{int((~mask[inside]).sum())} target ids of d2t are false in t2d")
    if problems:
        ck.add(
            "d2t-invalid", "error", f"The vocabulary mapping is invalid: {problems[0]}.", {**ev, "problems": problems}
        )
