"""A gang of threads that start one parallel pass together: ``gang(n).run(calls)``.

The compiled kernels release the GIL, so Python threads run them in parallel; what costs is
starting them. A ``ThreadPoolExecutor`` hands work out one ``submit`` at a time, and each worker
wakes, takes the GIL, runs the executor's bookkeeping and only then the kernel, so on many cores
the last thread starts well after the first. A gang's workers each wait on a lock of their own:
the caller releases them all, each needs the GIL only to call its kernel, and the caller runs the
first call itself.

One pass at a time per gang (a second caller waits); a gang per process id and size, since a
forked child has none of its parent's threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence


class Gang:
    """``n - 1`` worker threads; ``run`` executes up to ``n`` calls at once, one on the caller."""

    def __init__(self, n: int) -> None:
        self.n = max(1, int(n))
        self._busy = threading.Lock()
        self._go = [threading.Lock() for _ in range(self.n - 1)]
        self._done = [threading.Lock() for _ in range(self.n - 1)]
        self._jobs: list[Callable[[], object] | None] = [None] * (self.n - 1)
        self._errors: list[BaseException | None] = [None] * (self.n - 1)
        for i in range(self.n - 1):
            self._go[i].acquire()
            self._done[i].acquire()
            threading.Thread(target=self._work, args=(i,), name=f"pairstats-{i + 1}", daemon=True).start()

    def _work(self, i: int) -> None:
        go, done = self._go[i], self._done[i]
        while True:
            go.acquire()
            job = self._jobs[i]
            try:
                if job is not None:
                    job()
            except BaseException as exc:
                self._errors[i] = exc
            finally:
                self._jobs[i] = None
                done.release()

    def run(self, calls: Sequence[Callable[[], object]]) -> None:
        """Every call, at once (at most ``n``); returns when all are done, raising the first error."""
        if len(calls) > self.n:
            raise ValueError(f"{len(calls)} calls for a gang of {self.n}")
        if not calls:
            return
        with self._busy:
            k = len(calls) - 1
            for i in range(k):
                self._jobs[i], self._errors[i] = calls[i + 1], None
            for i in range(k):
                self._go[i].release()
            try:
                calls[0]()
            finally:
                for i in range(k):
                    self._done[i].acquire()
            for err in self._errors[:k]:
                if err is not None:
                    raise err


_GANGS: dict[tuple[int, int], Gang] = {}
_LOCK = threading.Lock()


def gang(n: int) -> Gang:
    """This process's gang of ``n`` threads (made on first use)."""
    key = (os.getpid(), max(1, int(n)))
    with _LOCK:
        g = _GANGS.get(key)
        if g is None:
            g = _GANGS[key] = Gang(key[1])
        return g
