"""One server on N nodes: the command of each rank, from the engine's flags for placing a rank.

A profile spans nodes with ``hosts = [...]`` (SSH hosts, rank order) or ``nodes = N`` on a SLURM host.
Every rank runs the profile's command plus the engine's rank flags (``RankFlags``: SGLang's
``--nnodes/--node-rank/--dist-init-addr``, vLLM's ``--nnodes/--node-rank/--master-addr/--master-port``,
its workers ``--headless``). Where the nodes meet (the rendezvous) is rank 0's address and a port
free on rank 0's node: an address not known before the launch (a SLURM node) and the port are
placeholders (``ADDR``, ``PORT``) that the launch fills in on the node, at the argv positions
``RankCommand.subst`` names.

Refused before anything starts, each in one line: what the engine would accept and then hang on or
refuse only on the nodes (``--nnodes`` over one node, a parallel size the node count does not
divide), and rank flags given by hand that contradict the profile (a ``--node-rank``, another
``--nnodes``, a worker flag, another executor backend).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.results import Result
from workbench.servers.command import model_index
from workbench.servers.profiles import split_flags

if TYPE_CHECKING:
    from workbench.servers.engines import Engine

ADDR = "{rank0}"  # rank 0's address, filled in when it is known (a SLURM job's first node)
PORT = "{port}"  # the rendezvous port, chosen free on rank 0's node when the server starts


@dataclass(frozen=True)
class RankFlags:
    """An engine's flags that place a rank (first spelling used, every spelling recognised)."""

    nnodes: tuple[str, ...]
    node_rank: tuple[str, ...]
    addr: tuple[str, ...]  # the rendezvous address
    port: tuple[str, ...] = ()  # its port, where a flag of its own holds it
    addr_has_port: bool = False  # the address flag takes ADDR:PORT (SGLang)
    worker: tuple[str, ...] = ()  # flags of ranks >= 1 only (vLLM's --headless)
    fixed: tuple[tuple[str, str], ...] = ()  # flags every rank needs with this value


@dataclass
class RankCommand(Result):
    rank: int
    host: str | None  # an SSH host; None: a SLURM node, known once the job runs
    argv: list[Any]
    subst: list[Any] = field(default_factory=list)  # argv indices holding ADDR or PORT


@dataclass
class Placement(Result):
    nodes: int
    ranks: list[Any]  # RankCommand, rank order
    rendezvous: str | None  # "ADDR:PORT" (placeholders where not known yet); None: one node


def _find(tokens: list[Any], names: tuple[str, ...]) -> list[str] | None:
    """The value of a flag spelt any of ``names`` (``-r 1``, ``--node-rank=1``, a bare switch: [])."""
    for k, tok in enumerate(tokens):
        t = str(tok)
        for n in names:
            if t == n:
                nxt = str(tokens[k + 1]) if k + 1 < len(tokens) else ""
                return [nxt] if nxt and not nxt.startswith("-") else []
            if t.startswith(n + "="):
                return [t[len(n) + 1 :]]
    return None


def _without(tokens: list[Any], names: set[str]) -> list[Any]:
    """The tokens less every flag spelt one of ``names`` and its value."""
    out: list[Any] = []
    skip = False
    for tok in tokens:
        t = str(tok)
        if skip:
            skip = False
            if not t.startswith("-"):
                continue
        if t in names:
            skip = True
            continue
        if t.split("=", 1)[0] in names and "=" in t:
            continue
        out.append(tok)
    return out


def place(
    eng: Engine,
    argv: list[Any],
    nodes: int,
    where: str,
    hosts: list[str] | None = None,
    addr: str | None = None,
) -> Placement:
    """Each rank's command. ``hosts``: the SSH host of each rank (None: SLURM nodes); ``addr``: rank
    0's address where it is known (else ``ADDR``). A rendezvous given by hand is kept."""
    rf = eng.rank_flags()
    i = model_index(argv)
    tokens = list(argv[i:])
    split_flags(tokens, where)  # the arguments' own shape checked (no value before a flag)
    for names, why in (
        (rf.node_rank, "is set for each node by the workbench (the rank order of hosts, or the SLURM node)"),
        (rf.worker, "is set by the workbench on ranks >= 1"),
    ):
        for n in names:
            if _find(tokens, (n,)) is not None:
                raise InputError(f"{where}: {n} {why}; remove it")
    hand_n = _find(tokens, rf.nnodes)
    if hand_n is not None:
        try:
            count: int | None = int(hand_n[0]) if hand_n else None
        except ValueError:
            count = None
        if count != nodes:
            what = "node" if nodes == 1 else "nodes"
            hint = "" if nodes > 1 else " (list them in hosts = [...], or ask a SLURM host for nodes = N)"
            given = f"{rf.nnodes[0]} {' '.join(hand_n)}"
            raise InputError(f"{where}: {given} contradicts the profile, which runs on {nodes} {what}{hint}")
    for flag, value in rf.fixed:
        vals = _find(tokens, (flag,))
        if vals is not None and nodes > 1 and vals != [value]:
            raise InputError(f"{where}: {flag} {' '.join(vals)}: a server across nodes runs with {flag} {value}")
    if nodes == 1:
        return Placement(1, [RankCommand(0, hosts[0] if hosts else None, list(argv))], None)
    eng.check_nodes(list(argv), nodes, where)
    base = list(argv[:i]) + _without(tokens, set(rf.nnodes) | {f for f, _ in rf.fixed})
    hand_addr = _find(tokens, rf.addr)
    hand_port = _find(tokens, rf.port) if rf.port else None
    if hand_addr is not None:
        if not hand_addr or (rf.addr_has_port and ":" not in hand_addr[0]):
            raise InputError(f"{where}: {rf.addr[0]} expects ADDRESS:PORT of rank 0, got {' '.join(hand_addr)!r}")
        rendezvous = hand_addr[0] if rf.addr_has_port else f"{hand_addr[0]}:{(hand_port or [PORT])[0]}"
    else:
        rendezvous = f"{addr or ADDR}:{(hand_port or [PORT])[0]}"
    ranks = []
    for r in range(nodes):
        head = eng.worker_argv(base) if r else list(base)
        flags = [rf.nnodes[0], str(nodes), rf.node_rank[0], str(r)]
        if hand_addr is None:
            host, _, port = rendezvous.rpartition(":")
            if rf.addr_has_port:
                flags += [rf.addr[0], rendezvous]
            else:
                flags += [rf.addr[0], host] + ([] if hand_port is not None else [rf.port[0], port])
        for flag, value in rf.fixed:
            flags += [flag, value]
        if r:
            flags += list(rf.worker)
        full = head + flags
        subst = [len(head) + k for k, t in enumerate(flags) if ADDR in t or PORT in t]
        ranks.append(RankCommand(r, hosts[r] if hosts else None, full, subst))
    return Placement(nodes, ranks, rendezvous)


def fill(argv: list[Any], subst: list[Any], addr: str | None, port: int | str | None) -> list[Any]:
    """A rank's argv with the rendezvous filled in (the placeholders known now; the rest left)."""
    out = list(argv)
    for k in subst:
        t = str(out[k])
        if addr is not None:
            t = t.replace(ADDR, addr)
        if port is not None:
            t = t.replace(PORT, str(port))
        out[k] = t
    return out


def loopback(address: str) -> bool:
    """An address only this machine reaches (127/8, ::1, localhost)."""
    a = address.strip("[]").lower()
    return a in ("localhost", "::1") or a.startswith("127.")
