"""Log parsing speed: lines per second of SGLang server logs through workbench.sglang.logparse.

Three logs are generated (line formats verbatim from SGLang 0.4.9 / 0.5.5 / 0.5.23):
  serving  - a server's startup, then load: uvicorn access lines, prefill and decode lines, info
  decode   - decode lines only
  errors   - milestone and traceback lines only (the rare-line path; real logs hold a few dozen)
The floor (1M lines/s) applies to the serving log. Prints one JSON object.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.sglang.logparse import parse_text  # noqa: E402

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


METRIC_COLUMNS = ("accept_len", "accept_rate", "gen_throughput", "running_req", "queue_req",
                  "token_usage")


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
    return {"lines": n, "recognised": len(scan.decode) + len(scan.prefill) + len(scan.events),
            "lines_per_s": round(n / best), "lines_per_s_with_metrics": round(n / best_cols),
            "mb_per_s": round(len(text) / best / 1e6, 1)}


def baseline(text: str) -> float:
    """str.split alone, for the speed of the machine at the time of the run."""
    t0 = time.perf_counter()
    text.split("\n")
    return text.count("\n") / (time.perf_counter() - t0)


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    logs = {
        "serving": make_log(n, {"access": 45, "prefill": 40, "decode": 10, "info": 5}),
        "decode": make_log(n // 2, {"decode": 1}),
        "errors": make_log(n // 5, {"other": 1}),
    }
    result = {"floor_lines_per_s": FLOOR, "logs": {},
              "machine_split_lines_per_s": round(baseline(logs["serving"]))}
    for name, text in logs.items():
        result["logs"][name] = measure(text)
    result["lines_per_s"] = result["logs"]["serving"]["lines_per_s"]
    result["ok"] = result["lines_per_s"] >= FLOOR
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
