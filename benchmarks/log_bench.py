"""Log parsing speed and memory: SGLang server logs through workbench.sglang.logparse.

Three logs are generated (line formats verbatim from SGLang 0.4.9 / 0.5.5 / 0.5.23):
  serving  - a server's startup, then load: uvicorn access lines, prefill and decode lines, info
  decode   - decode lines only
  errors   - milestone and traceback lines only (the rare-line path; real logs hold a few dozen)
The in-memory parse of each is timed (lines/s). Then a serving log of ``--stream-mb`` (1 GB by
default) is written to a file and streamed, each in a fresh process pinned to one core:
  stream_parse - ``iter_scans`` + the dashboard's decode columns (what the log follower does)
  stream_follow - ``Follower.feed`` in the status reads' chunks (what a server's row follows)
  stream_json  - ``stream_json_bytes``: one JSON line per record, what ``logs parse --json`` writes
                 (the compiled writer for the bulk lines where the package built it)
with the process's peak resident-memory growth over its start. Goals: >= 1M lines/s for the
serving log and the streamed parse on one core; <= 64 MB growth for the 1 GB log. A small log of
the same kind is streamed too, so the growth is seen not to follow the log's size. ``--small``: a
quick version for CI. Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.sglang.logparse import parse_text

FLOOR = 1_000_000

DECODE = [
    "[{t} TP0] Decode batch. #running-req: {r}, #token: 10536, token usage: 0.05, accept len: {a:.2f}, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 0",
    "[{t} TP0] Decode batch, #running-req: {r}, #token: 10536, token usage: 0.05, accept len: {a:.2f}, accept rate: 0.62, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 0, ",
    "[{t} TP0] Decode batch, #running-req: {r}, #token: 233600, token usage: 0.66, accept len: {a:.2f}, accept rate: 0.68, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 2",
]
PREFILL = [
    "[{t} TP0] Prefill batch. #new-seq: 1, #new-token: {n}, #cached-token: 0, #token: 0, token usage: 0.00, #running-req: {r}, #queue-req: 0",
    "[{t} TP0] Prefill batch, #new-seq: 1, #new-token: {n}, #cached-token: 0, token usage: 0.01, #running-req: {r}, #queue-req: 0, ",
    "[{t} TP0] Prefill batch, #new-seq: 1, #new-token: {n}, #cached-token: 0, token usage: 0.01, #running-req: {r}, #queue-req: 2, #pending-token: 0, cuda graph: False, input throughput (token/s): 10234.50",
]
ACCESS = '[{t}] INFO:     127.0.0.1:{p} - "POST /generate HTTP/1.1" 200 OK'
INFO = [
    "[{t} TP0] Cache flushed successfully!",
    "[{t}] Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.",
    "[{t} TP0] Receive: obj=GenerateReqInput(rid='3f2a', text=None, input_ids=[...])",
]
STARTUP = [
    "[{t}] server_args=ServerArgs(model_path='/shared/kimi-k2.5-int4', tp_size=8, speculative_algorithm='EAGLE3', speculative_num_steps=5)",
    "[{t} TP0] Load weight begin. avail mem=78.00 GB",
    "[{t} TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=20.00 GB, mem usage=58.00 GB.",
    "[{t} TP0] Load weight begin. avail mem=20.00 GB",
    "[{t} TP0] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=19.00 GB, mem usage=1.00 GB.",
    "[{t} TP0] KV Cache is allocated. #tokens: 233600, KV size: 10.00 GB",
    "[{t} TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=8.00 GB",
    "[{t} TP0] Capture cuda graph end. Time elapsed: 12.10 s. mem usage=1.00 GB. avail mem=7.00 GB.",
    "[{t} TP0] Capture draft cuda graph begin. This can take up to several minutes. avail mem=7.00 GB",
    "[{t} TP0] Capture draft cuda graph end. Time elapsed: 62.70 s. mem usage=1.00 GB. avail mem=6.00 GB.",
    "[{t}] The server is fired up and ready to roll!",
]
OTHER = [
    "[{t} TP0] Cache flushed successfully!",
    "[{t}] Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.",
    "[{t} TP0] Load weight begin. avail mem=78.00 GB",
    "[{t} TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 233600, K size: 10.00 GB, V size: 10.00 GB",
    "[{t} TP0] Capture target verify CUDA graph end. bs=[1, 2, 4], elapsed=6.00 s, mem usage=1.00 GB, avail mem=37.00 GB.",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", line 2846, in run_scheduler_process',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
]


def make_log(n: int, mix: dict, seed: int = 0) -> str:
    rnd = random.Random(seed)
    kinds, weights = zip(*mix.items())
    out = [s.format(t="2026-11-02 09:59:00") for s in STARTUP] if "info" in mix else []
    gen = 0  # one SGLang generation per log: a real log has one format
    for i in range(n - len(out)):
        t = f"2026-11-02 10:{(i // 6000) % 60:02d}:{(i // 100) % 60:02d}"
        k = rnd.choices(kinds, weights)[0]
        if k == "decode":
            out.append(DECODE[gen].format(t=t, r=rnd.randint(1, 64), a=rnd.uniform(1, 4), g=rnd.uniform(50, 900)))
        elif k == "prefill":
            out.append(PREFILL[gen].format(t=t, n=rnd.randint(16, 4096), r=rnd.randint(0, 64)))
        elif k == "info":
            out.append(rnd.choice(INFO).format(t=t))
        elif k == "access":
            out.append(ACCESS.format(t=t, p=rnd.randint(30000, 60000)))
        else:
            out.append(rnd.choice(OTHER).format(t=t))
        if i and i % (n // 3) == 0:
            gen = min(gen + 1, 2)
    return "\n".join(out) + "\n"


METRIC_COLUMNS = ("accept_len", "accept_rate", "gen_throughput", "running_req", "queue_req", "token_usage")


def measure(text: str, repeat: int = 3) -> dict:
    """Best of ``repeat``: parse (every line classified, milestones and failures parsed, bulk
    lines indexed) and parse + the dashboard's decode columns as numbers."""
    n = text.count("\n")
    best = best_cols = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        scan = parse_text(text)
        t1 = time.perf_counter()
        for name in METRIC_COLUMNS:
            scan.decode.column(name)
        scan.decode.stamps()
        t2 = time.perf_counter()
        best, best_cols = min(best, t1 - t0), min(best_cols, t2 - t0)
    assert scan.lines == n
    return {
        "lines": n,
        "recognised": len(scan.decode) + len(scan.prefill) + len(scan.events),
        "lines_per_s": round(n / best),
        "lines_per_s_with_metrics": round(n / best_cols),
        "mb_per_s": round(len(text) / best / 1e6, 1),
    }


def baseline(text: str) -> float:
    """str.split alone, for the speed of the machine at the time of the run."""
    t0 = time.perf_counter()
    text.split("\n")
    return text.count("\n") / (time.perf_counter() - t0)


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm() -> int:
    """This process's peak resident memory (VmHWM: per address space, so not the parent's)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def child(mode: str, path: str) -> None:
    """One streamed run (in its own process, pinned to one core): lines/s and peak RSS growth."""
    import numpy  # noqa: F401 - the parser's columns import it; a fixed cost, not the log's

    from workbench.sglang.logjson import stream_json_bytes
    from workbench.sglang.logparse import iter_scans

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    base = _rss()
    t0 = time.perf_counter()
    lines = records = 0
    if mode == "stream_parse":
        with open(path, "rb") as fh:
            scans = iter_scans(fh)
            while (scan := next(scans, None)) is not None:
                lines += scan.lines
                for name in METRIC_COLUMNS:
                    scan.decode.column(name)
                scan.decode.stamps()
                records += len(scan.decode) + len(scan.prefill) + len(scan.events)
                del scan
    elif mode == "stream_follow":
        from workbench.sglang.follower import READ_CAP, Follower

        f = Follower()
        with open(path, "rb") as fh:
            off = 0
            while data := fh.read(READ_CAP):
                f.feed(data, off)
                off += len(data)
                del data
        lines, records = f.total_lines, f.decode_lines + len(f.events)
    else:
        with open(os.devnull, "wb") as out:
            for piece in stream_json_bytes(path):
                out.write(piece)
                records += piece.count(b"\n")
    dt = time.perf_counter() - t0
    if mode == "stream_json":
        with open(path, "rb") as fh:  # (after the timing; in small reads: no memory of its own)
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    peak = _hwm()
    print(
        json.dumps(
            {
                "seconds": round(dt, 3),
                "lines": lines,
                "records": records,
                "lines_per_s": round(lines / dt),
                "rss_growth_mb": round((peak - base) / 2**20, 1),
            }
        )
    )


def write_log(path: Path, mb: float) -> int:
    block = make_log(200_000, {"access": 45, "prefill": 40, "decode": 10, "info": 5}, seed=1).encode()
    target = int(mb * 2**20)
    with open(path, "wb") as fh:
        n = 0
        while n < target:
            part = block[: target - n] if target - n < len(block) else block
            part = part[: part.rfind(b"\n") + 1]
            if not part:  # less than a line short of the target
                break
            fh.write(part)
            n += len(part)
    return n


MODES = ("stream_parse", "stream_follow", "stream_json")


def run_child(mode: str, path: Path) -> dict:
    r = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(r.stdout)


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lines", nargs="?", type=int, default=1_000_000, help="lines of the in-memory serving log")
    ap.add_argument("--stream-mb", type=float, default=1024.0, help="size of the streamed log (MB)")
    ap.add_argument("--small", action="store_true", help="a quick run: 100k lines, 64 MB streamed")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    n = args.lines
    if args.small:
        n, args.stream_mb = 100_000, 64.0
    logs = {
        "serving": make_log(n, {"access": 45, "prefill": 40, "decode": 10, "info": 5}),
        "decode": make_log(n // 2, {"decode": 1}),
        "errors": make_log(n // 5, {"other": 1}),
    }
    result = {"floor_lines_per_s": FLOOR, "logs": {}, "machine_split_lines_per_s": round(baseline(logs["serving"]))}
    for name, text in logs.items():
        result["logs"][name] = measure(text)
    del logs
    result["lines_per_s"] = result["logs"]["serving"]["lines_per_s"]
    from workbench.sglang.logjson import compiled_available

    result["json_writer"] = "compiled" if compiled_available() else "columns (the C writer was not built)"
    with tempfile.TemporaryDirectory(prefix="log-bench-") as tmp:
        stream = {}
        for label, mb in (("small", max(16.0, args.stream_mb / 16)), ("large", args.stream_mb)):
            path = Path(tmp) / f"{label}.log"
            nbytes = write_log(path, mb)
            stream[label] = {"bytes": nbytes, **{m: run_child(m, path) for m in MODES}}
            path.unlink()
    result["stream"] = stream
    large = stream["large"]
    result["stream_parse_lines_per_s"] = large["stream_parse"]["lines_per_s"]
    result["stream_follow_lines_per_s"] = large["stream_follow"]["lines_per_s"]
    result["stream_json_lines_per_s"] = large["stream_json"]["lines_per_s"]
    result["stream_rss_growth_mb"] = max(large[m]["rss_growth_mb"] for m in MODES)
    result["goals"] = {
        "parse_1m_lines_per_s": result["lines_per_s"] >= FLOOR,
        "stream_parse_1m_lines_per_s_one_core": result["stream_parse_lines_per_s"] >= FLOOR,
        "stream_follow_1m_lines_per_s_one_core": result["stream_follow_lines_per_s"] >= FLOOR,
        "stream_json_1m_lines_per_s_one_core": result["stream_json_lines_per_s"] >= FLOOR,
        "stream_rss_le_64mb": result["stream_rss_growth_mb"] <= 64,
        "rss_independent_of_size": result["stream_rss_growth_mb"]
        <= 1.5 * max(stream["small"][m]["rss_growth_mb"] for m in MODES) + 8,
    }
    result["ok"] = all(result["goals"].values())
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
