"""The state of each rank of a server across nodes, and which rank's failure ended it.

A rank is alive while its recorded process runs (on a SLURM node: while SLURM runs its task). When
one rank dies the engines' other ranks follow (SGLang's survivors log ``Scheduler hit an exception``
and take their process tree down; vLLM's executor ends the engine), so several ranks end with a
failure in their logs. Which one failed first is read from evidence, in this order:

1. a rank that died without a failure line of its own (killed, the OOM killer, a lost node): every
   survivor of a lost peer logs why it stops, so a silent death comes first;
2. else the rank whose failure line is the earliest (ties: the lowest rank);
3. a rank that runs with a failure in its log (a hang after an exception) when none died.

A hang is read the same way: a rank whose scheduler watchdog fired (no forward finished within
``--watchdog-timeout``: SGLang's ``Scheduler watchdog timeout``) waited on its peers' part of a
collective; a rank still running with no failure of its own while another waited is the one they
waited on (a rank whose watchdog fired too hung with them: the rule then names the first to fire).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.results import Result

DEAD = ("gone", "zombie", "replaced", "exited", "killed", "lost")


@dataclass
class RankStatus(Result):
    rank: int
    host: str | None  # the SSH host, or the SLURM cluster
    node: str | None = None  # the SLURM node (once the job runs)
    pid: int | None = None
    process: str = "unknown"  # running, gone, zombie, replaced, leftover, exited, killed, lost, pending, unknown
    state: str = "starting"  # starting, ready (rank 0), running (ranks >= 1), failing, failed, stopped, unknown
    stage: str = ""
    failure: dict[str, Any] | None = None
    log: str | None = None
    addr: str | None = None  # where the rank's node is reached (a SLURM node's address)
    detail: str = ""  # what SLURM said of the task (srun's line), or why the state is unknown
    progress: list[Any] = field(default_factory=list)  # the startup milestones its log reached
    extra: dict[str, Any] = field(default_factory=dict, metadata={"internal": True})

    @classmethod
    def of(cls, d: dict[str, Any]) -> RankStatus:
        """From its ``to_dict()`` form (as ``ServerStatus.ranks`` holds it)."""
        import dataclasses

        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in d.items() if k in names})


def primary(ranks: list[RankStatus]) -> RankStatus | None:
    """The rank whose failure explains the server's end (see the module's rules), or None."""
    dead = [x for x in ranks if x.process in DEAD]
    silent = [x for x in dead if not _evidence(x)]
    if silent:  # a lost node first, then in the order SLURM reported the tasks' ends
        return min(silent, key=lambda x: (x.process != "lost", _order(x), x.rank))
    witnessed = [x for x in ranks if _evidence(x)]
    if not witnessed:
        return min(dead, key=lambda x: x.rank) if dead else None
    return min(witnessed, key=lambda x: (str((x.failure or {}).get("time") or "~"), x.rank))


def _order(x: RankStatus) -> float:
    order = x.extra.get("order")
    return float(order) if order is not None else float("inf")


def _evidence(x: RankStatus) -> bool:
    """The rank's own log says why it failed."""
    f = x.failure or {}
    return bool(f) and f.get("line") is not None


def hung(ranks: list[RankStatus]) -> tuple[RankStatus, RankStatus] | None:
    """(the rank the others waited on, the first rank whose watchdog fired), or None."""
    waited = [x for x in ranks if (x.failure or {}).get("waited")]
    quiet = [x for x in ranks if x.process not in DEAD and x.process != "unknown" and not x.failure]
    if not waited or not quiet:
        return None
    return min(quiet, key=lambda x: x.rank), min(waited, key=lambda x: x.rank)


def server_failure(ranks: list[RankStatus]) -> dict[str, Any] | None:
    """The server's failure: the primary rank's, naming it, with every failed rank's class."""
    h = hung(ranks)
    p = h[0] if h else primary(ranks)
    if p is None:
        return None
    f = dict(p.failure or {"class": "process-died", "hint": "the rank's process died", "text": "", "line": None})
    if h:
        w = h[1]
        f = {
            "class": "hang",
            "hint": f"rank {w.rank} waited on it past its scheduler watchdog and went down; it still runs "
            "(a py-spy dump of it shows where it stopped)",
            "text": (w.failure or {}).get("text") or "",
            "line": None,
        }
    where = p.host if p.node is None else f"{p.node} ({p.host})"
    f["rank"] = p.rank
    f["host"] = p.node or p.host
    f["hint"] = f"rank {p.rank} on {where}: {f.get('hint') or ''}".rstrip(": ")
    f["ranks"] = {str(x.rank): (x.failure or {}).get("class") for x in ranks if x.failure or x.process in DEAD}
    if h:
        f["ranks"][str(p.rank)] = "hang"
    return f


def behind(ranks: list[RankStatus]) -> RankStatus | None:
    """The rank furthest from ready (fewest startup milestones): the one a stuck start waits on."""
    waiting = [x for x in ranks if x.state not in ("ready", "running")]
    if not waiting:
        return None
    return min(waiting, key=lambda x: (len(x.progress), -x.rank))
