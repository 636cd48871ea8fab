"""Compare-and-swap under races: concurrent writers, a hand edit saved between the check and the swap,
writers killed inside the write window (paused there deterministically by the writer's own hook), dead
writers' locks and temp files. One lock discipline for local files, LocalHost and SSH hosts."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.configs import writers
from workbench.configs import ConflictError, LocalFiles, sha256
from workbench.hosts import casfile

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 200


def _json(tmp_path, name="config.json", obj=None):
    p = tmp_path / name
    p.write_text(json.dumps(obj or {"hidden_size": 16, "payload": "x"}, indent=2) + "\n")
    return p


def _spawn_pair(target, args_of, rounds):
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    barriers = [ctx.Barrier(2) for _ in range(2)]
    procs = [ctx.Process(target=target, args=args_of(name, barriers, results)) for name in ("a", "b")]
    for p in procs:
        p.start()
    procs.append(barriers)  # kept alive with the processes (their semaphores)
    return procs, results


def _collect(procs, results, n, timeout=300):
    barriers = procs.pop()
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        try:
            got.append(results.get(timeout=5))
        except Exception:
            if not any(p.is_alive() for p in procs):
                break
    for p in procs:
        p.join(30)
    del barriers
    return got


def _figures(rows, rounds):
    by_round = {}
    for row in rows:
        by_round.setdefault(row[0], []).append(row)
    errors = [r for r in rows if r[2] not in ("ok", "conflict")]
    winners = {i: [r for r in rs if r[2] == "ok"] for i, rs in by_round.items()}
    return by_round, errors, winners


def test_concurrent_local_config_set_one_winner_per_round_nothing_lost_no_duplicates(wb, tmp_path):
    p = _json(tmp_path)
    wb.config_track(str(p))
    ws = str(wb.workspace.root)
    wb.close()
    procs, results = _spawn_pair(
        writers.config_writer, lambda name, b, q: (name, ws, str(p), ROUNDS, b[0], b[1], q), ROUNDS
    )
    rows = _collect(procs, results, 2 * ROUNDS)
    by_round, errors, winners = _figures(rows, ROUNDS)
    assert not errors, errors[:3]
    assert len(by_round) == ROUNDS
    assert all(len(w) == 1 for w in winners.values()), [i for i, w in winners.items() if len(w) != 1][:5]
    from workbench.api import Workbench

    with Workbench.open(ws) as wb2:
        versions = wb2.config_history(str(p)).versions
        assert len(versions) == 1 + ROUNDS  # tracked + one per round
        assert all(v.reason.startswith("set writer_") for v in versions[1:])
        shas = [v.sha256 for v in versions]
        assert len(set(shas)) == len(shas)  # no version stored twice
        lost = 0
        for prev, v, i in zip(versions, versions[1:], range(ROUNDS)):
            # every write was made over the one before it (an edit it replaced would be lost)
            lost += v.parent_sha256 != prev.sha256
            name = winners[i][0][1]
            lost += json.loads(wb2.configs.blob(v.sha256))[f"writer_{name}"] != i
        assert sha256(p.read_bytes()) == versions[-1].sha256
    print(
        json.dumps(
            {
                "rounds": ROUNDS,
                "clean": sum(len(w) == 1 for w in winners.values()),
                "lost": lost,
                "duplicate_versions": len(shas) - len(set(shas)),
            }
        )
    )
    assert lost == 0
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith(".config.json")] == []


def test_concurrent_file_writers_exactly_one_wins(tmp_path):
    p = _json(tmp_path, "f.json")
    procs, results = _spawn_pair(writers.file_writer, lambda name, b, q: (name, str(p), ROUNDS, b[0], q), ROUNDS)
    rows = _collect(procs, results, 2 * ROUNDS)
    by_round, errors, winners = _figures(rows, ROUNDS)
    assert not errors and len(by_round) == ROUNDS
    assert all(len(w) == 1 for w in winners.values())
    last = winners[ROUNDS - 1][0][3]
    assert p.read_text() == last
    assert sorted(x.name for x in tmp_path.iterdir()) == ["f.json"]  # no temp or lock left


# -- a hand edit between the check and the swap ---------------------------------------------------------
def _hand_edit_at_window(path: Path, style: str, text: bytes):
    def at(point):
        if point != "window":
            return
        if style == "in place":
            with open(path, "r+b") as fh:  # editors that write the same inode
                fh.truncate(0)
                fh.write(text)
        else:  # editors that save a new file and rename it
            tmp = path.with_name(path.name + ".swp")
            tmp.write_bytes(text)
            os.replace(tmp, path)

    return at


@pytest.mark.parametrize("style", ["in place", "rename"])
def test_a_hand_edit_saved_inside_the_window_is_kept_and_stored(wb, tmp_path, monkeypatch, style):
    p = _json(tmp_path)
    wb.config_track(str(p))
    hand = json.dumps({"hidden_size": 16, "payload": "edited by hand"}, indent=2).encode() + b"\n"
    monkeypatch.setattr(casfile, "HOOK", _hand_edit_at_window(p, style, hand))
    with pytest.raises(ConflictError, match="nothing written"):
        wb.config_set(str(p), {"hidden_size": 32})
    assert p.read_bytes() == hand  # not overwritten
    monkeypatch.setattr(casfile, "HOOK", casfile.pause)
    versions = wb.config_history(str(p)).versions
    assert versions[-1].sha256 == sha256(hand) and versions[-1].reason == "external edit"
    change = wb.config_set(str(p), {"hidden_size": 32})  # the retry builds on it
    assert json.loads(p.read_text()) == {"hidden_size": 32, "payload": "edited by hand"}
    assert change.version.parent_sha256 == sha256(hand)


def test_must_not_exist_never_replaces_a_file_that_appeared(tmp_path, monkeypatch):
    p = tmp_path / "new.json"
    monkeypatch.setattr(casfile, "HOOK", lambda point: point == "window" and p.write_bytes(b"theirs"))
    with pytest.raises(ConflictError):
        LocalFiles().write_cas(str(p), b"ours", None)
    assert p.read_bytes() == b"theirs"


# -- writers killed inside the write window --------------------------------------------------------------
WRITER = textwrap.dedent("""
    import sys
    from workbench.api import Workbench
    ws, path = sys.argv[1], sys.argv[2]
    with Workbench.open(ws) as wb:
        wb.config_set(path, {"hidden_size": int(sys.argv[3])})
    print("DONE", flush=True)
""")


def _writer_paused_at(point, ws, path, pause_dir, value=64, ssh=False):
    env = {**os.environ, "PYTHONPATH": str(ROOT), casfile.PAUSE_AT: point, casfile.PAUSE_DIR: str(pause_dir)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(ws), str(path), str(value)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(x.name.startswith(point + ".") for x in pause_dir.iterdir()):
            return proc
        if proc.poll() is not None:
            raise AssertionError(f"writer ended before {point}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.01)
    raise AssertionError(f"writer never reached {point}")


SLOW_MARK = textwrap.dedent("""
    import builtins, time
    from workbench.hosts import casfile
    real_open = builtins.open

    class Slow:                       # a mark whose bytes land half a second after its file is made
        def __init__(self, fh):
            self.fh = fh
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            self.fh.close()
        def write(self, text):
            time.sleep(0.5)
            return self.fh.write(text)

    builtins.open = lambda *a, **k: Slow(real_open(*a, **k))
    casfile.pause("locked")
""")


def test_a_pause_mark_is_never_seen_without_its_pid(tmp_path):
    """A watcher polls for the mark and kills the pid in it: the mark's name must not appear before
    the pid is in it, however slowly the pid is written (a mark seen empty once failed a kill test)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        casfile.PAUSE_AT: "locked",
        casfile.PAUSE_DIR: str(tmp_path),
        casfile.PAUSE_MAX: "1",
    }
    proc = subprocess.Popen([sys.executable, "-c", SLOW_MARK], env=env, stderr=subprocess.PIPE, text=True)
    seen = []
    while proc.poll() is None or not seen:
        seen += [(m.name, m.read_text()) for m in tmp_path.iterdir() if m.name.startswith("locked.")]
        if proc.poll() is not None and not seen:
            raise AssertionError(f"no mark: {proc.stderr.read()[-2000:]}")
        time.sleep(0.005)
    assert proc.wait(10) == 0, proc.stderr.read()
    proc.stderr.close()
    assert seen and all(text == str(proc.pid) for _, text in seen), seen[:3]
    assert sorted(m.name for m in tmp_path.iterdir()) == [f"locked.{proc.pid}"]  # nothing left aside


def _kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    proc.stdout.close()
    proc.stderr.close()


@pytest.fixture
def tracked(wb, tmp_path):
    d = tmp_path / "cfg"
    d.mkdir()
    p = _json(d)
    wb.config_track(str(p))
    ws = wb.workspace.root
    wb.close()
    pause = tmp_path / "pause"
    pause.mkdir()
    return ws, p, pause


@pytest.mark.parametrize("point", ["locked", "window"])
def test_killed_holding_the_lock_or_inside_the_window_blocks_nobody(tracked, point):
    """SIGKILL while the writer holds the lock (before and after its check, its temp file written):
    the file is the old one, the next writer neither waits nor finds the dead writer's temp file."""
    ws, p, pause = tracked
    old = p.read_bytes()
    proc = _writer_paused_at(point, ws, p, pause)
    if point == "window":
        assert [x for x in p.parent.iterdir() if x.name.endswith(".tmp")]  # really in the window
    _kill(proc)
    assert p.read_bytes() == old
    from workbench.api import Workbench

    with Workbench.open(ws) as wb:
        t0 = time.monotonic()
        wb.config_set(str(p), {"hidden_size": 48})
        elapsed = time.monotonic() - t0
        assert elapsed < 2.0, elapsed  # no stale-lock wait
        assert json.loads(p.read_text())["hidden_size"] == 48
        assert [v.reason for v in wb.config_history(str(p)).versions] == ["tracked", "set hidden_size=48"]
    assert sorted(x.name for x in p.parent.iterdir()) == ["config.json"]  # temp files cleaned


def test_killed_after_the_rename_before_the_version_row_is_not_an_external_edit(tracked):
    ws, p, pause = tracked
    proc = _writer_paused_at("renamed", ws, p, pause, value=96)
    _kill(proc)
    assert json.loads(p.read_text())["hidden_size"] == 96  # the write landed
    from workbench.api import Workbench

    with Workbench.open(ws) as wb:
        versions = wb.config_history(str(p)).versions
        assert [v.reason for v in versions] == ["tracked", "set hidden_size=96"]
        assert versions[-1].parent_sha256 == versions[0].sha256
        assert versions[-1].sha256 == sha256(p.read_bytes())
        wb.config_set(str(p), {"hidden_size": 97})
        assert len(wb.config_history(str(p)).versions) == 3


def test_kill_figures_over_many_points(tracked):
    """Kills at every point of the write, again and again: N tried, N clean (file whole and equal to
    the latest version, the next write neither waits nor leaves a temp file), N lost (a write that
    landed but is not in the history, or recorded as an external edit)."""
    ws, p, pause = tracked
    from workbench.api import Workbench

    tried = clean = lost = 0
    for k in range(12):
        point = ("locked", "window", "renamed")[k % 3]
        for f in pause.iterdir():
            f.unlink()
        proc = _writer_paused_at(point, ws, p, pause, value=200 + k)
        _kill(proc)
        tried += 1
        with Workbench.open(ws) as wb:
            versions = wb.config_history(str(p)).versions
            ok = versions[-1].sha256 == sha256(p.read_bytes())
            lost += any(v.reason == "external edit" for v in versions)
            t0 = time.monotonic()
            wb.config_set(str(p), {"payload": f"after {k}"})
            ok = ok and time.monotonic() - t0 < 2.0
            ok = ok and not [x for x in p.parent.iterdir() if x.name.endswith(".tmp")]
        clean += ok
    print(json.dumps({"kills": tried, "clean": clean, "lost": lost}))
    assert clean == tried and lost == 0


def test_stale_lock_file_of_a_dead_writer_and_an_old_lock_directory(tmp_path):
    """A lock file left behind (its holder killed) is no lock: only a live holder's flock is; an old
    workbench's lock directory is replaced."""
    p = _json(tmp_path, "f.json")
    lock = Path(casfile.lock_path(str(p)))
    lock.write_text("12345 999\n")
    t0 = time.monotonic()
    LocalFiles().write_cas(str(p), b"{}", sha256(p.read_bytes()))
    assert time.monotonic() - t0 < 1.0 and not lock.exists()
    lock.mkdir()
    LocalFiles().write_cas(str(p), b"[]", sha256(b"{}"))
    assert p.read_bytes() == b"[]" and not lock.exists()


def test_a_live_writer_is_waited_for_not_overrun(tmp_path):
    p = _json(tmp_path, "f.json")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import fcntl, os, sys, time
            fd = os.open({casfile.lock_path(str(p))!r}, os.O_RDWR | os.O_CREAT)
            fcntl.flock(fd, fcntl.LOCK_EX)
            print("HELD", flush=True)
            time.sleep(1.0)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "HELD"
    t0 = time.monotonic()
    LocalFiles().write_cas(str(p), b"{}", sha256(p.read_bytes()))
    assert time.monotonic() - t0 > 0.5  # it waited for the live holder
    holder.wait(10)
    holder.stdout.close()
    with pytest.raises(casfile.BusyError):
        h2 = subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(f"""
            import fcntl, os, time
            fd = os.open({casfile.lock_path(str(p))!r}, os.O_RDWR | os.O_CREAT)
            fcntl.flock(fd, fcntl.LOCK_EX)
            print("HELD", flush=True)
            time.sleep(5)
        """),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert h2.stdout.readline().strip() == "HELD"
            casfile.cas_write(str(p), b"[]", sha256(b"{}"), wait=0.3)
        finally:
            h2.kill()
            h2.wait(10)
            h2.stdout.close()
    assert p.read_bytes() == b"{}"
