"""Read, check and write SGLang-format EAGLE-3 draft checkpoints (``config.json`` + ``model.safetensors``).

SGLang's loader silently drops unknown weight names and never reports missing ones; this module is
strict instead.

API:

- ``make_config(target_config, layer_ids, draft_vocab_size, **overrides) -> dict``: an SGLang draft
  ``config.json`` for a target (``architectures: ["LlamaForCausalLMEagle3"]``, ``eagle_config``).
- ``read_config(dir) -> dict``; ``read_tensors(dir) -> {name: tensor}`` (``model.safetensors``, or
  ``pytorch_model.bin`` through ``torch.load(weights_only=True)``); ``read_tensor_shapes(dir)``:
  their shapes and dtypes from the safetensors headers (no weights read, no torch), for a check.
- ``check_weights(config, names_and_shapes) -> WeightReport``: missing / unexpected / mis-shaped
  against ``names.expected_weights``; accepts ``midlayer.*`` and ``layers.0.*`` naming.
- ``load_drafter(dir, embed=None, strict=True) -> (Eagle3Drafter, WeightReport)``; with ``strict``
  a report that is not ``ok`` raises ``InputError`` naming the first problem.
- ``save_drafter(model, dir, config=None)``: writes ``config.json`` and ``model.safetensors``
  (SGLang names, no shared embedding), each atomically (temp file + rename).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.drafter import names as N
from workbench.errors import InputError
from workbench.results import Result

if TYPE_CHECKING:
    import torch

    from workbench.drafter.model import Eagle3Drafter

CONFIG = "config.json"
WEIGHTS = "model.safetensors"


@dataclass
class WeightReport(Result):
    naming: str = N.SGLANG
    missing: list[str] = field(default_factory=list)  # required, absent
    optional_missing: list[str] = field(default_factory=list)  # optional, absent (e.g. embed_tokens)
    unexpected: list[str] = field(default_factory=list)  # present, not expected (SGLang drops them)
    mismatched: list[dict[str, Any]] = field(default_factory=list)  # {"name", "expected", "actual"}
    present: int = 0
    layout: str = N.SGLANG  # config layout: "sglang" or "speculators"
    variants: list[str] = field(default_factory=list)  # variants.explain: one line per variant
    unsupported: str | None = None  # a flag the forward does not implement

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched or self.unsupported)

    def first_problem(self) -> str:
        if self.unsupported:
            return self.unsupported
        if self.missing:
            return f"missing weight {self.missing[0]}"
        if self.mismatched:
            m = self.mismatched[0]
            return f"weight {m['name']} has shape {m['actual']}, expected {m['expected']}"
        if self.unexpected:
            return f"unexpected weight {self.unexpected[0]} (SGLang would silently drop it)"
        return ""


def make_config(
    target_config: Mapping[str, Any], layer_ids: list[int], draft_vocab_size: int, **overrides: Any
) -> dict[str, Any]:
    """SGLang draft config for a Llama-like target; fields follow SpecForge's ``configs/*-eagle3.json``."""
    H = int(target_config["hidden_size"])
    heads = int(target_config["num_attention_heads"])
    cfg: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": H,
        "target_hidden_size": H,
        "num_hidden_layers": 1,
        "num_attention_heads": heads,
        "num_key_value_heads": int(target_config.get("num_key_value_heads") or heads),
        "head_dim": int(target_config.get("head_dim") or H // heads),
        "intermediate_size": int(target_config["intermediate_size"]),
        "hidden_act": "silu",
        "rms_norm_eps": float(target_config.get("rms_norm_eps") or 1e-6),
        "max_position_embeddings": int(target_config.get("max_position_embeddings") or 2048),
        "rope_theta": float(target_config.get("rope_theta") or 10000.0),
        "rope_scaling": None,
        "vocab_size": int(target_config["vocab_size"]),
        "draft_vocab_size": int(draft_vocab_size),
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": target_config.get("bos_token_id"),
        "eos_token_id": target_config.get("eos_token_id"),
        "pad_token_id": target_config.get("pad_token_id"),
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(layer_ids), "use_aux_hidden_state": True},
    }
    cfg.update(overrides)
    return cfg


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    from workbench import strictjson

    p = Path(path) / CONFIG if Path(path).is_dir() else Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file; expected a draft config.json")
    data = strictjson.load_file(p, "draft config")  # standard JSON, finite numbers, bounded nesting
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a JSON object")
    return data


def read_tensors(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    d = Path(path)
    st = d / WEIGHTS
    if st.exists():
        from safetensors.torch import load_file

        try:
            return dict(load_file(str(st)))
        except Exception as exc:  # corrupt / truncated file
            raise InputError(f"{st}: cannot read safetensors ({' '.join(str(exc).split())[:160]})") from None
    shards = sorted(d.glob("model-*.safetensors"))
    if shards:
        from safetensors.torch import load_file

        out: dict[str, torch.Tensor] = {}
        for s in shards:
            try:
                out.update(load_file(str(s)))
            except Exception as exc:  # corrupt / truncated shard
                raise InputError(f"{s}: cannot read safetensors ({' '.join(str(exc).split())[:160]})") from None
        return out
    binf = d / "pytorch_model.bin"
    if binf.exists():
        import torch

        try:
            return dict(torch.load(str(binf), map_location="cpu", weights_only=True))
        except Exception as exc:
            raise InputError(f"{binf}: cannot read ({' '.join(str(exc).split())[:160]})") from None
    raise InputError(f"{d}: no model.safetensors or pytorch_model.bin")


# The dtypes whose torch names the header path gives (what ``str(tensor.dtype)`` says after loading);
# a file with any other dtype is loaded, so its names come from torch itself.
_TORCH_DTYPE = {
    "F64": "torch.float64",
    "F32": "torch.float32",
    "F16": "torch.float16",
    "BF16": "torch.bfloat16",
    "I64": "torch.int64",
    "I32": "torch.int32",
    "I16": "torch.int16",
    "I8": "torch.int8",
    "U8": "torch.uint8",
    "BOOL": "torch.bool",
}


@dataclass(frozen=True)
class TensorShape:
    """What ``check_weights`` reads of a tensor: its shape and its dtype as torch names it."""

    shape: tuple[int, ...]
    dtype: str


def read_tensor_shapes(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """``read_tensors`` for a check: each tensor's shape and dtype from the safetensors headers,
    without reading the weights or importing torch. Where the header reader and safetensors' own
    loader could disagree (a header the strict reader refuses, tensors not back to back from the
    start of the data section to the end of the file, a dtype outside the common ones, a name that
    is not UTF-8) the weights are loaded as ``read_tensors`` loads them, so what the loader says
    (an error, or the tensors) is the answer; so is a ``pytorch_model.bin``."""
    d = Path(path)
    st = d / WEIGHTS
    files = [st] if st.exists() else sorted(d.glob("model-*.safetensors"))
    out: dict[str, Any] = {}
    for f in files:
        shapes = _header_shapes(f)
        if shapes is None:
            return read_tensors(path)
        out.update(shapes)
    return out if files else read_tensors(path)


def _header_shapes(path: Path) -> dict[str, TensorShape] | None:
    """The tensors of one safetensors file in the loader's order (by offset), or None where only
    the loader can say."""
    import struct

    from workbench.draftconfig.safetensors_header import read_header

    try:
        infos, meta = read_header(path)
        size = path.stat().st_size
        with open(path, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
        for text in [*infos, *meta, *meta.values()]:
            text.encode("utf-8")  # a lone surrogate: JSON's escapes allow it, the loader not
    except (InputError, OSError, struct.error, UnicodeEncodeError):
        return None
    pos = 8 + n  # the loader's checks beyond the header reader's
    for info in sorted(infos.values(), key=lambda i: (i.offset, i.offset + i.nbytes, i.name)):
        if info.offset != pos or info.dtype not in _TORCH_DTYPE:
            return None
        pos += info.nbytes
    if pos != size:
        return None
    return {
        i.name: TensorShape(tuple(i.shape), _TORCH_DTYPE[i.dtype])
        for i in sorted(infos.values(), key=lambda i: (i.offset, i.offset + i.nbytes, i.name))
    }


def _kind(t: object) -> str:
    s = str(getattr(t, "dtype", ""))
    if "bool" in s:
        return "bool"
    if "int" in s:
        return "int64"
    return "float"


def check_weights(config: dict[str, Any], tensors: Mapping[str, Any], source: str = CONFIG) -> WeightReport:
    """Compare tensors (or ``{name: shape}``) with what the config implies; names normalised to SGLang.
    ``source`` names the config file in errors."""
    try:
        expected = N.expected_weights(config)
    except KeyError as exc:
        raise InputError(f"{source}: cannot derive weight shapes (no {exc.args[0]})") from None
    except (ValueError, TypeError) as exc:
        raise InputError(f"{source}: cannot derive weight shapes ({exc!s})") from None
    from workbench.drafter import variants as V

    layers = N.draft_dims(config).num_layers
    rep = WeightReport(
        naming=N.detect_naming(tensors.keys()),
        layout=V.layout(config),
        variants=V.explain(config),
        unsupported=V.unsupported(config),
    )
    seen = set()
    for raw, t in tensors.items():
        name = N.to_sglang(raw, layers)
        seen.add(name)
        spec = expected.get(name)
        if spec is None:
            rep.unexpected.append(raw)
            continue
        shape = tuple(t) if isinstance(t, (tuple, list)) else tuple(t.shape)
        if shape != tuple(spec.shape):
            rep.mismatched.append({"name": raw, "expected": list(spec.shape), "actual": list(shape)})
        elif not isinstance(t, (tuple, list)) and spec.kind != "float" and _kind(t) == "float":
            rep.mismatched.append(
                {"name": raw, "expected": f"{spec.kind} {list(spec.shape)}", "actual": f"{t.dtype} {list(shape)}"}
            )
        else:
            rep.present += 1
    for name, spec in expected.items():
        if name not in seen:
            (rep.missing if spec.required else rep.optional_missing).append(name)
    return rep


def load_drafter(
    path: str | os.PathLike[str],
    embed: torch.Tensor | None = None,
    strict: bool = True,
    dtype: torch.dtype | None = None,
    convention: str | None = None,
) -> tuple[Eagle3Drafter, WeightReport]:
    """Build an ``Eagle3Drafter`` from an SGLang- or speculators-named checkpoint directory."""
    import torch

    from workbench.drafter.model import Eagle3Drafter, UnsupportedError

    config = read_config(path)
    tensors = read_tensors(path)
    report = check_weights(config, tensors)
    if strict and not report.ok:
        raise InputError(f"{path}: {report.first_problem()}")
    try:
        model = Eagle3Drafter(config, convention=convention)
    except UnsupportedError as exc:
        raise InputError(f"{Path(path) / CONFIG}: {exc}") from None
    layers = N.draft_dims(config).num_layers
    state = {N.to_sglang(k, layers): v for k, v in tensors.items()}
    own_embed = state.pop("embed_tokens.weight", None)
    if own_embed is not None:
        model.own_embedding(own_embed)
    elif embed is not None:
        model.set_embed(embed)
    if "t2d" not in state:  # optional on disk; derive it from d2t
        t2d = torch.zeros(model.dims.vocab, dtype=torch.bool)
        if "d2t" in state:
            ids = state["d2t"].long() + torch.arange(state["d2t"].numel())
            t2d[ids.clamp(0, model.dims.vocab - 1)] = True
        state["t2d"] = t2d
    keep = {k: v for k, v in state.items() if k in model.state_dict()}
    model.load_state_dict(keep, strict=False)
    if dtype is not None:
        model.to(dtype)
        model.d2t = model.d2t.long()
    return model.eval(), report


def _atomic_write(path: Path, write: Callable[[str], object]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_drafter(model: Eagle3Drafter, path: str | os.PathLike[str], config: dict[str, Any] | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` in SGLang naming; returns the directory."""
    from safetensors.torch import save_file

    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    cfg = dict(config if config is not None else model.config)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if model.embed_tokens is not None:
        state["embed_tokens.weight"] = model.embed_tokens.weight.detach().contiguous().cpu()
    _atomic_write(d / WEIGHTS, lambda tmp: save_file(state, tmp, metadata={"format": "pt"}))
    _atomic_write(d / CONFIG, lambda tmp: Path(tmp).write_text(json.dumps(cfg, indent=2) + "\n"))
    return d
