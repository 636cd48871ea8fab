"""One SQLite journal per workspace (WAL): events, config versions, servers, measurements.

Migrations are named and applied once each, in name order; the applied set is stored in the
database, so areas of the code can add their own without renumbering anybody else's.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.results import Result, jsonable

MIGRATIONS: dict[str, str] = {
    "0001_events": """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            kind TEXT NOT NULL,
            subject TEXT NOT NULL DEFAULT '',
            payload TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_kind ON events(kind, ts);
        CREATE INDEX events_subject ON events(subject, ts);
    """,
    "0002_config_history": """
        CREATE TABLE blobs (
            sha256 TEXT PRIMARY KEY,
            content BLOB NOT NULL
        );
        CREATE TABLE tracked_configs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            location TEXT NOT NULL UNIQUE,      -- 'local:/abs/path' or 'HOST:/abs/path'
            added REAL NOT NULL,
            label TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE config_versions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            config_id INTEGER NOT NULL REFERENCES tracked_configs(id),
            sha256 TEXT NOT NULL REFERENCES blobs(sha256),
            ts REAL NOT NULL,
            reason TEXT NOT NULL,
            parent_sha256 TEXT
        );
        CREATE INDEX config_versions_config ON config_versions(config_id, id);
    """,
    "0003_servers": """
        CREATE TABLE servers (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            profile TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER,
            pgid INTEGER,
            start_time TEXT,
            port INTEGER,
            log_path TEXT,
            argv TEXT NOT NULL DEFAULT '[]',
            env TEXT NOT NULL DEFAULT '{}',
            draft_config_sha256 TEXT,
            state TEXT NOT NULL DEFAULT 'launching',
            launched REAL NOT NULL,
            stopped REAL,
            extra TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE measurements (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            server_id INTEGER REFERENCES servers(id),
            ts REAL NOT NULL,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX measurements_server ON measurements(server_id, ts);
    """,
    # a config write announced before the file is written: a writer killed between its rename and its
    # version row is recognised by the hash on the next look (not taken for an external edit)
    "0004_config_write_intents": """
        CREATE TABLE config_write_intents (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            location TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            parent_sha256 TEXT,
            reason TEXT NOT NULL,
            ts REAL NOT NULL
        );
        CREATE INDEX config_write_intents_location ON config_write_intents(location, id);
    """,
}


@dataclass
class Event(Result):
    id: int
    ts: float
    kind: str
    subject: str
    payload: dict[str, Any]


class Journal:
    """Thread-safe append-mostly store. Connections are per thread (TUI workers use threads)."""

    def __init__(self, path: str | Path):
        """Nothing is created until the journal is first used (an operation refused for bad input
        before it records anything leaves no file behind)."""
        self.path = Path(path)
        self._local = threading.local()
        self._watch: sqlite3.Connection | None = None  # revision()'s own connection
        self._watch_lock = threading.Lock()
        self._ready = False  # created and migrated
        self._ready_lock = threading.Lock()

    # -- connection -------------------------------------------------------------------------
    @property
    def db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if not self._ready:
                self._create()
            conn = self._connect()
        return conn

    def _create(self) -> None:
        with self._ready_lock:
            if self._ready:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._local.conn = self._connect()
            self._migrate()
            self._ready = True

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        with self._watch_lock:
            if self._watch is not None:
                self._watch.close()
                self._watch = None

    def revision(self) -> int:
        """A number that changes whenever anything is committed to the journal, by any thread of
        this process or another process: SQLite's ``data_version`` on a connection kept for it
        alone (it counts the commits of every other connection), so a face can follow the journal
        with one cheap read."""
        if not self._ready:
            self._create()
        with self._watch_lock:
            if self._watch is None:
                self._watch = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            return int(self._watch.execute("PRAGMA data_version").fetchone()[0])

    def transaction(self) -> _Transaction:
        return _Transaction(self.db)

    def _migrate(self) -> None:
        db = self.db
        db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
        done = {row[0] for row in db.execute("SELECT name FROM schema_migrations")}
        for name in sorted(MIGRATIONS):
            if name in done:
                continue
            with self.transaction():
                for stmt in _statements(MIGRATIONS[name]):
                    db.execute(stmt)
                db.execute("INSERT INTO schema_migrations(name, applied) VALUES (?, ?)", (name, time.time()))

    @property
    def schema(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM schema_migrations ORDER BY name")]

    # -- events -----------------------------------------------------------------------------
    def record(self, kind: str, subject: str = "", payload: Any = None, *, ts: float | None = None) -> int:
        body = json.dumps(jsonable(payload if payload is not None else {}), sort_keys=True)
        cur = self.db.execute(
            "INSERT INTO events(ts, kind, subject, payload) VALUES (?, ?, ?, ?)",
            (ts if ts is not None else time.time(), kind, subject, body),
        )
        return int(cur.lastrowid or 0)

    def events(
        self,
        kind: str | None = None,
        subject: str | None = None,
        since: float | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        sql, args = "SELECT * FROM events WHERE 1=1", list[object]()
        if kind is not None:
            if kind.endswith("*"):
                sql += " AND kind LIKE ?"
                args.append(kind[:-1] + "%")
            else:
                sql += " AND kind = ?"
                args.append(kind)
        if subject is not None:
            sql += " AND subject = ?"
            args.append(subject)
        if since is not None:
            sql += " AND ts >= ?"
            args.append(since)
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        return [
            Event(r["id"], r["ts"], r["kind"], r["subject"], json.loads(r["payload"]))
            for r in self.db.execute(sql, args)
        ]

    # -- content-addressed blobs (config files as they were) ----------------------------------------
    def put_blob(self, sha256: str, content: bytes) -> None:
        self.db.execute("INSERT OR IGNORE INTO blobs(sha256, content) VALUES (?, ?)", (sha256, content))

    def blob(self, sha256: str | None) -> bytes | None:
        if not sha256:
            return None
        row = self.db.execute("SELECT content FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
        return bytes(row[0]) if row is not None else None

    def config_version_number(self, sha256: str | None) -> int | None:
        """The version number (1-based, per tracked config) of the latest version with this content."""
        if not sha256:
            return None
        row = self.db.execute(
            "SELECT config_id, id FROM config_versions WHERE sha256 = ? ORDER BY id DESC LIMIT 1", (sha256,)
        ).fetchone()
        if row is None:
            return None
        return self.version_number(row["config_id"], row["id"])

    def version_number(self, config_id: int, version_row_id: int) -> int:
        return int(
            self.db.execute(
                "SELECT count(*) FROM config_versions WHERE config_id = ? AND id <= ?", (config_id, version_row_id)
            ).fetchone()[0]
        )

    # -- tracked configs and their versions (the store is workbench.configs.history) ------------------
    def tracked_config(self, location: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.db.execute(
            "SELECT * FROM tracked_configs WHERE location = ?", (location,)
        ).fetchone()
        return row

    def tracked_configs(self) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM tracked_configs ORDER BY id").fetchall()

    def add_tracked_config(self, location: str, label: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO tracked_configs(location, added, label) VALUES (?, ?, ?)", (location, time.time(), label)
            )

    def set_tracked_label(self, config_id: int, label: str) -> None:
        self.db.execute("UPDATE tracked_configs SET label = ? WHERE id = ?", (label, config_id))

    def config_versions(self, config_id: int) -> list[sqlite3.Row]:
        """A tracked config's versions in order: sha256, ts, reason, parent_sha256, size."""
        return self.db.execute(
            "SELECT v.sha256, v.ts, v.reason, v.parent_sha256, length(b.content) AS size "
            "FROM config_versions v JOIN blobs b ON b.sha256 = v.sha256 WHERE v.config_id = ? ORDER BY v.id",
            (config_id,),
        ).fetchall()

    def add_config_version(
        self,
        config_id: int,
        digest: str,
        content: bytes,
        reason: str | None,
        parent: str | None = None,
        *,
        location: str | None = None,
        sync: bool = False,
    ) -> str | None:
        """Add a version unless it is already the latest (one write is never stored twice); decided
        inside the insert's transaction. With ``sync``: the parent is the latest version and the
        reason that of an announced write of these bytes over it (``announce_config_write``), else
        ``reason``. Returns the reason stored, or None when nothing was added."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT sha256 FROM config_versions WHERE config_id = ? ORDER BY id DESC LIMIT 1", (config_id,)
            ).fetchone()
            latest = row["sha256"] if row is not None else None
            if latest == digest:
                return None
            if sync:
                parent = latest
                intent = db.execute(
                    "SELECT reason FROM config_write_intents WHERE location = ? AND sha256 = ? "
                    "AND parent_sha256 IS ? ORDER BY id DESC LIMIT 1",
                    (location, digest, latest),
                ).fetchone()
                reason = (intent["reason"] if intent is not None else None) or reason
            db.execute("INSERT OR IGNORE INTO blobs(sha256, content) VALUES (?, ?)", (digest, content))
            db.execute(
                "INSERT INTO config_versions(config_id, sha256, ts, reason, parent_sha256) VALUES (?, ?, ?, ?, ?)",
                (config_id, digest, time.time(), reason, parent),
            )
            if location is not None:
                db.execute("DELETE FROM config_write_intents WHERE location = ? AND sha256 = ?", (location, digest))
        return reason

    def announce_config_write(self, location: str, digest: str, parent: str | None, reason: str) -> None:
        """A write about to happen: a writer that dies before its version row keeps its reason."""
        with self.transaction() as db:
            db.execute("DELETE FROM config_write_intents WHERE ts < ?", (time.time() - 30 * 86400,))
            db.execute(
                "INSERT INTO config_write_intents(location, sha256, parent_sha256, reason, ts) VALUES (?, ?, ?, ?, ?)",
                (location, digest, parent, reason, time.time()),
            )

    def config_version_before(
        self, ts: float, *, sha256: str | None = None, location: str | None = None
    ) -> sqlite3.Row | None:
        """The latest version stored at or before ``ts`` with this content, or of this location
        (its row with the config's ``location``)."""
        if (sha256 is None) == (location is None):
            raise ValueError("config_version_before: give sha256 or location")
        where, key = ("v.sha256 = ?", sha256) if sha256 is not None else ("t.location = ?", location)
        row: sqlite3.Row | None = self.db.execute(
            "SELECT v.*, t.location FROM config_versions v JOIN tracked_configs t ON t.id = v.config_id "
            f"WHERE {where} AND v.ts <= ? ORDER BY v.id DESC LIMIT 1",
            (key, ts),
        ).fetchone()
        return row

    # -- measurements ------------------------------------------------------------------------------
    def add_measurement(self, server_id: int | None, kind: str, payload: Any, *, ts: float | None = None) -> int:
        cur = self.db.execute(
            "INSERT INTO measurements(server_id, ts, kind, payload) VALUES (?, ?, ?, ?)",
            (server_id, ts if ts is not None else time.time(), kind, json.dumps(jsonable(payload))),
        )
        return int(cur.lastrowid or 0)

    def add_measurement_after(
        self, server_id: int, kind: str, decide: Callable[[dict[str, Any] | None], Any]
    ) -> tuple[int, dict[str, Any]] | None:
        """Append a row decided from the server's latest row of ``kind`` (its payload, None if none),
        in one write transaction: two followers of a server never both append after the same row.
        ``decide`` returns the new payload, or None to add nothing. Returns (id, payload) or None."""
        with self.transaction() as db:
            row = db.execute(
                "SELECT payload FROM measurements WHERE server_id = ? AND kind = ? ORDER BY id DESC LIMIT 1",
                (int(server_id), kind),
            ).fetchone()
            payload = decide(json.loads(row["payload"]) if row is not None else None)
            if payload is None:
                return None
            body = jsonable(payload)
            cur = db.execute(
                "INSERT INTO measurements(server_id, ts, kind, payload) VALUES (?, ?, ?, ?)",
                (int(server_id), time.time(), kind, json.dumps(body)),
            )
            return int(cur.lastrowid or 0), body

    def measurement_rows(self, server_id: int | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        sql, args = "SELECT * FROM measurements WHERE 1=1", list[object]()
        if server_id is not None:
            sql += " AND server_id = ?"
            args.append(int(server_id))
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        return [
            {"id": r["id"], "server_id": r["server_id"], "ts": r["ts"], "kind": r["kind"], **json.loads(r["payload"])}
            for r in self.db.execute(sql + " ORDER BY id", args)
        ]


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip() and not s.strip().startswith("--")]
