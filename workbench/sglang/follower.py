"""What a server's log says so far, in memory that does not grow with the log (the log itself is
the source of truth): parsed by byte offset, the last lines, a bounded decode series and a bounded
list of events."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from workbench.servers.registry import STAGES
from workbench.sglang.logparse import LogParser, LogScan

READ_CAP = 1 << 22  # log bytes fetched per refresh
SERIES_LEN = 240  # decode samples kept per server for sparklines
TAIL_LINES = 5000  # raw log lines kept per server for log panes
EVENTS_KEPT = 2000  # milestone/failure events kept per server (see _compact_events)


def _compact_events(events: list[Any]) -> list[Any]:
    """A bounded event list that still tells the story: the startup's milestones, the first
    failure of each class (what ``classify`` reads) and the most recent events."""
    head = [e for e in events[: EVENTS_KEPT // 4] if e["kind"] == "milestone"]
    first: dict[str, Any] = {}
    for e in events:
        if e["kind"] == "failure":
            first.setdefault(e["class"], e)
    tail = events[-EVENTS_KEPT // 2 :]
    keep = {id(e): e for e in head + list(first.values()) + tail}
    return sorted(keep.values(), key=lambda e: e["line"] or 0)


class Follower:
    """What a server's log says so far, in memory that does not grow with the log: parsed by
    offset, the last lines, a bounded decode series and a bounded list of events."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.offset = 0
        self.parser = LogParser()
        self.events: list[dict[str, Any]] = []
        self.last_decode: dict[str, Any] = {}
        self.series: dict[str, list[Any]] = {"time": [], "accept_len": [], "gen_throughput": []}
        self.decode_lines = 0
        self.tail: deque[Any] = deque(maxlen=TAIL_LINES)  # (line number, text) for log panes
        self.total_lines = 0
        self._partial = b""

    def feed(self, data: bytes, offset: int) -> LogScan:
        if offset < self.offset:  # truncated or rotated: start again
            self._reset()
        self.offset = offset + len(data)
        scan = self.parser.feed(data)
        # Only the chunk's last TAIL_LINES lines can stay in the tail: the lines before them are
        # counted (the parser counted them), not decoded. The partial line of the read before is
        # joined to this one only where the tail reaches into it (a read of few lines).
        buf = data
        for _ in range(2):
            cut = buf.rfind(b"\n") + 1
            head = cut - 1
            for _ in range(TAIL_LINES):
                if head <= 0:
                    break
                head = buf.rfind(b"\n", 0, head)
            if head > 0 or not self._partial or buf is not data:
                break
            buf = self._partial + data
        self._partial = buf[cut:] if cut else self._partial + data
        head = max(0, head + 1)
        tail = buf[head:cut].decode("utf-8", errors="replace")
        # the parser counted the lines up to cut: those before head are the rest
        self.total_lines += scan.lines - (tail.count("\n") + tail.count("\r") - tail.count("\r\n"))
        lines = tail.splitlines()
        self.tail.extend(zip(range(self.total_lines + 1, self.total_lines + 1 + len(lines)), lines))
        self.total_lines += len(lines)
        self.events.extend(scan.events)
        if len(self.events) > EVENTS_KEPT:
            self.events = _compact_events(self.events)
        d = scan.decode
        if len(d):
            self.decode_lines += len(d)
            if len(d) > SERIES_LEN:  # only the series' tail is read: its columns, not the chunk's
                d = d.tail(SERIES_LEN)
            times = d.times()
            al = [x if x - x == 0 else math.nan for x in d.column("accept_len").tolist()]
            gt = [x if x - x == 0 else math.nan for x in d.column("gen_throughput").tolist()]
            for key, vals in (("time", times), ("accept_len", al), ("gen_throughput", gt)):
                self.series[key] = (self.series[key] + vals)[-SERIES_LEN:]
            self.last_decode = d.record(len(d) - 1)
        return scan

    def lines_since(self, seen: int) -> list[tuple[int, str]]:
        """Log lines numbered after ``seen`` that are still in the tail."""
        return [(n, t) for n, t in self.tail if n > seen]

    def progress(self) -> list[str]:
        names = set()
        for e in self.events:
            if e["kind"] != "milestone":
                continue
            n, role = e["name"], e.get("role")
            if n == "server_args":
                names.add("server_args")
            elif n == "weights_end":
                names.add(f"weights_{role}")
            elif n == "kv_cache":
                names.add("kv_cache")
            elif n == "graph_end":
                names.add(f"graphs_{role}")
            elif n == "ready":
                names.add("ready")
        return [k for k, _ in STAGES if k in names]

    def stage(self) -> str:
        """What the server is doing now (the last begin without its end)."""
        last = None
        for e in self.events:
            if e["kind"] == "milestone":
                last = e
        if last is None:
            return "starting"
        role = last.get("role", "")
        return str(
            {
                "server_args": "loading",
                "weights_begin": f"loading {role} weights",
                "weights_end": f"{role} weights loaded",
                "kv_cache": "KV cache allocated",
                "graph_begin": f"capturing {role} CUDA graphs",
                "graph_end": f"{role} CUDA graphs captured",
                "ready": "ready",
            }.get(last["name"], last["name"])
        )

    @property
    def ready(self) -> bool:
        return any(e.get("name") == "ready" for e in self.events)

    def failures(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "failure"]
