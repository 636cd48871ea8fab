"""The typed fields of draft and target ``config.json`` files: what each holds and what is plausible.

One table serves every reader and writer: the doctor's reader (a wrong value is a ``FieldProblem``),
the drafter's dimension derivation (a wrong value is an ``InputError``) and ``config set`` (a changed
value of the wrong type is refused before anything is written). Bounds are far above any real model
(hidden 65536, 1024 layers, a 4M vocabulary) and exist so that no count read from a file can make
the workbench allocate without limit: ``num_hidden_layers: 30000000`` is refused, not looped over.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import InputError
from workbench.numbers import Range, integer, number

MAX_LAYERS = 1024
MAX_HIDDEN = 1 << 16
MAX_VOCAB = 1 << 22
MAX_CONTEXT = 1 << 30
MAX_AUX = 64  # aux hidden states (drafter-input slots)
MAX_LIST = 64


class FieldError(InputError, ValueError):
    """A config field of the wrong type or out of range: an InputError for the faces, and a
    ValueError for callers that treat "the config cannot size this" as one case."""


@dataclass(frozen=True)
class Field:
    kind: str  # int | number | bool | str | str-list | int-list | object
    where: Range = field(default_factory=Range)
    max_items: int = MAX_LIST

    def expected(self) -> str:
        if self.kind == "int":
            if self.where.lo == 1 and not self.where.lo_open and self.where.hi is not None:
                return f"a positive integer (at most {int(self.where.hi)})"
            return f"an integer {self.where.describe()}"
        if self.kind == "number":
            return f"a number {self.where.describe()}"
        if self.kind == "int-list":
            return f"a list of integers like [2, 30, 58] (at most {self.max_items})"
        return {"bool": "true or false", "str": "a string", "str-list": "a list of strings", "object": "an object"}[
            self.kind
        ]


_DIM = Field("int", Range(1, MAX_HIDDEN))
_LAYERS = Field("int", Range(1, MAX_LAYERS))
_HEADS = Field("int", Range(1, 4096))
_VOCAB = Field("int", Range(1, MAX_VOCAB))
_CONTEXT = Field("int", Range(1, MAX_CONTEXT))
_BOOL = Field("bool")
_IDS = Field("int-list", Range(-MAX_LAYERS, 4 * MAX_LAYERS), max_items=MAX_AUX)

# Leaf name -> field. Keys are also found under ``transformer_layer_config.`` (speculators) and
# ``text_config.`` (multimodal targets); ``eagle_config.`` holds the EAGLE-3 keys SGLang reads.
FIELDS: dict[str, Field] = {
    "hidden_size": _DIM,
    "target_hidden_size": _DIM,
    "head_dim": Field("int", Range(1, 4096)),
    "intermediate_size": Field("int", Range(1, 1 << 20)),
    "num_hidden_layers": _LAYERS,
    "num_attention_heads": _HEADS,
    "num_key_value_heads": _HEADS,
    "vocab_size": _VOCAB,
    "draft_vocab_size": _VOCAB,
    "max_position_embeddings": _CONTEXT,
    "max_sequence_length": _CONTEXT,
    "seq_length": _CONTEXT,
    "max_seq_len": _CONTEXT,
    "model_max_length": _CONTEXT,
    "num_aux_hidden_states": Field("int", Range(1, MAX_AUX)),
    "rms_norm_eps": Field("number", Range(0, 1, lo_open=True)),
    "rope_theta": Field("number", Range(0, 1e15, lo_open=True)),
    "tie_word_embeddings": _BOOL,
    "use_aux_hidden_state": _BOOL,
    "norm_before_fc": _BOOL,
    "fc_norm": _BOOL,
    "use_aux_norm": _BOOL,
    "bias": _BOOL,
    "attention_bias": _BOOL,
    "architectures": Field("str-list", max_items=MAX_LIST),
    "model_type": Field("str"),
    "eagle_aux_hidden_state_layer_ids": _IDS,
    "eagle_config": Field("object"),
    "transformer_layer_config": Field("object"),
    "text_config": Field("object"),
    "language_config": Field("object"),
    "llm_config": Field("object"),
    "rope_scaling.factor": Field("number", Range(0, 1024, lo_open=True)),
    "rope_scaling.original_max_position_embeddings": _CONTEXT,
}
_PREFIXES = ("transformer_layer_config.", "text_config.", "language_config.", "llm_config.", "eagle_config.")


def field_for(key: str) -> Field | None:
    """The field a dotted config key names (``eagle_config.eagle_aux_hidden_state_layer_ids``,
    ``transformer_layer_config.hidden_size``), or None for keys without a type."""
    for prefix in _PREFIXES:
        if key.startswith(prefix) and key[len(prefix) :] in FIELDS:
            return FIELDS[key[len(prefix) :]]
    return FIELDS.get(key)


def describe(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return f"{type(value).__name__} {text[:40]}"


def validate(key: str, value: Any, f: Field | None = None) -> Any:
    """``value`` checked against the field ``key`` names; an ``InputError`` "key: expected ..., got ...".
    Numbers from JSON: ``16`` is an integer, ``16.0``, ``16.5`` and ``"16"`` are not."""
    f = f or field_for(key)
    if f is None:
        return value
    try:
        return _validate(key, value, f)
    except FieldError:
        raise
    except InputError as exc:
        raise FieldError(str(exc)) from None


def _validate(key: str, value: Any, f: Field) -> Any:
    ok = True
    if f.kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            ok = False
        else:
            v = integer(value, key, Range(), allow_str=False)  # digits bounded
            if not f.where.holds(v):
                raise FieldError(f"{key}: {v} is out of range; expected {f.expected()}")
            return v
    elif f.kind == "number":
        if isinstance(value, (str, bool)) or not isinstance(value, (int, float)):
            ok = False
        else:
            return number(value, key, f.where, allow_str=False)
    elif f.kind == "bool":
        ok = isinstance(value, bool)
    elif f.kind == "str":
        ok = isinstance(value, str)
    elif f.kind == "object":
        ok = isinstance(value, dict)
    elif f.kind == "str-list":
        ok = isinstance(value, list) and len(value) <= f.max_items and all(isinstance(v, str) for v in value)
    elif f.kind == "int-list":
        ok = (
            isinstance(value, list)
            and len(value) <= f.max_items
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        )
        if ok:
            for i, v in enumerate(value):
                integer(v, f"{key}[{i}]", f.where, allow_str=False)
    if not ok:
        raise FieldError(f"{key}: expected {f.expected()}, got {describe(value)}")
    return value


def keys_in(doc: Any) -> list[str]:
    """Every typed dotted key present in a config document (top level and the known sub-objects)."""
    out: list[str] = []
    if not isinstance(doc, dict):
        return out
    for k, v in doc.items():
        if k in FIELDS:
            out.append(k)
        if k == "rope_scaling" and isinstance(v, dict):
            out += [f"rope_scaling.{x}" for x in v if f"rope_scaling.{x}" in FIELDS]
        if k + "." in _PREFIXES and isinstance(v, dict):
            for inner in v:
                if inner in FIELDS:
                    out.append(f"{k}.{inner}")
                if inner == "rope_scaling" and isinstance(v[inner], dict):
                    out += [f"{k}.rope_scaling.{x}" for x in v[inner] if f"rope_scaling.{x}" in FIELDS]
    return out


def lookup(doc: Any, key: str, default: Any = None) -> Any:
    node = doc
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


_ABSENT = object()


def check_changes(before: Any, after: Any, where: str) -> None:
    """Refuse a typed field whose value the edit changed to something of the wrong type or out of
    range, wherever the edit reached it (``ids.0="abc"``, a whole ``eagle_config={...}``).
    Fields the edit left alone are not judged (an old mistake does not block a fix elsewhere)."""
    for key in keys_in(after):
        new = lookup(after, key, _ABSENT)
        if new is _ABSENT or _same(lookup(before, key, _ABSENT), new):
            continue
        try:
            validate(key, new)
        except InputError as exc:
            raise InputError(f"{where}: {exc} (use force to write it anyway)") from None


def _same(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return type(a) is type(b) and _canon(a) == _canon(b)


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=repr)  # NaN == NaN here, True != 1
