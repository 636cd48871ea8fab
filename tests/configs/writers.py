"""Writer processes for the compare-and-swap race tests (spawned: importable by path)."""

from __future__ import annotations


def config_writer(name: str, ws: str, path: str, rounds: int, start, read, results) -> None:
    """Each round: wait for the other writer, read and sync the file (both see the same version),
    wait again, then ``config set`` this writer's key to the round number; report ok or conflict."""
    from workbench.api import Workbench
    from workbench.configs import ConflictError
    from workbench.hosts import casfile

    def at(point):
        if point == "read":
            read.wait(30)

    casfile.HOOK = at
    with Workbench.open(ws) as wb:
        for i in range(rounds):
            start.wait(30)
            try:
                wb.config_set(path, {f"writer_{name}": i}, add=True)  # a key of its own, on purpose
                results.put((i, name, "ok"))
            except ConflictError:
                results.put((i, name, "conflict"))
            except Exception as exc:  # reported, so the test names it
                results.put((i, name, f"error: {type(exc).__name__}: {exc}"))


def file_writer(
    name: str, path: str, rounds: int, start, results, host_table=None, jitter: float = 0.0, hold: float = 0.0
) -> None:
    """Each round: read the file's sha, wait for the other writer, then compare-and-swap this writer's
    bytes over that sha: exactly one of two must win. ``host_table``: write through that SSH host;
    ``jitter``: a random delay before writing; ``hold``: seconds spent between the check and the swap
    (with the lock held), so that the other writer arrives while it is held."""
    import hashlib
    import os
    import random
    import time

    from workbench.hosts import casfile

    if hold:
        casfile.HOOK = lambda point: point == "window" and time.sleep(hold)
    rng = random.Random(name)

    from workbench.configs import ConflictError, LocalFiles
    from workbench.configs.access import HostFiles

    if host_table:
        from workbench.hosts import make_host

        acc = HostFiles(make_host("test", host_table))
    else:
        acc = LocalFiles()
    for i in range(rounds):
        start.wait(30)
        with open(path, "rb") as fh:
            seen = hashlib.sha256(fh.read()).hexdigest()
        start.wait(30)
        if jitter:
            time.sleep(rng.uniform(0, jitter))
        data = f'{{"round": {i}, "writer": "{name}", "pid": {os.getpid()}}}'.encode()
        try:
            acc.write_cas(path, data, seen)
            results.put((i, name, "ok", data.decode()))
        except ConflictError:
            results.put((i, name, "conflict", ""))
        except Exception as exc:
            results.put((i, name, f"error: {type(exc).__name__}: {exc}", ""))
