"""The timeline of a debugging effort: every journaled operation in time order.

Answers "which config was live when accept length was 1.12?": a server loads its draft config at
launch, so for anything tied to a server the live config is the version recorded at its launch
(``servers.draft_config_sha256``); otherwise it is the latest stored version at that time.
"""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from workbench.journal import Journal
from workbench.results import Result
from workbench.servers.registry import Registry, ServerRecord

# Event kind prefix -> category shown and filtered by the faces.
CATEGORIES = (
    ("server.launch", "launch"),
    ("server.stop", "launch"),
    ("server.measure", "measurement"),
    ("server.sweep", "measurement"),
    ("live.measure", "measurement"),
    ("config.", "config"),
    ("doctor", "finding"),
    ("live.doctor", "finding"),
    ("align", "finding"),
)


def category_of(kind: str) -> str:
    for prefix, cat in CATEGORIES:
        if kind.startswith(prefix):
            return cat
    return "other"


@dataclass
class TimelineEntry(Result):
    id: int
    ts: float
    time: str
    kind: str
    category: str
    subject: str
    summary: str
    server: int | None = None
    profile: str | None = None
    config: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class LiveConfig(Result):
    """The draft config version that was live for an entry, and why we believe so."""

    location: str
    version: int
    sha256: str
    reason: str
    basis: str  # "loaded at launch of server N" | "latest version at that time"
    content: str


@dataclass
class Timeline(Result):
    entries: list[TimelineEntry]
    filters: dict[str, Any]


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _server_rows(journal: Journal) -> dict[int, ServerRecord]:
    return Registry(journal).by_id()


def _summary(kind: str, payload: dict[str, Any]) -> str:
    """One line a person reads: the numbers that matter for each kind, else the compact payload."""
    p = payload
    if "accept_length" in p and isinstance(p.get("accept_length"), (int, float)):
        tail = f", {p['tokens_per_s']:.1f} tok/s" if isinstance(p.get("tokens_per_s"), (int, float)) else ""
        return f"accept length {p['accept_length']:.2f}{tail}"
    if kind.startswith("config.") and "version" in p:
        reason = p.get("reason") or (p.get("fix") or {}).get("summary") or ""
        return f"v{p['version']}" + (f": {reason}" if reason else "")
    if "findings" in p and isinstance(p["findings"], list):
        codes = [f.get("code", "?") if isinstance(f, dict) else str(f) for f in p["findings"]]
        return f"{len(codes)} finding(s): " + ", ".join(codes[:4]) + ("…" if len(codes) > 4 else "")
    text = json.dumps(p, sort_keys=True)
    return text if len(text) <= 100 else text[:99] + "…"


def _server_of(subject: str, payload: dict[str, Any]) -> int | None:
    for key in ("server_id", "server"):
        v = payload.get(key)
        if isinstance(v, int):
            return v
        if isinstance(v, str) and v.isdigit():
            return int(v)
    if subject.startswith("server:") and subject[7:].isdigit():
        return int(subject[7:])
    return None


def build(
    journal: Journal,
    *,
    server: int | None = None,
    profile: str | None = None,
    config: str | None = None,
    category: str | None = None,
) -> Timeline:
    servers = _server_rows(journal)
    entries = []
    for ev in journal.events():
        p = ev.payload if isinstance(ev.payload, dict) else {}
        sid = _server_of(ev.subject, p)
        prof = p.get("profile") or (servers[sid].profile if sid in servers else None)
        loc = ev.subject if ev.kind.startswith("config.") else (p.get("config") or p.get("location"))
        entry = TimelineEntry(
            ev.id,
            ev.ts,
            _iso(ev.ts),
            ev.kind,
            category_of(ev.kind),
            ev.subject,
            _summary(ev.kind, p),
            sid,
            prof,
            loc,
            p,
        )
        if server is not None and entry.server != server:
            continue
        if profile is not None and entry.profile != profile:
            continue
        if config is not None and (entry.config is None or config not in entry.config):
            continue
        if category is not None and entry.category != category:
            continue
        entries.append(entry)
    return Timeline(entries, {"server": server, "profile": profile, "config": config, "category": category})


def live_config(journal: Journal, entry: TimelineEntry) -> LiveConfig | None:
    """The config version live for an entry: the one its server loaded, else the latest at that time."""
    if entry.server is not None:
        srv = Registry(journal).find(entry.server)
        if srv is not None and srv.draft_config_sha256:
            row = journal.config_version_before(max(entry.ts, srv.launched), sha256=srv.draft_config_sha256)
            if row is not None:
                return _live(journal, row, f"loaded at launch of server {entry.server}")
    if entry.config:
        row = journal.config_version_before(entry.ts, location=entry.config)
        if row is not None:
            return _live(journal, row, "latest version at that time")
    return None


def _live(journal: Journal, row: sqlite3.Row, basis: str) -> LiveConfig:
    content = journal.blob(row["sha256"]) or b""
    return LiveConfig(
        row["location"],
        journal.version_number(row["config_id"], row["id"]),
        row["sha256"],
        row["reason"],
        basis,
        content.decode("utf-8", errors="replace"),
    )
