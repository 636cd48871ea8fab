"""Log reading speed and memory: ``eagle-workbench logs parse --json`` on one core, against its floors.

A serving log is generated (SGLang's line formats of 0.4.9 / 0.5.5 / 0.5.23: a start, then uvicorn access
lines, prefill and decode lines and other INFO lines, a vLLM start and its metrics lines after it) and written
to a file of ``--stream-mb`` (1 GB by default). Each measurement runs in a fresh process pinned to one core:

  cli_json      ``eagle-workbench logs parse FILE --json > /dev/null``: the command a user runs (lines/s)
  stream_json   the same records through ``workbench.logs.Reading(...).json_bytes()`` in-process
  stream_follow ``Follower.feed`` in the status reads' chunks (what a server's row follows)
  floor_read    the physical floor of touching every line: read the file in the parser's chunks, decode it
                and split it into lines (nothing parsed)
  floor_encode  msgspec writing JSON Lines of records already built as the JSON writer gets them (the output
                alone), as lines/s of the log

with each process's peak resident-memory growth over its start. A small log is streamed too, so the growth
is seen not to follow the log's size; it is read once more with every line indented (``generic_json``): the
parser then reads each line through its general path (prefixes, then the message item by item), so
``fast_path_gain`` is what the periodic lines' one-regex path earns. Goals: ``cli_json`` >= 500k lines a
CPU-second of its one core (the wall-clock rate is printed too; on a shared machine it measures the other work
as well); <= 64 MB growth for the large log.
``--small``: a quick version. Prints one JSON object.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GOAL = 500_000

DECODE = [
    "[{t} TP0] Decode batch. #running-req: {r}, #token: 10536, token usage: 0.05, accept len: {a:.2f}, "
    "cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 0",
    "[{t} TP0] Decode batch, #running-req: {r}, #token: 10536, token usage: 0.05, accept len: {a:.2f}, "
    "accept rate: 0.62, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 0, ",
    "[{t} TP0] Decode batch, #running-req: {r}, #token: 233600, token usage: 0.66, accept len: {a:.2f}, "
    "accept rate: 0.68, cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: 2",
]
PREFILL = [
    "[{t} TP0] Prefill batch. #new-seq: 1, #new-token: {n}, #cached-token: 0, #token: 0, token usage: 0.00, "
    "#running-req: {r}, #queue-req: 0",
    "[{t} TP0] Prefill batch, #new-seq: 1, #new-token: {n}, #cached-token: 0, token usage: 0.01, "
    "#running-req: {r}, #queue-req: 0, ",
    "[{t} TP0] Prefill batch, #new-seq: 1, #new-token: {n}, #cached-token: 0, token usage: 0.01, "
    "#running-req: {r}, #queue-req: 2, #pending-token: 0, cuda graph: False, input throughput (token/s): 10234.50",
]
ACCESS = '[{t}] INFO:     127.0.0.1:{p} - "POST /generate HTTP/1.1" 200 OK'
INFO = [
    "[{t} TP0] Cache flushed successfully!",
    "[{t}] Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
    "Please use '/server_info' instead.",
    "[{t} TP0] Using KV cache dtype: torch.bfloat16",
]
STARTUP = [
    "[{t}] server_args=ServerArgs(model_path='/shared/kimi-k2.5-int4', tp_size=8, speculative_algorithm='EAGLE3')",
    "[{t} TP0] Load weight begin. avail mem=78.00 GB",
    "[{t} TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=20.00 GB, "
    "mem usage=58.00 GB.",
    "[{t} TP0] KV Cache is allocated. #tokens: 233600, KV size: 10.00 GB",
    "[{t} TP0] Capture cuda graph end. Time elapsed: 12.10 s. mem usage=1.00 GB. avail mem=7.00 GB.",
    "[{t}] The server is fired up and ready to roll!",
]
VLLM = [
    "(APIServer pid=2181) INFO 12-05 04:50:13 [loggers.py:127] Engine 000: Avg prompt throughput: 1.1 tokens/s, "
    "Avg generation throughput: {g:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache usage: 0.4%, "
    "Prefix cache hit rate: 0.0%",
    "(APIServer pid=2181) INFO 12-05 04:50:13 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
    "{a:.2f}, Accepted throughput: 40.97 tokens/s, Drafted throughput: 81.40 tokens/s, Accepted: 462 tokens, "
    "Drafted: 918 tokens, Per-position acceptance rate: 0.778, 0.493, 0.239, Avg Draft acceptance rate: 50.3%",
    '(APIServer pid=2181) INFO:     127.0.0.1:{p} - "POST /v1/completions HTTP/1.1" 200 OK',
]
MIX = {"access": 45, "prefill": 40, "decode": 10, "info": 5}


def make_log(n: int, seed: int = 0) -> str:
    """``n`` lines: an SGLang server of each line generation in turn, then a vLLM server (a tenth)."""
    rnd = random.Random(seed)
    kinds, weights = zip(*MIX.items())
    out = [s.format(t="2026-11-02 09:59:00") for s in STARTUP]
    sg = int(n * 0.9)
    for i in range(sg - len(out)):
        t = f"2026-11-02 10:{(i // 6000) % 60:02d}:{(i // 100) % 60:02d}"
        gen = min(2, 3 * i // sg)  # one SGLang generation at a time: a real log has one format
        k = rnd.choices(kinds, weights)[0]
        if k == "decode":
            out.append(DECODE[gen].format(t=t, r=rnd.randint(1, 64), a=rnd.uniform(1, 4), g=rnd.uniform(50, 900)))
        elif k == "prefill":
            out.append(PREFILL[gen].format(t=t, n=rnd.randint(16, 4096), r=rnd.randint(0, 64)))
        elif k == "info":
            out.append(rnd.choice(INFO).format(t=t))
        else:
            out.append(ACCESS.format(t=t, p=rnd.randint(30000, 60000)))
    for _ in range(n - len(out)):
        out.append(rnd.choice(VLLM).format(g=rnd.uniform(50, 900), r=rnd.randint(1, 64), a=rnd.uniform(1, 4),
                                           p=rnd.randint(30000, 60000)))  # fmt: skip
    return "\n".join(out) + "\n"


def write_log(path: Path, mb: float) -> int:
    block = make_log(200_000, seed=1).encode()
    target = int(mb * 2**20)
    n = 0
    with open(path, "wb") as fh:
        while n < target:
            part = block[: target - n] if target - n < len(block) else block
            part = part[: part.rfind(b"\n") + 1]
            if not part:
                break
            fh.write(part)
            n += len(part)
    return n


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})


def child(mode: str, path: str) -> None:
    """One measurement in this process (pinned to one core): seconds, CPU seconds, lines, memory growth."""
    import msgspec

    from workbench.logs import Reading
    from workbench.logs.follower import READ_CAP, Follower
    from workbench.logs.parser import STREAM_CHUNK, LogParser

    _one_core()
    # the records as the JSON writer gets them (the periodic lines' as structs)
    sample = LogParser(dicts=False).feed(make_log(20_000, seed=2), final=True).records if mode == "floor_encode" else []
    base = _rss()
    t0, c0 = time.perf_counter(), time.process_time()
    lines = 0
    if mode == "stream_json":
        with open(path, "rb") as fh, open(os.devnull, "wb") as out:
            reading = Reading(fh)
            for piece in reading.json_bytes():
                out.write(piece)
            lines = reading.parser.lines
    elif mode == "stream_follow":
        f = Follower()
        with open(path, "rb") as fh:
            off = 0
            while data := fh.read(READ_CAP):
                f.feed(data, off)
                off += len(data)
        lines = f.total_lines
    elif mode == "floor_read":
        with open(path, "rb") as fh:
            while data := fh.read(STREAM_CHUNK):
                lines += len(data.decode("utf-8", "replace").split("\n")) - 1
    elif mode == "floor_encode":  # the same number of records the log's lines make, written from prebuilt ones
        encode = msgspec.json.Encoder().encode_lines
        per_line = len(sample) / 20_000
        with open(path, "rb") as fh:
            total = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 22), b""))
        t0, c0 = time.perf_counter(), time.process_time()
        done = 0
        with open(os.devnull, "wb") as out:
            while done < total * per_line:
                out.write(encode(sample))
                done += len(sample)
        lines = total
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _hwm()
    print(json.dumps({"seconds": round(dt, 3), "cpu_seconds": round(cpu, 3), "lines": lines,
                      "lines_per_s": round(lines / dt), "lines_per_cpu_s": round(lines / cpu),
                      "rss_growth_mb": round((peak - base) / 2**20, 1)}))  # fmt: skip


def cli_json(path: Path) -> dict[str, float]:
    """The command itself, in a process pinned to one core, writing to /dev/null."""
    exe = shutil.which("eagle-workbench") or str(Path(sys.executable).with_name("eagle-workbench"))
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 22), b""))
    t0 = time.perf_counter()
    r0 = os.times()
    with open(os.devnull, "wb") as out:
        subprocess.run([exe, "logs", "parse", str(path), "--json"], stdout=out, check=True, preexec_fn=_one_core)
    dt = time.perf_counter() - t0
    r1 = os.times()
    cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return {"seconds": round(dt, 3), "cpu_seconds": round(cpu, 3), "lines": lines,
            "lines_per_s": round(lines / dt), "lines_per_cpu_s": round(lines / cpu)}  # fmt: skip


MODES = ("stream_json", "stream_follow", "floor_read", "floor_encode")


def run_child(mode: str, path: Path) -> dict[str, float]:
    r = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--stream-mb", type=float, default=1024.0, help="size of the large log (MB)")
    ap.add_argument("--small", action="store_true", help="a quick run: 64 MB")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    if args.small:
        args.stream_mb = 64.0
    result: dict[str, object] = {"goal_lines_per_s": GOAL, "cpu": _cpu_name(), "load_before": os.getloadavg()}
    stream = {}
    with tempfile.TemporaryDirectory(prefix="log-bench-") as tmp:
        for label, mb in (("small", max(16.0, args.stream_mb / 16)), ("large", args.stream_mb)):
            path = Path(tmp) / f"{label}.log"
            nbytes = write_log(path, mb)
            stream[label] = {"bytes": nbytes, "cli_json": cli_json(path), **{m: run_child(m, path) for m in MODES}}
            if label == "small":
                indented = Path(tmp) / "indented.log"
                indented.write_bytes(b"".join(b"  " + x for x in path.read_bytes().splitlines(keepends=True)))
                stream[label]["generic_json"] = run_child("stream_json", indented)
                indented.unlink()
            path.unlink()
    large = stream["large"]
    result["stream"] = stream
    # a shared machine's other work stretches the wall clock, not the core time a process is given: both
    # are kept, the goal and the ratios taken on lines per CPU-second of the one core
    for m in ("cli_json", *MODES):
        result[f"{m}_lines_per_s"] = large[m]["lines_per_s"]
        result[f"{m}_lines_per_cpu_s"] = large[m]["lines_per_cpu_s"]
    per_cpu = {m: large[m]["lines_per_cpu_s"] for m in ("cli_json", *MODES)}
    result["cli_json_vs_read_floor"] = round(per_cpu["cli_json"] / per_cpu["floor_read"], 3)
    result["cli_json_vs_encode_floor"] = round(per_cpu["cli_json"] / per_cpu["floor_encode"], 3)
    small = stream["small"]
    result["fast_path_gain"] = round(
        small["stream_json"]["lines_per_cpu_s"] / small["generic_json"]["lines_per_cpu_s"], 2
    )
    result["load_after"] = os.getloadavg()
    modes = ("stream_json", "stream_follow")
    result["stream_rss_growth_mb"] = max(large[m]["rss_growth_mb"] for m in modes)
    result["goals"] = {
        "cli_json_500k_lines_per_cpu_s_one_core": per_cpu["cli_json"] >= GOAL,
        "stream_rss_le_64mb": result["stream_rss_growth_mb"] <= 64,
        "rss_independent_of_size": result["stream_rss_growth_mb"]
        <= 1.5 * max(stream["small"][m]["rss_growth_mb"] for m in modes) + 8,
    }
    result["ok"] = all(result["goals"].values())  # type: ignore[union-attr]
    print(json.dumps(result, indent=2))
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
