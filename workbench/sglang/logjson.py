"""JSON Lines of a log's records (what ``logs parse --json`` writes), streamed a chunk at a time.

Each line is ``json.dumps`` of the record ``stream_records`` gives, byte for byte. Decode and
prefill lines come from a compiled writer (``_logjson.c``, built with the package where a C
compiler is found) or, without it, from the columns (``Columns.iter_json``). A server prints its
bulk lines in one shape, so the first line of a chunk gives a program (its literals, and which
value each field is) that the writer matches every line against and writes the JSON of from a
template. A line of another shape gets a program of its own (a restart into another SGLang
release); a line the writer cannot write exactly as Python would (``nan``, ``1e+30``, a 16-digit
count, a field it does not know) is left to the columns, so the two paths give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Optional, TypeVar, cast

from workbench.sglang.logparse import (
    _FIELD_KEYS,
    _INT_FIELDS,
    DECODE_FIELDS,
    PREFILL_FIELDS,
    STREAM_CHUNK,
    Columns,
    LogScan,
    iter_scans,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

T = TypeVar("T")
SHAPES = 4  # programs tried per chunk and kind before the rest go to the columns

# a bulk line's prefix: "[stamp( rank)?] (Decode|Prefill) batch( [iter])?[.,] ", then "key: value, ..."
_HEAD = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?( [A-Za-z0-9_ ]*)?\]( ?)"
    r"(Decode|Prefill) batch( \[\d+\])?([.,]) "
)
_GRAPH_KEY = re.compile(r"(?:cuda|cpu|npu|musa) graph")
_KEY_FIELD = {key[:-2]: name for name, key in _FIELD_KEYS.items()}

# the writer's ops (_logjson.c): matching, then writing
M_LIT, M_TIME, M_RANK, M_INT, M_FLOAT, M_BOOL = range(6)
E_LIT, E_RAW, E_FLOAT, E_BOOL, E_LINE = range(5)
SLOTS = 32  # values a line can hold; the writer keeps the last for where a line ends


@dataclass(frozen=True)
class Program:
    """A shape's matching and writing ops, with their literals (see ``_logjson.c``)."""

    mops: npt.NDArray[np.int32]
    eops: npt.NDArray[np.int32]
    lit_off: npt.NDArray[np.int32]
    lit_len: npt.NDArray[np.int32]
    lits: npt.NDArray[np.uint8]
    template_bytes: int  # the most a line writes beyond its own bytes


def program(kind: str, line: str) -> Program | None:
    """The program of ``line``'s shape, or None where the line has a part the writer does not know."""
    import numpy as np

    m = _HEAD.match(line)
    if m is None or m.group(3).lower() != kind:
        return None
    rank_part, space, _, it, sep = m.groups()
    items = line[m.end() :].split(", ")
    trail = items[-1] == ""
    if trail:
        items.pop()
    if len(items) + 3 >= SLOTS:  # (the writer keeps the last slot for where a line ends)
        return None
    lits: list[bytes] = []

    def lit(text: str) -> int:
        lits.append(text.encode("ascii"))
        return len(lits) - 1

    mops: list[tuple[int, int]] = []
    pending = "["

    def flush() -> None:
        nonlocal pending
        if pending:
            mops.append((M_LIT, lit(pending)))
            pending = ""

    slot = iter(range(SLOTS - 1))
    t_slot = next(slot)
    flush()
    mops.append((M_TIME, t_slot))
    r_slot = None
    if rank_part is not None:
        if not rank_part.strip():
            return None
        pending = " "
        flush()
        r_slot = next(slot)
        mops.append((M_RANK, r_slot))
    pending = "]" + space + kind.capitalize() + " batch"
    values: dict[str, tuple[int, int]] = {}  # field -> (kind op, slot)
    if it is not None:
        pending += " ["
        flush()
        values["iter"] = (M_INT, next(slot))
        mops.append((M_INT, values["iter"][1]))
        pending = "]"
    pending += sep + " "
    graph_slot = None
    for j, item in enumerate(items):
        key, colon, _ = item.partition(": ")
        graph = _GRAPH_KEY.fullmatch(key) is not None
        name = _KEY_FIELD.get(key)
        if not colon or (graph and graph_slot is not None) or (not graph and (name is None or name in values)):
            return None  # a field the records do not carry, or one twice
        pending += (", " if j else "") + key + ": "
        flush()
        if graph:
            graph_slot = next(slot)
            mops.append((M_BOOL, graph_slot))
            continue
        assert name is not None
        values[name] = (M_INT if name in _INT_FIELDS else M_FLOAT, next(slot))
        mops.append(values[name])
    if trail:
        pending += ", "
    flush()

    eops: list[tuple[int, int]] = []
    text = '{"kind": "%s", "time": "' % kind
    written = 0

    def put(kind_op: int, arg: int) -> None:
        nonlocal text, written
        if text:
            eops.append((E_LIT, lit(text)))
            written += len(text)
            text = ""
        eops.append((kind_op, arg))

    put(E_RAW, t_slot)
    text = '", "line": '
    put(E_LINE, 0)
    for name in DECODE_FIELDS if kind == "decode" else PREFILL_FIELDS:
        text += ', "%s": ' % name
        got = values.get(name)
        if got is None:
            text += "null"
        else:
            put(E_FLOAT if got[0] == M_FLOAT else E_RAW, got[1])
    text += ', "cuda_graph": '
    if graph_slot is None:
        text += "null"
    else:
        put(E_BOOL, graph_slot)
    if r_slot is not None:
        text += ', "rank": "'
        put(E_RAW, r_slot)
        text += '"'
    text += "}"
    eops.append((E_LIT, lit(text)))
    written += len(text) + 1 + 20 + sum(5 if op == E_BOOL else 1 for op, _ in eops if op in (E_BOOL, E_FLOAT))
    offs = np.cumsum([0] + [len(b) for b in lits[:-1]], dtype=np.int64).astype(np.int32)
    return Program(
        np.array(mops, dtype=np.int32),
        np.array(eops, dtype=np.int32),
        offs,
        np.array([len(b) for b in lits], dtype=np.int32),
        np.frombuffer(b"".join(lits), dtype=np.uint8).copy(),
        written,
    )


@dataclass
class Written:
    """What the writer wrote of a kind's lines: every line in one ``block`` of JSON Lines (one
    program took them all: the common case) with where each line ends, or ``texts`` per line
    (None where the columns must write it)."""

    block: bytes | None = None
    ends: npt.NDArray[np.int64] | None = None
    texts: list[str | None] | None = None

    def lines(self) -> list[str | None]:
        if self.block is not None:
            got: list[str | None] = list(self.block.decode("ascii").split("\n"))
            got.pop()
            return got
        return cast("list[str | None]", self.texts)


def compiled_json(kind: str, lines: Sequence[str], numbers: Iterable[int], joined: str | None = None) -> Written:
    """The JSON of each line the writer can write, trying up to ``SHAPES`` programs: the first
    line's, then the first line left's. ``joined``: the lines joined by newlines, where the caller
    has them."""
    import numpy as np

    from workbench.sglang import _logjson

    n = len(lines)
    if not n:
        return Written(texts=[])
    text = "\n".join(lines) if joined is None else joined
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    line_no = np.fromiter(numbers, dtype=np.int64, count=n)
    todo = np.ones(n, dtype=np.uint8)
    texts: list[str | None] | None = None  # per line, once a first program left some
    starts = np.empty(n, dtype=np.int64)
    scanned = False  # the writer has noted where each line starts
    first = 0
    for _ in range(SHAPES):
        prog = program(kind, lines[first])
        if prog is not None:
            out = np.empty(len(data) + n * prog.template_bytes, dtype=np.uint8)
            done = np.empty(n, dtype=np.int64)
            ends = np.empty(n, dtype=np.int64)
            w, nd = _logjson.emit(
                data,
                todo,
                line_no,
                starts,
                not scanned,
                prog.mops,
                prog.eops,
                prog.lit_off,
                prog.lit_len,
                prog.lits,
                out,
                done,
                ends,
            )
            if nd == n:
                return Written(block=out[:w].tobytes(), ends=ends)
            scanned = True
            got = out[:w].tobytes().decode("ascii").split("\n")
            texts = texts if texts is not None else [None] * n
            for i, t in zip(done[:nd].tolist(), got):
                texts[i] = t
        # a line no program of its own takes (a shape the writer does not know, or a value it
        # cannot write exactly) is the columns'
        todo[first] = 0
        left = np.flatnonzero(todo)
        if not len(left):
            break
        first = int(left[0])
    return Written(texts=texts if texts is not None else [None] * n)


def _texts(cols: Columns, compiled: bool) -> list[str]:
    """Every line's JSON text, in line order."""
    if not compiled:
        return [t for _, t in cols.iter_json()]
    got = compiled_json(cols.kind, cols.texts(), cols.line, cols.joined).lines()
    return _filled(cols, got)


def _filled(cols: Columns, got: list[str | None]) -> list[str]:
    """``got`` with the lines the writer left written by the columns."""
    left = [i for i, t in enumerate(got) if t is None]
    if not left:
        return cast("list[str]", got)
    rest = dict(cols.json_rows(left))
    return [t if t is not None else rest[i] for i, t in enumerate(got)]


_Part = tuple["npt.NDArray[np.int64]", bytes, Optional["npt.NDArray[np.int64]"]]


def _json_bytes(cols: Columns) -> _Part:
    """The line numbers, the JSON Lines bytes of a kind's lines through the compiled writer, and
    where each line ends (None where the columns wrote some and that is not known without a scan)."""
    import numpy as np

    numbers = np.fromiter(cols.line, dtype=np.int64, count=len(cols))
    got = compiled_json(cols.kind, cols.texts(), numbers, cols.joined)
    if got.block is not None:
        return numbers, got.block, got.ends
    return numbers, ("\n".join(_filled(cols, got.lines())) + "\n").encode("ascii"), None


def compiled_available() -> bool:
    """The compiled writer was built with the package."""
    try:
        from workbench.sglang import _logjson  # noqa: F401
    except ImportError:
        return False
    return True


def _scans(source: BinaryIO, chunk: int, compiled: bool | None) -> Iterator[tuple[LogScan, bool]]:
    """Each chunk's scan, and whether its bulk lines take the compiled writer (``None``: where it
    was built)."""
    use = compiled_available() if compiled is None else bool(compiled)
    if use and not compiled_available():
        raise RuntimeError("the compiled JSON writer (workbench/sglang/_logjson.c) was not built")
    for scan in iter_scans(source, chunk):
        yield scan, use
        del scan


def _opened(source: str | Path | BinaryIO) -> tuple[BinaryIO, bool]:
    if hasattr(source, "read"):
        return cast(BinaryIO, source), False
    return open(source, "rb"), True


def _events(scan: LogScan, want: set[str] | None) -> tuple[list[int], list[str]]:
    import json

    dumps = json.JSONEncoder(check_circular=False, allow_nan=False).encode
    ev = [e for e in scan.events if want is None or e["kind"] in want]
    return [e["line"] for e in ev], [dumps(e) for e in ev]


def _per_chunk(
    source: str | Path | BinaryIO,
    kinds: Iterable[str] | None,
    chunk: int,
    compiled: bool | None,
    make: Callable[[LogScan, bool, set[str] | None], T],
) -> Iterator[T]:
    """``make(scan, compiled, kinds)`` of each chunk of the log, the chunk let go before the next."""
    fh, mine = _opened(source)
    want = set(kinds) if kinds else None
    try:
        for scan, use in _scans(fh, chunk, compiled):
            got = make(scan, use, want)
            del scan
            yield got
            del got
    finally:
        if mine:
            fh.close()


def _chunk_texts(scan: LogScan, compiled: bool, want: set[str] | None) -> list[str]:
    """A chunk's records as JSON texts, in line order."""
    parts = [
        (cols.line, _texts(cols, compiled))
        for cols in (scan.decode, scan.prefill)
        if len(cols) and (want is None or cols.kind in want)
    ]
    ev = _events(scan, want)
    if ev[0]:
        parts.append(ev)
    if len(parts) > 1:
        return _in_line_order(parts)
    return parts[0][1] if parts else []


def _chunk_bytes(scan: LogScan, compiled: bool, want: set[str] | None) -> bytes:
    """A chunk's JSON Lines; through the compiled writer no record is a Python object of its own."""
    import numpy as np

    if not compiled:
        texts = _chunk_texts(scan, compiled, want)
        return ("\n".join(texts) + "\n").encode("ascii") if texts else b""
    parts = [
        _json_bytes(cols) for cols in (scan.decode, scan.prefill) if len(cols) and (want is None or cols.kind in want)
    ]
    lines, texts = _events(scan, want)
    if lines:
        parts.append((np.array(lines, dtype=np.int64), ("\n".join(texts) + "\n").encode("ascii"), None))
    if len(parts) > 1:
        return _merged(parts)
    return parts[0][1] if parts else b""


def stream_json_lines(
    source: str | Path | BinaryIO,
    kinds: Iterable[str] | None = None,
    chunk: int = STREAM_CHUNK,
    compiled: bool | None = None,
) -> Iterator[str]:
    """``json.dumps`` of every record of ``stream_records``, in line order, one text per record.
    ``compiled``: the compiled writer for bulk lines (True), the columns (False), or the writer
    where it was built (None)."""
    for texts in _per_chunk(source, kinds, chunk, compiled, _chunk_texts):
        yield from texts


def stream_json_bytes(
    source: str | Path | BinaryIO,
    kinds: Iterable[str] | None = None,
    chunk: int = STREAM_CHUNK,
    compiled: bool | None = None,
) -> Iterator[bytes]:
    """The JSON Lines of ``stream_json_lines`` as bytes, a chunk at a time (each piece ends in a
    newline)."""
    for piece in _per_chunk(source, kinds, chunk, compiled, _chunk_bytes):
        if piece:
            yield piece


def _merged(parts: list[_Part]) -> bytes:
    """Several kinds' JSON Lines in line order (the compiled merge: one block copy per run)."""
    import numpy as np

    from workbench.sglang import _logjson

    none = np.zeros(0, dtype=np.int64)
    runs: list[tuple[bytes, Any, Any]] = []
    for n, b, ends in parts + [(none, b"", none)] * (3 - len(parts)):
        if ends is None:
            ends = np.flatnonzero(np.frombuffer(b, dtype=np.uint8) == 10) + 1
        runs.append((b, ends, n))
    (b0, e0, n0), (b1, e1, n1), (b2, e2, n2) = runs
    out = bytearray(sum(len(b) for _, b, _ in parts))
    w = _logjson.merge(b0, e0, n0, b1, e1, n1, b2, e2, n2, out)
    return bytes(out[:w]) if w != len(out) else bytes(out)


def _in_line_order(parts: list[tuple[list[int], list[str]]]) -> list[str]:
    """Texts of several line-ordered runs merged by line number."""
    import numpy as np

    numbers = np.fromiter(chain.from_iterable(p[0] for p in parts), dtype=np.int64)
    texts = list(chain.from_iterable(p[1] for p in parts))
    order = np.argsort(numbers, kind="stable").tolist()
    return [texts[order[0]]] if len(order) == 1 else list(itemgetter(*order)(texts))
