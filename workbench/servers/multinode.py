"""A server across SSH hosts (``hosts = [...]``): each rank started detached on its host, rank 0
first (its host picks the rendezvous port), each rank's identity recorded (pid, group, start time,
boot id), one log per rank per launch; stopped in the engine's order, rank 0 first.

A rank that cannot be started fails the launch naming it, and the ranks already running are stopped
by their recorded identities: no half-started server is left on the hosts.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError
from workbench.servers import host_scripts, ranks
from workbench.servers.registry import ServerState

if TYPE_CHECKING:
    from workbench.hosts import Hosts
    from workbench.servers.profiles import Profile
    from workbench.servers.registry import Registry, ServerRecord


def start(registry: Registry, hosts: Hosts, sid: int, profile: Profile, cmd: dict[str, Any], token: str) -> None:
    """Start every rank of server ``sid`` (its row already recorded) and record their identities."""
    from workbench.servers.launch import _python_of, rank_log, unique_log

    base = unique_log(cmd["log"], sid, token)
    started: list[dict[str, Any]] = []
    port: int | None = None
    for rc in cmd["ranks"]:
        r, host_name = rc["rank"], rc["host"]
        host = hosts.get(host_name)
        python = _python_of(profile, host.python)
        log = rank_log(base, r)
        argv = ranks.fill(rc["argv"], rc["subst"], None, port)
        line = host_scripts.launch_line(
            python, argv, cmd["env"], log, cmd.get("run_dir"), token, port_at=rc["subst"] if port is None else None
        )
        try:
            res = host.run(line, timeout=60)
            if res.rc != 0 or not res.out.strip():
                raise WorkbenchError(f"exit {res.rc}: {(res.err.strip() or res.out.strip())[-300:]}")
            ident = json.loads(res.out.strip().splitlines()[-1])
        except (WorkbenchError, ValueError) as exc:
            text = f"rank {r} on {host_name} did not start: {exc}"
            left = [a for a in stop_ranks(hosts, started, grace=5.0) if a.get("result") in ("survivors", "error")]
            registry.set(
                sid,
                state=ServerState.FAILED,
                extra={"failure": {"class": "launch", "rank": r, "host": host_name, "text": text}},
                stopped=None if left else _now(),
            )
            raise WorkbenchError(f"profile {profile.name}: {text}") from None
        if ident.get("port") is not None:
            port = int(ident["port"])
        st = ident.get("stat") or {}
        started.append(
            {
                "rank": r,
                "host": host_name,
                "python": python,
                "pid": ident["pid"],
                "pgid": st.get("pgid"),
                "starttime": st.get("starttime"),
                "boot_id": ident.get("boot_id"),
                "log": log,
                "argv": ident.get("argv") or argv,
                "token": token,
            }
        )
        if r == 0:
            registry.started(sid, ident["pid"], st.get("pgid"), str(st.get("starttime")) if st else None)
            registry.set(sid, extra={"boot_id": ident.get("boot_id")})
        registry.set(sid, extra={"ranks": started + _planned(cmd, len(started), base), "rendezvous_port": port})


def _planned(cmd: dict[str, Any], n: int, base: str) -> list[dict[str, Any]]:
    from workbench.servers.launch import rank_log

    return [{"rank": rc["rank"], "host": rc["host"], "log": rank_log(base, rc["rank"])} for rc in cmd["ranks"][n:]]


def _now() -> float:
    import time

    return time.time()


def stop_ranks(
    hosts: Hosts, rank_rows: list[dict[str, Any]], grace: float, kill_wait: float = 10.0
) -> list[dict[str, Any]]:
    """Stop ranks by their recorded identities in the engines' order: rank 0 first (its shutdown
    ends the others: SGLang's ranks >= 1 ignore SIGTERM and wait for rank 0's), then every other
    rank at once (those still running get SIGTERM, the grace, SIGKILL). One stop script per rank
    on its host; returns each rank's answer (``rank``, ``host`` added)."""
    rows = [r for r in rank_rows if r.get("pid") and r.get("starttime") is not None]
    out: list[dict[str, Any]] = []
    first = [r for r in rows if r["rank"] == 0]
    rest = [r for r in rows if r["rank"] != 0]
    for r in first:
        out.append(_stop_one(hosts, r, grace, kill_wait))
    if rest:
        with ThreadPoolExecutor(max_workers=min(8, len(rest))) as pool:
            out += list(pool.map(lambda r: _stop_one(hosts, r, grace, kill_wait), rest))
    return out


def _stop_one(hosts: Hosts, row: dict[str, Any], grace: float, kill_wait: float) -> dict[str, Any]:
    host = hosts.get(row["host"])
    req = {
        "pid": row["pid"],
        "pgid": row.get("pgid") or row["pid"],
        "starttime": row["starttime"],
        "boot_id": row.get("boot_id"),
        "token": row.get("token"),
        "grace": grace,
        "kill_wait": kill_wait,
    }
    python = row.get("python") or host.python
    try:
        res = host.run([python, "-c", host_scripts.STOP, host_scripts.as_arg(req)], timeout=grace + kill_wait + 40)
        if res.rc != 0:
            raise WorkbenchError(f"stop script failed (exit {res.rc}): {res.err.strip()[-300:]}")
        ans = dict(json.loads(res.out.strip().splitlines()[-1]))
    except (WorkbenchError, ValueError) as exc:
        ans = {"result": "error", "reason": str(exc), "signals": [], "remaining": []}
    ans.update(rank=row["rank"], host=row["host"])
    return ans


def rank_identities(r: ServerRecord) -> list[dict[str, Any]]:
    """The ranks of a server that were started (rank 0's identity from the record itself)."""
    out = []
    for row in r.extra.get("ranks") or []:
        if row.get("pid") is None:
            continue
        row = dict(row)
        row.setdefault("token", r.extra.get("launch_token"))
        out.append(row)
    return out
