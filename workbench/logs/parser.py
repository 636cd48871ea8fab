"""Read an SGLang or vLLM log, line by line, into records; say what was not recognised.

    scan = parse_text(text)                      # or LogParser().feed(chunk) for a growing log
    for rec in scan.records: ...                 # dicts, in line order (see workbench.logs for the fields)
    scan.unrecognised, scan.samples              # how many lines no rule, statement or known form read
    classify(scan.records, exit_code=1)          # the failure that explains a dead server, or None

A line is read in three steps: its prefixes (``prefix.py``: the engine's own, and those a container, an
orchestrator or srun puts around it), its message (``bulk.py`` for the periodic lines, ``rules.py`` for
the rest), and, where no rule reads it, whether the engine wrote it at all (``grammar.py``: every
release's log statements). Python tracebacks are read as one failure: its head line (``Scheduler hit an
exception:``, ``EngineCore encountered a fatal error.``) or, without one, the ``Traceback`` line, with
the final exception; a record waits for a traceback open before it to reach its exception line, so the
records come out in line order. Memory stays bounded: a chunk's lines are parsed and let go.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

from workbench.logs import bulk, prefix
from workbench.logs.failures import PRIORITY, hint
from workbench.logs.rules import FLOAT_FIELDS, INT_FIELDS, RULES, Rule

SAMPLES = 5  # unrecognised lines kept to show
MEMO = 4096  # distinct messages remembered (what the grammar, the rules made of each; repeated warnings)
MEMO_LEN = 2000  # the longest message remembered (the memos stay small whatever the log's lines)
KNOWN, RECORD = 1, 2  # what the fast path made of a line
STREAM_CHUNK = 1 << 21  # bytes parsed at a time when streaming
MAX_TRACEBACK = 4000  # lines a traceback may run before it is read as ended
CLIP = 400

_RANK_ORDER = {c: i for i, c in enumerate(PRIORITY)}
_RANK_ORDER["exception"] = len(PRIORITY)  # within one failure, any class a rule names says more
_KIND_ORDER = {"failure": 0, "ready": 1, "warning": 2, "milestone": 3, "metrics": 4}


def _trie(words: Iterable[str]) -> str:
    """One regex of literal ``words`` that finds the longest at each place, their common starts shared: the
    engine then follows one branch a character, not every word (a flat alternation tries each in turn)."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = None  # a word ends here

    def tail(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + tail(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body  # greedy: a longer word over one it starts with

    return tail(root)


# every rule's trigger literals, one pattern: a message is tried against the rules it holds triggers of
_BY_TRIGGER: dict[str, list[Rule]] = {}
for _r in RULES:
    for _t in _r.triggers:
        _BY_TRIGGER.setdefault(_t, []).append(_r)
_TRIGGERS = re.compile(_trie(_BY_TRIGGER))

# SGLang's stamp, then the message's first words (one match sorts a serving log's lines)
_SG_HEAD = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)((?: [A-Z][A-Z_]*\d+)*)\] ")
# a vLLM process's INFO line up to its message: (process, pid, level, time, src)
_VLLM_INFO = re.compile(r"\(([\w.:-]+) pid=([0-9]+)\) (INFO) ([0-9]{2}-[0-9]{2} [0-9:]{8}) \[([\w./-]+:[0-9]+)\] ")
# the same with the periodic metrics line's message (one match reads both)
_VLLM_TPUT = re.compile(_VLLM_INFO.pattern + bulk.TPUT.pattern)
_VLLM_SPEC = re.compile(_VLLM_INFO.pattern + bulk.SPEC.pattern)
_TPUT_HEADS = ("Engi", "Avg ")  # "Engine 000: Avg prompt throughput", or with no engine named
_ACCESS = re.compile(r'(?:\S+:\d+|\[[0-9a-fA-F:]+\]:\d+|-) - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}')
# lines the engines' processes write that are not log statements of theirs
_NOISE = re.compile(
    r"\d+%\|"  # tqdm bars
    r"|it/s\]|s/it\]|\d+/\d+ \[\d\d:\d\d"
    r"|\[\d\d:\d\d(?::\d\d)?(?:<[\d:?]+)?, [\d.?]+\s?\w*B/s\]$"  # a download's bar (bytes a second)
    r"|^\S+\.py:\d+: \w*Warning: "  # Python warnings
    r"|^\s*warnings\.warn\("
    r"|NCCL (?:INFO|WARN)"
    r"|^(?:Started server process|Waiting for application (?:startup|shutdown)|Uvicorn running on|Shutting down"
    r"|Finished server process|Application shutdown complete)"
    r"|^=+$|^-+$|^\*+$"
    r"|^\s+File \"[^\"]+\", line \d+|^\s*[~^]+\s*$"  # a traceback's frame or caret line, alone
    r"|^\[Gloo\] |is connected to \d+ peer ranks|^Process [\w-]+:$"
    r"|^frame #\d+: |^Exception raised from \w+ at "  # a C++ exception's trace
    r"|^CUDA kernel errors might be asynchronously reported|^For debugging consider passing CUDA_LAUNCH_BLOCKING"
    r"|^Compile with `TORCH_USE_CUDA_DSA`"  # CUDA's advice under an error
)
_FRAME = re.compile(r'\s+File "[^"]+", line \d+|\s*[~^]+\s*$|\s{4,}\S')
_TRACEBACK = "Traceback (most recent call last):"
_CHAIN = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\([^)]*\))?(?::(?: |$)|$)")
_EXC_NAME = re.compile(r"^([A-Za-z_][\w.]*)")
_EXIT = re.compile(r"[Ee]xit ?code:? (-?\d+)|exitcode=(-?\d+)")
_ARG_PORT = re.compile(r"""(?:'port': |\bport=|--port[ =])(\d+)""")
_URL_PORT = re.compile(r"https?://[^\s:/]+:(\d+)")
_PORT_NUM = re.compile(r"(?:\bport\s*[:=]?\s*|_port at |\d\.\d{1,3}:|\]:|localhost:|', )(\d{3,5})\b", re.I)
_INTERNAL_PORT = re.compile(
    r"TCPStore|DistNetworkError|dist_init|nccl_port|port_base|detokenizer_port|rpc_port|metrics_port"
    r"|scheduler_input_port|load_collector_port|zmq|Port is already in use|bootstrap_port|c10d|master_port",
    re.I,
)
_NO_CONTEXT_ARG = re.compile(r"""(?:'context_length': |\bcontext_length=)None\b""")
_DRAFT_CLASS = re.compile(r"Eagle|Draft|MTP|NextN")
_PHASES = ("verify", "extend", "prefill", "piecewise", "decode")


def _clip(s: str, n: int = CLIP) -> str:
    s = s.rstrip()
    return s if len(s) <= n else s[: n - 3] + "..."


@dataclass
class Scan:
    """What a chunk of a log gave: its records in line order and what was not recognised."""

    lines: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    unrecognised: int = 0
    samples: list[tuple[int, str]] = field(default_factory=list)  # (line, text) of the first few

    def of(self, *kinds: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] in kinds]

    def failures(self) -> list[dict[str, Any]]:
        return self.of("failure")

    @property
    def ready(self) -> bool:
        return any(r["kind"] == "ready" for r in self.records)

    def extend(self, other: Scan) -> None:
        self.lines += other.lines
        self.records += other.records
        self.unrecognised += other.unrecognised
        self.samples += other.samples[: max(0, SAMPLES - len(self.samples))]


@dataclass
class _Trace:
    """An open traceback of one source (a vLLM process, or the log's unprefixed lines)."""

    rec: dict[str, Any]  # the failure record it fills in
    start: int  # its first line
    exceptions: list[str] = field(default_factory=list)
    in_exception: bool = False  # the last line read was an exception line (more may continue it)
    lines: int = 0
    last: int = 0  # the last line read into it
    attached: bool = False  # the record is a failure line's, not the traceback's own


class LogParser:
    """Feed it a growing log (bytes by offset, or text); it keeps the partial last line, open
    tracebacks and the startup state (which weight load is the target's) between calls. ``dicts=False`` leaves
    the periodic lines' records as the structs they are built as (for a writer of JSON: no dict in between).

    A failure's record is filled in by the traceback after it; it is given as soon as the traceback reaches its
    exception (a live reader holds the dict, which the rest of the traceback completes in place). ``settled=True``
    gives it only once the traceback has ended, for a writer that cannot change what it wrote."""

    def __init__(self, *, dicts: bool = True, settled: bool = False) -> None:
        self.dicts = dicts  # records as dicts; False: the periodic lines' records as ``bulk.Record`` structs
        self.settled = settled  # a record is given only once later lines can no longer change it
        self._raw = b""
        self._partial = ""
        self.lines = 0  # complete lines consumed
        self.bytes = 0  # bytes fed (the next read offset)
        self.engine: str | None = None  # the engine the log's prefixes name
        self.records = 0  # records made so far
        self.known = 0  # lines recognised without a record of their own (blank lines among them)
        self.blank = 0
        self.prefixed = 0  # lines not recognised that carry an engine's prefix (a log, then)
        self.unrecognised = 0
        self.samples: list[tuple[int, str]] = []
        self.ready = False
        self.server_port: int | None = None
        self._no_context_arg = False
        self._weights_begin: dict[str, int] = {}
        self._weights_end: dict[str, int] = {}
        self._last_time: str | None = None
        self._traces: dict[Any, _Trace] = {}
        self._last_failure: dict[Any, tuple[int, dict[str, Any]]] = {}  # source -> (line, record)
        self._held: list[dict[str, Any]] = []  # records after an open traceback's start
        self._warned_source: Any = None  # a Python warning's next (indented) line is its source line
        self._memo: dict[str, Any] = {}  # message -> the statement that wrote it (a log repeats its lines)
        self._quiet: set[str] = set()  # engine messages that gave no record and end no traceback
        self._ruled: dict[tuple[str, str | None], Any] = {}  # (message, engine) -> the rule that reads it, or None
        self._warned: dict[str, dict[str, Any]] = {}  # SGLang's warning messages -> a record of one (see _remember)
        self._ranks: dict[str, Any] = {}  # vLLM process name -> its ranks

    # -- feeding --------------------------------------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview | str, *, final: bool = False) -> Scan:
        if isinstance(data, str):
            if self._raw:
                data = codecs.utf_8_decode(self._raw, "replace", True)[0] + data
                self._raw = b""
            text = self._partial + data if self._partial else data
            self._partial = ""
            if not final and not text.endswith("\n"):
                cut = text.rfind("\n") + 1
                text, self._partial = text[:cut], text[cut:]
            return self._parse(text, final)
        self.bytes += len(data)
        raw = bytes(data)
        if self._partial:
            raw = self._partial.encode("utf-8", "surrogatepass") + raw
            self._partial = ""
        cut = len(raw) if final else raw.rfind(b"\n") + 1
        if not cut and not final:
            self._raw += raw
            return Scan()
        head = self._raw + raw[:cut] if self._raw else raw[:cut]
        self._raw = raw[cut:]
        return self._parse(codecs.utf_8_decode(head, "replace", True)[0], final)

    def feed_lines(self, lines: bytes | bytearray | memoryview) -> Scan:
        """Whole lines (ending with a newline, no partial line waiting)."""
        if self._raw or self._partial:
            raise ValueError("feed_lines after a partial line: feed the rest first")
        self.bytes += len(lines)
        return self._parse(codecs.utf_8_decode(lines, "replace", True)[0], False)

    def finish(self) -> Scan:
        return self.feed("", final=True)

    # -- the work -------------------------------------------------------------------------------------
    def _parse(self, text: str, final: bool) -> Scan:
        scan = Scan()
        if text:
            if "\r" in text and "\r\n" in text:  # (a lone "\r", a redrawn bar, stays in its line; "\r": memchr)
                text = text.replace("\r\n", "\n")
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()
            self._lines(lines, scan)
        if final:
            for key in list(self._traces):
                self._close(key, scan)
        # records after a traceback still short of its exception wait for it (line order)
        if self._held:
            scan.records[:0] = self._held
            self._held = []
        if self._traces or (self.settled and self._last_failure):
            # settled: until its traceback has ended (its end line, chained exceptions and the class they give),
            # and a failure line the traceback in the next lines may still belong to
            first = min(
                [t.start for t in self._traces.values() if self.settled or not t.exceptions]
                + [ln for ln, _ in self._last_failure.values() if self.settled and not final and ln >= self.lines - 1],
                default=None,
            )
            if first is not None:
                keep = [r for r in scan.records if (r["line"] or 0) < first]
                self._held = [r for r in scan.records if (r["line"] or 0) >= first]
                scan.records = keep
        self.records += len(scan.records)
        if self.dicts:
            scan.records = [r.as_dict() if isinstance(r, bulk.Record) else r for r in scan.records]
        return scan

    def _lines(self, lines: list[str], scan: Scan) -> None:
        """The chunk's lines: a serving log's periodic and access lines on the fast path (one match each),
        every other line through ``_line``."""
        append: Any = scan.records.append  # a dict or, until _parse makes it one, a bulk.Record
        first = self.lines + 1
        self.lines += len(lines)
        scan.lines = len(lines)
        dec = bulk.DECODE.match
        pre = bulk.PREFILL.match
        decode = bulk.decode_record
        prefill = bulk.prefill_record
        quiet = self._quiet
        warned = self._warned
        traces = self._traces
        known = 0
        last = None  # the last line the loop read whose stamp is the time of the lines after it
        for n, line in enumerate(lines, first):
            if traces:
                pass  # an open traceback reads every line (below)
            elif line[:2] == "[2":
                # SGLang's "[stamp ranks] ": uvicorn's access lines, decode, prefill, messages seen before
                if line[20:32] == "] INFO:     " and line[32:33].isdigit() and line[5] == "-" and line[14] == ":":
                    known += 1  # an access line (the HTTP server's: a stamp with no ranks)
                    last = line
                    continue
                end = line.find("] ", 20, 72)
                if end > 0 and line[5] == "-" and line[14] == ":":
                    pos = end + 2
                    if line.startswith("INFO:     ", pos):
                        if line[pos + 10 : pos + 11].isdigit():
                            known += 1
                            last = line
                            continue
                    else:
                        c = line[pos : pos + 1]
                        m = dec(line, pos) if c == "D" else pre(line, pos) if c == "P" else None
                        if m is not None:
                            t, r = (
                                (line[1:20], None)
                                if end == 20
                                else (line[1:20], line[21:end])
                                if line[20] == " " and line[21] != " " and line[end - 1] != " "
                                else _stamp(line, end)
                            )
                            rec = (decode if c == "D" else prefill)(m, n, t, r)
                            if rec is not None:  # (None: a number JSON does not spell, "007": by ``_line``)
                                append(rec)
                                last = line
                                continue
                    msg = line[pos:]
                    if msg in quiet:
                        known += 1
                        last = line
                        continue
                    w = warned.get(msg)
                    if w is not None:
                        again = _repeat(w, line, pos, n)
                        if again is not None:
                            append(again)
                            last = line
                            continue
            elif line[:1] == "(":
                got = self._vllm_line(line, n, append)
                if got:
                    known += got == KNOWN
                    continue
            if last is not None:
                self._last_time, last = _stamp(last, last.find("] ", 20, 72))[0], None
            self._line(line, n, scan)
        if last is not None:
            self._last_time = _stamp(last, last.find("] ", 20, 72))[0]
        self.known += known

    def _vllm_line(self, line: str, n: int, append: Any) -> int:
        """A vLLM process's access line or a message seen before (KNOWN), its metrics line (RECORD,
        appended), or 0: read by ``_line``."""
        close = line.find(") ", 8, 96)  # "(APIServer pid=1) INFO:     127.0.0.1:5 - "POST ..." 200 OK"
        if close < 0:
            return 0
        if line.startswith("INFO:     ", close + 2) and line[close + 12 : close + 13].isdigit():
            return KNOWN
        # "(APIServer pid=1) INFO 12-05 04:50:13 [loggers.py:127] Engine 000: Avg prompt throughput: ..."
        src_end = line.find("] ", close + 23, close + 160)
        if src_end > 0:
            head = line[src_end + 2 : src_end + 6]
            f = _VLLM_SPEC.match(line) if head == "Spec" else _VLLM_TPUT.match(line) if head in _TPUT_HEADS else None
            if f is not None:
                g = f.groups()
                proc = g[0]
                rank = self._ranks.get(proc, _MISS)
                if rank is _MISS:
                    rank = prefix.rank_of(proc)
                    if len(self._ranks) < MEMO:
                        self._ranks[proc] = rank
                rec = bulk.metrics_record(g[5:], head == "Spec", n, g[3], rank, proc, int(g[1]), g[4])
                if rec is not None:  # (None: a number JSON does not spell: read item by item)
                    append(rec)
                    return RECORD
        v = _VLLM_INFO.match(line)
        return KNOWN if v is not None and line[v.end() :] in self._quiet else 0

    def _line(self, raw: str, n: int, scan: Scan) -> None:
        if not raw:  # a blank line (it may end a traceback)
            if self._traces:
                self._trace_line(None, "", n, scan)
            self.known += 1
            self.blank += 1
            return
        if "\r" in raw:  # a redrawn progress bar: what the terminal showed last (a log line glued after it)
            raw = next((p for p in reversed(raw.split("\r")) if p.strip()), "")
        line = prefix.clean(raw)
        pre = prefix.split(line)
        msg = line[pre.start :]
        engine = pre.engine
        if engine is not None and self.engine is None:
            self.engine = engine
        if pre.time is not None:
            self._last_time = pre.time
        key = (pre.process, pre.pid) if pre.pid is not None else (engine or "main")
        if self._traces and self._trace_line(pre, msg, n, scan, key):
            return
        stripped = msg.strip()
        if not stripped:
            self.known += 1
            if not line.strip():
                self.blank += 1
            return
        if stripped.startswith(_TRACEBACK) or msg.endswith(_TRACEBACK) or stripped in _CHAIN:
            self._open_trace(pre, msg, n, key, scan)
            return
        eng = engine or self.engine
        # the periodic lines
        if msg.startswith(("Decode batch", "Prefill batch")):
            got = bulk.decode_generic(msg)
            if got is not None:
                self._emit(scan, pre, n, got, engine or "sglang")
                return
        if "throughput: " in msg or "metrics: " in msg or msg.startswith("Prefix cache hit rate: "):
            got = bulk.vllm_metrics(msg)
            if got is not None:
                self._emit(scan, pre, n, got, engine or "vllm")
                return
        body = self._rules(msg, pre, eng)
        if body is not None:
            rec = self._emit(scan, pre, n, body, None)
            if rec["kind"] == "failure":
                self._last_failure[key] = (n, rec)
            return
        warned = self._other(msg, stripped, pre, n, eng, scan, key)
        if warned is not None and line is raw and len(self._warned) < MEMO and len(msg) < MEMO_LEN:
            self._remember(raw, msg, warned)

    def _remember(self, line: str, msg: str, rec: dict[str, Any]) -> None:
        """A warning in SGLang's plain "[stamp ranks] " (nothing else around it): the fast loop gives its repeats
        from a copy of this record with their own line, time and ranks, which are all that can differ."""
        end = line.find("] ", 20, 72) if line.startswith("[2") else -1
        if end > 0 and line[5] == "-" and line[14] == ":" and line[end + 2 :] == msg and rec.keys() <= _WARNING_KEYS:
            self._warned[msg] = dict(rec)

    def _other(
        self, msg: str, stripped: str, pre: prefix.Prefix, n: int, eng: str | None, scan: Scan, key: Any
    ) -> dict[str, Any] | None:
        """A line no rule reads: a warning or error the engine logged, a known form, or not recognised. The
        warning's record, where it is one the engine logged (the same message gives the same record)."""
        bare = ": " not in stripped and " " not in stripped  # "AssertionError": an exception with no message
        if _EXC_LINE.match(stripped) and (": " in stripped or bare) and pre.level in (None, "ERROR", "CRITICAL"):
            head = _EXC_NAME.match(stripped)
            name = head.group(1) if head else ""
            if name.endswith(("Error", "Exception", "Exit", "Interrupt", "Fault", "Failure")):
                # a traceback's last line pasted alone: a failure whose class the message may name
                body = {"kind": "failure", "class": "exception", "text": _clip(stripped)}
                self._refine(_Trace(self._emit(scan, pre, n, body, None), n, exceptions=[stripped]))
                return None
        st = None
        if len(msg) < MEMO_LEN:
            memo = self._memo.get(msg, _MISS)
            if memo is _MISS:
                g = _grammar()
                for e in (eng,) if eng else ("sglang", "vllm"):
                    st = g.match(e, msg)
                    if st is not None:
                        break
                if len(self._memo) < MEMO:
                    self._memo[msg] = st
            else:
                st = memo
            if st is not None:
                eng = st.engine
        level = pre.level or (st.level.upper() if st is not None and st.level != "raise" else None)
        if level in ("WARNING", "ERROR", "CRITICAL") and _FRAME.match(msg):
            self.known += 1  # a traceback's frame, pasted without the rest of it
            return None
        if level in ("WARNING", "ERROR", "CRITICAL"):
            warn: dict[str, Any] = {"kind": "warning", "name": None, "level": level, "text": _clip(msg)}
            if st is not None:
                warn["statement"] = st.at  # where the engine's newest release that writes it does
            return self._emit(scan, pre, n, warn, eng)
        if st is not None or _ACCESS.match(msg) or _NOISE.search(msg) or (pre.library and level in ("INFO", "DEBUG")):
            self.known += 1
            if st is not None and pre.engine is not None and len(self._quiet) < MEMO and len(msg) < MEMO_LEN:
                self._quiet.add(msg)  # the engine's line again: known at once, in the loop
            self._warned_source = n if "Warning: " in msg and _NOISE.match(msg) else None
            return None
        if self._warned_source == n - 1 and msg.startswith(" "):
            self.known += 1  # the source line Python prints under a warning
            return None
        if pre.engine is not None:
            self.prefixed += 1  # the engine's prefix: a line of its log, a statement this table lacks
        self._unknown(scan, n, msg)
        return None

    def _unknown(self, scan: Scan, n: int, text: str) -> None:
        self.unrecognised += 1
        scan.unrecognised += 1
        if len(self.samples) < SAMPLES:
            self.samples.append((n, _clip(text, 200)))
            scan.samples.append((n, _clip(text, 200)))

    # -- rules ----------------------------------------------------------------------------------------
    def _rules(self, msg: str, pre: prefix.Prefix, eng: str | None) -> dict[str, Any] | None:
        got = self._ruled.get((msg, eng), _MISS)
        if got is _MISS:
            got = match(msg, eng)
            if len(self._ruled) < MEMO and len(msg) < MEMO_LEN:
                self._ruled[msg, eng] = got
        if got is None:
            return None
        r, m = got
        rec: dict[str, Any] = {"kind": r.kind, "name": r.name}
        for k, v in m.groupdict().items():
            if v is not None:
                rec[k] = _convert(k, v)
        rec.update(r.fields)
        if r.kind == "failure":
            del rec["name"]
            self._failure(rec, r.name, r.what, msg)
        elif r.kind == "milestone":
            self._milestone(rec, msg, pre, r)
        elif r.kind == "ready":
            self.ready = True
        rec["text"] = _clip(msg)
        rec["engine"] = r.engine
        return rec

    def _place(self, cls: str) -> str:
        if cls == "context-length" and (any(self._weights_end.values()) or self._no_context_arg):
            # SGLang 0.4.9 says "User-specified" for the draft too; the draft's config is built after
            # the target's weights (or, with no --context-length, only the draft can be too long)
            return "draft-context"
        return cls

    def _failure(self, rec: dict[str, Any], cls: str, what: str | None, msg: str) -> None:
        cls = self._place(cls)
        rec["class"] = cls
        if what is not None:
            rec["what"] = what
        if cls == "port-in-use":
            which, port = self._which_port(msg)
            if what != "internal":
                rec["what"] = which
            if port is not None:
                rec.setdefault("port", port)
        ec = _EXIT.search(msg)
        if ec is not None and "exit_code" not in rec:
            rec["exit_code"] = int(ec.group(1) or ec.group(2))
        if rec.get("exit_code") == -9 and cls == "process-died":
            rec["what"] = "sigkill"
        rec["hint"] = hint(cls, rec.get("what"))
        if rec.get("exit_code") == -9:
            rec["hint"] += " (exit -9 is SIGKILL: often the OS out-of-memory killer; check dmesg)"

    def _which_port(self, msg: str) -> tuple[str, int | None]:
        m = _PORT_NUM.search(msg)
        port = int(m.group(1)) if m else None
        if port is not None and self.server_port is not None:
            return ("server" if port == self.server_port else "internal"), port
        if _INTERNAL_PORT.search(msg):
            return "internal", port
        return "server", port

    def _milestone(self, rec: dict[str, Any], msg: str, pre: prefix.Prefix, r: Rule) -> None:
        name = rec["name"]
        rank = pre.rank or ""
        if name == "server_args":
            self._weights_begin.clear()
            self._weights_end.clear()
            self.ready = False
            port = _ARG_PORT.search(msg)
            if port is not None:
                self.server_port = int(port.group(1))
            self._no_context_arg = _NO_CONTEXT_ARG.search(msg) is not None
        elif r.engine == "sglang" and name == "weights_begin":
            k = self._weights_begin[rank] = self._weights_begin.get(rank, 0) + 1
            rec["role"] = "target" if k == 1 else "draft"
        elif r.engine == "sglang" and name == "weights_end":
            k = self._weights_end[rank] = self._weights_end.get(rank, 0) + 1
            drafty = _DRAFT_CLASS.search(rec.get("model_class") or "") is not None
            rec["role"] = "draft" if (drafty or k > 1) else "target"
        elif name in ("graph_begin", "graph_end") and r.engine == "sglang":
            # "Capture draft extend cuda graph begin", "Capture target verify CUDA graph end", ...
            what = str(rec.pop("graph", "")).lower()
            rec["role"] = "draft" if "draft" in what else "target"
            rec["phase"] = next((p for p in _PHASES if p in what), "decode")
        elif r.id == "vllm.serving":
            port = _URL_PORT.search(msg)
            if port is not None:
                self.server_port = int(port.group(1))

    # -- tracebacks -----------------------------------------------------------------------------------
    def _open_trace(self, pre: prefix.Prefix, msg: str, n: int, key: Any, scan: Scan) -> None:
        old = self._traces.get(key)
        stripped = msg.strip()
        if old is not None and ((stripped.startswith(_TRACEBACK) and old.in_exception) or stripped in _CHAIN):
            old.in_exception = False  # a chained traceback: the same failure goes on
            old.lines += 1
            self.known += 1
            return
        if old is not None:
            self._close(key, scan)
        head = msg[: msg.find(_TRACEBACK)] if _TRACEBACK in msg else ""
        last = self._last_failure.get(key)
        if not head and last is not None and last[0] >= n - 2:
            # "EngineCore encountered a fatal error." then its traceback: one failure
            self._traces[key] = _Trace(last[1], last[0], last=n, attached=True)
            self.known += 1
            return
        body = self._rules(head, pre, pre.engine or self.engine) if head else None
        if body is None or body["kind"] != "failure":
            body = {"kind": "failure", "class": "exception", "text": _clip(head.rstrip(" :") or stripped)}
        else:
            body["text"] = _clip(head.rstrip(" :"))
        self._traces[key] = _Trace(self._emit(scan, pre, n, body, None), n, last=n)

    def _trace_line(self, pre: prefix.Prefix | None, msg: str, n: int, scan: Scan, key: Any = None) -> bool:
        """A line of an open traceback: True where it belongs to one (and is read there)."""
        if pre is None:  # a blank line
            for t in self._traces.values():
                t.lines += 1
                t.last = n
            return True
        own = self._traces.get(key)
        if own is None and pre.engine is None and key == "main":
            # an unprefixed line right after a prefixed traceback's line (a C++ library's output): its
            for k, t in self._traces.items():
                if t.last == n - 1:
                    key, own = k, t
                    break
        if own is None:
            if pre.engine is not None and pre.pid is None:
                # another prefixed line (SGLang's next message): unprefixed tracebacks end with it
                if "main" in self._traces and self._traces["main"].exceptions:
                    self._close("main", scan)
                if "sglang" in self._traces and self._traces["sglang"].exceptions:
                    self._close("sglang", scan)
            return False
        stripped = msg.strip()
        own.lines += 1
        own.last = n
        if own.lines > MAX_TRACEBACK:
            self._close(key, scan)
            return False
        if stripped.startswith(_TRACEBACK) or stripped in _CHAIN:
            own.in_exception = False
            self.known += 1
            return True
        if msg[:1] in (" ", "\t") or not stripped:
            if own.in_exception and stripped and not stripped.startswith(("File ", "^")):
                own.exceptions[-1] += " " + stripped  # an exception message's next line
            self.known += 1
            return True
        if pre.engine == "sglang" and pre.start and pre.pid is None:
            self._close(key, scan)  # the next SGLang message: its tracebacks' lines carry no stamp
            return False
        if not own.in_exception and _EXC_LINE.match(stripped):
            own.exceptions.append(stripped)
            own.in_exception = True
            self._refine(own)
            self.known += 1
            return True
        if own.in_exception and len(own.exceptions[-1]) < 2000 and pre.engine is None:
            own.exceptions[-1] += " " + stripped  # a multi-line message (CUDA's advice lines)
            self._refine(own)
            self.known += 1
            return True
        if own.exceptions:
            self._close(key, scan)
            return False
        self.known += 1  # something printed inside the traceback (a frame's locals, a kernel's line)
        return True

    def _close(self, key: Any, scan: Scan) -> None:
        t = self._traces.pop(key, None)
        if t is None:
            return
        self._refine(t)
        rec = t.rec
        rec["end_line"] = t.last or t.start
        self._last_failure.pop(key, None)

    def _refine(self, t: _Trace) -> None:
        """The failure's class from its exceptions (the most specific wins over the head's); an
        exception no class names, raised on a serving server without a failure line before it, is a
        request's: logged and survived, a warning."""
        rec = t.rec
        if rec["kind"] == "warning":
            rec["exception"] = _clip(t.exceptions[-1]) if t.exceptions else rec.get("exception")
            return
        if not t.exceptions:
            rec.setdefault("hint", hint(rec["class"], rec.get("what")))
            return
        rec["exception"] = _clip(t.exceptions[-1])
        best = rec["class"]
        what = rec.get("what")
        for exc in reversed(t.exceptions):
            got = match(exc, None, failures_only=True)
            if got is not None:
                r, m = got
                cls = self._place(r.name)
                if _RANK_ORDER.get(cls, 99) < _RANK_ORDER.get(best, 99):
                    best, what = cls, r.what
                    for k, v in m.groupdict().items():
                        if v is not None and k != "component":
                            rec[k] = _convert(k, v)
        if best == "exception" and self.ready and not t.attached:
            rec["kind"] = "warning"
            rec["name"] = "exception"
            for k in ("class", "hint", "what"):
                rec.pop(k, None)
            return
        rec["class"] = best
        if what is not None:
            rec["what"] = what
        else:
            rec.pop("what", None)
        rec["hint"] = hint(best, what)

    # -- records --------------------------------------------------------------------------------------
    def _emit(self, scan: Scan, pre: prefix.Prefix, n: int, body: dict[str, Any], engine: str | None) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "kind": body.pop("kind"),
            "engine": body.pop("engine", None) or engine or pre.engine or self.engine,
            "line": n,
            "time": pre.time or self._last_time,
        }
        rec["rank"] = pre.rank
        if pre.process:
            rec["process"] = pre.process
        if pre.pid is not None:
            rec["pid"] = pre.pid
        if pre.level and pre.level != "INFO":
            rec["level"] = pre.level
        if pre.src:
            rec["src"] = pre.src
        if pre.task is not None:
            rec["task"] = pre.task
        if pre.container:
            rec["container"] = pre.container
        rec.update(body)
        scan.records.append(rec)
        return rec


def match(msg: str, engine: str | None, failures_only: bool = False) -> tuple[Rule, re.Match[str]] | None:
    """The rule that reads ``msg`` (of ``engine``'s log, None: any): a failure over readiness over a
    warning over a stage, the most specific failure class first."""
    found = _TRIGGERS.findall(msg)
    if not found:
        return None
    best: tuple[tuple[int, int], Rule, re.Match[str]] | None = None
    for t in set(found):
        for r in _BY_TRIGGER[t]:
            if (r.engine is not None and engine is not None and r.engine != engine) or (
                failures_only and r.kind != "failure"
            ):
                continue
            m = r.regex.search(msg)
            if m is None:
                continue
            rank = (_KIND_ORDER[r.kind], _RANK_ORDER.get(r.name, 99) if r.kind == "failure" else 0)
            if best is None or rank < best[0]:
                best = (rank, r, m)
    return None if best is None else (best[1], best[2])


def _convert(name: str, v: str) -> Any:
    if name in INT_FIELDS:
        try:
            return int(v.replace(",", ""))
        except ValueError:
            return None
    if name in FLOAT_FIELDS:
        try:
            return float(v)
        except ValueError:
            return None
    return v


def _repeat(first: dict[str, Any], line: str, pos: int, n: int) -> dict[str, Any] | None:
    """The record of a warning repeated at line ``n``: the first one's, with this line's time and ranks as the
    prefixes read them for a line by itself (None where they would not read it so)."""
    s = prefix.SGLANG.match(line)
    if s is None or s.end() != pos:
        return None
    rec = first.copy()
    rec["line"], rec["time"], rec["rank"] = n, s.group(1), s.group(2).strip() or None
    return rec


def _stamp(line: str, end: int) -> tuple[str, str | None]:
    """(time, ranks) of SGLang's "[stamp ranks]" ending at ``end``, as ``prefix.split`` reads them."""
    if end == 20:
        return line[1:20], None
    inner = line[1:end]
    cut = inner.find(" ", 19)
    if cut < 0:
        return inner, None
    return inner[:cut], inner[cut + 1 :].strip() or None


_MISS = object()
_WARNING_KEYS = frozenset({"kind", "engine", "line", "time", "rank", "name", "level", "text", "statement"})


def _grammar() -> Any:
    from workbench.logs.grammar import load

    return load()


# -- convenience ----------------------------------------------------------------------------------------
def parse_text(text: str | bytes) -> Scan:
    """A whole log's records (and what was not recognised)."""
    p = LogParser()
    scan = p.feed(text, final=True)
    return scan


def iter_scans(fh: BinaryIO, chunk: int = STREAM_CHUNK) -> Iterator[tuple[LogParser, Scan]]:
    """A binary file object's log, a chunk at a time: what is parsed is let go as the next comes."""
    p = LogParser()
    while data := fh.read(chunk):
        yield p, p.feed(data)
    yield p, p.finish()


def stream_records(
    source: str | Path | BinaryIO, kinds: Iterable[str] | None = None, chunk: int = STREAM_CHUNK
) -> Iterator[dict[str, Any]]:
    """Records of a log file (a path or a binary file object) in line order, in memory that does not
    grow with the log."""
    if not hasattr(source, "read"):
        with open(source, "rb") as fh:
            yield from stream_records(fh, kinds, chunk)
        return
    want = set(kinds) if kinds else None
    for _, scan in iter_scans(cast(BinaryIO, source), chunk):
        recs = scan.records if want is None else [r for r in scan.records if r["kind"] in want]
        del scan
        yield from recs
