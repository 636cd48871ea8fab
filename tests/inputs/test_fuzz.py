"""Property-based fuzzing of the readers that take files from outside: the safetensors header reader
(against the safetensors library itself), the strict JSON reader and the draft-config reader, the
JSON editor, and the TOML loader. Every outcome is a value or one ``InputError`` line; nothing else.
Examples are bounded so each test runs in a few seconds."""

from __future__ import annotations

import json
import math
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.fixtures.toml_files import write_toml
from workbench import strictjson
from workbench.configs.jsonedit import apply_edits, delete_key, parse, set_key
from workbench.draftconfig import read_draft, read_header
from workbench.draftconfig.safetensors_header import DTYPE_BYTES
from workbench.draftconfig.schema import FIELDS, validate
from workbench.errors import InputError
from workbench.workspace import load_toml

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def one_line(exc: InputError, name: str = "") -> str:
    msg = str(exc)
    assert msg and "\n" not in msg and "Traceback" not in msg
    assert name in msg
    return msg


_ROOT: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def _scratch_root():
    """The examples' folders, in one folder removed after the module (a run makes ~1400)."""
    root = Path(tempfile.mkdtemp(prefix="wb-fuzz-"))
    _ROOT.append(root)
    yield
    _ROOT.remove(root)
    shutil.rmtree(root, ignore_errors=True)


def scratch() -> Path:
    """A fresh folder for one example."""
    return Path(tempfile.mkdtemp(prefix="x-", dir=_ROOT[-1] if _ROOT else None))


# ------------------------------------------------------------------------------ safetensors header
dims = st.one_of(st.integers(0, 6), st.integers(-3, 10**20), st.booleans(), st.floats(), st.text(max_size=3))
entries = st.fixed_dictionaries(
    {
        "dtype": st.one_of(st.sampled_from(sorted(DTYPE_BYTES)), st.text(max_size=6), st.integers()),
        "shape": st.one_of(st.lists(st.integers(0, 6), max_size=4), st.lists(dims, max_size=20), st.text(max_size=4)),
        "data_offsets": st.one_of(
            st.lists(st.integers(0, 400), min_size=2, max_size=2),
            st.lists(st.one_of(st.integers(-5, 10**30), st.floats()), max_size=3),
        ),
    },
    optional={"extra": st.integers()},
)
metadata = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), min_size=1, max_size=2),
)


def _st_file(header_text: bytes, data_len: int, declared=None) -> Path:
    p = scratch() / "x.safetensors"
    p.write_bytes(
        struct.pack("<Q", len(header_text) if declared is None else declared) + header_text + b"\0" * data_len
    )
    return p


def _check_against_library(p: Path) -> None:
    """Ours and the safetensors library: a file the library opens, we open with the same tensors."""
    from safetensors import safe_open

    try:
        with safe_open(str(p), framework="pt") as f:
            lib = {k: (f.get_slice(k).get_dtype(), list(f.get_slice(k).get_shape())) for k in f.keys()}  # noqa: SIM118  (a safetensors handle, not a dict: keys() is its only listing)
    except Exception:
        lib = None
    try:
        ours, meta = read_header(p)
    except InputError as exc:
        one_line(exc, "x.safetensors")
        assert lib is None or set(lib) - {"__metadata__"} == set(), f"the library reads {lib}, we refused: {exc}"
        return
    assert isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())
    size = p.stat().st_size
    for name, info in ours.items():
        count = math.prod(info.shape)
        assert info.nbytes == count * DTYPE_BYTES[info.dtype] and info.offset + info.nbytes <= size
        if lib is not None and name in lib:
            assert lib[name] == (info.dtype, info.shape)


@settings(FUZZ, max_examples=100)
@given(st.dictionaries(st.text(max_size=6), entries, max_size=4), metadata, st.integers(0, 300))
@example({"": {"dtype": "BF16", "shape": "\n", "data_offsets": []}}, None, 0)  # a newline in the value
@example({"t": {"dtype": "F32", "shape": [1], "data_offsets": "0\n4"}}, None, 4)
def test_safetensors_header_structured(tensors, meta, data_len):
    header = dict(tensors)
    if meta is not None:
        header["__metadata__"] = meta
    _check_against_library(_st_file(json.dumps(header).encode(), data_len))


@FUZZ
@given(st.binary(max_size=200), st.one_of(st.none(), st.integers(0, 2**64 - 1)), st.integers(0, 64))
def test_safetensors_header_bytes(raw, declared, data_len):
    _check_against_library(_st_file(raw, data_len, declared))


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["F32", "BF16", "I64", "U8", "F8_E4M3", "BOOL"]), st.lists(st.integers(0, 5), max_size=3)
        ),
        max_size=4,
    )
)
def test_safetensors_valid_files_read_like_the_library(specs):
    """Well-formed files (contiguous, like the library writes them): every tensor read back the same."""
    header, pos = {}, 0
    for i, (dtype, shape) in enumerate(specs):
        n = math.prod(shape) * DTYPE_BYTES[dtype]
        header[f"t{i}"] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + n]}
        pos += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    p = _st_file(raw, pos)
    ours, _ = read_header(p)
    assert {k: (v.dtype, v.shape) for k, v in ours.items()} == {k: (h["dtype"], h["shape"]) for k, h in header.items()}
    _check_against_library(p)


# ------------------------------------------------------------------------ strict JSON, draft reader
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**40), 10**40), st.floats(allow_nan=True), st.text(max_size=6)
)
json_values = st.recursive(
    scalars,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4)),
    max_leaves=20,
)
typed_keys = st.sampled_from(sorted(k for k in FIELDS if "." not in k))


def _finite(v) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return abs(v) < 10**30
    if isinstance(v, list):
        return all(_finite(x) for x in v)
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    return True


@FUZZ
@given(json_values)
def test_strict_json_matches_json_on_standard_documents(value):
    text = json.dumps(value)  # writes NaN/Infinity for non-finite floats, as careless writers do
    try:
        got = strictjson.loads(text, "doc.json")
    except InputError as exc:
        one_line(exc, "doc.json")
        assert not _finite(value), f"refused a finite document: {exc}"
        return
    assert _finite(value) and got == json.loads(text)


@FUZZ
@given(st.text(alphabet='{}[]",:0123456789.eE+-aNInfinity tru\\\n', max_size=60))
def test_strict_json_on_arbitrary_text(text):
    try:
        strictjson.loads(text, "doc.json")
    except InputError as exc:
        one_line(exc, "doc.json")


@FUZZ
@given(
    st.dictionaries(typed_keys, json_values, max_size=6), st.dictionaries(st.text(max_size=5), json_values, max_size=3)
)
def test_draft_reader_types_every_field(fields, other):
    d = scratch()
    doc = {**other, **fields}
    (d / "config.json").write_text(json.dumps(doc))
    try:
        ck = read_draft(d)
    except InputError as exc:
        one_line(exc, "config.json")
        assert not _finite(doc) or not isinstance(doc, dict)
        return
    bad = {p.field for p in ck.problems}
    for key, value in fields.items():
        try:
            validate(key, value)
            ok = True
        except InputError:
            ok = value is None  # JSON null means "not given", as in HF configs
        assert ok != (key in bad), (key, value, bad)
    assert all("\n" not in str(p) for p in ck.problems)
    for name in ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads"):
        v = getattr(ck, name)
        assert v is None or (type(v) is int and 1 <= v <= FIELDS[name].where.hi)


# -------------------------------------------------------------------------------------- JSON editor
plain = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
plain_values = st.recursive(
    plain,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.text(alphabet="abcxyz", max_size=3), kids, max_size=3)
    ),
    max_leaves=10,
)
docs = st.dictionaries(st.text(alphabet="abcxyz", min_size=1, max_size=3), plain_values, min_size=1, max_size=4)
indents = st.sampled_from([None, 2, 4, "\t"])
key_parts = st.lists(st.text(alphabet="abcxyz01", min_size=1, max_size=3), min_size=1, max_size=3)


def _expected_set(doc, parts, value):
    node = doc
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, dict):
            if part not in node:
                for p in reversed(parts[i + 1 :]):
                    value = {p: value}
                node[part] = value
                return doc
            node = node[part]
        elif isinstance(node, list):
            node = node[int(part)]
        else:
            raise AssertionError("unreachable")
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return doc


@FUZZ
@given(docs, indents, key_parts, plain_values)
def test_editor_sets_exactly_the_key(doc, indent, parts, value):
    text = json.dumps(doc, indent=indent)
    key = ".".join(parts)
    try:
        new = set_key(text, key, value, name="c.json")
    except InputError as exc:
        one_line(exc)
        return
    expected = _expected_set(json.loads(text), parts, value)
    assert json.loads(new) == expected
    parse(new, "c.json")
    assert set_key(new, key, value, name="c.json") == new  # setting it again changes nothing


@FUZZ
@given(docs, indents)
def test_editor_deletes_one_member_and_keeps_the_rest(doc, indent):
    text = json.dumps(doc, indent=indent)
    for key in list(doc):
        new = delete_key(text, key, name="c.json")
        assert json.loads(new) == {k: v for k, v in doc.items() if k != key}


@FUZZ
@given(docs, indents, st.sampled_from(sorted(FIELDS)), json_values)
def test_editor_type_checks_every_changed_field(doc, indent, key, value):
    text = json.dumps(doc, indent=indent)
    try:
        new = apply_edits(text, [(key, value)], name="c.json")
    except InputError as exc:
        one_line(exc, "c.json")
        return
    after = json.loads(new)
    node = after
    for part in key.split("."):
        node = node[part]
    validate(key, node)  # whatever was written has its type
    strictjson.loads(new, "c.json")  # and the file is standard JSON


# -------------------------------------------------------------------------------------- TOML loader
toml_scalars = st.one_of(
    st.booleans(), st.integers(-(10**40), 10**40), st.floats(allow_nan=True), st.text(alphabet="abc xyz-_", max_size=6)
)
toml_tables = st.dictionaries(
    st.text(alphabet="abcxyz_", min_size=1, max_size=4),
    st.one_of(toml_scalars, st.lists(st.integers(-5, 5), max_size=3)),
    max_size=4,
)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["hosts", "profiles", "configs", "live"]),
        st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=3), toml_tables, max_size=2),
        max_size=3,
    )
)
def test_toml_loader_reads_back_or_names_the_key(data):
    p = scratch() / "workbench.toml"
    write_toml(p, data)
    try:
        got = load_toml(p)
    except InputError as exc:
        msg = one_line(exc, "workbench.toml")
        assert not _finite(data), msg
        return
    assert _finite(data)
    for section, tables in data.items():
        for name, table in tables.items():
            assert got[section][name] == table


@FUZZ
@given(st.binary(max_size=120) | st.text(alphabet="[]=\"'\n.abc01 =#{}\\xef", max_size=80).map(str.encode))
def test_toml_loader_on_arbitrary_bytes(raw):
    p = scratch() / "workbench.toml"
    p.write_bytes(raw)
    try:
        load_toml(p)
    except InputError as exc:
        one_line(exc, "workbench.toml")


@pytest.mark.parametrize("depth", [10, 70, 5000])
def test_every_reader_bounds_nesting(depth):
    text = "[" * depth + "]" * depth
    if depth > strictjson.MAX_DEPTH:
        with pytest.raises(InputError, match="nested"):
            strictjson.loads(text, "x.json")
        with pytest.raises(InputError, match="nested"):
            parse('{"a": ' + text + "}", "x.json")
    else:
        assert strictjson.loads(text, "x.json") is not None
        parse('{"a": ' + text + "}", "x.json")
