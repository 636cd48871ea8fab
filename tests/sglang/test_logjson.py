"""The compiled JSON writer of bulk log lines (_logjson.c): byte for byte what the columns write,
on the lines it takes; every other line left to the columns."""

from __future__ import annotations

import io
import json

import pytest

from workbench.sglang.logjson import compiled_available, compiled_json, program, stream_json_bytes, stream_json_lines
from workbench.sglang.logparse import parse_text

# `make venv` builds it (a C compiler is on every machine the project installs on): a missing
# writer is a failed build, not a reason to skip
assert compiled_available(), "workbench/sglang/_logjson.c was not built: pip install -e . with a C compiler"

STAMP = "[2026-11-02 10:00:13 TP0] "
DECODE_0523_PLAIN = (
    "[2026-11-02 10:00:13 TP0] Decode batch, #running-req: 24, #token: 233600, token usage: 0.66, "
    "cuda graph: True, gen throughput (token/s): 239.06, #queue-req: 2"
)
DECODE = (
    "Decode batch, #running-req: {r}, #token: {t}, token usage: {u}, accept len: {a}, "
    "accept rate: 0.68, cuda graph: True, gen throughput (token/s): {g}, #queue-req: 2"
)


def _columns_json(text: str) -> dict[int, str]:
    scan = parse_text(text)
    return dict(pair for cols in (scan.decode, scan.prefill) for pair in cols.iter_json())


def _writer_json(text: str) -> dict[int, str | None]:
    scan = parse_text(text)
    out: dict[int, str | None] = {}
    for cols in (scan.decode, scan.prefill):
        if len(cols):
            out.update(zip(cols.line, compiled_json(cols.kind, cols.lines, cols.line).lines()))
    return out


@pytest.mark.parametrize(
    "field, value, written",
    [
        ("u", "0.00", True),
        ("u", "0.0001", True),
        ("g", "10234.50", True),
        ("g", "-0.00", True),
        ("g", "123456789012.345", True),
        ("r", "0", True),
        ("t", "123456789012345", True),
        ("a", "3.10000", True),
        ("u", "0.00001", False),  # repr writes 1e-05
        ("g", "1234567890123456.0", False),  # 16 significant digits
        ("g", "1e+30", False),
        ("a", "nan", False),
        ("a", "inf", False),
        ("a", "3", False),  # a float field printed as an integer: 3.0 in the record
        ("r", "007", False),
        ("t", "1234567890123456", False),  # int(float()) of 16 digits is not exact
        ("r", "-3", False),
        ("u", ".5", False),
        ("u", "5.", False),
        ("u", "05.1", False),
    ],
)
def test_the_writer_writes_what_python_would_or_leaves_the_line(field, value, written):
    values = {"r": "24", "t": "233600", "u": "0.66", "a": "3.05", "g": "239.06"}
    plain = STAMP + DECODE.format(**values)
    values[field] = value
    odd = STAMP + DECODE.format(**values)
    text = "\n".join([plain, odd, plain]) + "\n"
    want = _columns_json(text)
    got = _writer_json(text)
    assert got[1] == want[1] and got[3] == want[3]  # the plain lines: the writer's, exact
    assert (got[2] is not None) == written, (value, got[2], want[2])
    if written:
        assert got[2] == want[2]
    # and through the stream: every line, byte for byte, whoever wrote it
    assert list(stream_json_lines(io.BytesIO(text.encode()), compiled=True)) == [want[1], want[2], want[3]]


@pytest.mark.parametrize(
    "stamp, written",
    [
        ("[2026-11-02 10:00:13 DP0 TP0 EP0] ", True),
        ("[2026-11-02 10:00:13   TP1  ] ", True),
        ("[2026-11-02 10:00:13.250] ", True),
        ("[2026-11-02 10:00:13,250 TP0] ", True),
        ("[2026-11-02 10:00:13] ", True),
        ("[2026-11-02 10:00:13]", True),
        ('[2026-11-02 10:00:13 odd"rank] ', False),
        ("[2026-11-02 10:00:13 \tTP0] ", False),
        ("[2026-11-02 10:00:13 ] ", False),
    ],
)
def test_stamps_and_ranks(stamp, written):
    line = stamp + DECODE.format(r=1, t=2, u="0.50", a="2.00", g="5.00")
    text = line + "\n"
    want = _columns_json(text)
    got = _writer_json(text)
    assert (got[1] is not None) == written, (stamp, got, want)
    if written:
        assert got[1] == want[1]
    assert list(stream_json_lines(io.BytesIO(text.encode()), compiled=True)) == [want[1]]


def test_every_release_shape_gets_its_own_program_in_one_chunk():
    """Decode and prefill lines of 0.4.9, 0.5.5, 0.5.4 (iteration numbers) and 0.5.23 in one chunk:
    one program per shape, all written by the writer, in line order with the events."""
    from tests.sglang.test_logparse import (
        DECODE_049,
        DECODE_0523,
        DECODE_054_ITER,
        DECODE_055,
        PREFILL_049,
        PREFILL_0523,
        PREFILL_055,
    )

    lines = [DECODE_049, PREFILL_049, DECODE_055, PREFILL_055, DECODE_054_ITER, DECODE_0523, PREFILL_0523]
    text = "\n".join([*lines, "[2026-11-02 10:00:14] The server is fired up and ready to roll!", *lines]) + "\n"
    for shape in lines:
        kind = "decode" if "Decode" in shape else "prefill"
        assert program(kind, shape) is not None, shape
    got = _writer_json(text)
    assert all(t is not None for t in got.values())
    assert got == _columns_json(text)
    want = list(stream_json_lines(io.BytesIO(text.encode()), compiled=False))
    assert list(stream_json_lines(io.BytesIO(text.encode()), compiled=True)) == want
    assert b"".join(stream_json_bytes(io.BytesIO(text.encode()), compiled=True)) == ("\n".join(want) + "\n").encode()


def test_fields_the_writer_does_not_know_leave_the_line_to_the_columns():
    """Hybrid pools (``#full token``, ``token usage: full=``) and a field no record has a name for
    (``est. decode TFLOPS/s``): no program; DSpark's ``cap len`` / ``block accept len`` are fields
    the parser knows (read, not in the record): the writer takes the line."""
    from tests.sglang.test_logparse import DECODE_DSPARK, DECODE_HYBRID_049, DECODE_HYBRID_055, DECODE_NOSPEC

    for line in (DECODE_HYBRID_055, DECODE_HYBRID_049, DECODE_NOSPEC, DECODE_DSPARK):
        assert (program("decode", line) is None) == (line != DECODE_DSPARK), line
        text = line + "\n"
        assert list(stream_json_lines(io.BytesIO(text.encode()), compiled=True)) == list(
            stream_json_lines(io.BytesIO(text.encode()), compiled=False)
        ), line
    got = _writer_json(DECODE_DSPARK + "\n")
    assert got[1] is not None and json.loads(got[1])["accept_len"] == 2.4
    for odd in (", é: 1", ", x", ", #queue-req: 3"):  # not ASCII, no value, a field twice
        line = DECODE_0523_PLAIN + odd
        assert program("decode", line) is None, odd
        assert list(stream_json_lines(io.BytesIO((line + "\n").encode()), compiled=True)) == list(
            stream_json_lines(io.BytesIO((line + "\n").encode()), compiled=False)
        )


def test_generated_numbers_and_shapes_match_the_columns_byte_for_byte():
    """Random values in every format a number can take in a log line, random ranks and stamps,
    lines of several shapes mixed: the two writers agree on every line."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    floats = st.one_of(
        st.builds(lambda v, d: f"{v:.{d}f}", st.floats(-1e17, 1e17, allow_nan=False), st.integers(0, 7)),
        st.builds(lambda v, d: f"{v:.{d}f}", st.floats(0, 1e-3), st.integers(0, 9)),
        st.sampled_from(["nan", "inf", "-inf", "1e+30", "2", "0", "-0.0", "00.5", "1.", ".5", "7e-05"]),
    )
    ints = st.one_of(st.integers(0, 10**17).map(str), st.sampled_from(["007", "-1", "0", "1.5", "nan"]))
    ranks = st.sampled_from(["", " TP0", " DP1 TP8", "  TP3 ", ' a"b', " x\\y", " TP0\t"])
    stamps = st.builds(lambda ms, r: "[2026-11-02 10:00:13" + ms + r + "] ", st.sampled_from(["", ".250", ",5"]), ranks)
    decode = st.builds(
        lambda s, r, t, u, a, g, q, trail: (
            s + f"Decode batch, #running-req: {r}, #token: {t}, token usage: {u}, "
            f"accept len: {a}, cuda graph: True, gen throughput (token/s): {g}, #queue-req: {q}" + trail
        ),
        stamps,
        ints,
        ints,
        floats,
        floats,
        floats,
        ints,
        st.sampled_from(["", ", "]),
    )
    prefill = st.builds(
        lambda s, n, c, u, q, x: (
            s + f"Prefill batch, #new-seq: 1, #new-token: {n}, #cached-token: {c}, "
            f"token usage: {u}, #running-req: 0, #queue-req: {q}, #pending-token: 0, cuda graph: False, "
            f"input throughput (token/s): {x}"
        ),
        stamps,
        ints,
        ints,
        floats,
        ints,
        floats,
    )

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.one_of(decode, prefill), min_size=1, max_size=25), st.integers(200, 4000))
    def check(lines, chunk):
        data = ("\n".join(lines) + "\n").encode()
        want = list(stream_json_lines(io.BytesIO(data), chunk=chunk, compiled=False))
        for x in want:
            json.loads(x, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
        assert list(stream_json_lines(io.BytesIO(data), chunk=chunk, compiled=True)) == want
        assert (
            b"".join(stream_json_bytes(io.BytesIO(data), chunk=chunk, compiled=True))
            == ("\n".join(want) + "\n").encode()
            if want
            else True
        )

    check()


def test_the_stream_takes_the_compiled_writer_where_it_was_built(monkeypatch, tmp_path):
    from workbench.sglang import logjson

    line = STAMP + DECODE.format(r=1, t=2, u="0.50", a="2.00", g="5.00") + "\n"
    path = tmp_path / "s.log"
    path.write_text(line * 400)
    seen: list[bool] = []
    real = logjson._chunk_bytes

    def spy(scan, compiled, want):
        seen.append(compiled)
        return real(scan, compiled, want)

    monkeypatch.setattr(logjson, "_chunk_bytes", spy)
    out = b"".join(stream_json_bytes(str(path), chunk=1 << 12))
    assert seen and all(seen)
    seen.clear()
    assert b"".join(stream_json_bytes(str(path), chunk=1 << 12, compiled=False)) == out
    assert seen and not any(seen)
    monkeypatch.setattr(logjson, "compiled_available", lambda: False)  # a package built without it
    seen.clear()
    assert b"".join(stream_json_bytes(str(path), chunk=1 << 12)) == out
    assert seen and not any(seen)
    with pytest.raises(RuntimeError, match="was not built"):
        next(stream_json_bytes(str(path), compiled=True))


def test_the_writer_refuses_buffers_that_do_not_fit():
    import numpy as np

    from workbench.sglang import _logjson

    prog = program("decode", STAMP + DECODE.format(r=1, t=2, u="0.50", a="2.00", g="5.00"))
    data = (STAMP + DECODE.format(r=1, t=2, u="0.50", a="2.00", g="5.00")).encode()
    one = np.ones(1, dtype=np.uint8)
    i64 = np.zeros(1, dtype=np.int64)
    args = [data, one, i64 + 1, i64.copy(), True, prog.mops, prog.eops, prog.lit_off, prog.lit_len, prog.lits]
    with pytest.raises(ValueError, match="too small"):
        _logjson.emit(*args, np.empty(10, dtype=np.uint8), i64.copy(), i64.copy())
    with pytest.raises(ValueError, match="shorter than the lines"):
        _logjson.emit(
            data, np.ones(2, dtype=np.uint8), *args[2:], np.empty(4096, dtype=np.uint8), i64.copy(), i64.copy()
        )
    bad = prog.mops.copy()
    bad[0, 1] = 999  # a literal that is not there
    with pytest.raises(ValueError, match="out of range"):
        _logjson.emit(*args[:5], bad, *args[6:], np.empty(4096, dtype=np.uint8), i64.copy(), i64.copy())
    w, nd = _logjson.emit(*args, out := np.empty(4096, dtype=np.uint8), i64.copy(), i64.copy())
    assert nd == 1 and out[:w].tobytes().decode() == _columns_json(data.decode() + "\n")[1] + "\n"
    with pytest.raises(ValueError, match="out of order"):
        _logjson.merge(
            b"a\nb\n", np.array([2, 4]), np.array([2, 1]), b"", i64[:0], i64[:0], b"", i64[:0], i64[:0], bytearray(4)
        )


def test_cli_json_of_a_long_log_is_the_columns_output(cli, tmp_path):
    """``logs parse --json`` on a long log (a file and a pipe): the same bytes as the columns write."""
    import subprocess
    import sys

    from tests.sglang.test_logparse import DECODE_055, PREFILL_055

    block = "".join(
        f"{DECODE_055}\n{PREFILL_055}\n[2025-11-10 09:00:00] INFO:     127.0.0.1:5000 - "
        f'"POST /generate HTTP/1.1" 200 OK\n'
        for _ in range(2000)
    )
    path = tmp_path / "long.log"
    with open(path, "w") as fh:
        while fh.tell() < 6 << 20:
            fh.write(block)
        fh.write(DECODE_055.replace("accept len: 3.12", "accept len: nan") + "\n")
    want = b"".join(stream_json_bytes(str(path), compiled=False))
    r = cli("logs", "parse", str(path), "--json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.encode() == want
    piped = subprocess.run(
        [sys.executable, "-m", "workbench", "logs", "parse", "-", "--json"],
        stdin=open(path, "rb"),
        capture_output=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == want
