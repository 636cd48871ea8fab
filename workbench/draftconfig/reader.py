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
from typing import TYPE_CHECKING, Any, cast

from workbench import strictjson
from workbench.draftconfig import schema
from workbench.draftconfig.safetensors_header import TensorInfo, read_header, read_tensor
from workbench.engine.draft import DraftFields, read_draft_fields
from workbench.errors import InputError
from workbench.results import Result

if TYPE_CHECKING:
    import numpy.typing as npt

CONFIG_NAME = "config.json"
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
_MISSING = object()


def load_json(path: str | Path, what: str = "JSON") -> Any:
    """Parse a JSON file strictly (finite numbers, bounded nesting); a one-line InputError naming
    the file, and the field or position, otherwise."""
    return strictjson.load_file(path, what)


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

    def __init__(self, data: dict[str, Any], file: str, problems: list[FieldProblem]):
        self.data, self.file, self.problems = data, file, problems

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def _bad(self, key: str, message: str) -> None:
        self.problems.append(FieldProblem(self.file, key, message))

    def typed(self, key: str) -> Any:
        """The value at ``key`` checked against its schema field; None (and a problem) otherwise."""
        v = self.raw(key, None)
        if v is None:
            return None
        try:
            return schema.validate(key, v)
        except InputError as exc:
            text = str(exc)
            self._bad(key, text[len(key) + 2 :] if text.startswith(key + ": ") else text)
            return None


def derived_context_length(cfg: dict[str, Any]) -> int | None:
    """SGLang's ``get_context_length``: first of the length keys, times the rope factor unless the
    scaling carries ``original_max_position_embeddings`` or is llama3-style. None when the value
    there is not a plausible length (the reader reports that field)."""
    factor = 1.0
    rs = cfg.get("rope_scaling")
    if isinstance(rs, dict) and rs:
        try:
            factor = schema.validate("rope_scaling.factor", rs.get("factor", 1))
        except InputError:
            return None
        if "original_max_position_embeddings" in rs or rs.get("rope_type") == "llama3":
            factor = 1
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings"):
        v = cfg.get(key)
        if v is not None:
            try:
                return int(factor * schema.validate(key, v))
            except InputError:
                return None
    return None


@dataclass
class DraftCheckpoint(Result):
    """A draft directory as read from disk. ``key_for[name]`` is the dotted config key of a field."""

    path: str
    config_file: str
    layout: str  # "sglang" (SpecForge/EAGLE) or "speculators"
    architectures: list[str]
    model_type: str | None
    is_eagle3: bool
    hidden_size: int | None
    target_hidden_size: int | None
    num_hidden_layers: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None
    head_dim: int | None
    intermediate_size: int | None
    vocab_size: int | None
    draft_vocab_size: int | None
    max_position_embeddings: int | None
    context_length: int | None
    tie_word_embeddings: bool | None
    layer_ids: list[int] | None  # eagle_config.eagle_aux_hidden_state_layer_ids
    top_level_layer_ids: list[int] | None  # top-level eagle_aux_hidden_state_layer_ids
    use_aux_hidden_state: bool | None
    num_aux_hidden_states: int | None
    norm_before_fc: bool | None
    fc_norm: bool | None
    bias: bool | None
    weight_files: list[str]
    weights_error: str | None
    problems: list[FieldProblem]
    key_for: dict[str, str]
    tensors: dict[str, TensorInfo] = field(default_factory=dict, metadata={"internal": True})
    config: dict[str, Any] = field(default_factory=dict, metadata={"internal": True})
    # what the engines' capture reads (ids where each reader looks, the variant switches): read once,
    # here, and asked by every capture check (``workbench.engine.draft_ids``)
    capture: DraftFields = field(default_factory=lambda: _no_fields(), metadata={"internal": True})

    def has_field(self, name: str) -> bool:
        return (
            self.key_for.get(name) is not None
            and _Fields(self.config, "", []).raw(self.key_for[name], _MISSING) is not _MISSING
        )

    def bad_fields(self) -> set[str]:
        return {p.field for p in self.problems}

    def tensor(self, name: str) -> npt.NDArray[Any]:
        """A small tensor as a numpy array (d2t, t2d, norms); InputError if absent or too big."""
        info = self.tensors.get(name)
        if info is None:
            raise InputError(f"{self.path}: no tensor named {name!r} in the weights")
        return read_tensor(self.path, info)

    def summary(self) -> dict[str, Any]:
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


def shard_name_problem(name: str) -> str | None:
    """Why an index's shard entry may not be opened (None when it is a file inside the checkpoint).

    Entries are file names relative to the checkpoint; an absolute path or a ``..`` would make the
    reader open any file on the host. Judged on the text, not the resolved path: shards are often
    symlinks into a download cache, which is fine once the name itself stays inside."""
    if not name or "\0" in name:
        return "is not a file name"
    pure = Path(name)
    if pure.is_absolute() or name.startswith(("/", "\\")) or ":" in pure.parts[0]:
        return "is an absolute path; expected a file name inside the checkpoint folder"
    if any(part == ".." for part in pure.parts) or "\\" in name:
        return "leaves the checkpoint folder; expected a file name inside it"
    return None


def read_weights(directory: Path) -> tuple[dict[str, TensorInfo], list[str], str | None]:
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
                bad = shard_name_problem(f)
                if bad:
                    return {}, files, f"{index}: weight_map: shard {f[:80]!r} {bad}"
            for f in files:
                shard = directory / f
                if not shard.is_file():
                    return {}, files, f"{index}: shard {f} is missing"
                infos, _ = read_header(shard)
                for info in infos.values():
                    info.file = f  # relative to the checkpoint, as the index names it
                tensors.update(infos)
            missing = sorted(n for n, f in wmap.items() if n not in tensors or tensors[n].file != f)
            if missing:
                return (
                    tensors,
                    files,
                    (f"{index}: {len(missing)} names not found in the shard the index names (first: {missing[0]})"),
                )
            return tensors, files, None
        single = directory / SINGLE_NAME
        files = [single] if single.is_file() else sorted(directory.glob("*.safetensors"))
        if not files:
            if (directory / "pytorch_model.bin").is_file():
                return (
                    {},
                    ["pytorch_model.bin"],
                    (f"{directory}: weights only in pytorch_model.bin (a pickle); names and shapes not inspected"),
                )
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


def read_draft(path: str | Path) -> DraftCheckpoint:
    """Read a draft directory (or its config.json); InputError only when no config can be read."""
    path = Path(path).expanduser()
    cfg_path = _find_config(path)
    directory = cfg_path.parent
    cfg = load_json(cfg_path, "config")
    if not isinstance(cfg, dict):
        raise InputError(f"{cfg_path}: expected a JSON object at the top level, got {type(cfg).__name__}")
    problems: list[FieldProblem] = []
    f = _Fields(cfg, str(cfg_path), problems)

    speculators = "speculators_model_type" in cfg or "transformer_layer_config" in cfg or "speculators_config" in cfg
    layout = "speculators" if speculators else "sglang"
    text_prefix = "transformer_layer_config." if speculators else ""
    if speculators:
        f.typed("transformer_layer_config")

    def tkey(name: str) -> str:
        return text_prefix + name

    key_for = {
        "architectures": "architectures",
        "model_type": tkey("model_type"),
        "hidden_size": tkey("hidden_size"),
        "target_hidden_size": "target_hidden_size",
        "num_hidden_layers": tkey("num_hidden_layers"),
        "num_attention_heads": tkey("num_attention_heads"),
        "num_key_value_heads": tkey("num_key_value_heads"),
        "head_dim": tkey("head_dim"),
        "intermediate_size": tkey("intermediate_size"),
        "vocab_size": tkey("vocab_size"),
        "draft_vocab_size": "draft_vocab_size",
        "max_position_embeddings": tkey("max_position_embeddings"),
        "tie_word_embeddings": tkey("tie_word_embeddings") if speculators else "tie_word_embeddings",
        "layer_ids": "eagle_config.eagle_aux_hidden_state_layer_ids",
        "top_level_layer_ids": "eagle_aux_hidden_state_layer_ids",
        "use_aux_hidden_state": "eagle_config.use_aux_hidden_state",
        "num_aux_hidden_states": "num_aux_hidden_states",
        "norm_before_fc": "norm_before_fc",
        "fc_norm": "fc_norm",
        "bias": "bias",
    }
    f.typed("eagle_config")
    archs = f.typed("architectures") or []
    spec_type = cfg.get("speculators_model_type")
    algo = None
    sc = cfg.get("speculators_config")
    if isinstance(sc, dict):
        algo = sc.get("algorithm")
    is_eagle3 = (
        any("eagle3" in a.lower() for a in archs) or str(spec_type).lower() == "eagle3" or str(algo).lower() == "eagle3"
    )
    text_cfg = f.raw("transformer_layer_config", {}) if speculators else cfg
    text_cfg = text_cfg if isinstance(text_cfg, dict) else {}

    ec = cast("dict[str, Any]", cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {})
    nbf = f.typed("eagle_config.norm_before_fc") if "norm_before_fc" in ec else f.typed("norm_before_fc")
    if "norm_before_fc" in ec:
        key_for["norm_before_fc"] = "eagle_config.norm_before_fc"
    fc_norm = f.typed("fc_norm")
    if fc_norm is None and "use_aux_norm" in cfg:
        fc_norm = f.typed("use_aux_norm")
        key_for["fc_norm"] = "use_aux_norm"

    tensors, files, werr = read_weights(directory)
    mt = f.raw(tkey("model_type"), None)
    _check_all(f, cfg)
    return DraftCheckpoint(
        path=str(directory),
        config_file=str(cfg_path),
        layout=layout,
        architectures=archs,
        model_type=mt if isinstance(mt, str) else None,
        is_eagle3=is_eagle3,
        hidden_size=f.typed(tkey("hidden_size")),
        target_hidden_size=f.typed("target_hidden_size"),
        num_hidden_layers=f.typed(tkey("num_hidden_layers")),
        num_attention_heads=f.typed(tkey("num_attention_heads")),
        num_key_value_heads=f.typed(tkey("num_key_value_heads")),
        head_dim=f.typed(tkey("head_dim")),
        intermediate_size=f.typed(tkey("intermediate_size")),
        vocab_size=f.typed(tkey("vocab_size")),
        draft_vocab_size=f.typed("draft_vocab_size"),
        max_position_embeddings=f.typed(tkey("max_position_embeddings")),
        context_length=derived_context_length(text_cfg),
        tie_word_embeddings=f.typed(key_for["tie_word_embeddings"]),
        layer_ids=f.typed("eagle_config.eagle_aux_hidden_state_layer_ids"),
        top_level_layer_ids=f.typed("eagle_aux_hidden_state_layer_ids"),
        use_aux_hidden_state=f.typed("eagle_config.use_aux_hidden_state"),
        num_aux_hidden_states=f.typed("num_aux_hidden_states"),
        norm_before_fc=nbf,
        fc_norm=fc_norm,
        bias=f.typed("bias"),
        weight_files=files,
        weights_error=werr,
        problems=_dedupe(problems),
        key_for=key_for,
        tensors=tensors,
        config=cfg,
        capture=read_draft_fields(cfg),
    )


def _no_fields() -> DraftFields:
    from workbench.engine.draft import DraftFields

    return DraftFields()


def _check_all(f: _Fields, cfg: dict[str, Any]) -> None:
    """Every typed field present is checked, also those no check reads (they would mislead SGLang)."""
    for key in schema.keys_in(cfg):
        f.typed(key)


def _dedupe(problems: list[FieldProblem]) -> list[FieldProblem]:
    seen, out = set(), []
    for p in problems:
        if (p.field, p.message) not in seen:
            seen.add((p.field, p.message))
            out.append(p)
    return out


@dataclass
class TargetInfo(Result):
    """The fields of a target's HF config.json the doctor uses (a multimodal wrapper's text config
    understood: ``workbench.engine.target.text_config_key``)."""

    path: str
    architectures: list[str]
    model_type: str | None
    arch: str | None  # what picks the engine's model file: architectures[0] or model_type
    num_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    max_position_embeddings: int | None
    context_length: int | None
    problems: list[FieldProblem]


def read_target(path: str | Path) -> TargetInfo:
    """A target's config.json (or the directory holding it)."""
    path = Path(path).expanduser()
    cfg_path = _find_config(path)
    cfg = load_json(cfg_path, "config")
    if not isinstance(cfg, dict):
        raise InputError(f"{cfg_path}: expected a JSON object at the top level, got {type(cfg).__name__}")
    problems: list[FieldProblem] = []
    f = _Fields(cfg, str(cfg_path), problems)
    from workbench.engine.target import TEXT_KEYS, text_config_key

    for k in TEXT_KEYS:
        f.typed(k)  # a sub-config that is not an object is a problem, named
    key = text_config_key(cfg)
    text = cfg[key] if key else None

    def pick_int(name: str) -> int | None:  # integer fields of the schema: validated as int
        if text is not None and name in text:
            return cast("int | None", f.typed(f"{key}.{name}"))
        return cast("int | None", f.typed(name))

    archs = f.typed("architectures") or []
    mt = cfg.get("model_type") if isinstance(cfg.get("model_type"), str) else None
    if not archs and text is not None and isinstance(text.get("architectures"), list):
        archs = [a for a in text["architectures"] if isinstance(a, str)]
    text_mt = (text or {}).get("model_type")
    arch = archs[0] if archs else (mt or (text_mt if isinstance(text_mt, str) else None))
    _check_all(f, cfg)
    ctx_src = (
        text
        if text is not None and any(k in text for k in ("max_position_embeddings", "max_sequence_length", "seq_length"))
        else cfg
    )
    return TargetInfo(
        path=str(cfg_path),
        architectures=archs,
        model_type=mt,
        arch=arch,
        num_layers=pick_int("num_hidden_layers"),
        hidden_size=pick_int("hidden_size"),
        vocab_size=pick_int("vocab_size"),
        max_position_embeddings=pick_int("max_position_embeddings"),
        context_length=derived_context_length(ctx_src),
        problems=_dedupe(problems),
    )
