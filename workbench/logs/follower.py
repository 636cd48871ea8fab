"""What a server's log says so far, in memory that does not grow with the log (the log itself is the
source of truth): parsed by byte offset, the last lines, a bounded metrics series and a bounded list
of events (startup stages, readiness, warnings, failures), for SGLang's log and vLLM's alike."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from workbench.logs.failures import classify
from workbench.logs.parser import SAMPLES, LogParser, Scan

READ_CAP = 1 << 22  # log bytes fetched per refresh
SERIES_LEN = 240  # metrics samples kept per server for sparklines
TAIL_LINES = 5000  # raw log lines kept per server for log panes
EVENTS_KEPT = 2000  # stage/readiness/warning/failure records kept per server (see _compact_events)
EVENT_KINDS = ("milestone", "ready", "warning", "failure")

# The startup stages a server's row shows, in order (both engines' milestones map onto them).
STAGE_KEYS = ("server_args", "weights_target", "weights_draft", "kv_cache", "graphs_target", "graphs_draft", "ready")


def _compact_events(events: list[Any]) -> list[Any]:
    """A bounded event list that still tells the story: the startup's stages, the first failure of each
    class (what ``classify`` reads) and the most recent events."""
    head = [e for e in events[: EVENTS_KEPT // 4] if e["kind"] in ("milestone", "ready")]
    first: dict[str, Any] = {}
    for e in events:
        if e["kind"] == "failure":
            first.setdefault(e["class"], e)
    tail = events[-EVENTS_KEPT // 2 :]
    keep = {id(e): e for e in head + list(first.values()) + tail}
    return sorted(keep.values(), key=lambda e: e["line"] or 0)


def _finite(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else math.nan


class Follower:
    """What a server's log says so far: parsed by offset, the last lines, a bounded metrics series
    (accept length and generation throughput, from SGLang's decode lines or vLLM's metrics lines) and a
    bounded list of events; the lines it did not recognise are counted and the first few kept."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.offset = 0
        self.parser = LogParser()
        self.events: list[dict[str, Any]] = []
        self.last_decode: dict[str, Any] = {}  # the last metrics of the server (decode line, or vLLM's two)
        self.series: dict[str, list[Any]] = {"time": [], "accept_len": [], "gen_throughput": []}
        self.decode_lines = 0
        self.tail: deque[Any] = deque(maxlen=TAIL_LINES)  # (line number, text) for log panes
        self.total_lines = 0
        self._partial = b""

    @property
    def engine(self) -> str | None:
        return self.parser.engine

    @property
    def unrecognised(self) -> int:
        """Lines of the log no rule, engine statement or known form read."""
        return self.parser.unrecognised

    @property
    def samples(self) -> list[tuple[int, str]]:
        """(line, text) of the first few lines not recognised (at most ``SAMPLES``)."""
        return self.parser.samples[:SAMPLES]

    def feed(self, data: bytes, offset: int) -> Scan:
        if offset < self.offset:  # truncated or rotated: start again
            self._reset()
        self.offset = offset + len(data)
        scan = self.parser.feed(data)
        self._keep_tail(data)
        events = [r for r in scan.records if r["kind"] in EVENT_KINDS]
        if events:
            self.events.extend(events)
            if len(self.events) > EVENTS_KEPT:
                self.events = _compact_events(self.events)
        self._metrics(scan.records)
        return scan

    def _keep_tail(self, data: bytes) -> None:
        """The chunk's last TAIL_LINES lines joined to the partial line of the read before."""
        buf = self._partial + data if self._partial else data
        cut = buf.rfind(b"\n") + 1
        self._partial = buf[cut:]
        head = cut - 1
        for _ in range(TAIL_LINES):
            if head <= 0:
                break
            head = buf.rfind(b"\n", 0, head)
        head = max(0, head + 1)
        skipped = buf.count(b"\n", 0, head)
        self.total_lines += skipped
        lines = buf[head:cut].decode("utf-8", errors="replace").split("\n")[:-1]
        self.tail.extend(zip(range(self.total_lines + 1, self.total_lines + 1 + len(lines)), lines))
        self.total_lines += len(lines)

    def _metrics(self, records: list[dict[str, Any]]) -> None:
        """The series and the last metrics, from SGLang's decode lines and vLLM's metrics lines."""
        times: list[Any] = []
        al: list[float] = []
        gt: list[float] = []
        pending: dict[str, Any] = {}
        for r in records:
            kind = r["kind"]
            if kind == "decode":
                self.decode_lines += 1
                times.append(r["time"])
                al.append(_finite(r.get("accept_len")))
                gt.append(_finite(r.get("gen_throughput")))
                self.last_decode = r
            elif kind == "metrics":
                self.decode_lines += 1
                if r.get("name") == "throughput":
                    if pending:  # a throughput line with no spec line after it
                        times.append(pending["time"])
                        al.append(_finite(pending.get("accept_len")))
                        gt.append(_finite(pending.get("gen_throughput")))
                    pending = dict(r)
                    self.last_decode = {**self.last_decode, **r}
                elif r.get("name") == "spec_decode":
                    pending = {**pending, **r} if pending else dict(r)
                    self.last_decode = {**self.last_decode, **r}
                    times.append(pending.get("time"))
                    al.append(_finite(pending.get("accept_len")))
                    gt.append(_finite(pending.get("gen_throughput")))
                    pending = {}
        if pending:
            times.append(pending.get("time"))
            al.append(_finite(pending.get("accept_len")))
            gt.append(_finite(pending.get("gen_throughput")))
        if times:
            for key, vals in (("time", times), ("accept_len", al), ("gen_throughput", gt)):
                self.series[key] = (self.series[key] + vals)[-SERIES_LEN:]

    def lines_since(self, seen: int) -> list[tuple[int, str]]:
        """Log lines numbered after ``seen`` that are still in the tail."""
        return [(n, t) for n, t in self.tail if n > seen]

    def progress(self) -> list[str]:
        """The startup stages reached (``STAGE_KEYS``), from either engine's milestones."""
        names = set()
        draft = False
        for e in self.events:
            kind, n, role = e["kind"], e.get("name"), e.get("role")
            if kind == "ready":
                names.add("ready")
            elif kind != "milestone":
                continue
            elif n in ("server_args", "engine_config"):
                names.add("server_args")
            elif n == "weights_begin" and role == "draft":
                draft = True
            elif n == "weights_end":
                if e.get("engine") == "vllm":  # one line after the target's and the drafter's loads
                    names.add("weights_target")
                    if draft:
                        names.add("weights_draft")
                else:
                    names.add(f"weights_{role or 'target'}")
            elif n == "kv_cache":
                names.add("kv_cache")
            elif n == "graph_end":
                names.add(f"graphs_{role or 'target'}")
        return [k for k in STAGE_KEYS if k in names]

    def stage(self) -> str:
        """What the server is doing now (the last stage it logged)."""
        last = None
        for e in self.events:
            if e["kind"] in ("milestone", "ready"):
                last = e
        if last is None:
            return "starting"
        if last["kind"] == "ready":
            return "ready"
        role = last.get("role", "")
        return str(
            {
                "server_args": "loading",
                "engine_config": "starting the engine",
                "weights_begin": f"loading {role} weights".replace("  ", " "),
                "weights_loaded": "weights loaded",
                "weights_end": f"{role} weights loaded".strip(),
                "aux_layers": "draft configured",
                "kv_memory": "sizing the KV cache",
                "kv_cache": "KV cache allocated",
                "compile_begin": "compiling",
                "compile_end": "compiled",
                "graph_begin": f"capturing {role} CUDA graphs".replace("  ", " "),
                "graph_end": f"{role} CUDA graphs captured".strip(),
                "engine_init": "engine initialised",
                "health_server": "waiting for rank 0 (health server up)",
            }.get(last["name"], str(last["name"]).replace("_", " "))
        )

    @property
    def ready(self) -> bool:
        return any(e["kind"] == "ready" for e in self.events)

    def failures(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "failure"]

    def verdict(self, exit_code: int | None = None, process_alive: bool = True) -> dict[str, Any] | None:
        """The failure that explains the server's state (``classify`` over the events)."""
        return classify(self.events, exit_code=exit_code, process_alive=process_alive)
