"""The journal's ``servers`` table: what was launched (pid, group, start time, boot id, argv, env,
log, draft config sha; in ``extra`` the engine, the launch token and whatever else a server keeps),
the one set of states a server goes through, and the stages of its startup.

Only this module writes or reads the table with SQL; the rest of the lifecycle asks it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from workbench.errors import InputError
from workbench.journal import Journal
from workbench.results import Result


class ServerState(StrEnum):
    """A server's state: stored in the journal as these strings, shown as they are."""

    LAUNCHING = "launching"  # row written, launch command not yet answered
    STARTING = "starting"  # process running, not ready yet
    READY = "ready"  # the log says ready
    FAILING = "failing"  # running, but the log shows a failure (derived, never stored)
    STOPPING = "stopping"  # a stop is signalling it
    FAILED = "failed"  # died (or hung after a failure) before ready
    EXITED = "exited"  # died after it was ready
    STOPPED = "stopped"  # stopped by the workbench
    TIMEOUT = "timeout"  # not ready in time (a wait's verdict, never stored)
    UNKNOWN = "unknown"  # its host did not answer (derived, never stored)


S = ServerState
#: launched and not known to be finished: its process may be running
LIVE: tuple[ServerState, ...] = (S.LAUNCHING, S.STARTING, S.READY)
#: LIVE, or being stopped
RUNNING: tuple[ServerState, ...] = (*LIVE, S.STOPPING)
#: finished on its own; processes of it may live on (``failed_alive``)
ENDED: tuple[ServerState, ...] = (S.FAILED, S.EXITED)
#: states a wait ends on
FINAL: tuple[ServerState, ...] = (S.FAILED, S.EXITED, S.STOPPED)
#: what a sweep or a live loop stops after using a server (a failed server may keep processes)
STOPPABLE: tuple[ServerState, ...] = (*LIVE, S.FAILED)

#: the startup's stages, in order: (key, what a face shows)
STAGES: list[tuple[str, str]] = [
    ("server_args", "arguments"),
    ("weights_target", "target weights"),
    ("weights_draft", "draft weights"),
    ("kv_cache", "KV cache"),
    ("graphs_target", "target CUDA graphs"),
    ("graphs_draft", "draft CUDA graphs"),
    ("ready", "ready"),
]


@dataclass
class ServerRecord(Result):
    id: int
    profile: str
    host: str
    pid: int | None
    pgid: int | None
    starttime: int | None
    port: int | None
    log: str
    argv: list[str]
    env: dict[str, str]
    draft_config_sha256: str | None
    state: str
    launched: float
    stopped: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def failed_alive(r: ServerRecord) -> bool:
    """Failed or exited while processes of it live on (a hang after an exception, or the children of a
    dead leader, like SGLang's scheduler processes): not finished until they are gone."""
    return r.state in ENDED and r.stopped is None and r.pid is not None


def record_of(row: sqlite3.Row) -> ServerRecord:
    st = row["start_time"]
    return ServerRecord(
        row["id"],
        row["profile"],
        row["host"],
        row["pid"],
        row["pgid"],
        int(st) if st not in (None, "", "None") else None,
        row["port"],
        row["log_path"],
        json.loads(row["argv"]),
        json.loads(row["env"]),
        row["draft_config_sha256"],
        row["state"],
        row["launched"],
        row["stopped"],
        json.loads(row["extra"] or "{}"),
    )


class Registry:
    """Reads and writes of the ``servers`` table, each in one statement or one transaction."""

    def __init__(self, journal: Journal):
        self.journal = journal

    def get(self, sid: int) -> ServerRecord:
        row = self.journal.db.execute("SELECT * FROM servers WHERE id = ?", (int(sid),)).fetchone()
        if row is None:
            raise InputError(f"server {sid}: no such server (see `eagle-workbench server status`)")
        return record_of(row)

    def all(self, active: bool = False) -> list[ServerRecord]:
        """Every server, or (``active``) those whose processes may still run: the running states, and
        a server that failed or exited while processes of it live on (they still hold its port and
        GPUs): ``failed_alive``."""
        sql = "SELECT * FROM servers"
        args: tuple[str, ...] = ()
        if active:
            sql += (
                f" WHERE state IN ({', '.join('?' * len(RUNNING))})"
                f" OR (state IN ({', '.join('?' * len(ENDED))}) AND stopped IS NULL AND pid IS NOT NULL)"
            )
            args = (*(s.value for s in RUNNING), *(s.value for s in ENDED))
        return [record_of(r) for r in self.journal.db.execute(sql + " ORDER BY id", args)]

    def by_id(self) -> dict[int, ServerRecord]:
        return {r.id: r for r in self.all()}

    def find(self, sid: int | None) -> ServerRecord | None:
        if sid is None:
            return None
        row = self.journal.db.execute("SELECT * FROM servers WHERE id = ?", (int(sid),)).fetchone()
        return record_of(row) if row is not None else None

    def last_launch(self, profile: str) -> ServerRecord | None:
        row = self.journal.db.execute(
            "SELECT * FROM servers WHERE profile = ? ORDER BY id DESC LIMIT 1", (profile,)
        ).fetchone()
        return record_of(row) if row is not None else None

    def insert(
        self,
        profile: str,
        host: str,
        port: int | None,
        log: str,
        *,
        argv: list[str],
        env: dict[str, str],
        draft_config_sha256: str | None,
        launched: float,
        extra: dict[str, Any],
        log_of: Any,
    ) -> tuple[int, str]:
        """A new ``launching`` row; ``log_of(sid)`` names its own log, written in the same transaction.
        Returns (id, log path)."""
        with self.journal.transaction() as db:
            cur = db.execute(
                "INSERT INTO servers(profile, host, port, log_path, argv, env, draft_config_sha256, state, "
                "launched, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    profile,
                    host,
                    port,
                    log,
                    json.dumps(argv),
                    json.dumps(env),
                    draft_config_sha256,
                    ServerState.LAUNCHING.value,
                    launched,
                    json.dumps(extra),
                ),
            )
            sid = int(cur.lastrowid or 0)
            path = str(log_of(sid))
            db.execute("UPDATE servers SET log_path = ? WHERE id = ?", (path, sid))
        return sid, path

    def started(self, sid: int, pid: int, pgid: int | None, starttime: str | None) -> None:
        """The launched process's identity, as the host read it: the server is starting."""
        self.journal.db.execute(
            "UPDATE servers SET pid = ?, pgid = ?, start_time = ?, state = ? WHERE id = ?",
            (pid, pgid, starttime, ServerState.STARTING.value, sid),
        )

    def set(
        self,
        sid: int,
        state: str | None = None,
        extra: dict[str, Any] | None = None,
        stopped: float | None = None,
        expect: str | None = None,
    ) -> bool:
        """Update a server row; with ``expect``, only if its state is still that (a stop and a
        refresh may race: the refresh must not call a server the user is stopping "exited")."""
        with self.journal.transaction() as db:
            row = db.execute("SELECT state, extra FROM servers WHERE id = ?", (sid,)).fetchone()
            if row is None or (expect is not None and row["state"] != expect):
                return False
            ex = json.loads(row["extra"] or "{}")
            if extra:
                ex.update(extra)
            new = str(state.value if isinstance(state, ServerState) else state) if state else row["state"]
            db.execute(
                "UPDATE servers SET state = ?, extra = ?, stopped = COALESCE(?, stopped) WHERE id = ?",
                (new, json.dumps(ex), stopped, sid),
            )
        return True
