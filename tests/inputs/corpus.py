"""A corpus of malformed inputs, one builder per case, across every reader and command.

Each case writes its files under a fresh folder and returns a ``Spec``: the command line, the
words its one-line error must contain (the file and the field), and what outcome is expected.
Most cases are bad input (exit 2, one line on stderr); the doctor's cases are diagnoses of a
broken draft (exit 1, an error finding that names the file and the field, as its design says).
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.fixtures.drafts import TINY_DRAFT, TINY_TARGET, tiny_tensors
from workbench.draftconfig import write_safetensors

T, H, K = 6, 8, 3  # tokens, hidden width, drafter-input slots of the valid captures


@dataclass
class Spec:
    argv: list
    needles: list  # each must appear in the error line (file, field, rule)
    code: int = 2
    finding: str | None = None  # doctor: the finding code expected instead of a usage error
    forbidden_reads: list = field(default_factory=list)  # paths no reader may open


@dataclass
class Case:
    id: str
    group: str
    build: Callable[[Path], Spec]


CASES: list[Case] = []


def case(group: str, id: str):
    def deco(fn):
        CASES.append(Case(f"{group}:{id}", group, fn))
        return fn

    return deco


def cases(group: str, table: dict, build):
    for id, arg in table.items():
        CASES.append(Case(f"{group}:{id}", group, (lambda a: lambda root: build(root, a))(arg)))


# ------------------------------------------------------------------------------------------ helpers
def deep(n: int, open_="[", close="]", inner="1") -> str:
    return open_ * n + inner + close * n


def deep_obj(n: int) -> str:
    return '{"a":' * n + "1" + "}" * n


def draft_dir(root: Path, text: str | bytes | None = None, tensors=True, **changes) -> Path:
    d = root / "draft"
    d.mkdir(parents=True, exist_ok=True)
    cfg = copy.deepcopy(TINY_DRAFT)
    for key, value in changes.items():
        node = cfg
        parts = key.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    if text is None:
        text = json.dumps(cfg, indent=2)
    (d / "config.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    if tensors:
        write_safetensors(d / "model.safetensors", tiny_tensors())
    return d


def draft_text(**replace) -> str:
    """The tiny draft's config.json with raw JSON text spliced in for some values."""
    cfg = copy.deepcopy(TINY_DRAFT)
    marks = {}
    for i, (k, raw) in enumerate(replace.items()):
        marks[f"@@{i}@@"] = raw
        cfg[k] = f"@@{i}@@"
    text = json.dumps(cfg, indent=2)
    for m, raw in marks.items():
        text = text.replace(json.dumps(m), raw)
    return text


def target_file(root: Path, text: str | bytes | None = None, **changes) -> Path:
    p = root / "target" / "config.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = json.dumps({**TINY_TARGET, **changes})
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def st_bytes(header: dict | str | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    raw = header if isinstance(header, bytes) else (header if isinstance(header, str) else json.dumps(header)).encode()
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def good_train(root: Path) -> Path:
    """A valid SpecForge sample: K slots of width H over T tokens."""
    import torch

    g = torch.Generator().manual_seed(0)
    p = root / "train" / "data_0.ckpt"
    p.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "input_ids": torch.arange(T),
            "loss_mask": torch.ones(T, dtype=torch.long),
            "hidden_state": torch.randn(1, T, H, generator=g),
            "aux_hidden_state": torch.randn(1, T, K * H, generator=g),
        },
        p,
    )
    return p


def good_infer(root: Path) -> Path:
    """A valid named layer stack with token ids."""
    p = root / "infer" / "stack.safetensors"
    p.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    arrays = {"embed": rng.standard_normal((T, H), dtype=np.float32), "token_ids": np.arange(T, dtype=np.int64)}
    for k in range(4):
        arrays[f"layers.{k}"] = rng.standard_normal((T, H), dtype=np.float32)
    write_safetensors(p, arrays)
    return p


def specforge(root: Path, name: str = "data_0.ckpt", gz: bool = False, **items) -> Path:
    import torch

    g = torch.Generator().manual_seed(0)
    base = {
        "input_ids": torch.arange(T),
        "loss_mask": torch.ones(T, dtype=torch.long),
        "hidden_state": torch.randn(1, T, H, generator=g),
        "aux_hidden_state": torch.randn(1, T, K * H, generator=g),
    }
    for k, v in items.items():
        if v is _DROP:
            base.pop(k)
        else:
            base[k] = v
    p = root / "bad" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.save(base, buf)
    p.write_bytes(gzip.compress(buf.getvalue()) if gz else buf.getvalue())
    return p


class _Drop:
    pass


_DROP = _Drop()


def align_train(root: Path, train: Path, *needles, extra=()) -> Spec:
    return Spec(
        ["align", "--train", str(train), "--infer", str(good_infer(root)), "--device", "cpu", *extra],
        [train.name, *needles],
    )


def align_infer(root: Path, infer: Path, *needles, extra=()) -> Spec:
    return Spec(
        ["align", "--train", str(good_train(root)), "--infer", str(infer), "--device", "cpu", *extra],
        [infer.name, *needles],
    )


# ------------------------------------------------------------------------- draft config.json reader
MALFORMED_JSON = {
    "nan": draft_text(max_position_embeddings="NaN"),
    "infinity": draft_text(max_position_embeddings="Infinity"),
    "minus-infinity": draft_text(rope_theta="-Infinity"),
    "1e400": draft_text(max_position_embeddings="1e400"),
    "minus-1e400": draft_text(rms_norm_eps="-1e400"),
    "nan-in-list": draft_text(eagle_aux_hidden_state_layer_ids="[1, NaN, 3]"),
    "5000-digit-int": draft_text(hidden_size="1" * 5000),
    "deep-arrays-100000": draft_text(rope_scaling=deep(100000)),
    "deep-arrays-70": draft_text(rope_scaling=deep(70)),
    "deep-objects-5000": draft_text(rope_scaling=deep_obj(5000)),
    "trailing-comma": '{"hidden_size": 16,}',
    "truncated": json.dumps(TINY_DRAFT)[:57],
    "empty": "",
    "top-level-list": "[1, 2, 3]",
    "top-level-string": '"config"',
    "top-level-number": "16",
    "single-quotes": "{'hidden_size': 16}",
    "bom": "\ufeff" + json.dumps(TINY_DRAFT),
    "bad-escape": '{"model_type": "ll\\xama"}',
    "control-char": '{"model_type": "ll\nama"}',
    "nul-byte": '{"hidden_size": 16\x00}',
}
MALFORMED_NEEDLE = {
    "nan": "max_position_embeddings",
    "infinity": "max_position_embeddings",
    "minus-infinity": "rope_theta",
    "1e400": "max_position_embeddings",
    "minus-1e400": "rms_norm_eps",
    "nan-in-list": "eagle_aux_hidden_state_layer_ids[1]",
    "5000-digit-int": "hidden_size",
    "deep-arrays-100000": "nested",
    "deep-arrays-70": "nested",
    "deep-objects-5000": "nested",
}


def _malformed_draft(cmd):
    def build(root: Path, key: str) -> Spec:
        d = draft_dir(root, MALFORMED_JSON[key])
        argv = ["drafter", "check", "--draft", str(d)] if cmd == "check" else ["doctor", "--draft", str(d)]
        return Spec(argv, ["config.json", MALFORMED_NEEDLE.get(key, "JSON")])

    return build


cases("draft-json/drafter-check", {k: k for k in MALFORMED_JSON}, _malformed_draft("check"))
cases("draft-json/doctor", {k: k for k in MALFORMED_JSON}, _malformed_draft("doctor"))


@case("draft-json/drafter-check", "non-utf8")
def _(root):
    return Spec(
        ["drafter", "check", "--draft", str(draft_dir(root, b'{"model_type": "\xff\xfe"}'))], ["config.json", "UTF-8"]
    )


@case("draft-json/doctor", "non-utf8")
def _(root):
    return Spec(["doctor", "--draft", str(draft_dir(root, b'{"model_type": "\xff\xfe"}'))], ["config.json", "UTF-8"])


@case("draft-json/doctor", "config-is-a-directory")
def _(root):
    d = root / "draft"
    (d / "config.json").mkdir(parents=True)
    return Spec(["doctor", "--draft", str(d)], ["config.json", "no config.json"])


# Field values: `drafter check` sizes every tensor from them (exit 2); the doctor reports them as
# config-invalid findings (exit 1) and runs no check that depends on them.
BAD_FIELDS = {
    "hidden-size-string": ("hidden_size", "16"),
    "hidden-size-float": ("hidden_size", 16.5),
    "hidden-size-whole-float": ("hidden_size", 16.0),
    "hidden-size-bool": ("hidden_size", True),
    "hidden-size-zero": ("hidden_size", 0),
    "hidden-size-negative": ("hidden_size", -16),
    "hidden-size-huge": ("hidden_size", 10**12),
    "hidden-size-list": ("hidden_size", [16]),
    "layers-30-million": ("num_hidden_layers", 30000000),
    "layers-zero": ("num_hidden_layers", 0),
    "layers-string": ("num_hidden_layers", "1"),
    "heads-zero": ("num_attention_heads", 0),
    "heads-string": ("num_attention_heads", "2"),
    "kv-heads-zero": ("num_key_value_heads", 0),
    "head-dim-zero": ("head_dim", 0),
    "head-dim-huge": ("head_dim", 10**9),
    "intermediate-list": ("intermediate_size", []),
    "intermediate-huge": ("intermediate_size", 2**40),
    "vocab-zero": ("vocab_size", 0),
    "vocab-2-to-40": ("vocab_size", 2**40),
    "draft-vocab-string": ("draft_vocab_size", "x"),
    "aux-count-zero": ("num_aux_hidden_states", 0),
    "aux-count-huge": ("num_aux_hidden_states", 100000),
    "ids-string": ("eagle_config__eagle_aux_hidden_state_layer_ids", "2,30,58"),
    "ids-with-string": ("eagle_config__eagle_aux_hidden_state_layer_ids", [1, "a", 3]),
    "ids-with-bool": ("eagle_config__eagle_aux_hidden_state_layer_ids", [1, True, 3]),
    "ids-with-float": ("eagle_config__eagle_aux_hidden_state_layer_ids", [1, 2.5, 3]),
    "ids-too-many": ("eagle_config__eagle_aux_hidden_state_layer_ids", list(range(100))),
    "ids-huge-value": ("eagle_config__eagle_aux_hidden_state_layer_ids", [1, 10**15, 3]),
    "eagle-config-string": ("eagle_config", "x"),
    "bias-string": ("bias", "yes"),
    "tie-string": ("tie_word_embeddings", "false"),
    "norm-before-fc-int": ("norm_before_fc", 1),
}
_FIELD_NAME = {k: v[0].replace("__", ".") for k, v in BAD_FIELDS.items()}


def _field_check(root: Path, key: str) -> Spec:
    name, value = BAD_FIELDS[key]
    d = draft_dir(root, **{name: value})
    return Spec(["drafter", "check", "--draft", str(d)], ["config.json", _FIELD_NAME[key].split(".")[-1]])


def _field_doctor(root: Path, key: str) -> Spec:
    name, value = BAD_FIELDS[key]
    d = draft_dir(root, **{name: value})
    field_ = _FIELD_NAME[key]
    if key == "eagle-config-string":
        field_ = "eagle_config"
    return Spec(
        ["doctor", "--draft", str(d), "--target-config", str(target_file(root)), "--json"],
        ["config.json", field_],
        code=1,
        finding="config-invalid",
    )


cases("draft-fields/drafter-check", {k: k for k in BAD_FIELDS}, _field_check)
cases("draft-fields/doctor", {k: k for k in BAD_FIELDS}, _field_doctor)


@case("draft-fields/drafter-check", "no-intermediate-size")
def _(root):
    cfg = copy.deepcopy(TINY_DRAFT)
    del cfg["intermediate_size"]
    return Spec(
        ["drafter", "check", "--draft", str(draft_dir(root, json.dumps(cfg)))], ["config.json", "intermediate_size"]
    )


# ------------------------------------------------------------------------------ target HF config
TARGET_MALFORMED = {
    k: MALFORMED_JSON[k]
    for k in (
        "nan",
        "infinity",
        "1e400",
        "5000-digit-int",
        "deep-arrays-100000",
        "deep-arrays-70",
        "trailing-comma",
        "empty",
        "top-level-list",
        "bom",
    )
}


def _target_malformed(root: Path, key: str) -> Spec:
    t = target_file(root, TARGET_MALFORMED[key])
    return Spec(
        ["doctor", "--draft", str(draft_dir(root)), "--target-config", str(t)],
        ["target/config.json", MALFORMED_NEEDLE.get(key, "JSON")],
    )


cases("target-json/doctor", {k: k for k in TARGET_MALFORMED}, _target_malformed)

TARGET_FIELDS = {
    "layers-30-million": {"num_hidden_layers": 30000000},
    "layers-string": {"num_hidden_layers": "8"},
    "layers-float": {"num_hidden_layers": 8.5},
    "hidden-zero": {"hidden_size": 0},
    "vocab-huge": {"vocab_size": 2**40},
    "text-config-layers-huge": {"text_config": {"num_hidden_layers": 10**9}},
    "architectures-string": {"architectures": "LlamaForCausalLM"},
    "max-position-negative": {"max_position_embeddings": -1},
}


def _target_field(root: Path, key: str) -> Spec:
    t = target_file(root, **TARGET_FIELDS[key])
    name = next(iter(TARGET_FIELDS[key]))
    inner = TARGET_FIELDS[key][name]
    field_ = f"{name}.{next(iter(inner))}" if isinstance(inner, dict) else name
    return Spec(
        ["doctor", "--draft", str(draft_dir(root)), "--target-config", str(t), "--json"],
        ["target/config.json", field_],
        code=1,
        finding="config-invalid",
    )


cases("target-fields/doctor", {k: k for k in TARGET_FIELDS}, _target_field)

TARGET_FOR_ALIGN = {
    "layers-30-million": json.dumps({**TINY_TARGET, "num_hidden_layers": 30000000}),
    "layers-string": json.dumps({**TINY_TARGET, "num_hidden_layers": "8"}),
    "nan": json.dumps(TINY_TARGET).replace('"hidden_size": 16', '"hidden_size": NaN'),
    "deep": deep(100000),
    "not-json": "{",
}


def _target_align(root: Path, key: str) -> Spec:
    t = target_file(root, TARGET_FOR_ALIGN[key])
    needle = "num_hidden_layers" if key.startswith("layers") else ("hidden_size" if key == "nan" else "JSON")
    spec = align_infer(root, good_infer(root), extra=["--target", str(t)])
    spec.needles = ["target/config.json", needle]
    return spec


cases("target-json/align", {k: k for k in TARGET_FOR_ALIGN}, _target_align)


# ---------------------------------------------------------------------- safetensors header reader
F32_4 = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
HEADERS = {
    # name: (file bytes, needles)
    "shorter-than-8-bytes": (b"\x01\x02", ["8-byte length"]),
    "declared-length-zero": (st_bytes(b"", length=0), ["header length 0"]),
    "declared-length-past-end": (st_bytes(b"{}", length=10**6), ["header length"]),
    "declared-length-2-to-63": (st_bytes(b"{}", length=2**63), ["header length"]),
    "header-not-json": (st_bytes(b"{nope"), ["not JSON"]),
    "header-not-utf8": (st_bytes(b'{"\xff": 1}'), ["UTF-8"]),
    "header-nan": (st_bytes('{"w": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 16]}}', b"\0" * 16), ["NaN"]),
    "header-1e400": (
        st_bytes('{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1e400]}}', b"\0" * 16),
        ["not finite"],
    ),
    "header-deep": (st_bytes(deep(100000)), ["nested"]),
    "header-deep-70": (st_bytes('{"w": ' + deep(70) + "}"), ["nested"]),
    "header-5000-digit-offset": (
        st_bytes('{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, ' + "1" * 5000 + "]}}"),
        ["digit"],
    ),
    "header-top-level-list": (st_bytes([1, 2]), ["JSON object"]),
    "entry-not-object": (st_bytes({"w": [1, 2]}), ["'w'", "expected an object"]),
    "unknown-dtype-zero-bytes": (
        st_bytes({"w": {"dtype": "Q7", "shape": [0], "data_offsets": [0, 0]}}),
        ["'w'", "dtype"],
    ),
    "dtype-not-string": (st_bytes({"w": {**F32_4, "dtype": 4}}, b"\0" * 16), ["'w'", "dtype"]),
    "shape-string": (st_bytes({"w": {**F32_4, "shape": "4"}}, b"\0" * 16), ["'w'", "shape"]),
    "shape-float": (st_bytes({"w": {**F32_4, "shape": [4.0]}}, b"\0" * 16), ["'w'", "shape"]),
    "shape-negative": (st_bytes({"w": {**F32_4, "shape": [-4]}}, b"\0" * 16), ["'w'", "shape"]),
    "shape-bool": (st_bytes({"w": {**F32_4, "shape": [True]}}, b"\0" * 16), ["'w'", "shape"]),
    "shape-40-dims": (st_bytes({"w": {**F32_4, "shape": [1] * 40}}, b"\0" * 16), ["'w'", "shape"]),
    "shape-product-huge": (
        st_bytes({"w": {"dtype": "F32", "shape": [10**9] * 8, "data_offsets": [0, 16]}}, b"\0" * 16),
        ["'w'", "bytes"],
    ),
    "offsets-reversed": (st_bytes({"w": {**F32_4, "data_offsets": [16, 0]}}, b"\0" * 16), ["'w'", "data_offsets"]),
    "offsets-past-end": (st_bytes({"w": {**F32_4, "data_offsets": [0, 64]}}, b"\0" * 16), ["'w'", "data_offsets"]),
    "offsets-float": (st_bytes({"w": {**F32_4, "data_offsets": [0.0, 16.0]}}, b"\0" * 16), ["'w'", "data_offsets"]),
    "offsets-three": (st_bytes({"w": {**F32_4, "data_offsets": [0, 8, 16]}}, b"\0" * 16), ["'w'", "data_offsets"]),
    "offsets-missing": (st_bytes({"w": {"dtype": "F32", "shape": [4]}}, b"\0" * 16), ["'w'", "data_offsets"]),
    "bytes-do-not-match-shape": (st_bytes({"w": {**F32_4, "shape": [3]}}, b"\0" * 16), ["'w'", "expected 12"]),
    "metadata-string": (st_bytes({"__metadata__": "format=pt", "w": F32_4}, b"\0" * 16), ["__metadata__"]),
    "metadata-list": (st_bytes({"__metadata__": ["a"], "w": F32_4}, b"\0" * 16), ["__metadata__"]),
    "metadata-int-values": (st_bytes({"__metadata__": {"a": 1}, "w": F32_4}, b"\0" * 16), ["__metadata__"]),
    "truncated-data": (st_bytes({"w": {**F32_4, "data_offsets": [0, 16]}}, b"\0" * 5), ["'w'", "truncated"]),
}


def _header_infer(root: Path, key: str) -> Spec:
    raw, needles = HEADERS[key]
    p = root / "bad" / "stack.safetensors"
    p.parent.mkdir(parents=True)
    p.write_bytes(raw)
    return align_infer(root, p, *needles)


def _header_train(root: Path, key: str) -> Spec:
    raw, needles = HEADERS[key]
    p = root / "bad" / "hs_0.safetensors"
    p.parent.mkdir(parents=True)
    p.write_bytes(raw)
    return align_train(root, p, *needles)


cases("safetensors/stack", {k: k for k in HEADERS}, _header_infer)
cases("safetensors/speculators", {k: k for k in HEADERS}, _header_train)


def _header_doctor(root: Path, key: str) -> Spec:
    raw, needles = HEADERS[key]
    d = draft_dir(root, tensors=False)
    (d / "model.safetensors").write_bytes(raw)
    return Spec(
        ["doctor", "--draft", str(d), "--json"], ["model.safetensors", *needles], code=1, finding="weights-unreadable"
    )


cases("safetensors/doctor", {k: k for k in HEADERS}, _header_doctor)


def _stack_meta(root: Path, meta: dict, needle: str) -> Spec:
    p = root / "bad" / "stack.safetensors"
    p.parent.mkdir(parents=True)
    write_safetensors(
        p, {"embed": np.zeros((T, H), np.float32), "layers.0": np.zeros((T, H), np.float32)}, metadata=meta
    )
    return align_infer(root, p, "token_ids", needle)


cases(
    "safetensors/stack-metadata",
    {
        "token-ids-not-json": ({"token_ids": "[1, 2"}, "JSON"),
        "token-ids-nan": ({"token_ids": "[1, NaN, 2, 3, 4, 5]"}, "NaN"),
        "token-ids-strings": ({"token_ids": '["a", "b", "c", "d", "e", "f"]'}, "integers"),
        "token-ids-ragged": ({"token_ids": "[[1, 2], [3]]"}, "integers"),
        "token-ids-deep": ({"token_ids": deep(100000)}, "nested"),
        "token-ids-floats": ({"token_ids": "[0.5, 1, 2, 3, 4, 5]"}, "integers"),
    },
    lambda root, a: _stack_meta(root, *a),
)


@case("safetensors/stack", "hf-stack-million-entries-zero-width")
def _(root):
    p = root / "bad" / "stack.safetensors"
    p.parent.mkdir(parents=True)
    p.write_bytes(st_bytes({"hidden_states": {"dtype": "F32", "shape": [10**6, T, 0], "data_offsets": [0, 0]}}))
    return align_infer(root, p, "hidden_states")


@case("safetensors/stack", "zero-width-layer")
def _(root):
    p = root / "bad" / "stack.safetensors"
    p.parent.mkdir(parents=True)
    write_safetensors(p, {"embed": np.zeros((T, 0), np.float32), "layers.0": np.zeros((T, 0), np.float32)})
    return align_infer(root, p, "'embed'", "H > 0")


@case("safetensors/drafter-check", "corrupt-weights")
def _(root):
    d = draft_dir(root, tensors=False)
    (d / "model.safetensors").write_bytes(st_bytes(b"{nope"))
    return Spec(["drafter", "check", "--draft", str(d)], ["model.safetensors", "cannot read"])


@case("safetensors/drafter-check", "truncated-weights")
def _(root):
    d = draft_dir(root)
    raw = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(raw[: len(raw) // 2])
    return Spec(["drafter", "check", "--draft", str(d)], ["model.safetensors", "cannot read"])


@case("safetensors/drafter-check", "corrupt-shard")
def _(root):
    d = draft_dir(root, tensors=False)
    write_safetensors(d / "model-00001-of-00002.safetensors", tiny_tensors())
    (d / "model-00002-of-00002.safetensors").write_bytes(b"\x00" * 7)
    return Spec(["drafter", "check", "--draft", str(d)], ["model-00002-of-00002.safetensors", "cannot read"])


# ------------------------------------------------------------------------------ safetensors index
SECRET = "outside.safetensors"
INDEX_ENTRIES = {
    "dot-dot-etc-passwd": "../../../../etc/passwd",
    "dot-dot-sibling": f"../{SECRET}",
    "absolute": "/etc/passwd",
    "absolute-sibling": None,  # filled with the absolute path of the sibling
    "inner-dot-dot": f"sub/../../{SECRET}",
    "backslash": f"..\\{SECRET}",
    "empty-name": "",
}


def _index(root: Path, key: str) -> Spec:
    d = draft_dir(root, tensors=False)
    outside = root / SECRET
    write_safetensors(outside, tiny_tensors())
    entry = INDEX_ENTRIES[key] if INDEX_ENTRIES[key] is not None else str(outside)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"fc.weight": entry}}))
    return Spec(
        ["doctor", "--draft", str(d), "--json"],
        ["model.safetensors.index.json", "weight_map"],
        code=1,
        finding="weights-unreadable",
        forbidden_reads=[str(outside), "/etc/passwd"],
    )


cases("safetensors/index", {k: k for k in INDEX_ENTRIES}, _index)

INDEX_DOCS = {
    "weight-map-list": {"weight_map": ["model.safetensors"]},
    "weight-map-int-values": {"weight_map": {"fc.weight": 1}},
    "top-level-list": [1],
    "nan": None,
}


def _index_doc(root: Path, key: str) -> Spec:
    d = draft_dir(root, tensors=False)
    text = json.dumps(INDEX_DOCS[key]) if key != "nan" else '{"weight_map": {"fc.weight": NaN}}'
    (d / "model.safetensors.index.json").write_text(text)
    return Spec(
        ["doctor", "--draft", str(d), "--json"],
        ["model.safetensors.index.json", "weight_map"],
        code=1,
        finding="weights-unreadable",
    )


cases("safetensors/index", {k: k for k in INDEX_DOCS}, _index_doc)


# ---------------------------------------------------------------------- SpecForge .ckpt / .ckpt.gz
def _ckpt_bytes(root: Path, raw: bytes, name: str, *needles) -> Spec:
    p = root / "bad" / name
    p.parent.mkdir(parents=True)
    p.write_bytes(raw)
    return align_train(root, p, *needles)


def _valid_ckpt_bytes() -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({"input_ids": torch.arange(T)}, buf)
    return buf.getvalue()


def _gz_with_garbage_deflate() -> bytes:
    raw = gzip.compress(b"x" * 4096)
    return raw[:10] + bytes(b ^ 0x5A for b in raw[10:-8]) + raw[-8:]  # zlib.error inside


cases(
    "specforge/bytes",
    {
        "gz-garbage-deflate": lambda: (_gz_with_garbage_deflate(), "data_0.ckpt.gz", "corrupt"),
        "gz-truncated": lambda: (gzip.compress(_valid_ckpt_bytes())[:60], "data_0.ckpt.gz", "corrupt"),
        "gz-not-gzip": lambda: (b"not gzip at all", "data_0.ckpt.gz", "corrupt"),
        "gz-bad-crc": lambda: (gzip.compress(_valid_ckpt_bytes())[:-8] + b"\0" * 8, "data_0.ckpt.gz", "corrupt"),
        "gz-of-garbage": lambda: (gzip.compress(b"\x80\x05garbage"), "data_0.ckpt.gz", "data_0.ckpt.gz"),
        "ckpt-empty": lambda: (b"", "data_0.ckpt", "corrupt"),
        "ckpt-garbage": lambda: (b"\x00\x01\x02garbage", "data_0.ckpt", "data_0.ckpt"),
        "ckpt-truncated-zip": lambda: (_valid_ckpt_bytes()[:100], "data_0.ckpt", "corrupt"),
        "ckpt-zip-corrupted-middle": lambda: (_flip_middle(_valid_ckpt_bytes()), "data_0.ckpt", "data_0.ckpt"),
    },
    lambda root, f: _ckpt_bytes(root, *f()),
)


def _flip_middle(raw: bytes) -> bytes:
    mid = len(raw) // 2
    return raw[:mid] + bytes(b ^ 0xFF for b in raw[mid : mid + 64]) + raw[mid + 64 :]


def _ckpt_items(root: Path, spec) -> Spec:
    import torch

    items, needles, extra = spec(torch)
    return align_train(root, specforge(root, **items), *needles, extra=extra)


cases(
    "specforge/content",
    {
        "ids-bf16": lambda t: ({"input_ids": t.arange(T).bfloat16()}, ["input_ids", "bfloat16"], ()),
        "ids-f16": lambda t: ({"input_ids": t.arange(T).half()}, ["input_ids", "float16"], ()),
        "ids-fractional": lambda t: ({"input_ids": t.arange(T) + 0.5}, ["input_ids", "integers"], ()),
        "ids-2d": lambda t: ({"input_ids": t.zeros(2, T, dtype=t.long)}, ["input_ids", "1-D"], ()),
        "ids-not-tensor": lambda t: ({"input_ids": [1, 2, 3]}, ["input_ids", "tensor"], ()),
        "missing-loss-mask": lambda t: ({"loss_mask": _DROP}, ["loss_mask"], ()),
        "mask-length": lambda t: ({"loss_mask": t.ones(T - 1, dtype=t.long)}, ["loss_mask"], ()),
        "aux-zero-width": lambda t: ({"aux_hidden_state": t.zeros(1, T, 0)}, ["aux_hidden_state", "width"], ()),
        "hidden-zero-width": lambda t: ({"hidden_state": t.zeros(1, T, 0)}, ["hidden_state", "width"], ()),
        "aux-1d": lambda t: ({"aux_hidden_state": t.zeros(T)}, ["aux_hidden_state", "shape"], ()),
        "aux-4d": lambda t: ({"aux_hidden_state": t.zeros(1, 1, T, K * H)}, ["aux_hidden_state", "shape"], ()),
        "hidden-int": lambda t: ({"hidden_state": t.zeros(1, T, H, dtype=t.long)}, ["hidden_state", "int64"], ()),
        "aux-more-rows": lambda t: ({"aux_hidden_state": t.zeros(1, T + 3, K * H)}, ["aux_hidden_state", "rows"], ()),
        "hidden-fewer-rows": lambda t: ({"hidden_state": t.zeros(1, T - 2, H)}, ["hidden_state", "rows"], ()),
        "aux-not-slots": lambda t: ({"aux_hidden_state": t.zeros(1, T, K * H + 1)}, ["aux_hidden_state"], ()),
        "slot-count-huge": lambda t: (
            {"aux_hidden_state": t.zeros(1, T, 200), "hidden_state": t.zeros(1, T, 1)},
            ["slots"],
            (),
        ),
        "train-layers-not-slots": lambda t: ({}, ["aux_hidden_state", "5 slots"], ("--train-layers", "1,2,3,4,5")),
        "list-not-dict": None,
    },
    lambda root, f: _ckpt_items(root, f) if f else _ckpt_list(root),
)


def _ckpt_list(root: Path) -> Spec:
    import torch

    p = root / "bad" / "data_0.ckpt"
    p.parent.mkdir(parents=True)
    torch.save([1, 2, 3], p)
    return align_train(root, p, "expected a dict")


@case("specforge/content", "hostile-pickle")
def _(root):
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    p = root / "bad" / "data_0.ckpt"
    p.parent.mkdir(parents=True)
    p.write_bytes(pickle.dumps({"input_ids": Evil()}))
    return align_train(root, p, "refused to unpickle")


# --------------------------------------------------------------------------- speculators hs files
def _hs(root: Path, tensors: dict, *needles) -> Spec:
    from safetensors.torch import save_file

    p = root / "bad" / "hs_0.safetensors"
    p.parent.mkdir(parents=True)
    save_file(tensors, str(p))
    return align_train(root, p, *needles)


cases(
    "speculators/content",
    {
        "no-token-ids": lambda t: ({"hidden_states": t.zeros(T, 4, H)}, ["token_ids"]),
        "no-hidden-states": lambda t: ({"token_ids": t.arange(T)}, ["hidden_states"]),
        "hidden-2d": lambda t: ({"token_ids": t.arange(T), "hidden_states": t.zeros(T, H)}, ["hidden_states", "shape"]),
        "rows-mismatch": lambda t: ({"token_ids": t.arange(T), "hidden_states": t.zeros(T + 1, 4, H)}, ["rows"]),
        "ids-bf16": lambda t: (
            {"token_ids": t.arange(T).bfloat16(), "hidden_states": t.zeros(T, 4, H)},
            ["token_ids", "bfloat16"],
        ),
        "ids-fractional": lambda t: (
            {"token_ids": t.arange(T).float() + 0.25, "hidden_states": t.zeros(T, 4, H)},
            ["token_ids", "integers"],
        ),
        "one-slot-only": lambda t: ({"token_ids": t.arange(T), "hidden_states": t.zeros(T, 1, H)}, ["slot"]),
        "ids-2d": lambda t: (
            {"token_ids": t.zeros(3, T, dtype=t.long), "hidden_states": t.zeros(T, 4, H)},
            ["token_ids", "1-D"],
        ),
    },
    lambda root, f: (lambda t: _hs(root, *(lambda r: (r[0], *r[1]))(f(t))))(__import__("torch")),
)


# -------------------------------------------------------------------------- SGLang dump folders
def _pass_dir(root: Path) -> Path:
    d = root / "dump" / "target" / "TP0_PP0_Rank0_pid7"
    d.mkdir(parents=True)
    return d


def _good_pass(t, n=T):
    return {
        "model.forward_batch_info.input_ids": t.arange(n),
        "model.forward_batch_info.positions": t.arange(n),
        "model.embed_tokens": t.zeros(n, H),
        "model.layers.1.input_layernorm": [t.zeros(n, H), t.zeros(n, H)],
    }


def _dump_case(root: Path, fn) -> Spec:
    import torch

    d = _pass_dir(root)
    needles = fn(torch, d)
    return align_infer(root, root / "dump", *needles)


cases(
    "sglang-dump/pass",
    {
        "no-pass-files": lambda t, d: ["no Pass"],
        "pass-corrupt": lambda t, d: ((d / "Pass00000.pt").write_bytes(b"garbage"), ["Pass00000.pt", "unpickle"])[1],
        "pass-list": lambda t, d: (t.save([1, 2], d / "Pass00000.pt"), ["Pass00000.pt", "dict"])[1],
        "pass-no-input-ids": lambda t, d: (
            t.save({"model.embed_tokens": t.zeros(T, H)}, d / "Pass00000.pt"),
            ["Pass00000.pt", "input_ids"],
        )[1],
        "pass-int-keys": lambda t, d: (t.save({1: t.zeros(T, H)}, d / "Pass00000.pt"), ["Pass00000.pt", "names"])[1],
        "pass-ids-bf16": lambda t, d: (
            t.save({**_good_pass(t), "model.forward_batch_info.input_ids": t.arange(T).bfloat16()}, d / "Pass00000.pt"),
            ["Pass00000.pt", "bfloat16"],
        )[1],
        "pass-rows-disagree": lambda t, d: (
            t.save({**_good_pass(t), "model.embed_tokens": t.zeros(T + 2, H)}, d / "Pass00000.pt"),
            ["Pass00000.pt", "rows"],
        )[1],
        "pass-entry-vanishes": lambda t, d: (
            t.save(_good_pass(t, 3), d / "Pass00000.pt"),
            t.save({"model.forward_batch_info.input_ids": t.arange(3)}, d / "Pass00001.pt"),
            ["Pass00001.pt", "missing"],
        )[2],
        "pass-width-changes": lambda t, d: (
            t.save(_good_pass(t, 3), d / "Pass00000.pt"),
            t.save({**_good_pass(t, 3), "model.embed_tokens": t.zeros(3, H + 1)}, d / "Pass00001.pt"),
            ["Pass00001.pt", "wide"],
        )[2],
    },
    _dump_case,
)


def _dumper_case(root: Path, fn) -> Spec:
    import torch

    d = root / "dumper" / "exp"
    d.mkdir(parents=True)
    needles = fn(torch, d)
    return align_infer(root, root / "dumper", *needles)


def _dumper_file(d: Path, t, name: str, value, step="0", rank="0", idx="0"):
    t.save({"value": value, "meta": {}}, d / f"step={step}___rank={rank}___dump_index={idx}___name={name}.pt")


cases(
    "sglang-dump/dumper",
    {
        "step-not-int": lambda t, d: (_dumper_file(d, t, "x.output", t.zeros(T, H), step="abc"), ["step", "integer"])[
            1
        ],
        "rank-negative": lambda t, d: (_dumper_file(d, t, "x.output", t.zeros(T, H), rank="-1"), ["rank"])[1],
        "no-value": lambda t, d: (
            t.save({"meta": {}}, d / "step=0___rank=0___dump_index=0___name=x.output.pt"),
            ["value"],
        )[1],
        "value-corrupt": lambda t, d: (
            (d / "step=0___rank=0___dump_index=0___name=x.output.pt").write_bytes(b"\0\1"),
            ["unpickle"],
        )[1],
        "series-turns-into-int": lambda t, d: (
            _dumper_file(d, t, "non_intrusive__model.embed_tokens.output", t.zeros(3, H)),
            _dumper_file(d, t, "non_intrusive__model.embed_tokens.output", 5, step="1", idx="1"),
            ["step=1", "not a tensor"],
        )[2],
        "series-width-changes": lambda t, d: (
            _dumper_file(d, t, "non_intrusive__model.embed_tokens.output", t.zeros(3, H)),
            _dumper_file(d, t, "non_intrusive__model.embed_tokens.output", t.zeros(3, H + 2), step="1", idx="1"),
            ["width"],
        )[2],
    },
    _dumper_case,
)


# -------------------------------------------------------------------- return_hidden_states payloads
ROW = [0.5] * (K * H)


def _payload(root: Path, text: str | bytes, *needles) -> Spec:
    p = root / "bad" / "payload.json"
    p.parent.mkdir(parents=True)
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return align_infer(root, p, *needles)


def _pl(hs, **meta) -> str:
    return json.dumps({"meta_info": {"hidden_states": hs, **meta}, "output_ids": list(range(T))})


PAYLOADS = {
    "nan": (_pl([[ROW]]).replace("0.5", "NaN", 1), ["hidden_states[0][0][0]", "NaN"]),
    "infinity": (_pl([[ROW]]).replace("0.5", "Infinity", 1), ["Infinity"]),
    "1e400": (_pl([[ROW]]).replace("0.5", "1e400", 1), ["not finite"]),
    "beyond-float32": (_pl([[[1e39] * (K * H)]]), ["float32"]),
    "5000-digits": (_pl([[ROW]]).replace("0.5", "1" * 5000, 1), ["digit"]),
    "deep": (json.dumps({"meta_info": {"hidden_states": "@"}}).replace('"@"', deep(100000)), ["nested"]),
    "deep-70": (json.dumps({"meta_info": {"hidden_states": "@"}}).replace('"@"', deep(70)), ["nested"]),
    "ragged-rows": (_pl([[ROW, ROW[:-1]]]), ["hidden_states[0]", "ragged"]),
    "string-rows": (_pl([[["a"] * (K * H)]]), ["hidden_states[0]", "non-numbers"]),
    "dict-rows": (_pl([[{"a": 1}]]), ["hidden_states[0]"]),
    "one-number": (_pl([5]), ["hidden_states[0]", "one number"]),
    "four-d": (_pl([[[[ROW]]], [[[ROW]]]]), ["hidden_states[0]", "shape"]),
    "hidden-states-string": (_pl("rows"), ["hidden_states"]),
    "hidden-states-empty": (_pl([]), ["hidden_states"]),
    "only-empty-rows": (_pl([[], []]), ["no rows"]),
    "widths-differ": (_pl([[ROW], [[*ROW, 1.0]]]), ["widths"]),
    "meta-info-string": (json.dumps({"meta_info": "x", "hidden_states": [[ROW]]}), ["meta_info"]),
    "request-list": (json.dumps({"request": [1], "response": {"meta_info": {"hidden_states": [[ROW]]}}}), ["request"]),
    "prompt-tokens-string": (_pl([[ROW]], prompt_tokens="6"), ["prompt_tokens"]),
    "cached-tokens-negative": (_pl([[ROW]], prompt_tokens=6, cached_tokens=-3), ["cached_tokens"]),
    "input-ids-strings": (json.dumps({"meta_info": {"hidden_states": [[ROW]]}, "input_ids": ["a"]}), ["input_ids"]),
    "input-ids-ragged": (
        json.dumps({"meta_info": {"hidden_states": [[ROW]]}, "input_ids": [[1, 2], [3]]}),
        ["input_ids"],
    ),
    "input-ids-fractional": (json.dumps({"meta_info": {"hidden_states": [[ROW]]}, "input_ids": [0.5]}), ["input_ids"]),
    "input-ids-too-few": (json.dumps({"meta_info": {"hidden_states": [[ROW, ROW]]}, "input_ids": [1]}), ["tokens"]),
    "input-ids-huge": (json.dumps({"meta_info": {"hidden_states": [[ROW]]}, "input_ids": [2**70]}), ["input_ids"]),
    "empty-response-list": ("[]", ["empty"]),
    "not-json": ("{", ["JSON"]),
    "non-utf8": (b'{"meta_info": {"hidden_states": "\xff"}}', ["UTF-8"]),
    "top-level-number": ("5", ["response"]),
}

cases("payload", {k: k for k in PAYLOADS}, lambda root, k: _payload(root, PAYLOADS[k][0], *PAYLOADS[k][1]))


# --------------------------------------------------------------------------------- workbench.toml
TOMLS = {
    "non-utf8": (b'[hosts.gpu]\naddress = "\xff\xfe"\n', ["workbench.toml", "UTF-8"]),
    "invalid": (b"[hosts\n", ["workbench.toml", "invalid TOML"]),
    "nan": (b"[profiles.a]\nstop_grace = nan\n", ["workbench.toml", "profiles.a.stop_grace", "not finite"]),
    "inf": (b"[profiles.a]\nready_timeout = inf\n", ["workbench.toml", "profiles.a.ready_timeout", "not finite"]),
    "minus-inf": (b"[profiles.a]\nstop_grace = -inf\n", ["workbench.toml", "stop_grace"]),
    "deep-arrays": (b"x = " + deep(100000).encode() + b"\n", ["workbench.toml", "nested"]),
    "deep-arrays-70": (b"x = " + deep(70).encode() + b"\n", ["workbench.toml", "nested"]),
    "5000-digit-int": (b"x = " + b"1" * 5000 + b"\n", ["workbench.toml"]),
    "40-digit-int": (b"[profiles.a]\nport = " + b"9" * 40 + b"\n", ["workbench.toml", "profiles.a.port", "digits"]),
    "hosts-not-table": (b"hosts = 5\n", ["workbench.toml", "[hosts]"]),
    "profiles-string": (b'profiles = "x"\n', ["workbench.toml", "[profiles]"]),
    "nul-byte": (b"x = 1\x00\n", ["workbench.toml", "invalid TOML"]),
    "bom-then-garbage": (b"\xef\xbb\xbf[[[\n", ["workbench.toml"]),
}


def _toml(root: Path, key: str) -> Spec:
    raw, needles = TOMLS[key]
    ws = root / "ws"
    ws.mkdir()
    (ws / "workbench.toml").write_bytes(raw)
    return Spec(["--workspace", str(ws), "config", "list"], needles)


cases("workbench-toml", {k: k for k in TOMLS}, _toml)


# ------------------------------------------------------------------------------- config set values
SET_EXPRESSIONS = {
    "nan": ("rope_theta=NaN", ["rope_theta", "NaN"]),
    "infinity": ("rope_theta=Infinity", ["rope_theta", "Infinity"]),
    "minus-infinity": ("x=-Infinity", ["x", "finite"]),
    "inf-word": ("x=inf", ["x", "finite"]),
    "1e400": ("x=1e400", ["x", "not finite"]),
    "1e400-in-list": ("x=[1, 1e400]", ["x[1]", "not finite"]),
    "nan-in-object": ('x={"a": NaN}', ["x.a", "NaN"]),
    "5000-digits": ("x=" + "1" * 5000, ["x", "digit"]),
    "40-digits": ("x=" + "9" * 40, ["x", "digits"]),
    "deep-arrays": ("x=" + deep(100000), ["x", "nested"]),
    "deep-arrays-70": ("x=" + deep(70), ["x", "nested"]),
    "deep-objects": ("x=" + deep_obj(5000), ["x", "nested"]),
    "ids-item-string": (
        'eagle_config.eagle_aux_hidden_state_layer_ids.0="abc"',
        ["eagle_aux_hidden_state_layer_ids", "list of integers"],
    ),
    "ids-item-float": ("eagle_config.eagle_aux_hidden_state_layer_ids.1=2.5", ["eagle_aux_hidden_state_layer_ids"]),
    "ids-item-bool": ("eagle_config.eagle_aux_hidden_state_layer_ids.2=true", ["eagle_aux_hidden_state_layer_ids"]),
    "ids-string": ('eagle_config.eagle_aux_hidden_state_layer_ids="2,30,58"', ["eagle_aux_hidden_state_layer_ids"]),
    "ids-too-many": (
        "eagle_config.eagle_aux_hidden_state_layer_ids=" + json.dumps(list(range(80))),
        ["eagle_aux_hidden_state_layer_ids"],
    ),
    "whole-eagle-config-strings": (
        'eagle_config={"eagle_aux_hidden_state_layer_ids": ["2", "30"]}',
        ["eagle_config.eagle_aux_hidden_state_layer_ids"],
    ),
    "whole-eagle-config-aux-flag": (
        'eagle_config={"use_aux_hidden_state": "yes"}',
        ["eagle_config.use_aux_hidden_state"],
    ),
    "eagle-config-not-object": ("eagle_config=[1]", ["eagle_config", "an object"]),
    "hidden-size-string": ('hidden_size="16"', ["hidden_size", "positive integer"]),
    "hidden-size-float": ("hidden_size=16.5", ["hidden_size"]),
    "hidden-size-whole-float": ("hidden_size=16.0", ["hidden_size"]),
    "hidden-size-bool": ("hidden_size=true", ["hidden_size"]),
    "layers-30-million": ("num_hidden_layers=30000000", ["num_hidden_layers", "out of range"]),
    "heads-zero": ("num_attention_heads=0", ["num_attention_heads"]),
    "max-position-negative": ("max_position_embeddings=-4", ["max_position_embeddings", "positive integer"]),
    "architectures-string": ('architectures="LlamaForCausalLMEagle3"', ["architectures"]),
    "architectures-ints": ("architectures=[1]", ["architectures"]),
    "tie-string": ('tie_word_embeddings="false"', ["tie_word_embeddings", "true or false"]),
    "nested-speculators-field": ('transformer_layer_config.hidden_size="x"', ["transformer_layer_config.hidden_size"]),
    "text-config-layers-zero": ("text_config.num_hidden_layers=0", ["text_config.num_hidden_layers"]),
    "rope-factor-zero": ('rope_scaling={"factor": 0}', ["rope_scaling.factor"]),
    "rms-eps-negative": ("rms_norm_eps=-1e-5", ["rms_norm_eps"]),
    "empty-key-part": ("eagle_config..x=1", ["eagle_config..x"]),
    "leading-dot": (".x=1", ["'.x'"]),
    "no-equals": ("hidden_size", ["KEY=VALUE"]),
    "unclosed-list": ("x=[1,2", ["x", "not JSON"]),
    "words-with-spaces": ("x=two words", ["x", "not JSON"]),
    "index-into-number": ("hidden_size.0=1", ["hidden_size.0", "not an object or array"]),
    "index-out-of-range": ("eagle_config.eagle_aux_hidden_state_layer_ids.9=1", ["index 9"]),
    "index-not-number": ("eagle_config.eagle_aux_hidden_state_layer_ids.x=1", ["'x'", "number"]),
    "key-100-parts": (".".join(["a"] * 100) + "=1", ["key"]),
    "key-lone-surrogate": ("x\udcff=1", ["key"]),
    "value-lone-surrogate": ('x="\udcff"', ["Unicode"]),
}


def _config_file(root: Path, text: str | bytes | None = None) -> Path:
    p = root / "cfg" / "config.json"
    p.parent.mkdir(parents=True)
    p.write_bytes(
        (text if isinstance(text, bytes) else text.encode())
        if text is not None
        else json.dumps(TINY_DRAFT, indent=2).encode()
    )
    return p


def _set(root: Path, key: str) -> Spec:
    expr, needles = SET_EXPRESSIONS[key]
    p = _config_file(root)
    return Spec(["config", "set", str(p), expr], ["config.json", *needles])


cases("config-set", {k: k for k in SET_EXPRESSIONS}, _set)

SET_FILES = {
    "file-not-json": ('{"a": 1,, }', "x=1", ["config.json", "JSON"]),
    "file-not-utf8": (b'{"a": "\xff"}', "x=1", ["config.json", "UTF-8"]),
    "file-deep": ('{"a": ' + deep(100000) + "}", "x=1", ["config.json", "nested"]),
    "file-deep-70": ('{"a": ' + deep(70) + "}", "x=1", ["config.json", "nested"]),
    "file-top-level-list": ("[1, 2]", "x=1", ["config.json", "not a JSON object"]),
    "delete-missing-key": (None, None, ["config.json", "nothing to delete"]),
    "file-bad-escape": ('{"a": "\\q"}', "x=1", ["config.json", "string"]),
}


def _set_file(root: Path, key: str) -> Spec:
    text, expr, needles = SET_FILES[key]
    p = _config_file(root, text)
    argv = ["config", "set", str(p)] + ([expr] if expr else ["--delete", "no_such_key"])
    return Spec(argv, needles)


cases("config-set", {k: k for k in SET_FILES}, _set_file)


# ------------------------------------------------------------------------------ CLI numeric flags
def _flag(argv_fn, needles):
    def build(root: Path) -> Spec:
        return Spec(argv_fn(root), needles)

    return build


FLAGS = {
    "doctor-num-layers-zero": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--num-layers", "0"],
        ["--num-layers"],
    ),
    "doctor-num-layers-huge": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--num-layers", "100000000"],
        ["--num-layers", "out of range"],
    ),
    "doctor-num-layers-5000-digits": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--num-layers", "9" * 5000],
        ["--num-layers"],
    ),
    "doctor-num-layers-float": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--num-layers", "8.5"],
        ["--num-layers"],
    ),
    "doctor-num-layers-nan": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--num-layers", "nan"],
        ["--num-layers"],
    ),
    "doctor-context-nan": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--context-length", "nan"],
        ["--context-length"],
    ),
    "doctor-context-negative": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--context-length", "-5"],
        ["--context-length"],
    ),
    "doctor-context-1e400": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--context-length", "1e400"],
        ["--context-length"],
    ),
    "doctor-trained-layers-words": (
        lambda r: ["doctor", "--draft", str(draft_dir(r)), "--trained-layers", "a,b"],
        ["--trained-layers"],
    ),
    "doctor-server-huge": (lambda r: ["doctor", "--server", "9" * 25], ["--server"]),
    "doctor-samples-zero": (lambda r: ["doctor", "--server", "1", "--samples", "0"], ["--samples"]),
    "align-num-layers-zero": (
        lambda r: ["align", "--train", "x", "--infer", "y", "--num-layers", "0"],
        ["--num-layers"],
    ),
    "align-sample-negative": (lambda r: ["align", "--train", "x", "--infer", "y", "--sample", "-1"], ["--sample"]),
    "align-train-layers-huge": (
        lambda r: ["align", "--train", "x", "--infer", "y", "--train-layers", "1" * 5000],
        ["--train-layers"],
    ),
    "drafter-depth-zero": (
        lambda r: ["drafter", "eval", "--draft", "a", "--data", "b", "--target", "c", "--depth", "0"],
        ["--depth"],
    ),
    "drafter-depth-huge": (
        lambda r: ["drafter", "eval", "--draft", "a", "--data", "b", "--target", "c", "--depth", "100000"],
        ["--depth"],
    ),
    "drafter-topk-nan": (
        lambda r: ["drafter", "eval", "--draft", "a", "--data", "b", "--target", "c", "--topk", "nan"],
        ["--topk"],
    ),
    "drafter-max-samples-zero": (
        lambda r: ["drafter", "eval", "--draft", "a", "--data", "b", "--target", "c", "--max-samples", "0"],
        ["--max-samples"],
    ),
    "predict-acc-nan": (lambda r: ["predict", "--acc", "nan"], ["acc"]),
    "predict-acc-inf": (lambda r: ["predict", "--acc", "0.8,inf"], ["acc"]),
    "predict-acc-1e400": (lambda r: ["predict", "--acc", "1e400"], ["acc"]),
    "predict-acc-5000-chars": (lambda r: ["predict", "--acc", "0." + "1" * 5000], ["acc"]),
    "predict-steps-huge": (
        lambda r: ["predict", "--acc", "0.8", "--steps", "100000000", "--topk", "1", "--draft-tokens", "2"],
        ["--steps"],
    ),
    "predict-observed-nan": (
        lambda r: ["predict", "--acc", "0.8", "--observed-accept-length", "nan"],
        ["--observed-accept-length"],
    ),
    "predict-observed-inf": (
        lambda r: ["predict", "--acc", "0.8", "--observed-accept-length", "inf"],
        ["--observed-accept-length"],
    ),
    "sweep-draft-ms-nan": (
        lambda r: ["predict", "sweep", "--acc", "0.8", "--verify-ms", "2:20", "--draft-ms", "nan"],
        ["--draft-ms"],
    ),
    "sweep-draft-ms-negative": (
        lambda r: ["predict", "sweep", "--acc", "0.8", "--verify-ms", "2:20", "--draft-ms", "-1"],
        ["--draft-ms"],
    ),
    "sweep-baseline-inf": (
        lambda r: [
            "predict",
            "sweep",
            "--acc",
            "0.8",
            "--verify-ms",
            "2:20",
            "--draft-ms",
            "1",
            "--baseline-ms",
            "inf",
        ],
        ["--baseline-ms"],
    ),
    "sweep-verify-nan": (
        lambda r: ["predict", "sweep", "--acc", "0.8", "--verify-ms", "2:nan", "--draft-ms", "1"],
        ["--verify-ms"],
    ),
    "sweep-verify-key-huge": (
        lambda r: ["predict", "sweep", "--acc", "0.8", "--verify-ms", "9" * 5000 + ":2", "--draft-ms", "1"],
        ["--verify-ms"],
    ),
    "sweep-steps-range-huge": (
        lambda r: [
            "predict",
            "sweep",
            "--acc",
            "0.8",
            "--verify-ms",
            "2:20",
            "--draft-ms",
            "1",
            "--steps",
            "1..100000000",
        ],
        ["--steps"],
    ),
    "sweep-top-zero": (
        lambda r: ["predict", "sweep", "--acc", "0.8", "--verify-ms", "2:20", "--draft-ms", "1", "--top", "0"],
        ["--top"],
    ),
    "fit-measured-inf": (lambda r: ["predict", "fit", "--measured", "1:inf,2:2"], ["measured"]),
    "fit-max-steps-huge": (
        lambda r: ["predict", "fit", "--measured", "1:1.5,2:2", "--max-steps", "10000000"],
        ["--max-steps"],
    ),
    "timeline-server-huge": (lambda r: ["timeline", "--server", "9" * 25], ["--server"]),
    "timeline-live-config-zero": (lambda r: ["timeline", "--live-config", "0"], ["--live-config"]),
}
for _id, (_argv, _needles) in FLAGS.items():
    CASES.append(Case(f"cli-flags:{_id}", "cli-flags", _flag(_argv, _needles)))


# ----------------------------------------------------------------------------------- keymap.toml
KEYMAPS = {
    "non-utf8": (b'"app.help" = "\xff"\n', "UTF-8"),
    "invalid": (b'"app.help" = \n', "invalid TOML"),
    "int-value": (b'"app.help" = 5\n', "app.help"),
    "table-value": (b'[app]\nhelp = "f1"\n', "app"),
    "empty-key-name": (b'"app.help" = ""\n', "app.help"),
    "nan": (b'"app.help" = nan\n', "not finite"),
    "deep": (b'"app.help" = ' + deep(100000).encode() + b"\n", "nested"),
    "long-key-name": (b'"app.help" = "' + b"a" * 500 + b'"\n', "app.help"),
    "list-value": (b'"app.help" = ["f1"]\n', "app.help"),
}
