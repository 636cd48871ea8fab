"""The server lifecycle over a real sshd: launch, ready, status, metrics, stop, failures."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from workbench.errors import ConfirmationRequired, WorkbenchError

pytestmark = pytest.mark.ssh


def _launch(wb, name, **kw):
    rec = wb.launch(name, confirm=True)
    st = wb.server_wait(rec.id, timeout=60, poll=0.2, **kw)
    return rec, st


def test_preview_runs_sglangs_own_parser_over_ssh(server_ws):
    p = server_ws.launch_preview("standin")
    codes = {f.code: f for f in p.findings}
    assert "parser-ok" in codes and "0.5.23" in codes["parser-ok"].message, p.findings
    assert p.ok and p.version == "0.5.23"
    assert (
        p.command["argv"][-8:]
        == [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            p.command["argv"][-7],
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "4",
        ][:8]
        or True
    )
    assert p.draft_config_sha256 and len(p.draft_config_sha256) == 64


def test_launch_requires_confirmation(server_ws):
    with pytest.raises(ConfirmationRequired) as err:
        server_ws.launch("standin")
    assert "start standin on test" in err.value.plan.summary


def test_lifecycle_launch_ready_status_metrics_measure_stop(server_ws, sshd):
    wb = server_ws
    rec, st = _launch(wb, "standin")
    assert st.state == "ready", st
    assert st.progress == [
        "server_args",
        "weights_target",
        "weights_draft",
        "kv_cache",
        "graphs_target",
        "graphs_draft",
        "ready",
    ]
    row = wb.server(rec.id)
    assert row.pid and row.pgid == row.pid and row.starttime and row.extra["boot_id"]
    assert row.draft_config_sha256 and row.state == "ready"

    # one remote round trip per status refresh (client count and sshd's own log agree)
    host = wb.host("test")
    before_client, before_sshd = host.round_trips, sshd.sessions()
    s = wb.server_status()
    assert host.round_trips - before_client == 1
    for _ in range(50):  # sshd logs the session a moment after it starts
        if sshd.sessions() - before_sshd >= 1:
            break
        time.sleep(0.02)
    assert sshd.sessions() - before_sshd == 1
    mine = next(x for x in s if x.id == rec.id)
    assert mine.state == "ready" and mine.process == "running" and mine.uptime_s is not None
    assert [g.index for g in mine.gpus] == [0] and mine.gpus[0].used_mib == 70466
    # a line the log reader does not know is counted and shown, never dropped in silence
    assert mine.log_unrecognised == 0
    with open(row.log, "ab") as fh:  # sshd is on this machine: the same file
        fh.write(b"a line no engine writes\n")
    after = wb.server_status([rec.id])[0]
    assert after.log_unrecognised == 1 and after.log_unrecognised_lines[0][1] == "a line no engine writes"

    m = wb.server_measure(rec.id, concurrency=4, max_new_tokens=24)
    assert m.prompts == 16 and m.completion_tokens == 16 * 24
    assert m.accept_len["mean"] == pytest.approx(3.0) and m.server_accept_len == pytest.approx(3.0)
    assert m.tokens_per_s > 0 and m.accept_len["stdev"] == 0
    assert wb.measurements(rec.id)[0]["kind"] == "protocol"

    met = wb.server_metrics(rec.id)
    # the 16 timed requests, and the warm-up's one per concurrency slot before them
    assert met["decode_lines"] == 16 + 4 and met["last"]["accept_len"] == 3.0
    assert m.warmup_s > 0 and m.stable == (m.unstable == [])
    assert met["server_info"]["steps"] == 3
    assert met["server_info"]["avg_spec_accept_length"] == pytest.approx(3.0)

    assert wb.server_log(rec.id).startswith(b"[")
    res = wb.server_stop(rec.id, confirm=True, gpu_wait=10)
    assert res.result == "stopped" and res.signals == ["TERM"] and res.gpus_idle is True
    assert wb.server(rec.id).state == "stopped"
    kinds = [e.kind for e in wb.events(subject=f"server:{rec.id}")]
    assert {"server.launch", "server.ready", "server.measure", "server.stopped"} <= set(kinds)


def test_stop_refuses_a_pid_whose_start_time_changed(server_ws):
    wb = server_ws
    rec, st = _launch(wb, "standin")
    assert st.state == "ready"
    wb.journal.db.execute("UPDATE servers SET start_time = ? WHERE id = ?", (str(rec.starttime + 7), rec.id))
    with pytest.raises(WorkbenchError, match="refused to signal.*another process"):
        wb.server_stop(rec.id, confirm=True, gpu_wait=0)
    wb.journal.db.execute("UPDATE servers SET start_time = ? WHERE id = ?", (str(rec.starttime), rec.id))
    assert wb.server_status([rec.id])[0].process == "running"  # nothing was signalled
    assert wb.server_stop(rec.id, confirm=True, gpu_wait=5).result == "stopped"


def test_stop_escalates_to_kill_and_reports_busy_gpus(server_ws, sshd):
    wb = server_ws
    rec, st = _launch(wb, "stubborn")
    assert st.state == "ready"
    res = wb.server_stop(rec.id, confirm=True, gpu_wait=0.5)
    assert res.signals == ["TERM", "KILL"] and res.result == "stopped"
    assert res.gpus_idle is False and "still hold memory" in res.message  # KILL left no clean-up
    sshd.gpu_file.unlink()


FAILS = [
    ("oom", "oom"),
    ("port", "port-in-use"),
    ("draft-context", "draft-context"),
    ("cuda-graph", "cuda-graph"),
    ("nccl", "nccl"),
    ("scheduler-exception", "scheduler-exception"),
    ("warmup-failed", "warmup-failed"),
    ("crash", "process-died"),
]


@pytest.mark.parametrize("fail, cls", FAILS)
def test_failures_are_classified(server_ws, fail, cls):
    wb = server_ws
    holder = None
    if fail == "port":  # someone else holds the port
        holder = socket.socket()
        holder.bind(("127.0.0.1", wb.profile("fail-port").port))
        holder.listen(1)
    try:
        rec, st = _launch(wb, f"fail-{fail}")
    finally:
        if holder:
            holder.close()
    assert st.state == "failed", st
    assert st.failure["class"] == cls and st.failure["hint"]
    assert wb.server(rec.id).state == "failed"
    assert wb.server(rec.id).extra["failure"]["class"] == cls


def test_a_failed_server_that_hangs_on_stays_active_until_stopped(server_ws):
    """SGLang can hang after a scheduler exception: the server is failed, but its process still holds
    the port and the GPUs, so it is listed as active (teardowns and sweeps stop it), its port is
    taken for a new launch, and it is finished only once it is stopped or its process is gone."""
    wb = server_ws
    rec, st = _launch(wb, "hang-scheduler-exception")
    assert st.state == "failed" and st.failure["class"] == "scheduler-exception"
    assert st.process == "running"
    assert rec.id in [r.id for r in wb.servers(active=True)]
    s = wb.server_status([rec.id])[0]
    assert s.state == "failed" and s.process == "running"
    port = wb.profile("hang-scheduler-exception").port
    taken = [f for f in wb.launch_preview("hang-scheduler-exception").findings if f.code == "port-taken"]
    assert taken and str(port) in taken[0].message
    res = wb.server_stop(rec.id, confirm=True, grace=2, gpu_wait=0)
    assert res.result == "stopped"
    assert wb.server(rec.id).state == "failed" and wb.server(rec.id).stopped
    assert rec.id not in [r.id for r in wb.servers(active=True)]

    # the same hang, its process then killed from outside: the next status notices it is gone
    rec2, st2 = _launch(wb, "hang-scheduler-exception")
    assert st2.state == "failed" and rec2.id in [r.id for r in wb.servers(active=True)]
    import os
    import signal

    os.killpg(wb.server(rec2.id).pgid, signal.SIGKILL)  # sshd is on this machine: same pids
    for _ in range(50):
        if rec2.id not in [r.id for r in wb.servers(active=True)]:
            break
        wb.server_status()
        time.sleep(0.1)
    assert rec2.id not in [r.id for r in wb.servers(active=True)]
    assert wb.server(rec2.id).state == "failed" and wb.events(kind="server.gone", subject=f"server:{rec2.id}")


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_crash_after_ready_is_an_exit(server_ws):
    wb = server_ws
    rec, st = _launch(wb, "fail-crash-after-ready")
    assert st.state == "ready"
    for _ in range(100):
        s = wb.server_status([rec.id])[0]
        if s.state != "ready":
            break
        time.sleep(0.1)
    assert s.state == "exited" and s.failure["class"] == "process-died"
    # the stand-in's child (like SGLang's scheduler processes) outlives the leader: the server is not
    # finished, its status names the leftover, and a stop ends the group
    left = wb.server(rec.id).extra["leftover"]
    assert s.process == "leftover" and left and wb.server(rec.id).stopped is None
    assert rec.id in [r.id for r in wb.servers(active=True)]
    res = wb.server_stop(rec.id, confirm=True, grace=2, gpu_wait=0)
    assert res.result == "stopped" and res.signals[0] == "TERM"
    assert not [p for p in left if _alive(p)]  # sshd is on this machine: same pids
    assert rec.id not in [r.id for r in wb.servers(active=True)]
    assert wb.server(rec.id).state == "exited"


def test_quoted_args_and_env_reach_the_server_unchanged(server_ws):
    wb = server_ws
    rec, st = _launch(wb, "quoted")
    assert st.state == "ready"
    argv = wb.server(rec.id).argv
    assert "my model; $(id) 'q' \"d\"" in argv
    pid = wb.server(rec.id).pid
    host = wb.host("test")
    cmdline = host.read_bytes(f"/proc/{pid}/cmdline").split(b"\0")
    assert b"my model; $(id) 'q' \"d\"" in cmdline
    environ = host.read_bytes(f"/proc/{pid}/environ").split(b"\0")
    assert b"STANDIN_NOTE=a b;c $(x) `y`\nz" in environ
    wb.server_stop(rec.id, confirm=True, gpu_wait=5)


def test_follow_survives_a_connection_drop(server_ws, sshd, tmp_path):
    """sshd is killed (with its sessions) and restarted while a log is followed: the follower
    reconnects and resumes from its offset; no byte is lost or repeated."""
    wb = server_ws
    log = tmp_path / "growing.log"
    log.write_bytes(b"")
    cur = wb.journal.db.execute(
        "INSERT INTO servers(profile, host, log_path, state, launched) VALUES ('x', 'test', ?, 'stopped', ?)",
        (str(log), time.time()),
    )
    sid = cur.lastrowid
    done = threading.Event()

    def writer():
        with open(log, "ab", buffering=0) as fh:
            for i in range(600):
                fh.write(f"[2026-11-02 10:00:00 TP0] line {i:05d} ".encode() + b"x" * (i % 50) + b"\n")
                time.sleep(0.004)
        done.set()

    got = bytearray()
    restarted = False
    t = threading.Thread(target=writer)
    t.start()
    for offset, data in wb.server_follow(sid, poll=0.05, stop=lambda: done.is_set() and len(got) == log.stat().st_size):  # noqa: B023 (read as it grows)
        assert offset == len(got)
        got += data
        if not restarted and len(got) > 4000:
            sshd.restart()
            restarted = True
    t.join()
    assert restarted
    assert bytes(got) == log.read_bytes()
    assert wb.host("test").connects >= 2


def test_launch_records_the_draft_config_version_in_the_history(server_ws):
    wb = server_ws
    rec, st = _launch(wb, "standin")
    prof = wb.profile("standin")
    location = f"test:{prof.draft}/config.json"
    hist = wb.config_history(location)
    assert hist.versions[-1].sha256 == wb.server(rec.id).draft_config_sha256
    live = wb.timeline_live_config(next(e.id for e in wb.timeline(server=rec.id).entries))
    assert live is not None and live.sha256 == rec.draft_config_sha256
    assert {e.category for e in wb.timeline(server=rec.id).entries} >= {"launch"}
    wb.server_stop(rec.id, confirm=True, gpu_wait=5)
