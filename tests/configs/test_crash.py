"""A writer killed mid-write leaves the old or the new file, never a partial one; history stays intact."""

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent("""
    import os, sys, time
    from workbench.api import Workbench
    from workbench.hosts import casfile

    ws, path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    wb = Workbench.open(ws)
    if mode == "stall":
        def stalled(point):                       # the temp file is written; the swap has not happened
            if point == "window":
                print("STALLED", flush=True)
                time.sleep(60)
        casfile.HOOK = stalled
        print("START", flush=True)
        wb.config_set(path, {"payload": "new" * 400000})
    else:
        print("START", flush=True)
        i = 0
        while True:
            wb.config_set(path, {"payload": ("abc" if i % 2 else "xyz") * 400000, "round": i})
            i += 1
""")


def _spawn(ws, path, mode):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(ws), str(path), mode], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout.readline().strip() == "START"
    return proc


def _kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()


def _blobs(ws):
    db = sqlite3.connect(Path(ws) / ".workbench" / "journal.sqlite3")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = db.execute("SELECT sha256, content FROM blobs").fetchall()
        for digest, content in rows:
            assert hashlib.sha256(content).hexdigest() == digest
        versions = db.execute("SELECT sha256 FROM config_versions ORDER BY id").fetchall()
        return {d for d, _ in rows}, [v for (v,) in versions]
    finally:
        db.close()


@pytest.fixture
def tracked(tmp_path, wb):
    p = tmp_path / "config.json"
    p.write_text(
        json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}, "payload": ""}, indent=2)
    )
    wb.config_track(str(p))
    wb.close()
    return wb.workspace.root, p


def test_killed_before_the_rename_leaves_the_old_file(tracked):
    ws, p = tracked
    old = p.read_bytes()
    proc = _spawn(ws, p, "stall")
    assert proc.stdout.readline().strip() == "STALLED"
    _kill(proc)
    assert p.read_bytes() == old
    _, versions = _blobs(ws)
    assert versions == [hashlib.sha256(old).hexdigest()]


def test_killed_at_random_moments_never_leaves_a_partial_file(tracked):
    ws, p = tracked
    rng = random.Random(1234)
    for _ in range(4):
        proc = _spawn(ws, p, "loop")
        time.sleep(rng.uniform(0.05, 0.6))
        _kill(proc)
        data = p.read_bytes()
        json.loads(data)  # whole, parseable
        blobs, versions = _blobs(ws)
        assert hashlib.sha256(data).hexdigest() in blobs  # every byte of it is in the history
        assert set(versions) <= blobs
    from workbench.api import Workbench

    with Workbench.open(ws) as wb:  # the next look records a file the journal missed
        hist = wb.config_history(str(p))
        assert hist.versions[-1].sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
        wb.config_revert(str(p), 1, confirm=True)
        assert json.loads(p.read_text())["payload"] == ""


def test_temp_files_of_killed_writers_are_cleaned_by_the_next_write(tmp_path):
    """Temp files are only made under the file's lock, so any the next lock holder finds are a dead
    writer's, however young."""
    from workbench.configs import LocalFiles, sha256

    p = tmp_path / "config.json"
    p.write_bytes(b"{}")
    stale, fresh = tmp_path / ".config.json.abc.tmp", tmp_path / ".config.json.def.tmp"
    stale.write_bytes(b"{partial")
    fresh.write_bytes(b"{partial")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    LocalFiles().write_cas(str(p), b'{"a": 1}', sha256(b"{}"))
    assert not stale.exists() and not fresh.exists()
