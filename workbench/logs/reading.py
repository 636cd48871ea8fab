"""A log file read a chunk at a time: its records, or their JSON Lines (msgspec), and what was read.

    reading = Reading(open("server.log", "rb"), kinds=["failure"])
    for piece in reading.json_bytes(): out.write(piece)      # or: for rec in reading.records()
    reading.summary()    # lines, records, unrecognised and the first few of them, the engine
    reading.is_log       # False where no line was one the engines write

Memory stays bounded: one chunk of the file and its records are alive at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from workbench.logs.bulk import Record
from workbench.logs.parser import STREAM_CHUNK, LogParser


class Reading:
    def __init__(self, source: BinaryIO, kinds: Iterable[str] | None = None, chunk: int = STREAM_CHUNK) -> None:
        self.source = source
        self.kinds = set(kinds) if kinds else None
        self.chunk = chunk
        # the JSON writer takes the periodic lines' structs as they are, and records nothing later changes
        self.parser = LogParser(dicts=False, settled=True)

    def _chunks(self) -> Iterator[list[dict[str, Any]]]:
        p = self.parser
        want = self.kinds
        while True:
            data = self.source.read(self.chunk)
            scan = p.feed(data, final=not data)
            recs = scan.records if want is None else [r for r in scan.records if r["kind"] in want]
            del scan
            if recs:
                yield recs
            if not data:
                return

    def records(self) -> Iterator[dict[str, Any]]:
        """The records in line order, as their chunks are parsed."""
        for recs in self._chunks():
            for r in recs:
                yield r.as_dict() if isinstance(r, Record) else r

    def json_bytes(self) -> Iterator[bytes]:
        """The records as JSON Lines, a piece per chunk (each piece ends in a newline)."""
        import msgspec

        encode = msgspec.json.Encoder().encode_lines
        for recs in self._chunks():
            yield encode(recs)

    @property
    def is_log(self) -> bool:
        """Whether any line read was one the engines (or the processes around them) write."""
        p = self.parser
        return p.records > 0 or p.known > p.blank or p.prefixed > 0

    def summary(self) -> dict[str, Any]:
        p = self.parser
        return {
            "engine": p.engine,
            "lines": p.lines,
            "records": p.records,
            "unrecognised": p.unrecognised,
            "samples": [{"line": n, "text": t} for n, t in p.samples],
        }
