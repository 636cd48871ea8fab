"""Read a draft checkpoint directory (config + weight headers) and a target's HF config.

Nothing here loads weight data: names, shapes and dtypes come from the safetensors headers; small
tensors (``d2t``, ``t2d``) are read on demand. Typed fields are validated as they are read; a
wrong type becomes a ``FieldProblem`` (file, dotted field, what was expected) rather than an
exception, so the doctor can still run every check that does not depend on that field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from workbench.draftconfig.safetensors_header import TensorInfo, read_header, read_tensor
from workbench.errors import InputError
from workbench.results import Result

CONFIG_NAME = "config.json"
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
_MISSING = object()


def load_json(path: "str | Path", what: str = "JSON") -> Any:
    """Parse a JSON file; a one-line InputError naming the file and the position otherwise."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a {what} file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


@dataclass
class FieldProblem(Result):
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return f"{type(value).__name__} {text[:40]}"


class _Fields:
    """Typed lookups into a JSON object by dotted key; wrong types are recorded, not raised."""

    def __init__(self, data: dict, file: str, problems: list):
        self.data, self.file, self.problems = data, file, problems

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def _bad(self, key: str, expected: str, value: Any) -> None:
        self.problems.append(FieldProblem(self.file, key, f"expected {expected}, got {_describe(value)}"))

    def int(self, key: str, *, minimum: int = 0) -> Optional[int]:
        v = self.raw(key, None)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            self._bad(key, f"an integer >= {minimum}", v)
            return None
        return v

    def bool(self, key: str) -> Optional[bool]:
        v = self.raw(key, None)
        if v is None:
            return None
        if not isinstance(v, bool):
            self._bad(key, "true or false", v)
            return None
        return v

    def str_list(self, key: str) -> Optional[list[str]]:
        v = self.raw(key, None)
        if v is None:
            return None
        if not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            self._bad(key, "a list of strings", v)
            return None
        return v

    def int_list(self, key: str) -> Optional[list[int]]:
        v = self.raw(key, None)
        if v is None:
            return None
        if not (isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
            self._bad(key, "a list of integers like [2, 30, 58]", v)
            return None
        return v

    def dict(self, key: str) -> Optional[dict]:
        v = self.raw(key, None)
        if v is None:
            return None
        if not isinstance(v, dict):
            self._bad(key, "an object", v)
            return None
        return v


def derived_context_length(cfg: dict) -> Optional[int]:
    """SGLang's ``get_context_length``: first of the length keys, times the rope factor unless the
    scaling carries ``original_max_position_embeddings`` or is llama3-style."""
    factor = 1.0
    rs = cfg.get("rope_scaling")
    if isinstance(rs, dict) and rs:
        f = rs.get("factor", 1)
        factor = f if isinstance(f, (int, float)) and not isinstance(f, bool) else 1
        if "original_max_position_embeddings" in rs or rs.get("rope_type") == "llama3":
            factor = 1
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                "max_position_embeddings"):
        v = cfg.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(factor * v)
    return None


@dataclass
class DraftCheckpoint(Result):
    """A draft directory as read from disk. ``key_for[name]`` is the dotted config key of a field."""

    path: str
    config_file: str
    layout: str                                   # "sglang" (SpecForge/EAGLE) or "speculators"
    architectures: list[str]
    model_type: Optional[str]
    is_eagle3: bool
    hidden_size: Optional[int]
    target_hidden_size: Optional[int]
    num_hidden_layers: Optional[int]
    num_attention_heads: Optional[int]
    num_key_value_heads: Optional[int]
    head_dim: Optional[int]
    intermediate_size: Optional[int]
    vocab_size: Optional[int]
    draft_vocab_size: Optional[int]
    max_position_embeddings: Optional[int]
    context_length: Optional[int]
    tie_word_embeddings: Optional[bool]
    layer_ids: Optional[list[int]]               # eagle_config.eagle_aux_hidden_state_layer_ids
    top_level_layer_ids: Optional[list[int]]     # top-level eagle_aux_hidden_state_layer_ids
    use_aux_hidden_state: Optional[bool]
    num_aux_hidden_states: Optional[int]
    norm_before_fc: Optional[bool]
    fc_norm: Optional[bool]
    bias: Optional[bool]
    weight_files: list[str]
    weights_error: Optional[str]
    problems: list[FieldProblem]
    key_for: dict[str, str]
    tensors: dict[str, TensorInfo] = field(default_factory=dict, metadata={"internal": True})
    config: dict = field(default_factory=dict, metadata={"internal": True})

    def has_field(self, name: str) -> bool:
        return self.key_for.get(name) is not None and _Fields(self.config, "", []).raw(
            self.key_for[name], _MISSING) is not _MISSING

    def bad_fields(self) -> set[str]:
        return {p.field for p in self.problems}

    def tensor(self, name: str):
        """A small tensor as a numpy array (d2t, t2d, norms); InputError if absent or too big."""
        info = self.tensors.get(name)
        if info is None:
            raise InputError(f"{self.path}: no tensor named {name!r} in the weights")
        return read_tensor(self.path, info)

    def summary(self) -> dict:
        d = self.to_dict()
        d["tensor_count"] = len(self.tensors)
        return d


def _find_config(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.exists():
        raise InputError(f"{path}: no such directory")
    cfg = path / CONFIG_NAME
    if not cfg.is_file():
        raise InputError(f"{path}: no {CONFIG_NAME} in this directory")
    return cfg


def read_weights(directory: Path) -> tuple[dict[str, TensorInfo], list[str], Optional[str]]:
    """Headers of the draft's safetensors: (tensors, files, error). Never raises for bad weights."""
    index = directory / INDEX_NAME
    try:
        if index.is_file():
            data = load_json(index, "index")
            wmap = data.get("weight_map") if isinstance(data, dict) else None
            if not isinstance(wmap, dict) or not all(isinstance(v, str) for v in wmap.values()):
                return {}, [INDEX_NAME], f"{index}: weight_map: expected an object of name -> shard file"
            tensors: dict[str, TensorInfo] = {}
            files = sorted(set(wmap.values()))
            for f in files:
                shard = directory / f
                if not shard.is_file():
                    return {}, files, f"{index}: shard {f} is missing"
                infos, _ = read_header(shard)
                tensors.update(infos)
            missing = sorted(n for n, f in wmap.items() if n not in tensors or tensors[n].file != f)
            if missing:
                return tensors, files, (f"{index}: {len(missing)} names not found in the shard the index "
                                        f"names (first: {missing[0]})")
            return tensors, files, None
        single = directory / SINGLE_NAME
        files = [single] if single.is_file() else sorted(directory.glob("*.safetensors"))
        if not files:
            if (directory / "pytorch_model.bin").is_file():
                return {}, ["pytorch_model.bin"], (f"{directory}: weights only in pytorch_model.bin (a pickle); "
                                                   "names and shapes not inspected")
            return {}, [], f"{directory}: no {SINGLE_NAME} or {INDEX_NAME}"
        tensors = {}
        names = [f.name for f in files]
        for f in files:
            try:
                infos, _ = read_header(f)
            except InputError as exc:
                return {}, names, str(exc)
            tensors.update(infos)
        return tensors, names, None
    except InputError as exc:
        return {}, [INDEX_NAME] if index.is_file() else [], str(exc)


def read_draft(path: "str | Path") -> DraftCheckpoint:
    """Read a draft directory (or its config.json); InputError only when no config can be read."""
    path = Path(path).expanduser()
    cfg_path = _find_config(path)
    directory = cfg_path.parent
    cfg = load_json(cfg_path, "config")
    if not isinstance(cfg, dict):
        raise InputError(f"{cfg_path}: expected a JSON object at the top level, got {type(cfg).__name__}")
    problems: list[FieldProblem] = []
    f = _Fields(cfg, str(cfg_path), problems)

    speculators = "speculators_model_type" in cfg or "transformer_layer_config" in cfg \
        or "speculators_config" in cfg
    layout = "speculators" if speculators else "sglang"
    text_prefix = "transformer_layer_config." if speculators else ""
    if speculators:
        f.dict("transformer_layer_config")

    def tkey(name: str) -> str:
        return text_prefix + name

    key_for = {
        "architectures": "architectures", "model_type": tkey("model_type"),
        "hidden_size": tkey("hidden_size"), "target_hidden_size": "target_hidden_size",
        "num_hidden_layers": tkey("num_hidden_layers"), "num_attention_heads": tkey("num_attention_heads"),
        "num_key_value_heads": tkey("num_key_value_heads"), "head_dim": tkey("head_dim"),
        "intermediate_size": tkey("intermediate_size"), "vocab_size": tkey("vocab_size"),
        "draft_vocab_size": "draft_vocab_size", "max_position_embeddings": tkey("max_position_embeddings"),
        "tie_word_embeddings": tkey("tie_word_embeddings") if speculators else "tie_word_embeddings",
        "layer_ids": "eagle_config.eagle_aux_hidden_state_layer_ids",
        "top_level_layer_ids": "eagle_aux_hidden_state_layer_ids",
        "use_aux_hidden_state": "eagle_config.use_aux_hidden_state",
        "num_aux_hidden_states": "num_aux_hidden_states",
        "norm_before_fc": "norm_before_fc", "fc_norm": "fc_norm", "bias": "bias",
    }
    f.dict("eagle_config")
    archs = f.str_list("architectures") or []
    spec_type = cfg.get("speculators_model_type")
    algo = None
    sc = cfg.get("speculators_config")
    if isinstance(sc, dict):
        algo = sc.get("algorithm")
    is_eagle3 = any("eagle3" in a.lower() for a in archs) or str(spec_type).lower() == "eagle3" \
        or str(algo).lower() == "eagle3"
    text_cfg = f.raw("transformer_layer_config", {}) if speculators else cfg
    text_cfg = text_cfg if isinstance(text_cfg, dict) else {}

    ec = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    nbf = f.bool("eagle_config.norm_before_fc") if "norm_before_fc" in ec else f.bool("norm_before_fc")
    if "norm_before_fc" in ec:
        key_for["norm_before_fc"] = "eagle_config.norm_before_fc"
    fc_norm = f.bool("fc_norm")
    if fc_norm is None and "use_aux_norm" in cfg:
        fc_norm = f.bool("use_aux_norm")
        key_for["fc_norm"] = "use_aux_norm"

    tensors, files, werr = read_weights(directory)
    mt = f.raw(tkey("model_type"), None)
    return DraftCheckpoint(
        path=str(directory), config_file=str(cfg_path), layout=layout, architectures=archs,
        model_type=mt if isinstance(mt, str) else None, is_eagle3=is_eagle3,
        hidden_size=f.int(tkey("hidden_size"), minimum=1),
        target_hidden_size=f.int("target_hidden_size", minimum=1),
        num_hidden_layers=f.int(tkey("num_hidden_layers"), minimum=1),
        num_attention_heads=f.int(tkey("num_attention_heads"), minimum=1),
        num_key_value_heads=f.int(tkey("num_key_value_heads"), minimum=1),
        head_dim=f.int(tkey("head_dim"), minimum=1),
        intermediate_size=f.int(tkey("intermediate_size"), minimum=1),
        vocab_size=f.int(tkey("vocab_size"), minimum=1),
        draft_vocab_size=f.int("draft_vocab_size", minimum=1),
        max_position_embeddings=f.int(tkey("max_position_embeddings"), minimum=1),
        context_length=derived_context_length(text_cfg),
        tie_word_embeddings=f.bool(key_for["tie_word_embeddings"]),
        layer_ids=f.int_list("eagle_config.eagle_aux_hidden_state_layer_ids"),
        top_level_layer_ids=f.int_list("eagle_aux_hidden_state_layer_ids"),
        use_aux_hidden_state=f.bool("eagle_config.use_aux_hidden_state"),
        num_aux_hidden_states=f.int("num_aux_hidden_states", minimum=1),
        norm_before_fc=nbf, fc_norm=fc_norm, bias=f.bool("bias"),
        weight_files=files, weights_error=werr, problems=_dedupe(problems), key_for=key_for,
        tensors=tensors, config=cfg,
    )


def _dedupe(problems: list[FieldProblem]) -> list[FieldProblem]:
    seen, out = set(), []
    for p in problems:
        if (p.field, p.message) not in seen:
            seen.add((p.field, p.message))
            out.append(p)
    return out


@dataclass
class TargetInfo(Result):
    """The fields of a target's HF config.json the doctor uses (``text_config`` understood)."""

    path: str
    architectures: list[str]
    model_type: Optional[str]
    arch: Optional[str]                # what picks the engine's model file: architectures[0] or model_type
    num_layers: Optional[int]
    hidden_size: Optional[int]
    vocab_size: Optional[int]
    max_position_embeddings: Optional[int]
    context_length: Optional[int]
    problems: list[FieldProblem]


def read_target(path: "str | Path") -> TargetInfo:
    """A target's config.json (or the directory holding it)."""
    path = Path(path).expanduser()
    cfg_path = _find_config(path)
    cfg = load_json(cfg_path, "config")
    if not isinstance(cfg, dict):
        raise InputError(f"{cfg_path}: expected a JSON object at the top level, got {type(cfg).__name__}")
    problems: list[FieldProblem] = []
    f = _Fields(cfg, str(cfg_path), problems)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else None
    f.dict("text_config")

    def pick_int(name: str) -> Optional[int]:
        if text is not None and name in text:
            return f.int(f"text_config.{name}", minimum=1)
        return f.int(name, minimum=1)

    archs = f.str_list("architectures") or []
    mt = cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else None
    if not archs and text is not None:
        archs = [a for a in (text.get("architectures") or []) if isinstance(a, str)]
    arch = archs[0] if archs else (mt or (text or {}).get("model_type"))
    ctx_src = text if text is not None and any(
        k in text for k in ("max_position_embeddings", "max_sequence_length", "seq_length")) else cfg
    return TargetInfo(
        path=str(cfg_path), architectures=archs, model_type=mt, arch=arch,
        num_layers=pick_int("num_hidden_layers"), hidden_size=pick_int("hidden_size"),
        vocab_size=pick_int("vocab_size"), max_position_embeddings=pick_int("max_position_embeddings"),
        context_length=derived_context_length(ctx_src), problems=_dedupe(problems),
    )
