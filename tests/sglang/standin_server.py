"""A small stand-in for an SGLang server (tests only): accepts launch_server flags, writes
SGLang 0.5.23-format log lines to stdout, answers SGLang's HTTP routes.

STANDIN_FAIL: oom | port | draft-context | cuda-graph | nccl | scheduler-exception |
              warmup-failed | crash | crash-after-ready
STANDIN_IGNORE_TERM=1: survive SIGTERM (to exercise SIGKILL). STANDIN_HANG=1: after a failure,
hang on instead of exiting. STANDIN_GPU_FILE: rows for the
nvidia-smi double while alive. STANDIN_SLOW: seconds per startup milestone.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
p.add_argument("--model-path")
p.add_argument("--port", type=int, default=30000)
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--tp-size", type=int, default=1)
p.add_argument("--speculative-algorithm")
p.add_argument("--speculative-draft-model-path")
p.add_argument("--speculative-num-steps", type=int)
p.add_argument("--speculative-eagle-topk", type=int)
p.add_argument("--speculative-num-draft-tokens", type=int)
args, _ = p.parse_known_args()
FAIL = os.environ.get("STANDIN_FAIL", "")
SLOW = float(os.environ.get("STANDIN_SLOW", "0.05"))
GPU_FILE = os.environ.get("STANDIN_GPU_FILE")
NGPU = max(1, args.tp_size)


def ts():
    return time.strftime("%Y-%m-%d %H:%M:%S")


def log(msg, rank=True):
    print(f"[{ts()}{' TP0' if rank and NGPU > 1 else ''}] {msg}", flush=True)


def gpus(used):
    if GPU_FILE:
        with open(GPU_FILE + ".tmp", "w") as fh:
            for i in range(8):
                fh.write(f"{i}, {used if i < NGPU else 0}, 143771, {97 if used and i < NGPU else 0}\n")
        os.replace(GPU_FILE + ".tmp", GPU_FILE)


def die(code):
    sys.stdout.flush()
    if os.environ.get("STANDIN_HANG"):  # SGLang hanging on after a scheduler exception
        while True:
            time.sleep(1)
    gpus(0)
    os._exit(code)


if os.environ.get("STANDIN_IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *a: die(0))

# a child in the same process group, like SGLang's scheduler processes
child = None
if os.fork() == 0:
    if os.environ.get("STANDIN_IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)

log(
    "server_args="
    + repr(
        {
            "model_path": args.model_path,
            "tp_size": NGPU,
            "port": args.port,
            "speculative_algorithm": args.speculative_algorithm,
            "speculative_num_steps": args.speculative_num_steps,
        }
    ),
    rank=False,
)
gpus(1024)
time.sleep(SLOW)
if FAIL == "draft-context":
    log("Load weight begin. avail mem=139.00 GB")
    print(
        "ValueError: Warning: Target model's context_length (131072) is greater than the derived "
        "context_length (2048). This may lead to incorrect model outputs or CUDA errors. To allow "
        "overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
        flush=True,
    )
    die(1)
log("Load weight begin. avail mem=139.00 GB")
time.sleep(SLOW)
log("Load weight end. elapsed=0.10 s, type=LlamaForCausalLM, avail mem=120.00 GB, mem usage=19.00 GB.")
gpus(20000)
if args.speculative_algorithm:
    log("Load weight begin. avail mem=120.00 GB")
    time.sleep(SLOW)
    log("Load weight end. elapsed=0.05 s, type=LlamaForCausalLMEagle3, avail mem=119.00 GB, mem usage=1.00 GB.")
if FAIL == "oom":
    log("Scheduler hit an exception: Traceback (most recent call last):")
    print(
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.88",
        flush=True,
    )
    log("Received sigquit from a child process. It usually means the child failed.", rank=False)
    die(1)
log("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 233600, K size: 10.00 GB, V size: 10.00 GB")
gpus(70466)
time.sleep(SLOW)
log("Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=30.00 GB")
if FAIL == "cuda-graph":
    log("Scheduler hit an exception: Traceback (most recent call last):")
    print("Exception: Capture cuda graph failed: CUDA error: out of memory", flush=True)
    die(1)
if FAIL == "nccl":
    print("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", flush=True)
    die(1)
if FAIL == "scheduler-exception":
    log("Scheduler hit an exception: Traceback (most recent call last):")
    print("KeyError: 'model.layers.0.self_attn.q_proj.weight'", flush=True)
    die(1)
if FAIL == "crash":
    die(139)
time.sleep(SLOW)
log("Capture target verify CUDA graph end. bs=[1, 2, 4], elapsed=0.10 s, mem usage=1.00 GB, avail mem=29.00 GB.")
if args.speculative_algorithm:
    log("Capture draft extend CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=29.00 GB")
    log("Capture draft extend CUDA graph end. elapsed=0.05 s, mem usage=0.50 GB, avail mem=28.50 GB.")

STATE = {"verify": 0, "accepted": 0, "lines": 0}
steps = args.speculative_num_steps or 0


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, code, obj):
        body = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *a):
        print(
            f'[{ts()}] INFO:     127.0.0.1:1 - "{self.command} {self.path} HTTP/1.1" {a[1] if len(a) > 1 else ""} OK',
            flush=True,
        )

    def do_GET(self):
        if self.path in ("/health", "/health_generate"):
            return self._send(200, b"")
        if self.path in ("/server_info", "/get_server_info"):
            al = (STATE["accepted"] / STATE["verify"]) if STATE["verify"] else None
            st = {"last_gen_throughput": 42.0}
            if al is not None and args.speculative_algorithm:
                st["avg_spec_accept_length"] = al
            return self._send(
                200,
                {
                    "speculative_algorithm": args.speculative_algorithm,
                    "speculative_num_steps": args.speculative_num_steps,
                    "speculative_eagle_topk": args.speculative_eagle_topk,
                    "speculative_num_draft_tokens": args.speculative_num_draft_tokens,
                    "status": "ready",
                    "version": "0.5.23",
                    "internal_states": [st],
                },
            )
        self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        if self.path == "/flush_cache":
            STATE.update(verify=0, accepted=0)
            return self._send(200, b"Cache flushed.")
        if self.path == "/generate":
            m = int(body.get("sampling_params", {}).get("max_new_tokens", 16))
            # deterministic "acceptance": a chain accepting 2 of `steps` drafts per verify
            per = min(3, steps + 1) if steps else 1
            verify = -(-m // per)
            STATE["verify"] += verify
            STATE["accepted"] += m
            # time per verify cycle follows the throughput model: verify(ndt) + steps * draft
            ndt = args.speculative_num_draft_tokens or 1
            cycle = 0.004 + 0.0005 * ndt + 0.002 * steps
            time.sleep(cycle * verify)
            STATE["lines"] += 1
            log(
                f"Decode batch, #running-req: 1, #token: {100 + m}, token usage: 0.01, "
                + (
                    f"accept len: {m / verify:.2f}, accept rate: {(m / verify - 1) / max(1, steps):.2f}, "
                    if steps
                    else ""
                )
                + f"cuda graph: True, gen throughput (token/s): {m / (cycle * verify):.2f}, #queue-req: 0"
            )
            return self._send(
                200,
                {"text": "x" * m, "meta_info": {"completion_tokens": m, "spec_verify_ct": verify, "prompt_tokens": 8}},
            )
        self._send(404, {"detail": "Not Found"})


try:
    srv = ThreadingHTTPServer((args.host, args.port), H)
except OSError as exc:
    print(
        f"[{ts()}] ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
        f"('{args.host}', {args.port}): address already in use",
        flush=True,
    )
    die(1)
threading.Thread(target=srv.serve_forever, daemon=True).start()
if FAIL == "warmup-failed":
    print(f"[{ts()}] Initialization failed. warmup error: Traceback (most recent call last):", flush=True)
    print("RuntimeError: warmup request returned 500", flush=True)
    die(1)
print(f"[{ts()}] The server is fired up and ready to roll!", flush=True)
if FAIL == "crash-after-ready":
    time.sleep(float(os.environ.get("STANDIN_CRASH_AFTER", "1")))
    die(139)
while True:
    time.sleep(1)
