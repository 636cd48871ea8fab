"""Which rank's failure ended a server across nodes: the evidence rules of ``servers/rankstate.py``."""

from __future__ import annotations

from workbench.servers.rankstate import RankStatus, behind, primary, server_failure


def _failed(cls: str, time: str | None, line: int | None = 7) -> dict:
    return {"class": cls, "hint": f"{cls} hint", "text": "", "time": time, "line": line}


def rank(n: int, process: str = "running", failure: dict | None = None, order=None, **kw) -> RankStatus:
    x = RankStatus(n, f"n{n + 1}", process=process, failure=failure, **kw)
    x.extra["order"] = order
    return x


def test_a_silent_death_comes_before_the_survivors_that_logged_it():
    ranks = [
        rank(0, "gone", _failed("scheduler-exception", "2026-12-05 08:16:59")),
        rank(1, "gone", _failed("process-died", None, line=None)),  # killed: nothing in its own log
    ]
    assert primary(ranks).rank == 1
    f = server_failure(ranks)
    assert f["rank"] == 1 and f["host"] == "n2" and f["class"] == "process-died"
    assert f["hint"].startswith("rank 1 on n2:") and f["ranks"] == {"0": "scheduler-exception", "1": "process-died"}


def test_the_earliest_failure_line_when_every_rank_logged_one():
    ranks = [
        rank(0, "gone", _failed("scheduler-exception", "2026-12-05 08:17:01")),
        rank(1, "gone", _failed("oom", "2026-12-05 08:16:40")),
        rank(2, "gone", _failed("scheduler-exception", "2026-12-05 08:17:01")),
    ]
    assert primary(ranks).rank == 1


def test_a_lost_node_first_then_srun_s_order():
    ranks = [
        rank(0, "killed", order=0),
        rank(1, "killed", order=1),
        rank(2, "lost", {"class": "node-lost", "hint": "SLURM lost node n3", "line": None, "slurm": True}),
    ]
    assert primary(ranks).rank == 2
    assert primary(ranks[:2]).rank == 0  # srun reported task 0 first
    assert primary([rank(0, "killed", order=1), rank(1, "killed", order=0)]).rank == 1


def test_a_rank_failing_alive_when_none_died():
    ranks = [rank(0), rank(1, "running", _failed("scheduler-exception", "2026-12-05 08:00:00"))]
    assert primary(ranks).rank == 1
    assert primary([rank(0), rank(1)]) is None and server_failure([rank(0), rank(1)]) is None


def test_the_rank_a_stuck_start_waits_on():
    a, b = rank(0, state="starting"), rank(1, state="starting")
    a.progress, b.progress = ["server_args"], ["server_args"]
    assert behind([a, b]).rank == 1  # at a tie, the worker that has not joined
    b.progress = ["server_args", "weights_target", "kv_cache"]
    assert behind([a, b]).rank == 0
    assert behind([rank(0, state="ready"), rank(1, state="running")]) is None
    assert RankStatus.of(b.to_dict()).progress == b.progress


def test_a_hang_names_the_rank_the_others_waited_on():
    wd = "Scheduler watchdog timeout (self.watchdog_timeout=3.0, self.soft=False)"
    waited = {**_failed("process-died", None), "waited": True, "text": wd}
    ranks = [rank(0, "gone", waited), rank(1), rank(2)]  # ranks 1 and 2 run on; rank 1 first
    f = server_failure(ranks)
    assert f["rank"] == 1 and f["class"] == "hang" and f["text"] == wd, f
    assert f["hint"].startswith("rank 1 on n2: rank 0 waited on it past its scheduler watchdog")
    assert f["ranks"] == {"0": "process-died", "1": "hang"}
    # every rank's watchdog fired: they hung together; the first to fire is named
    both = [rank(0, "gone", waited), rank(1, "gone", {**waited, "time": "2026-12-05 08:00:00"})]
    assert server_failure(both)["class"] == "process-died"
    # no watchdog: a survivor running on is not blamed for a peer's death
    assert server_failure([rank(0, "gone", _failed("oom", None)), rank(1)])["rank"] == 0
