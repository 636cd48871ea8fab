"""What stands before a log message: the engine's own prefix and whatever the user's setup adds around it.

Engine prefixes, as the engines' logging configuration writes them:

- SGLang (``configure_logger``): ``[%(asctime)s{.ms}{ DPn}{ PPn}{ TPn}{ EPn}...] `` with a dated stamp;
  uvicorn's lines in an SGLang server: ``[stamp] INFO:     ...``.
- vLLM (``vllm/logger.py``): ``LEVEL mm-dd hh:mm:ss [file.py:line] `` (``file.py:line] `` without the
  bracket before 0.5), since 0.11 or so behind a process tag ``(EngineCore_DP0 pid=N) `` that older
  releases added to their workers' output (``(VllmWorkerProcess pid=N)``, ``(VllmWorker rank=0 pid=N)``),
  and coloured (``\\x1b[36m``) where the output is a terminal.

Around them (outermost first, each optional): ANSI colour codes (also with the escape byte lost in a paste,
``[1;36m``), a container runtime's stamp (``2025-01-05T10:00:00.123456789Z``, with ``stdout F`` in
Kubernetes' log files), ``kubectl logs --prefix``'s ``[pod/name/container]``, docker compose's
``service-1  | ``, srun ``--label``'s ``0: ``, a syslog/journald head (``Dec 05 10:00:00 host python3[123]:``),
and indentation. PyTorch's own C++ log lines (``[rank0]:[W914 04:53:45.615 ProcessGroupNCCL.cpp:1476] ``) and
the ``[rank0]: `` torch.distributed puts before a rank's traceback are read as prefixes too, as are SGLang's rank
tags with their stamp cut off (``[TP0] ``), its router's lines and a library's Python logging head.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# SGLang: "[2025-07-10 08:15:42(.123)?( DP0 TP1 ...)?] "
SGLANG = re.compile(r"\[((?:\d{4}-\d\d-\d\d |\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?)([^\]\[\n]*)\] ?")
# vLLM: "(Proc pid=N) " and / or "LEVEL mm-dd hh:mm:ss(.mmm)? [file.py:N] "
VLLM_PROC = re.compile(r"\(([^()\n]*?) ?pid=(\d+)(?:, ip=[^)\n]*)?\) ?")
# the same with its "(" lost in a paste: "_AsyncLLMEngine pid=1974) INFO ..."
VLLM_PROC_CUT = re.compile(r"([A-Za-z_][\w .=-]*?) pid=(\d+)(?:, ip=[^)\n]*)?\) ")
VLLM_HEAD = re.compile(
    r"(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?) \[?([^\s\]]*?:\d+)\] ?"
)
# Python logging's "%(asctime)s - %(levelname)s - ..." (libraries in the engine's processes: FlashInfer, Ray)
PYLOG = re.compile(
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?:([\w./-]+\.py:\d+) - )?"
)
# uvicorn's own level prefix (after SGLang's stamp, after vLLM's process tag, or alone)
UVICORN = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):(?: +|$)")
# around the engines
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|(?<![\w\]])\[[0-9]{1,3}(?:;[0-9]{1,3})*m")
OUTER = re.compile(
    r"(?:\s*[|│] )?"  # a CI log viewer's or a terminal UI's gutter (Buildkite, k9s)
    # a container runtime's stamp (Kubernetes' log files add the stream)
    r"(?:\[?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]?(?: (?:stdout|stderr) [FP])? )?"
    r"(?:\[([A-Za-z][\w.-]*(?:/[\w.-]+)*)\] )?"  # kubectl --prefix's [pod/name/container], a [worker-0] tag
    r"(?:([\w.-]+)\s+\| )?"  # docker compose
    r"(?:(\w{3,4}\.? [ \d]\d \d\d:\d\d:\d\d) \S+ [\w./-]+(?:\[\d+\])?: )?"  # syslog / journald (any locale)
    r"(?: *(\d{1,5}): )?"  # srun --label
)
# a Rust "tracing" subscriber's head around an engine's message (dynamo): "2025-10-28T21:32:44.76Z  INFO module: "
TRACING = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+(TRACE|DEBUG|INFO|WARN|ERROR)\s+[\w.:]+: ")
# PyTorch's C++ log lines (c10 / glog), behind the rank prefix torch.distributed adds to a rank's output:
# "[rank0]:[W914 04:53:45.615225908 ProcessGroupNCCL.cpp:1476] ", "[E ProcessGroupNCCL.cpp:475] ", "[rank1]: "
TORCH = re.compile(
    r"(?:\[rank(\d+)\]: ?)?(?:\[([IWEF])(?:(\d\d?)(\d\d) (\d\d:\d\d:\d\d)(?:\.\d+)?(?: \d+)?)? ([\w.-]+:\d+)\] ?"
    r"(?:\[(?:PG ID \d+ PG GUID \d+(?:\([^)]*\))? )?Rank (\d+)\] )?)?"
)
# SGLang's rank tags with no stamp before them ("[TP0] ", "[DP1 TP3] "), as some pastes have them
RANKS = re.compile(r"\[((?:(?:DP|PP|TP|EP|CP|ATTN_CP|MOE_DP|ATTN_DP)\d+ ?)+)\] ")
# the SGLang router's own Python log: "[Router (Python)] 2025-05-17 01:10:45 - INFO - ... - launch_server.py:175"
ROUTER = re.compile(
    r"\[Router \((?:Python|Rust)\)\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) - (DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
)
_TORCH_LEVEL = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
HTML = re.compile(r"</?(?:font|b|span|strong|i|code)\b[^>]*>")
_TAGS = re.compile(r"(?<![A-Za-z])(DP|PP|TP|EP|CP|ATTN_CP|MOE_DP|ATTN_DP|rank=?)(\d+)")


class Prefix(NamedTuple):
    engine: str | None  # "sglang", "vllm", or None where nothing says
    time: str | None
    rank: str | None  # "TP0", "DP1 TP8", "DP0" (from a vLLM process name)
    process: str | None  # vLLM's process name ("EngineCore_DP0", "APIServer")
    pid: int | None
    level: str | None  # vLLM's and uvicorn's level (DEBUG, INFO, WARNING, ERROR, CRITICAL)
    src: str | None  # vLLM's "file.py:line"
    task: int | None  # srun's task number
    container: str | None  # compose service or kubectl pod
    start: int  # where the message starts in the (cleaned) line
    library: bool = False  # a library's own log line (Python logging's default format), not the engine's


NONE = Prefix(None, None, None, None, None, None, None, None, None, 0)


def rank_of(process: str) -> str | None:
    """The ranks a vLLM process name holds: ``Worker_PP0_TP1`` -> ``PP0 TP1``, ``EngineCore_DP0`` -> ``DP0``."""
    tags = _TAGS.findall(process)
    if not tags:
        return None
    return " ".join(("rank" if k.startswith("rank") else k) + n for k, n in tags)


def clean(line: str) -> str:
    """The line without colour codes (also those whose escape byte a paste lost: "[1;36m(Worker pid=1)[0;0m",
    and those a paste kept as HTML: "<font color=...><b>(APIServer pid=1)</b></font>")."""
    if "\x1b" in line or "m(" in line[:16] or "[0m" in line or "[0;0m" in line:
        line = ANSI.sub("", line)
    if line[:1] == "<":
        line = HTML.sub("", line, count=8)
    if line[-1:] == "│":  # a terminal UI's box around the line (k9s): its right edge
        line = line.rstrip("│").rstrip()
    return line


def split(line: str) -> Prefix:
    """The prefixes of a line with no colour codes (``clean``): engine, time, ranks, and so on."""
    c = line[:1]
    if c == "[":
        m = SGLANG.match(line)
        if m is not None:
            return _sglang(line, m, NONE)
        r = RANKS.match(line)  # (before the outer prefixes: "[TP0] " is no kubectl tag)
        if r is not None:
            return NONE._replace(engine="sglang", rank=r.group(1).strip(), start=r.end())
    elif c == "(" or c in "DIWEC":
        got = _vllm(line, 0, NONE)
        if got is not None:
            return got
    return _outer(line)


def _sglang(line: str, m: re.Match[str], outer: Prefix) -> Prefix:
    tags = m.group(2).strip()
    end = m.end()
    level = None
    if line.startswith(("INFO:", "WARNING:", "ERROR:", "DEBUG:", "CRITICAL:"), end):
        u = UVICORN.match(line, end)
        if u is not None:
            level, end = u.group(1), u.end()
    return Prefix("sglang", m.group(1), tags or None, None, None, level, None, outer.task, outer.container, end)


def _vllm(line: str, pos: int, outer: Prefix) -> Prefix | None:
    process = pid = None
    p = VLLM_PROC.match(line, pos) if line.startswith("(", pos) else None
    while p is not None:  # Ray nests them: "(ServeReplica:... pid=1) (EngineCore pid=2) (Worker pid=3) "
        process, pid, pos = p.group(1).strip(), int(p.group(2)), p.end()
        nxt = VLLM_PROC.match(line, pos) if line.startswith("(", pos) else None
        if nxt is None:
            break
        p = nxt
    h = VLLM_HEAD.match(line, pos)
    if h is None:
        if p is None:
            return None
        lib = PYLOG.match(line, pos)
        if lib is not None:  # a library's own logger in a vLLM process
            return Prefix(
                "vllm", lib.group(1), rank_of(process or ""), process or None, pid, lib.group(2), lib.group(3),
                outer.task, outer.container, lib.end(), library=True,
            )  # fmt: skip
        s = SGLANG.match(line, pos)
        if s is not None:  # Ray's "(Actor pid=N, ip=...)" before an SGLang line
            got = _sglang(line, s, outer)
            return got._replace(process=process or None, pid=pid)
        if ", ip=" in p.group(0) and not line.startswith(("INFO", "WARNING", "ERROR", "DEBUG"), pos):
            return outer._replace(process=process or None, pid=pid, start=pos)
        level = None
        u = UVICORN.match(line, pos)
        if u is not None:
            level, pos = u.group(1), u.end()
        return Prefix(
            "vllm", outer.time, rank_of(process or ""), process or None, pid, level, None, outer.task,
            outer.container, pos,
        )  # fmt: skip
    level = "WARNING" if h.group(1) == "WARN" else h.group(1)
    return Prefix(
        "vllm", h.group(2), rank_of(process or ""), process or None, pid, level, h.group(3), outer.task,
        outer.container, h.end(),
    )  # fmt: skip


def _bracketed(line: str, rest: int, outer: Prefix) -> Prefix | None:
    """A prefix in brackets at ``rest``: SGLang's stamp, its bare rank tags, its router's, PyTorch's."""
    s = SGLANG.match(line, rest)
    if s is not None:
        return _sglang(line, s, outer)
    r = RANKS.match(line, rest)
    if r is not None:
        return outer._replace(engine="sglang", rank=r.group(1).strip(), start=r.end())
    if line.startswith("[Router (", rest):
        g = ROUTER.match(line, rest)
        if g is not None:
            return outer._replace(engine="sglang", time=g.group(1), level=g.group(2), start=g.end(), library=True)
    t = TORCH.match(line, rest) if line.startswith(("[rank", "[I", "[W", "[E", "[F"), rest) else None
    if t is None or t.end() == rest:
        return None
    rank, level, mm, dd, hms, src, rank2 = t.groups()
    rank = rank or rank2
    return outer._replace(
        time=f"{int(mm):02d}-{dd} {hms}" if hms else outer.time, rank=f"rank{rank}" if rank else None,
        level=_TORCH_LEVEL.get(level or ""), src=src, start=t.end(), library=level is not None,
    )  # fmt: skip


def _outer(line: str) -> Prefix:
    """Prefixes added around the engine's (or a line with none): runtime stamps, compose, srun, indentation."""
    if line[:2] == "20":
        t = TRACING.match(line)
        if t is not None:
            level = {"WARN": "WARNING", "TRACE": "DEBUG"}.get(t.group(2), t.group(2))
            return Prefix(None, t.group(1), None, None, None, level, None, None, None, t.end())
        lib = PYLOG.match(line)
        if lib is not None:  # a library's own logger (FlashInfer's JIT, Ray) in the server's output
            return Prefix(None, lib.group(1), None, None, None, lib.group(2), lib.group(3), None, None, lib.end(), True)
    m = OUTER.match(line)
    pos = m.end() if m is not None else 0
    stamp = task = container = None
    if m is not None and pos:
        stamp = m.group(1) or m.group(4)
        container = m.group(2) or m.group(3)
        task = int(m.group(5)) if m.group(5) else None
    rest = pos
    while rest < len(line) and line[rest] in " \t":
        rest += 1
    outer = Prefix(None, stamp, None, None, None, None, None, task, container, pos)
    c = line[rest : rest + 1]
    if c == "[":
        got = _bracketed(line, rest, outer)
        if got is not None:
            return got
    elif c == "(" or (c and c in "DIWEC"):
        v = _vllm(line, rest, outer)
        if v is not None:
            return v
    if "pid=" in line[rest : rest + 64]:
        cut = VLLM_PROC_CUT.match(line, rest)
        if cut is not None:
            v = _vllm(line, cut.end(), outer._replace(start=cut.end()))
            if v is not None:
                return v._replace(process=cut.group(1), pid=int(cut.group(2)))
    if c in ("I", "W", "E"):
        u = UVICORN.match(line, rest)
        if u is not None:
            return outer._replace(level=u.group(1), start=u.end())
    if "[20" in line:  # a stamp after something glued before it (a progress bar without its newline)
        s = SGLANG.search(line, rest)
        if s is not None:
            return _sglang(line, s, outer)
    return outer
