"""Parse SGLang server logs: decode and prefill lines, startup milestones, failures.

Covers every log generation from 0.4.9 to 0.5.23 (``Decode batch.`` / ``Decode batch,`` /
``Decode batch [N],``, with or without ``accept rate``, with or without the trailing ``, ``,
hybrid-pool token fields, optional DP/TP/EP/PP rank tags and millisecond stamps).

    scan = parse_text(text)                # or LogParser().feed(chunk) for a growing log
    scan.decode.column("accept_len")       # numpy array, NaN where a line has no value
    for rec in scan.records(): ...         # {"kind": "decode"|"prefill"|"milestone"|"failure", ...}
    classify(scan.events, exit_code=1)     # the failure that explains a dead server, or None

Bulk lines (decode/prefill) are parsed column-wise: a log of one server prints them in one
shape, so all lines of a shape are split together and their numbers converted in one numpy call.
Lines of an unexpected shape fall back to a tolerant per-line regex, so speed never costs a line.
Where the package was built with a C compiler, ``_logscan.c`` sorts a chunk's lines and reads the
common decode shape and the stamps; it gives what this module's Python gives, or leaves the chunk
(or the column) to it.
"""

from __future__ import annotations

import ast
import codecs
import gc
import heapq
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, repeat
from operator import itemgetter, not_
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, BinaryIO, cast, overload

if TYPE_CHECKING:
    import numpy as np

_native: ModuleType | None
try:
    from workbench.sglang import _logscan as _native
except ImportError:  # built with the package where a C compiler is found
    _native = None

FAILURE_CLASSES = (
    "oom",
    "port-in-use",
    "draft-context",
    "context-length",
    "cuda-graph",
    "nccl",
    "scheduler-exception",
    "warmup-failed",
    "process-died",
)

# When several classes show up in one log, the most specific explains the death.
_PRIORITY = (
    "draft-context",
    "context-length",
    "port-in-use",
    "cuda-graph",
    "oom",
    "nccl",
    "warmup-failed",
    "scheduler-exception",
    "process-died",
)

HINTS = {
    "oom": "out of GPU memory: lower --mem-fraction-static (the draft's weights and KV pool share it) "
    "or the CUDA-graph batch size, or free the GPUs",
    "port-in-use": "the port is taken: stop whatever holds it or pick another --port",
    "draft-context": "the draft's context is shorter than the target's: raise the draft's "
    "max_position_embeddings or set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    "context-length": "--context-length is longer than the model's own: lower it, or set "
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 if the model really supports it",
    "cuda-graph": "CUDA-graph capture failed: lower the decode CUDA-graph max batch size or "
    "--mem-fraction-static, try --disable-custom-all-reduce, or disable graphs to isolate it",
    "nccl": "NCCL / custom all-reduce error: try --disable-custom-all-reduce or NCCL settings "
    "(NCCL_P2P_LEVEL, NCCL_PROTO, NCCL_ALGO)",
    "scheduler-exception": "a scheduler raised: read the traceback above the line",
    "warmup-failed": "the warm-up request failed: read the traceback after the line",
    "process-died": "the server process died: read the end of the log",
}
# Hints that depend on what exactly failed (the record's "what"), over the class's own.
HINTS_WHAT: dict[tuple[str, str | None], str] = {
    ("oom", "kv-pool"): "no room left for the KV cache pool after the weights (SGLang: 'Not enough memory'): "
    "increase --mem-fraction-static, or lower --max-running-requests / --context-length, "
    "or spread the model over more GPUs",
    ("port-in-use", "server"): "the server's --port is taken: stop whatever holds it or pick another --port",
    ("port-in-use", "internal"): "an internal port SGLang opens for its own processes (ZMQ, NCCL, the "
    "distributed-init TCPStore) is taken, not --port: another server or a "
    "leftover of one on this host holds it; stop it, or give this server its "
    "own --nccl-port / --dist-init-addr",
}
WARNINGS = ("context-override",)

MILESTONES = ("server_args", "weights_begin", "weights_end", "kv_cache", "graph_begin", "graph_end", "ready")

_COMMON = ("] Decode batch", "] Prefill batch", "] INFO:  ")
# SGLang's prefix: "[%(asctime)s(.%(msecs)03d)?( DPn)?( TPn)?( EPn)?( PPn)?] " (configure_logger).
# It may follow anything: indentation, a docker-compose "svc-1  | " tag, a glued progress bar.
_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)([^\]\[\n]*)\] ?")
_BULK_ANY = re.compile(r"(?:Decode|Prefill) batch(?: \[\d+\])?[.,] #")

# Rare lines: milestones and failures. One alternation over the lines that are not bulk lines.
_RARE_PARTS = (
    r"server_args=",
    r"Load weight (?:begin|end)",
    r"KV Cache is allocated",
    r"Capture [^\n]*?graph",
    r"The server is fired up and ready to roll",
    r"Not enough memory",
    r"out of memory",
    r"OutOfMemoryError",
    r"leaves no room for the full KV pool",
    r"address already in use",
    r"Errno 98",
    r"Port is already in use",
    r"is already in use",
    r"is not available in \d+ seconds",
    r"context_length \(\d+\) is greater than the derived context_length",
    r"NCCL error",
    r"nccl\w*Error",
    r"custom_all_reduce\S*:\d+: CUDA error",
    r"CustomAllreduce",
    r"Scheduler hit an exception",
    r"warmup error",
    r"Initialization failed",
    r"scheduler died",
    r"scheduler is dead",
    r"Received sigquit",
    r"Address already in use",
    r"EADDRINUSE",
    r"stream is capturing",
    r"cudaErrorStreamCapture",
    r"Overriding the draft model's max_position_embeddings",
    r"Decode batch",
    r"Prefill batch",
)  # plain literals: the engine's first-character scan stays on
_RARE = re.compile("|".join(_RARE_PARTS))


def _leading_literal(part: str) -> str:
    """The text every match of the regex ``part`` starts with (to its first class, group or
    character a quantifier may leave out)."""
    out: list[str] = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "\\":
            if not part[i + 1 : i + 2] or part[i + 1].isalnum():  # \d, \w, \S...: a class
                break
            c, i = part[i + 1], i + 2
        elif c in ".^$*+?{}[]()|":
            break
        else:
            i += 1
        q = part[i : i + 1]
        if q in ("*", "?", "{"):
            break
        out.append(c)
        if q == "+":
            break
    return "".join(out)


# A match of _RARE holds one of these: the compiled scan finds the lines that do, and the regex
# reads those lines alone (None where some alternative starts with less than two characters).
_RARE_LITERALS: tuple[str, ...] | None = tuple(map(_leading_literal, _RARE_PARTS))
if min(map(len, _RARE_LITERALS or ())) < 2:
    _RARE_LITERALS = None

_GRAPH_LINE = re.compile(
    r"Capture (?:(target|draft) )?(?:(decode|verify|extend|prefill) )?(?:(draft) )?(?:(extend) )?"
    r"(?:cuda|CUDA|cpu|npu|musa) graph (begin|end)"
)
_KV_TOKENS = re.compile(r"#tokens: (\d+)")
_ELAPSED = re.compile(r"(?:elapsed=|Time elapsed: )([\d.]+) ?s")
_AVAIL = re.compile(r"avail mem=([\d.]+) GB")
_TYPE = re.compile(r"type=(\w+)")
_DRAFT_CLASS = re.compile(r"Eagle|Draft|MTP|NextN")
_EXIT = re.compile(r"exit code: (-?\d+)|Exit code: (-?\d+)")


# ---------------------------------------------------------------------------------------------
# Columns of bulk lines (extracted lazily: a dashboard needs two columns, not twelve)
# ---------------------------------------------------------------------------------------------
# Each field: the literal that precedes its value. The first occurrence in a line is the field
# (``block accept len`` and ``swa token usage`` come after ``accept len`` / ``token usage``).
_FIELD_KEYS = {
    "running_req": "#running-req: ",
    "queue_req": "#queue-req: ",
    "tokens": "#token: ",
    "token_usage": "token usage: ",
    "accept_len": "accept len: ",
    "accept_rate": "accept rate: ",
    "gen_throughput": "gen throughput (token/s): ",
    "input_throughput": "input throughput (token/s): ",
    "new_seq": "#new-seq: ",
    "new_token": "#new-token: ",
    "cached_token": "#cached-token: ",
    "pending_token": "#pending-token: ",
    "cap_len": "cap len: ",
    "block_accept_len": "block accept len: ",
}
# Numbers as Python prints them: 3.05, 1e+30, inf, nan (a value that is not finite is kept as
# such in the columns and reported as missing, never cut to its leading digits).
_NUM = r"(-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf|nan))"
_COL_BULK = {name: re.compile(re.escape(key) + _NUM + r"[^\n]*") for name, key in _FIELD_KEYS.items()}
_COL_LINE = {name: re.compile(re.escape(key) + r"(?:full=)?" + _NUM) for name, key in _FIELD_KEYS.items()}
_COL_LINE["tokens"] = re.compile(r"#(?:full )?token: (?:full=)?(\d+)")
_COL_LINE["token_usage"] = re.compile(r"(?<!swa )token usage: (?:full=)?" + _NUM)
_COL_LINE["accept_len"] = re.compile(r"(?<!block )accept len: " + _NUM)
_DECODE_SHAPE = re.compile(
    r"#running-req: (\d+), #token: (\d+), token usage: ([\d.]+), (?:accept len: ([\d.]+), "
    r"(?:accept rate: ([\d.]+), )?)?(?:cuda|cpu|npu|musa) graph: (True|False), "
    r"gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)(?![\w.+-])[^\n]*"
)  # one match per line
_DECODE_SHAPE_COLS = (
    "running_req",
    "tokens",
    "token_usage",
    "accept_len",
    "accept_rate",
    "_graph",
    "gen_throughput",
    "queue_req",
)
_SHAPE_NUMBERS = tuple(c for c in _DECODE_SHAPE_COLS if c != "_graph")  # _logscan.decode_shape's order
_GRAPH_BULK = re.compile(r" graph: (True|False)[^\n]*")
_GRAPH_ONE = re.compile(r"(?:cuda|cpu|npu|musa) graph: (True|False)")
_STAMP_BULK = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?[^\]\[\n]*)\] ?", re.M)  # = _STAMP
_ITER = re.compile(r"batch \[(\d+)\]")
_INT_FIELDS = {"running_req", "queue_req", "tokens", "new_seq", "new_token", "cached_token", "pending_token", "iter"}
DECODE_FIELDS = (
    "running_req",
    "tokens",
    "token_usage",
    "accept_len",
    "accept_rate",
    "gen_throughput",
    "queue_req",
    "iter",
)
PREFILL_FIELDS = (
    "new_seq",
    "new_token",
    "cached_token",
    "tokens",
    "token_usage",
    "running_req",
    "queue_req",
    "pending_token",
    "input_throughput",
    "iter",
)


class Columns:
    """Decode or prefill lines. The raw lines are kept; ``column(name)`` extracts one field for
    every line at once (a numpy float array, NaN where a line lacks the field) and caches it."""

    def __init__(self, kind: str):
        self.kind = kind
        self._lines: list[str] = []
        self._n = 0
        self._unsplit = False  # lines are only in _joined yet
        self._line: list[int] = []
        self._pending: list[Callable[[], Iterable[int]]] = []  # callables making line numbers, run on first use
        self._joined: str | None = None
        self._cache: dict[str, Any] = {}

    def __len__(self) -> int:
        return self._n

    def texts(self) -> Sequence[str]:
        """The lines, where still joined a sequence that cuts out the first alone (a writer reads
        the first line's shape and the text joined)."""
        return _Unsplit(self) if self._unsplit else self.lines

    @property
    def lines(self) -> list[str]:
        if self._unsplit:
            self._lines = cast(str, self._joined).split("\n")
            self._unsplit = False
        return self._lines

    @property
    def line(self) -> list[int]:
        """1-based line numbers in the log."""
        while self._pending:
            self._line.extend(self._pending.pop(0)())
        return self._line

    def _add(
        self, lines: list[str], numbers: Iterable[int] | Callable[[], Iterable[int]], joined: str | None = None
    ) -> None:
        """``joined``: the new lines joined by newlines, where the caller made it."""
        fresh = not self._n
        self.lines.extend(lines)
        self._n += len(lines)
        if callable(numbers):
            self._pending.append(numbers)
        else:
            self.line.extend(numbers)
        self._joined = joined if fresh else None
        self._cache.clear()

    def _add_joined(self, joined: str, n: int, numbers: Callable[[], Iterable[int]]) -> None:
        """``n`` lines given joined by newlines, split only when read."""
        if self._n:
            self._add(joined.split("\n"), numbers, None)
            return
        self._joined, self._n, self._unsplit = joined, n, True
        self._pending.append(numbers)
        self._cache.clear()

    def tail(self, n: int) -> Columns:
        """The last ``n`` lines as their own columns (a follower reads only those)."""
        out = Columns(self.kind)
        k = max(0, len(self) - n)
        out._add(self.lines[k:], self.line[k:])
        return out

    def extend(self, other: Columns) -> None:
        self._add(other.lines, other.line)

    @property
    def joined(self) -> str:
        if self._joined is None:
            self._joined = "\n".join(self.lines)
        return self._joined

    def column(self, name: str) -> np.ndarray:
        import numpy as np

        got: np.ndarray | None = self._cache.get(name)
        if got is not None:
            return got
        n = len(self)
        if self.kind == "decode" and name in _DECODE_SHAPE_COLS and "_shape" not in self._cache:
            self._decode_shape()
            shaped: np.ndarray | None = self._cache.get(name)
            if shaped is not None:
                return shaped
        if name == "iter":
            vals = [_ITER.search(s) for s in self.lines] if "batch [" in self.joined else []
            arr = np.array([float(m.group(1)) if m else np.nan for m in vals] or [np.nan] * n, dtype=float)
        else:
            found = _COL_BULK[name].findall(self.joined) if n else []
            if len(found) == n:
                arr = np.array(list(map(float, found)), dtype=float)
            elif not found:
                arr = np.full(n, np.nan)
            else:  # some lines lack the field (a log spanning two servers): scatter
                has = np.fromiter(map(str.__contains__, self.lines, repeat(_FIELD_KEYS[name])), bool, n)
                sub = _COL_BULK[name].findall("\n".join(compress(self.lines, has)))
                if len(sub) == int(has.sum()):
                    arr = np.full(n, np.nan)
                    arr[has] = np.array(list(map(float, sub)), dtype=float)
                else:
                    ms = map(_COL_LINE[name].search, self.lines)
                    arr = np.array([float(m.group(1)) if m else np.nan for m in ms], dtype=float)
            if name in ("tokens", "token_usage", "accept_len") and n and self._unusual():
                # hybrid pools ("#full token", "token usage: full=") and DSpark need the exact form
                ms = map(_COL_LINE[name].search, self.lines)
                arr = np.array([float(m.group(1)) if m else np.nan for m in ms], dtype=float)
        self._cache[name] = arr
        return arr

    def _value_columns(
        self,
        names: Sequence[str],
        ints: Callable[[list[float]], list[Any]] | None,
        floats: Callable[[list[float]], list[Any]] | None,
        missing: str | None,
    ) -> tuple[list[list[Any]], dict[int, list[str]]]:
        """Each field's values as the list converters ``ints`` / ``floats`` make them (``None``: the
        floats as they are), ``missing`` where a value is not finite; and the rows whose value was
        present but not finite (``{row: [field, ...]}``: a ``nan``/``inf`` the server printed, not a
        field it left out). Converters take whole lists: the common all-finite column stays in C."""
        import numpy as np

        lists = self._lists()
        cols: list[list[Any]] = []
        bad_rows: dict[int, list[str]] = {}
        for name in names:
            col = lists[name]
            conv = ints if name in _INT_FIELDS else floats
            if np.isfinite(self.column(name)).all():  # all finite: the common case
                cols.append(col if conv is None else conv(col))
                continue
            key = _FIELD_KEYS.get(name, "\0") + "nan"
            out: list[Any] = []
            for i, x in enumerate(col):
                if x - x == 0.0:
                    out.append(x if conv is None else conv([x])[0])
                else:
                    out.append(missing)
                    if x == x or key in self.lines[i]:
                        bad_rows.setdefault(i, []).append(name)
            cols.append(out)
        return cols, bad_rows

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """``record(i)`` for every line, made column by column (what a stream of records costs)."""
        n = len(self)
        if not n:
            return iter(())
        names = DECODE_FIELDS if self.kind == "decode" else PREFILL_FIELDS
        cols, bad_rows = self._value_columns(names, _ints, None, None)
        split = _split_stamps(self.stamps())
        times = [t or None for t, _ in split]
        ranks = [r for _, r in split]
        graph = self.graph()
        keys = ("kind", "time", "line", *names, "cuda_graph")
        keys_r = (*keys, "rank")
        kinds = repeat(self.kind, n)

        def gen() -> Iterator[dict[str, Any]]:
            for i, row in enumerate(zip(kinds, times, self.line, *cols, graph)):
                rank = ranks[i]
                rec = dict(zip(keys_r, (*row, rank))) if rank else dict(zip(keys, row))
                if bad_rows and i in bad_rows:
                    rec["nonfinite"] = bad_rows[i]
                yield rec

        return gen()

    def iter_json(self) -> Iterator[tuple[int, str]]:
        """``(line, json_text)`` per line: ``json.dumps`` of the record ``iter_records`` gives, byte
        for byte, made from per-column text (a record dict and its encoding per line cost more
        than the parse)."""
        if not len(self):
            return iter(())
        lines = self.line
        return ((lines[i], t) for i, t in self.json_rows(range(len(self))))

    def json_rows(self, rows: Iterable[int]) -> Iterator[tuple[int, str]]:
        """``(row, json_text)`` for the given rows (0-based, ascending), as ``iter_json`` writes them."""
        import json

        names = DECODE_FIELDS if self.kind == "decode" else PREFILL_FIELDS
        cols, bad_rows = self._value_columns(names, _int_texts, _float_texts, "null")
        quoted: dict[str, str] = {}

        def q(v: str) -> str:
            got = quoted.get(v)
            if got is None:
                got = quoted[v] = json.dumps(v)
            return got

        split = _split_stamps(self.stamps())
        times = ['"' + t + '"' if _SAFE_TIME.fullmatch(t) else ("null" if not t else json.dumps(t)) for t, _ in split]
        ranks = ["" if not r else ', "rank": ' + q(r) for _, r in split]
        graph = ["true" if g else ("null" if g is None else "false") for g in self.graph()]
        head = '{"kind": "%s", "time": %%s, "line": %%s, ' % self.kind
        tmpl = head + ", ".join(f'"{name}": %s' for name in names) + ', "cuda_graph": %s%s%s}'
        lines = self.line
        bad = {i: ', "nonfinite": ' + json.dumps(v) for i, v in bad_rows.items()}
        every = enumerate(zip(times, lines, *cols, graph, ranks))
        if isinstance(rows, range) and rows == range(len(self)):
            picked: Iterator[tuple[int, tuple[Any, ...]]] = every
        else:
            wanted = set(rows)
            picked = ((i, row) for i, row in every if i in wanted)

        def gen() -> Iterator[tuple[int, str]]:
            for i, row in picked:
                yield i, tmpl % ((*row, bad.get(i, "")) if bad else (*row, ""))

        return gen()

    def _lists(self) -> dict[str, list[Any]]:
        """Every record field's column as a Python list (records are made one by one)."""
        got: dict[str, list[Any]] | None = self._cache.get("_lists")
        if got is None:
            names = DECODE_FIELDS if self.kind == "decode" else PREFILL_FIELDS
            got = self._cache["_lists"] = {n: self.column(n).tolist() for n in names}
        return got

    def _decode_shape(self) -> None:
        """The common decode shape (every generation, plain KV pool): all its columns in one scan."""
        import numpy as np

        self._cache["_shape"] = True
        n = len(self)
        if not n:
            return
        got = _native.decode_shape(self.joined) if _native is not None else None
        if got is not None and len(got[1]) == n:  # (it reads no text that is _unusual)
            values = np.frombuffer(got[0], dtype=float).reshape(len(_SHAPE_NUMBERS), n)
            self._cache.update(zip(_SHAPE_NUMBERS, values))
            self._cache["_graph"] = list(map(bool, got[1]))
            self._cache["_unusual"] = False
            return
        if self._unusual():
            return
        found = _DECODE_SHAPE.findall(self.joined)
        if len(found) != n:
            return
        shaped: dict[str, Any] = {}
        try:
            for name, col in zip(_DECODE_SHAPE_COLS, zip(*found)):
                if name == "_graph":
                    shaped[name] = list(map("True".__eq__, col))
                elif "" in col:
                    shaped[name] = np.array([float(x) if x else np.nan for x in col], dtype=float)
                else:
                    shaped[name] = np.array(list(map(float, col)), dtype=float)
        except ValueError:  # "1.2.3" fits [\d.]+ but is no number: each column's own reading
            return
        self._cache.update(shaped)

    def _unusual(self) -> bool:
        got = self._cache.get("_unusual")
        if got is None:
            j = self.joined
            got = self._cache["_unusual"] = any(k in j for k in ("#full token", "usage: full=", "block accept len"))
        return got

    def graph(self) -> list[bool | None]:
        if self.kind == "decode" and "_shape" not in self._cache:
            self._decode_shape()
        got = self._cache.get("_graph")
        if got is None:
            found = _GRAPH_BULK.findall(self.joined) if self.lines else []
            if len(found) == len(self):
                got = [v == "True" for v in found]
            else:
                got = [(m.group(1) == "True") if m else None for m in map(_GRAPH_ONE.search, self.lines)]
            self._cache["_graph"] = got
        return got

    def stamps(self) -> list[str]:
        """The "[...]" prefix of each line ("" for a line that had none)."""
        got = self._cache.get("_stamp")
        if got is None:
            n = len(self)
            got = _native.stamps(self.joined) if n and _native is not None else None
            if got is None or len(got) != n:
                got = _STAMP_BULK.findall(self.joined) if n else []
            if len(got) != n:  # a line with another "[...]" first: its stamp
                got = [m.group(1) + m.group(2) if m else "" for m in map(_STAMP.search, self.lines)]
            self._cache["_stamp"] = got
        return got

    def times(self) -> list[str]:
        return [_split_stamp(s)[0] for s in self.stamps()]

    def record(self, i: int) -> dict[str, Any]:
        time, rank = _split_stamp(self.stamps()[i])
        rec: dict[str, Any] = {"kind": self.kind, "time": time or None, "line": self.line[i]}
        if rank:
            rec["rank"] = rank
        names = DECODE_FIELDS if self.kind == "decode" else PREFILL_FIELDS
        bad = None
        cols = self._lists()
        for name in names:
            v = cols[name][i]
            if v - v != 0.0:  # NaN (missing, or printed "nan") or +-inf
                if v == v or (_FIELD_KEYS.get(name, "\0") + "nan") in self.lines[i]:
                    bad = (bad or []) + [name]
                rec[name] = None
            else:
                rec[name] = int(v) if name in _INT_FIELDS else float(v)
        if bad:
            rec["nonfinite"] = bad  # printed, but not a finite number: reported as missing
        rec["cuda_graph"] = self.graph()[i]
        return rec


_line_of = itemgetter("line")
_SAFE_TIME = re.compile(r"[0-9 :.,-]*")
_STAMP_SPLIT = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)\s*(.*)")


def _split_stamp(stamp: str) -> tuple[str, str]:
    m = _STAMP_SPLIT.match(stamp)
    return (m.group(1), m.group(2).strip()) if m else (stamp, "")


def _split_stamps(stamps: list[str]) -> list[tuple[str, str]]:
    """``_split_stamp`` of many: the plain "YYYY-MM-DD HH:MM:SS[ RANK]" shape by slicing."""
    out: list[tuple[str, str]] = []
    for st in stamps:
        if len(st) == 19 and st[4] == "-":
            out.append((st, ""))
        elif len(st) > 20 and st[19] == " " and st[4] == "-" and st[20] != " ":
            out.append((st[:19], st[20:].strip()))
        else:
            out.append(_split_stamp(st))
    return out


# ---------------------------------------------------------------------------------------------
# The result of parsing some text
# ---------------------------------------------------------------------------------------------
@dataclass
class LogScan:
    lines: int = 0
    decode: Columns = field(default_factory=lambda: Columns("decode"))
    prefill: Columns = field(default_factory=lambda: Columns("prefill"))
    events: list[dict[str, Any]] = field(default_factory=list)  # milestone and failure records, in order

    def extend(self, other: LogScan) -> None:
        self.lines += other.lines
        self.decode.extend(other.decode)
        self.prefill.extend(other.prefill)
        self.events.extend(other.events)

    def records(self) -> list[dict[str, Any]]:
        """Every recognised line as a record, in line order."""
        return list(self.iter_records())

    def iter_records(self, kinds: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        """The records one at a time, in line order (``kinds``: only these), made as they are read."""
        want = set(kinds) if kinds else None
        parts: list[Iterator[dict[str, Any]]] = []
        for cols in (self.decode, self.prefill):
            if len(cols) and (want is None or cols.kind in want):
                parts.append(cols.iter_records())
        ev = [dict(e) for e in self.events if want is None or e["kind"] in want]
        if ev:
            parts.append(iter(ev))
        if len(parts) == 1:
            return parts[0]
        return heapq.merge(*parts, key=_line_of)

    def milestones(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "milestone"]

    def failures(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "failure"]

    @property
    def ready(self) -> bool:
        return any(e.get("name") == "ready" for e in self.events)


# ---------------------------------------------------------------------------------------------
# The incremental parser
# ---------------------------------------------------------------------------------------------
class LogParser:
    """Feed it the bytes of a growing log (by offset); it keeps the partial last line and the
    startup state (which weight load is the target's, which the draft's) between calls."""

    def __init__(self) -> None:
        self._raw = b""  # the bytes of a partial last line
        self._partial = ""  # the text of a partial last line (fed as text)
        self.lines = 0  # complete lines consumed so far
        self.bytes = 0  # bytes fed so far (when fed bytes): the next read offset
        self._weights_begin: dict[str, int] = {}  # per rank tag: weight loads seen (target first)
        self._weights_end: dict[str, int] = {}
        self._last_stamp = ""
        self.server_port: int | None = None  # from the server_args line
        self._no_context_arg = False  # server_args says context_length=None

    def feed(self, data: bytes | bytearray | str, *, final: bool = False) -> LogScan:
        if isinstance(data, str):
            if self._raw:  # bytes fed before: their partial line comes first
                data = codecs.utf_8_decode(self._raw, "replace", True)[0] + data
                self._raw = b""
            text = self._partial + data if self._partial else data
            self._partial = ""
            if final:
                if text and not text.endswith("\n"):
                    text += "\n"
            elif not text.endswith("\n"):
                cut = text.rfind("\n") + 1
                text, self._partial = text[:cut], text[cut:]
            return self._parse(text)
        self.bytes += len(data)
        if self._partial:  # text fed before: its partial line comes first
            data = self._partial.encode("utf-8", "surrogatepass") + data
            self._partial = ""
        # whole lines are parsed, the partial last one kept as bytes (no character is split between
        # two reads, and the bytes are read in place: not decoded into one text and cut again)
        cut = len(data) if final else data.rfind(b"\n") + 1
        if not cut and not final:
            self._raw += data
            return LogScan()
        lines: bytes | bytearray | memoryview = (
            self._raw + memoryview(data)[:cut] if self._raw else data if cut == len(data) else memoryview(data)[:cut]
        )
        self._raw = bytes(data[cut:])
        if final and lines and lines[-1:] != b"\n":
            lines = bytes(lines) + b"\n"
        return self._parse(lines)

    def feed_lines(self, lines: bytes | bytearray | memoryview) -> LogScan:
        """Whole lines (ending with a newline, no partial line waiting), read in place: what
        ``iter_scans`` feeds from its reused buffer."""
        if self._raw or self._partial:
            raise ValueError("feed_lines after a partial line: feed the rest first")
        self.bytes += len(lines)
        return self._parse(lines)

    def finish(self) -> LogScan:
        return self.feed("", final=True)

    # -- the work -----------------------------------------------------------------------------
    def _parse(self, src: str | bytes | bytearray | memoryview) -> LogScan:
        """Whole lines, as text or as UTF-8 bytes."""
        scan = LogScan()
        if not len(src):
            return scan
        was = gc.isenabled()
        gc.disable()  # millions of small tuples and strings, no cycles: the collector only costs time
        try:
            got = _native.sort(src) if _native is not None else None
            if got is None or not self._parse_sorted(scan, src, got):
                text = src if isinstance(src, str) else codecs.utf_8_decode(src, "replace", True)[0]
                if "\r" in text:
                    text = text.replace("\r\n", "\n").replace("\r", "\n")
                self._parse_lines(scan, text)
        finally:
            if was:
                gc.enable()
        return scan

    def _parse_lines(self, scan: LogScan, text: str) -> None:
        lines = text.split("\n")
        lines.pop()  # text ends with "\n": the last element is empty
        base = self.lines
        self.lines += len(lines)
        scan.lines = len(lines)
        # Sort lines by the start of their message (after the "[stamp] " prefix): decode and
        # prefill lines, uvicorn INFO lines (an access line per request), and the rest.
        at = list(map(str.find, lines, repeat("] ")))
        common = list(map(str.startswith, lines, repeat(_COMMON), at))
        other = list(map(not_, common)) if any(common) else [True] * len(lines)
        # Rare lines first: a bulk line the fast sort missed (no stamp, or a "] " in a prefix)
        # comes back from there and joins the bulk lines in its place.
        extra = self._rare(scan, lines, other, base) if any(other) else {}
        numbers = range(base + 1, base + 1 + len(lines))
        if extra:  # bulk lines from the rare path join in place
            for i in extra:
                common[i] = True
                at[i] = lines[i].find("] ") if lines[i].startswith("[") else -1
        if any(common):
            sel = list(compress(lines, common))
            sel_at = list(compress(at, common))
            for cols, prefix, kind in (
                (scan.decode, "] Decode batch", "decode"),
                (scan.prefill, "] Prefill batch", "prefill"),
            ):
                flags = list(map(str.startswith, sel, repeat(prefix), sel_at))
                if extra:
                    for j, i in enumerate(compress(range(len(lines)), common)):
                        if extra.get(i) == kind:
                            flags[j] = True
                if not any(flags):
                    continue
                part = list(compress(sel, flags))

                # line numbers are made only when asked for (most uses never need them)
                def line_numbers(n: range = numbers, c: list[bool] = common, f: list[bool] = flags) -> list[int]:
                    return list(compress(compress(n, c), f))

                part, joined = _bulk(part, "\n".join(part))
                cols._add(part, line_numbers, joined)
        self._note_last_stamp(lines)

    def _parse_sorted(self, scan: LogScan, src: str | bytes | bytearray | memoryview, got: tuple[Any, ...]) -> bool:
        """The lines as ``_logscan.sort`` sorted them; False, having changed nothing, where a rare
        line is a bulk line the sort missed (``_parse_lines`` puts it in its place)."""
        d_text, d_rows, d_plain, p_text, p_rows, p_plain, o_text, o_rows, o_starts, starts, ends = got
        lines = _Lines(src, memoryview(starts).cast("q"), memoryview(ends).cast("q"))
        rows = memoryview(o_rows).cast("q")
        at = memoryview(o_starts).cast("q")
        hits = self._rare_lines(o_text, at)
        if any(_as_bulk(lines[rows[k]]) is not None for k in hits):
            return False
        base = self.lines
        self.lines += len(lines)
        scan.lines = len(lines)
        for k in hits:
            i = rows[k]
            rec = self._classify_line(lines[i], lines, i)
            if rec is not None:
                rec["line"] = base + i + 1
                scan.events.append(rec)
        for cols, joined, idx, plain in (
            (scan.decode, d_text, d_rows, d_plain),
            (scan.prefill, p_text, p_rows, p_plain),
        ):
            if idx:

                def line_numbers(r: bytes = idx, b: int = base + 1) -> list[int]:
                    return [b + i for i in memoryview(r).cast("q")]

                if plain:  # split when read (a dashboard reads the decode columns only)
                    cols._add_joined(joined, len(idx) // 8, line_numbers)
                else:
                    part, joined = _bulk(joined.split("\n"), joined)
                    cols._add(part, line_numbers, joined)
        self._note_last_stamp(lines)
        return True

    @staticmethod
    def _rare_lines(text: str, at: memoryview) -> list[int]:
        """The lines of ``text`` (lines joined by newlines, line k from ``at[k]``) that hold a rare
        line's match, in order."""
        if not text:
            return []
        cand = _native.lines_with(text, _RARE_LITERALS) if _native is not None and _RARE_LITERALS else None
        if cand is None:
            return sorted({bisect_right(at, m.start()) - 1 for m in _RARE.finditer(text)})
        last = len(at) - 1
        return [k for k in cand if _RARE.search(text, at[k], at[k + 1] - 1 if k < last else len(text))]

    def _note_last_stamp(self, lines: Sequence[str]) -> None:
        for i in range(len(lines) - 1, -1, -1):
            if "[" in lines[i]:
                m = _STAMP.search(lines[i])
                if m:
                    self._last_stamp = m.group(1)
                    return

    def _rare(self, scan: LogScan, lines: list[str], other: list[bool], base: int) -> dict[int, str]:
        """Milestones and failures among the lines not sorted as bulk; returns {index: "decode" |
        "prefill"} for bulk lines found there."""
        other_idx = list(compress(range(len(lines)), other))
        others = list(compress(lines, other))
        joined = "\n".join(others)
        hits = [m.start() for m in _RARE.finditer(joined)]
        bulk: dict[int, str] = {}
        if not hits:
            return bulk
        # others[k] starts at sum(len(others[:k])) + k in joined
        sums = list(accumulate(map(len, others), initial=0))
        seen = set()
        for pos in hits:
            k = bisect_right(range(len(sums)), pos, key=lambda j: sums[j] + j) - 1
            if k in seen:
                continue
            seen.add(k)
            i = other_idx[k]
            found = _as_bulk(lines[i])
            if found is not None:
                bulk[i], lines[i] = found
                continue
            rec = self._classify_line(lines[i], lines, i)
            if rec is not None:
                rec["line"] = base + i + 1
                scan.events.append(rec)
        return bulk

    def _stamp_before(self, lines: Sequence[str], i: int) -> str:
        for j in range(i, max(-1, i - 400), -1):
            if "[" in lines[j]:
                m = _STAMP.search(lines[j])
                if m:
                    return m.group(1)
        return self._last_stamp

    def _classify_line(self, line: str, lines: Sequence[str], i: int) -> dict[str, Any] | None:
        m = _STAMP.search(line)
        time = m.group(1) if m else self._stamp_before(lines, i) or None
        rank = m.group(2).strip() if m else ""
        msg = line[m.end() :] if m else line.strip()
        rec: dict[str, Any] = {"kind": "", "time": time}
        if rank:
            rec["rank"] = rank
        warn = warning_name(msg)
        if warn is not None:
            rec.update(kind="warning", name=warn, text=_clip(msg))
            if "Target model's" in msg or "draft model's" in msg:
                rec["role"] = "draft"
            return rec
        cls = failure_class(msg)
        if cls == "context-length" and (any(self._weights_end.values()) or self._no_context_arg):
            # SGLang < 0.5 says "User-specified" for the draft too; the draft's config is built
            # after the target's weights (or, with no --context-length, only the draft can fail)
            cls = "draft-context"
        if cls is not None:
            rec.update(kind="failure", **{"class": cls}, hint=HINTS[cls], text=_clip(msg))
            if cls == "oom":
                rec["what"] = "kv-pool" if ("Not enough memory" in msg or "KV pool" in msg) else "cuda-alloc"
            elif cls == "port-in-use":
                rec["what"], port = _which_port(msg, self.server_port)
                if port is not None:
                    rec["port"] = port
            rec["hint"] = HINTS_WHAT.get((cls, rec.get("what")), rec["hint"])
            ec = _EXIT.search(msg)
            if ec:
                code = int(ec.group(1) or ec.group(2))
                rec["exit_code"] = code
                if code == -9:
                    rec["hint"] += " (exit -9 is SIGKILL: often the OS OOM killer; check dmesg)"
            if "custom_all_reduce" in msg or "CustomAllreduce" in msg:
                rec["custom_all_reduce"] = True
            return rec
        name, extra = _milestone(msg)
        if name is None:
            return None
        rec.update(kind="milestone", name=name, text=_clip(msg))
        if name == "server_args":  # a (re)start: weight loads count afresh
            self._weights_begin.clear()
            self._weights_end.clear()
            port_m = _ARG_PORT.search(msg)
            self.server_port = int(port_m.group(1)) if port_m else None
            self._no_context_arg = _NO_CONTEXT_ARG.search(msg) is not None
        elif name == "weights_begin":
            n = self._weights_begin[rank] = self._weights_begin.get(rank, 0) + 1
            rec["role"] = "target" if n == 1 else "draft"
        elif name == "weights_end":
            n = self._weights_end[rank] = self._weights_end.get(rank, 0) + 1
            t = _TYPE.search(msg)
            if t:
                rec["model_class"] = t.group(1)
            drafty = t is not None and _DRAFT_CLASS.search(t.group(1)) is not None
            # each rank loads the target first, then the draft (the class name says it when it can)
            rec["role"] = "draft" if (drafty or n > 1) else "target"
        rec.update(extra)
        return rec


_NEXT_STAMP = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _first_record(line: str) -> str:
    """A line holding two records (a missing newline between writers) gives its first."""
    own = _STAMP.search(line)
    m = _NEXT_STAMP.search(line, own.end() if own else 1)
    return line[: m.start()] if m else line


def _from_stamp(line: str) -> str:
    """A bulk line from its "[stamp] " on (whatever was pasted or glued before it)."""
    m = _STAMP.search(line)
    return line[m.start() :] if m else line


def _as_bulk(line: str) -> tuple[str, str] | None:
    """A line the sort did not take as bulk that is one: ("decode" | "prefill", the line from its
    stamp on, or its message alone where it has none); None for any other line. A bulk record is
    the line's message when nothing but a prefix comes before it (a line whose first record is
    another message is that message: glued records give their first)."""
    b = _BULK_ANY.search(line)
    if b is None or line.lstrip().startswith(("File ", "Traceback")):
        return None
    m = _STAMP.search(line, 0, b.start())
    if not (m.end() == b.start() if m else "[2" not in line[: b.start()]):
        return None
    return (
        "decode" if line.startswith("Decode", b.start()) else "prefill",
        line[m.start() :] if m else line[b.start() :],
    )


def _bulk(part: list[str], joined: str) -> tuple[list[str], str]:
    """A chunk's bulk lines of one kind (and their text joined by newlines) from their stamps on,
    one record each."""
    if not (joined.startswith("[2") and joined.count("\n[2") == len(part) - 1):  # "[<year>-" first
        part = [_from_stamp(x) for x in part]
        joined = "\n".join(part)
    if joined.count(" batch") > len(part):
        part = [_first_record(x) for x in part]  # records glued on one line
        joined = "\n".join(part)
    return part, joined


class _Unsplit(Sequence[str]):
    """Columns' lines still joined: the first is cut out alone, any other splits them all."""

    def __init__(self, cols: Columns):
        self.cols = cols

    def __len__(self) -> int:
        return len(self.cols)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if i == 0 and self.cols._unsplit:
            joined = self.cols.joined
            end = joined.find("\n")
            return joined if end < 0 else joined[:end]
        return self.cols.lines[i]


class _Lines(Sequence[str]):
    """A chunk's lines by index, each cut from the source (text, or UTF-8 bytes decoded as the
    parser decodes them) when read: the sorted path reads few."""

    def __init__(self, src: str | bytes | bytearray | memoryview, starts: memoryview, ends: memoryview):
        self.src, self.starts, self.ends = src, starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        piece = self.src[self.starts[i] : self.ends[i]]
        return piece if isinstance(piece, str) else codecs.utf_8_decode(piece, "replace", True)[0]


_NO_CONTEXT_ARG = re.compile(r"""(?:'context_length': |\bcontext_length=)None\b""")
_ARG_PORT = re.compile(r"""(?:'port': |\bport=)(\d+)""")
_PORT_NUM = re.compile(r"(?:\bport\s*[:=]?\s*|_port at |\d\.\d{1,3}:|\]:|localhost:|', )(\d{3,5})\b", re.I)
_INTERNAL_PORT = re.compile(
    r"TCPStore|DistNetworkError|dist_init|nccl_port|port_base|detokenizer_port|rpc_port"
    r"|metrics_port|scheduler_input_port|load_collector_port|zmq|ZMQ|Port is already in use"
    r"|bootstrap_port|c10d",
    re.I,
)


def _which_port(msg: str, server_port: int | None) -> tuple[str, int | None]:
    """Whose port is taken: "server" (the HTTP --port) or "internal" (SGLang's own ZMQ / NCCL /
    TCPStore ports), with the number where the line gives one."""
    m = _PORT_NUM.search(msg)
    port = int(m.group(1)) if m else None
    if port is not None and server_port is not None:
        return ("server" if port == server_port else "internal"), port
    if _INTERNAL_PORT.search(msg):
        return "internal", port
    return "server", port


def warning_name(msg: str) -> str | None:
    """A logged warning the server survives (it goes on), or None."""
    if ("is greater than the derived context_length" in msg and msg.startswith("Warning:")) or msg.startswith(
        "Overriding the draft model's max_position_embeddings"
    ):
        return "context-override"  # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN set: logged, not raised
    return None


def _milestone(msg: str) -> tuple[str | None, dict[str, Any]]:
    if msg.startswith("server_args=") or " server_args=" in msg[:40]:
        return "server_args", {}
    if "The server is fired up and ready to roll" in msg:
        return "ready", {}
    if msg.startswith("Load weight begin"):
        return "weights_begin", _numbers(msg)
    if msg.startswith("Load weight end"):
        return "weights_end", _numbers(msg)
    if "KV Cache is allocated" in msg:
        t = _KV_TOKENS.search(msg)
        return "kv_cache", ({"tokens": int(t.group(1))} if t else {})
    g = _GRAPH_LINE.search(msg)
    if g:
        role = g.group(1) or g.group(3) or "target"
        phase = g.group(2) or g.group(4) or "decode"
        out = {"role": role, "phase": phase, **_numbers(msg)}
        return ("graph_begin" if g.group(5) == "begin" else "graph_end"), out
    return None, {}


def _numbers(msg: str) -> dict[str, float]:
    out: dict[str, float] = {}
    e = _ELAPSED.search(msg)
    if e:
        out["elapsed_s"] = float(e.group(1))
    a = _AVAIL.search(msg)
    if a:
        out["avail_mem_gb"] = float(a.group(1))
    return out


_PORT_BUSY = re.compile(r"is not available in \d+ seconds|port \S*\s?is already in use|_port \d+ is already in use")
_GRAPH_FAILED = re.compile(r"Capture [^:]*graph failed", re.I)
_NCCL = re.compile(r"nccl\w*Error|custom_all_reduce\S*:\d+: CUDA error")


def failure_class(msg: str) -> str | None:
    """The failure class of one log message, or None. Order: the most specific text first."""
    if "is greater than the derived context_length" in msg:
        if warning_name(msg) is not None:
            return None  # the logged warning: the server overrides and goes on
        return "draft-context" if "Target model's" in msg else "context-length"
    low = msg.lower()
    if (
        "address already in use" in low
        or "Errno 98" in msg
        or "EADDRINUSE" in msg
        or "Port is already in use" in msg
        or _PORT_BUSY.search(msg)
    ):
        return "port-in-use"
    if (
        ("graph failed" in msg and _GRAPH_FAILED.search(msg))
        or "stream is capturing" in msg
        or "cudaErrorStreamCapture" in msg
    ):
        return "cuda-graph"
    if (
        "Not enough memory" in msg
        or "out of memory" in msg
        or "OutOfMemoryError" in msg
        or "leaves no room for the full KV pool" in msg
    ):
        return "oom"
    if "NCCL error" in msg or "CustomAllreduce" in msg or _NCCL.search(msg):
        return "nccl"
    if "warmup error" in msg:
        return "warmup-failed"
    if "Scheduler hit an exception" in msg:
        return "scheduler-exception"
    if (
        "scheduler died" in msg
        or "scheduler is dead" in msg
        or "Received sigquit" in msg
        or "Initialization failed" in msg
    ):
        return "process-died"
    return None


def _clip(s: str, n: int = 400) -> str:
    s = s.rstrip()
    return s if len(s) <= n else s[: n - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Convenience
# ---------------------------------------------------------------------------------------------
def parse_text(text: str | bytes) -> LogScan:
    p = LogParser()
    scan = p.feed(text, final=True)
    return scan


def _ints(col: list[float]) -> list[int]:
    return list(map(int, col))


def _int_texts(col: list[float]) -> list[str]:
    return list(map(str, map(int, col)))


def _float_texts(col: list[float]) -> list[str]:
    return list(map(float.__repr__, col))


STREAM_CHUNK = 1 << 21  # bytes parsed at a time when streaming (memory stays near this)


def iter_scans(fh: BinaryIO, chunk: int = STREAM_CHUNK) -> Iterator[LogScan]:
    """A binary file object's log, a chunk at a time: what is parsed is let go as the next comes.
    The chunks are read into one buffer, kept for the whole file, and its whole lines parsed in
    place (fresh memory each chunk would be paged in again each chunk)."""
    p = LogParser()
    readinto = getattr(fh, "readinto", None)
    if readinto is None:
        while data := fh.read(chunk):
            scan = p.feed(data)
            del data  # one chunk alive at a time (its bytes go before the next read)
            yield scan
            del scan
        yield p.finish()
        return
    buf = bytearray(chunk)
    keep = 0  # the partial last line, at the buffer's start
    while True:
        if keep == len(buf):  # a line longer than the buffer
            buf.extend(bytes(len(buf)))
        with memoryview(buf) as view:
            n = readinto(view[keep:])
        if not n:
            break
        end = keep + n
        cut = buf.rfind(b"\n", 0, end) + 1
        keep = end - cut
        if not cut:
            continue
        with memoryview(buf) as view, view[:cut] as lines:
            scan = p.feed_lines(lines)
        buf[:keep] = buf[cut:end]
        yield scan
        del scan
    yield p.feed(bytes(buf[:keep]), final=True)


def stream_records(
    source: str | Path | BinaryIO, kinds: Iterable[str] | None = None, chunk: int = STREAM_CHUNK
) -> Iterator[dict[str, Any]]:
    """Records of a log file (a path or a binary file object) in line order, in memory that does
    not grow with the log."""
    if not hasattr(source, "read"):
        with open(source, "rb") as fh:
            yield from stream_records(fh, kinds, chunk)
        return
    scans = iter_scans(cast(BinaryIO, source), chunk)  # a binary file object: it has read()
    while True:
        scan = next(scans, None)  # (a loop variable would keep the last chunk alive
        if scan is None:  # while the next one is parsed)
            return
        recs = scan.iter_records(kinds)
        del scan
        yield from recs
        del recs


def iter_records(text: str | bytes) -> Iterator[dict[str, Any]]:
    yield from parse_text(text).iter_records()


def classify(
    events: Iterable[dict[str, Any]], exit_code: int | None = None, process_alive: bool = True
) -> dict[str, Any] | None:
    """The failure that explains a failed start: the most specific class seen in the log, or
    ``process-died`` when the process is gone (or exited non-zero) without a recognised line."""
    found: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.get("kind") == "failure":
            found.setdefault(e["class"], e)
    for cls in _PRIORITY:
        if cls in found:
            return dict(found[cls])
    if not process_alive or (exit_code not in (None, 0)):
        text = "the server process is gone" + (f" (exit code {exit_code})" if exit_code is not None else "")
        return {
            "kind": "failure",
            "class": "process-died",
            "hint": HINTS["process-died"],
            "text": text,
            "time": None,
            "line": None,
            **({"exit_code": exit_code} if exit_code is not None else {}),
        }
    return None


def parse_server_args(text: str) -> dict[str, Any]:
    """The resolved server arguments from a ``server_args=`` line: a dict (0.5.23) or a
    ``ServerArgs(...)`` repr (older). Values that are not plain literals are kept as strings."""
    i = text.find("server_args=")
    if i < 0:
        return {}
    body = text[i + len("server_args=") :].strip()
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError:
        return {}
    out: dict[str, Any] = {}
    if isinstance(tree, ast.Dict):
        for k, v in zip(tree.keys, tree.values):
            if isinstance(k, ast.Constant):
                out[str(k.value)] = _literal(v, body)
    elif isinstance(tree, ast.Call):
        for kw in tree.keywords:
            if kw.arg:
                out[kw.arg] = _literal(kw.value, body)
    return out


def _literal(node: ast.expr, src: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return ast.get_source_segment(src, node)
