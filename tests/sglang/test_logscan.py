"""The log parser's compiled sorter and readers (_logscan.c) against the Python they stand in for:
each gives what the parser's own regexes and list passes give, or None (the Python path then reads
the text), never another answer. Then whole logs parsed both ways, fuzzed, field for field."""

from __future__ import annotations

import codecs
import math
import re
from itertools import compress, repeat

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sglang.test_logparse import (
    CORPUS,
    DECODE_049,
    DECODE_0523,
    DECODE_054_ITER,
    DECODE_055,
    DECODE_DSPARK,
    DECODE_HYBRID_049,
    DECODE_NOSPEC,
    DECODE_TP1_MS,
    FAILURES,
    PREFILL_049,
    PREFILL_0523,
    PREFIXES,
    STARTUP_0523,
)
from workbench.sglang import logparse
from workbench.sglang.logparse import (
    _COMMON,
    _DECODE_SHAPE,
    _SHAPE_NUMBERS,
    _STAMP_BULK,
    DECODE_FIELDS,
    PREFILL_FIELDS,
    LogParser,
    iter_scans,
)

try:
    from workbench.sglang import _logscan
except ImportError:  # `make venv` builds it: a missing module is a failed build, not a skip
    pytest.fail("workbench/sglang/_logscan.c was not built: pip install -e . with a C compiler", pytrace=False)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BULK = [
    DECODE_049,
    DECODE_055,
    DECODE_0523,
    DECODE_054_ITER,
    DECODE_TP1_MS,
    DECODE_HYBRID_049,
    DECODE_NOSPEC,
    DECODE_DSPARK,
    PREFILL_049,
    PREFILL_0523,
] + [line for line, _, _ in CORPUS]
ACCESS = '[2026-11-02 10:00:13] INFO:     127.0.0.1:36879 - "POST /generate HTTP/1.1" 200 OK'
# pieces that move a line across the sorter's and readers' edges
EDGES = [
    "#full token",
    "usage: full=",
    "block accept len",
    "block ",
    "full",
    "] ",
    "]",
    " ",
    "[2",
    "[",
    "#running-req: ",
    " batch",
    "Decode batch",
    "] Decode batch",
    "] INFO:  ",
    "] INFO: ",
    "] INFO:",
    "] Decode",
    "] Prefill batc",
    "] Prefill batch",
    ".",
    "..",
    "1.2.3",
    "+",
    "-",
    "_",
    "a",
    "é",
    "\u00b2",
    "\u00aa",
    "\u20ac",
    "0",
    "007",
    "1" * 70,
    ", ",
    "accept len: ",
    "accept rate: ",
    "cuda graph: ",
    "musa graph: ",
    "True",
    "\t",
    "\x00",
    "\ufffd",
    ", #queue-req: 3",
    "[2026-11-02 10:00:13 TP0] ",
]


def _mutated(line: str, rnd_ops: list[tuple[int, int, str]]) -> str:
    """``line`` with pieces cut out or put in (positions taken modulo its length)."""
    for pos, cut, piece in rnd_ops:
        p = pos % (len(line) + 1)
        line = line[:p] + piece + line[p + cut % 4 :]
    return line


ops = st.lists(st.tuples(st.integers(0, 400), st.integers(0, 7), st.sampled_from(EDGES)), max_size=3)
mutated_line = st.builds(_mutated, st.sampled_from([*BULK, ACCESS, STARTUP_0523.splitlines()[2]]), ops)


def _python_sort(text: str) -> list[int]:
    """The Python path's sort of each line: 0 decode, 1 prefill, 2 other, 3 uvicorn INFO."""
    lines = text.split("\n")[:-1]
    at = list(map(str.find, lines, repeat("] ")))
    common = list(map(str.startswith, lines, repeat(_COMMON), at))
    kinds = []
    for line, a, c in zip(lines, at, common):
        if not c:
            kinds.append(2)
        else:
            kinds.append(
                0 if line.startswith("] Decode batch", a) else 1 if line.startswith("] Prefill batch", a) else 3
            )
    return kinds


def _plain(lines: list[str]) -> bool:
    """What _bulk leaves as it is: every line from "[2", one " batch" each."""
    return all(x.startswith("[2") for x in lines) and "\n".join(lines).count(" batch") <= len(lines)


def _check_sort(got: tuple, text: str) -> None:
    """``got`` is ``sort``'s answer for the whole lines of ``text`` (read as the parser reads it)."""
    d_text, d_rows, d_plain, p_text, p_rows, p_plain, o_text, o_rows, o_starts, starts, ends = got
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    kinds = _python_sort(text)
    split = text.split("\n")[:-1]
    for joined, rows, kind in ((d_text, d_rows, 0), (p_text, p_rows, 1), (o_text, o_rows, 2)):
        want = [i for i, k in enumerate(kinds) if k == kind]
        assert list(memoryview(rows).cast("q")) == want
        assert joined == "\n".join(split[i] for i in want)
    for plain, kind in ((d_plain, 0), (p_plain, 1)):
        assert plain == _plain([x for x, k in zip(split, kinds) if k == kind])
    others = [x for x, k in zip(split, kinds) if k == 2]
    assert [o_text[s:].split("\n", 1)[0] for s in memoryview(o_starts).cast("q")] == others
    assert len(starts) == len(ends) == 8 * len(split)


line_end = st.sampled_from(["\n", "\n", "\r\n", "\r"])
garbage = st.sampled_from([b"", b"", b"\xe2\x82", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98"])


@FUZZ
@given(st.lists(st.tuples(mutated_line, line_end, garbage), min_size=1, max_size=12))
def test_sort_sorts_each_line_as_the_python_path_does(parts):
    text = "".join(x + e for x, e, _ in parts) + "\n"
    got = _logscan.sort(text)
    if max(map(ord, text)) > 255:
        assert got is None
    else:
        assert got is not None
        _check_sort(got, text)
        for joined in got[0], got[3], got[6]:  # one form per text, as Python makes them
            assert type(joined) is str and joined.isascii() == all(ord(c) < 128 for c in joined)
    # the same log as the bytes a server wrote (any text; invalid UTF-8 read as the parser reads it)
    data = b"".join(g + (x + e).encode("utf-8", "surrogatepass") for x, e, g in parts) + b"\n"
    got = _logscan.sort(data)
    assert got is not None
    _check_sort(got, codecs.utf_8_decode(data, "replace", True)[0])
    lines = logparse._Lines(data, memoryview(got[9]).cast("q"), memoryview(got[10]).cast("q"))
    text = codecs.utf_8_decode(data, "replace", True)[0]
    assert list(lines) == text.replace("\r\n", "\n").replace("\r", "\n").split("\n")[:-1]


def test_sort_leaves_text_it_cannot_read_to_the_python_path():
    assert _logscan.sort("no newline at the end") is None
    assert _logscan.sort(b"no newline at the end\r") is None
    assert _logscan.sort("") is None and _logscan.sort(b"") is None
    assert _logscan.sort(DECODE_0523 + " \u20ac\n") is None  # a str not of one-byte kind
    assert _logscan.sort((DECODE_0523 + " \u20ac\n").encode()) is not None  # its bytes are read
    assert _logscan.sort(DECODE_0523 + " é\n") is not None  # latin-1 is
    with pytest.raises(TypeError):
        _logscan.sort(12)


def _python_shape(joined: str) -> tuple[np.ndarray, list[bool]] | None:
    """What Columns._decode_shape caches from the regex (None: the columns read each on its own)."""
    n = joined.count("\n") + 1
    if any(k in joined for k in ("#full token", "usage: full=", "block accept len")):  # _unusual
        return None
    found = _DECODE_SHAPE.findall(joined)
    if len(found) != n:
        return None
    try:
        cols = [[float(x) if x else math.nan for x in col] for i, col in enumerate(zip(*found)) if i != 5]
    except ValueError:
        return None
    return np.array(cols), [g == "True" for g in list(zip(*found))[5]]


@FUZZ
@given(st.lists(mutated_line, min_size=1, max_size=6))
def test_decode_shape_reads_what_the_shape_regex_reads(lines):
    joined = "\n".join(lines)
    got = _logscan.decode_shape(joined)
    want = _python_shape(joined) if max(map(ord, joined), default=0) <= 255 else None
    if want is None:
        assert got is None
        return
    assert got is not None
    values = np.frombuffer(got[0], dtype=float).reshape(len(_SHAPE_NUMBERS), len(lines))
    np.testing.assert_array_equal(values, want[0])  # NaN where NaN, every other value bit for bit
    assert list(map(bool, got[1])) == want[1]


@pytest.mark.parametrize("field", ["#full token: 3", "usage: full=0.1", "block accept len: 2.0"])
@pytest.mark.parametrize("where", ["before", "after"])
def test_decode_shape_leaves_a_line_with_an_exact_form_field_to_the_columns(field, where):
    line = DECODE_055 + field if where == "after" else DECODE_055.replace("] Decode", f"] {field} Decode")
    assert _logscan.decode_shape(line) is None and _python_shape(line) is None
    assert _logscan.decode_shape(DECODE_055 + "x" + field[1:]) is not None  # not that field: read


def test_decode_shape_reads_every_generation_and_refuses_a_broken_number():
    for line in (DECODE_049, DECODE_055, DECODE_0523, DECODE_054_ITER, DECODE_TP1_MS, DECODE_NOSPEC):
        assert _logscan.decode_shape(line) is not None, line
    assert _logscan.decode_shape(DECODE_0523.replace("token usage: 0.66", "token usage: 1.2.3")) is None
    assert _logscan.decode_shape(DECODE_0523.replace("#queue-req: 2", "#queue-req: 2\u00b2")) is None  # \w after it


@FUZZ
@given(st.lists(mutated_line, min_size=1, max_size=6))
def test_stamps_reads_what_the_stamp_regex_reads(lines):
    joined = "\n".join(lines)
    got = _logscan.stamps(joined)
    want = _STAMP_BULK.findall(joined)
    if max(map(ord, joined), default=0) > 255 or len(want) != len(lines):
        assert got is None
    else:
        assert got == want


# ---------------------------------------------------------------------------------------------
# Whole logs, parsed both ways
# ---------------------------------------------------------------------------------------------
def _scan_both(data: bytes, step: int, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    out = []
    for native in (_logscan, None):
        monkeypatch.setattr(logparse, "_native", native)
        p, seen = LogParser(), []
        for i in range(0, len(data), step):
            seen.append(_view(p.feed(data[i : i + step])))
        seen.append(_view(p.finish()))
        seen.append(
            {
                "state": (
                    p.lines,
                    p.bytes,
                    p._last_stamp,
                    p._weights_begin,
                    p._weights_end,
                    p.server_port,
                    p._no_context_arg,
                )
            }
        )
        out.append(seen)
    return out


def _col(a: np.ndarray) -> list:
    return ["nan" if x != x else x for x in a.tolist()]


def _view(scan: logparse.LogScan) -> dict:
    """Everything a scan answers, in a form == compares (NaN as a name)."""
    v: dict = {"lines": scan.lines, "events": scan.events, "records": list(scan.iter_records())}
    for cols, names in ((scan.decode, DECODE_FIELDS), (scan.prefill, PREFILL_FIELDS)):
        v[cols.kind] = {
            "n": len(cols),
            "lines": cols.lines,
            "line": cols.line,
            "joined": cols.joined,
            "stamps": cols.stamps(),
            "graph": cols.graph(),
            **{name: _col(cols.column(name)) for name in names},
        }
    return v


def _log(lines: list[str], seed: int) -> bytes:
    rnd = np.random.default_rng(seed)
    body = [lines[i] for i in rnd.integers(0, len(lines), 400)]
    return (STARTUP_0523 + "\n".join(body) + "\n").encode("utf-8", "surrogatepass")


def test_a_serving_log_takes_the_compiled_path_and_parses_the_same(monkeypatch):
    lines = BULK + [ACCESS] * 8 + [PREFIXES["compose"] + DECODE_0523, FAILURES[3][1], "", "plain text"]
    data = _log(lines, 0)
    text = data.decode()
    assert LogParser()._parse_sorted(logparse.LogScan(), text, _logscan.sort(text)) is True
    for step in (len(data), 997, 64):
        compiled, python = _scan_both(data, step, monkeypatch)
        assert compiled == python


def test_a_stampless_bulk_line_sends_its_chunk_to_the_python_path(monkeypatch):
    text = ACCESS + "\n" + DECODE_0523.split("] ", 1)[1] + "\n" + DECODE_049 + "\n"
    scan = logparse.LogScan()
    p = LogParser()
    assert p._parse_sorted(scan, text, _logscan.sort(text)) is False
    assert p.lines == 0 and scan.lines == 0 and not scan.events  # nothing changed
    compiled, python = _scan_both(text.encode(), len(text), monkeypatch)
    assert compiled == python and compiled[0]["decode"]["n"] == 2


def _fuzzed_log() -> st.SearchStrategy[bytes]:
    piece = st.one_of(
        mutated_line,
        st.sampled_from([ACCESS, "", "\r", FAILURES[3][1]]),
        st.sampled_from(STARTUP_0523.splitlines()),
        st.builds(lambda p, x: PREFIXES[p] + x, st.sampled_from(list(PREFIXES)), st.sampled_from(BULK)),
    )
    glue = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])
    return st.lists(st.tuples(piece, glue, garbage), max_size=25).map(
        lambda ps: b"".join((a + b).encode("utf-8", "surrogatepass") + g for a, b, g in ps)
    )


def test_fuzzed_logs_parse_the_same_both_ways(monkeypatch):
    @FUZZ
    @given(_fuzzed_log(), st.integers(1, 400))
    def check(data, step):
        compiled, python = _scan_both(data, step, monkeypatch)
        assert compiled == python

    check()


def test_a_streamed_file_gives_the_same_records_both_ways(monkeypatch, tmp_path):
    path = tmp_path / "serving.log"
    path.write_bytes(_log(BULK + [ACCESS] * 8, 1) * 40)
    got = []
    for native in (_logscan, None):
        monkeypatch.setattr(logparse, "_native", native)
        with open(path, "rb") as fh:
            got.append([_view(s) for s in iter_scans(fh, chunk=1 << 16)])
    assert got[0] == got[1] and sum(v["decode"]["n"] for v in got[0]) > 1000


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "python"])
def test_a_number_that_is_no_number_is_read_by_its_column(native, monkeypatch):
    """ "1.2.3" fits the shape's [\\d.]+ but not float(): the column's own reading takes it
    (its leading number), where it once raised ValueError out of the parser."""
    monkeypatch.setattr(logparse, "_native", _logscan if native else None)
    line = DECODE_0523.replace("token usage: 0.66", "token usage: 1.2.3")
    scan = logparse.parse_text(line + "\n" + DECODE_0523 + "\n")
    assert scan.decode.column("token_usage").tolist() == [1.2, 0.66]
    assert scan.decode.column("accept_len").tolist() == [3.05, 3.05]


def test_the_python_sort_here_is_the_parsers(monkeypatch):
    """_python_sort above restates the parser's sort; held to the parser's own result."""
    text = "".join(x + "\n" for x in [*BULK, ACCESS, "x] INFO:  y", "] ", ""])
    kinds = _python_sort(text)
    monkeypatch.setattr(logparse, "_native", None)
    got = LogParser().feed(text)
    lines = text.split("\n")[:-1]
    assert got.decode.lines == list(compress(lines, [k == 0 for k in kinds]))
    assert got.prefill.lines == list(compress(lines, [k == 1 for k in kinds]))
    assert list(compress(lines, [k == 3 for k in kinds])) == [ACCESS, "x] INFO:  y"]


# ---------------------------------------------------------------------------------------------
# Rare lines: the compiled scan for the alternatives' literals, then the regex on those lines
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("part", logparse._RARE_PARTS)
def test_every_match_of_a_rare_alternative_starts_with_its_literal(part):
    lit = logparse._leading_literal(part)
    assert len(lit) >= 2 and logparse._RARE_LITERALS is not None

    @settings(max_examples=40, deadline=None)
    @given(st.from_regex(re.compile(part), fullmatch=True))
    def check(s):
        assert s.startswith(lit)

    check()


@pytest.mark.parametrize(
    "part, lit",
    [
        (r"ab?c", "a"),
        (r"ab*", "a"),
        (r"ab+c", "ab"),
        (r"a\(b", "a(b"),
        (r"a\db", "a"),
        (r"ab{2}", "a"),
        (r"(?:x)", ""),
        (r"abc", "abc"),
    ],
)
def test_leading_literal_stops_where_a_match_may_differ(part, lit):
    assert logparse._leading_literal(part) == lit


rare_line = st.one_of(
    mutated_line,
    st.sampled_from([x for _, x in FAILURES]),
    st.sampled_from(STARTUP_0523.splitlines()),
    st.builds(_mutated, st.sampled_from([x for _, x in FAILURES]), ops),
)


@FUZZ
@given(st.lists(rare_line, min_size=1, max_size=10))
def test_lines_with_finds_each_line_that_holds_a_literal(lines):
    text = "\n".join(lines)
    lits = logparse._RARE_LITERALS
    got = _logscan.lines_with(text, lits)
    if not text or max(map(ord, text)) > 255:
        assert got is None
        return
    assert got == [k for k, x in enumerate(lines) if any(lit in x for lit in lits)]
    regex = sorted({text.count("\n", 0, m.start()) for m in logparse._RARE.finditer(text)})
    at = (
        memoryview(np.array([0] + [i + 1 for i, c in enumerate(text) if c == "\n"], dtype=np.int64)).cast("B").cast("q")
    )
    assert LogParser._rare_lines(text, at) == regex  # what the regex alone finds
    assert set(regex) <= set(got)
