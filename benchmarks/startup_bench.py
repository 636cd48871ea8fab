"""Start-up times: ``eagle-workbench --help`` and the TUI's first frame (torch must stay unimported).

Prints JSON with the figures and their floors. The TUI is started for real on a pseudo-terminal
(120x40); "first frame" is the first paint that shows the app's title, "first prediction" the
moment the Predictor shows its numbers. A headless run checks that torch was never imported.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELP_FLOOR_S = 0.3
TUI_FLOOR_S = 1.0
RUNS = 7


def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def help_time() -> list[float]:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "workbench", "--help"], check=True, stdout=subprocess.DEVNULL, env=env(), cwd=ROOT
        )
        times.append(time.perf_counter() - t0)
    return times


def tui_times(workspace: str, timeout: float = 30.0) -> tuple[float, float]:
    """(first frame, first prediction) in seconds, on a real pseudo-terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", "--workspace", workspace],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**env(), "TERM": "xterm-256color"},
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    first = prediction = None
    try:
        while time.perf_counter() - t0 < timeout and prediction is None:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
            if first is None and b"eagle-workbench" in seen:
                first = time.perf_counter() - t0
            if b"accept length" in seen:
                prediction = time.perf_counter() - t0
        os.write(master, b"\x11")  # ctrl+q
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        os.close(master)
    if first is None:
        raise RuntimeError("the TUI showed no frame within the timeout")
    return first, prediction if prediction is not None else float("nan")


def torch_imported_by_tui(workspace: str) -> bool:
    code = (
        "import asyncio, sys\nfrom workbench.tui.app import WorkbenchApp\n"
        "async def main():\n"
        f"    app = WorkbenchApp({workspace!r})\n"
        "    async with app.run_test() as pilot:\n"
        "        await pilot.pause(0.3); await app.workers.wait_for_complete(); await pilot.pause()\n"
        "    print('torch' in sys.modules)\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), cwd=ROOT, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


def main() -> int:
    helps = help_time()
    with tempfile.TemporaryDirectory() as ws:
        frames = [tui_times(ws) for _ in range(3)]
        torch_loaded = torch_imported_by_tui(ws)
    help_median = statistics.median(helps)
    first = statistics.median(f for f, _ in frames)
    pred = statistics.median(p for _, p in frames)
    print(
        json.dumps(
            {
                "benchmark": "startup",
                "help_s_median": round(help_median, 3),
                "help_s_best": round(min(helps), 3),
                "help_floor_s": HELP_FLOOR_S,
                "tui_first_frame_s_median": round(first, 3),
                "tui_first_prediction_s_median": round(pred, 3),
                "tui_floor_s": TUI_FLOOR_S,
                "tui_imports_torch": torch_loaded,
                "ok": help_median < HELP_FLOOR_S and first < TUI_FLOOR_S and not torch_loaded,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
