"""The log parser against SGLang's own line formats (as each release's scheduler and server code prints them)."""

from __future__ import annotations

import io
import math
import random

import pytest

from workbench.sglang import logparse
from workbench.sglang.logparse import FAILURE_CLASSES, LogParser, classify, failure_class, parse_server_args, parse_text


@pytest.fixture(autouse=True, params=["compiled", "python"])
def reader(request, monkeypatch):
    """Each test reads its logs both ways: through the compiled sorter and readers (_logscan.c,
    where built) and through the parser's Python alone. (The CLI's own process reads them one way.)"""
    if request.param == "python":
        if "cli" in request.fixturenames:
            pytest.skip("the CLI runs in a process of its own")
        monkeypatch.setattr(logparse, "_native", None)


DECODE_049 = (
    "[2025-07-10 08:15:42 TP0] Decode batch. #running-req: 8, #token: 10536, token usage: 0.05, "
    "accept len: 3.12, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0"
)
DECODE_055 = (
    "[2025-11-10 09:00:00 TP0] Decode batch, #running-req: 8, #token: 10536, token usage: 0.05, "
    "accept len: 3.12, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 1234.56, "
    "#queue-req: 0, "
)
DECODE_0523 = (
    "[2026-11-02 10:00:13 TP0] Decode batch, #running-req: 24, #token: 233600, token usage: 0.66, "
    "accept len: 3.05, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 239.06, "
    "#queue-req: 2"
)
DECODE_054_ITER = (
    "[2025-10-24 11:00:00 TP0] Decode batch [1234], #running-req: 3, #token: 900, "
    "token usage: 0.01, accept len: 2.50, accept rate: 0.30, cuda graph: False, "
    "gen throughput (token/s): 50.00, #queue-req: 1, "
)
DECODE_TP1_MS = (
    "[2026-11-02 10:00:13.250] Decode batch, #running-req: 1, #token: 100, token usage: 0.00, "
    "accept len: 1.12, accept rate: 0.02, cuda graph: False, gen throughput (token/s): 51.20, "
    "#queue-req: 0"
)
DECODE_HYBRID_055 = (
    "[2025-11-10 09:00:00 DP1 TP8] Decode batch, #running-req: 8, #full token: 10536, "
    "full token usage: 0.05, #swa token: 100, swa token usage: 0.01, accept len: 3.12, "
    "accept rate: 0.62, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0, "
)
DECODE_HYBRID_049 = (
    "[2025-07-10 08:15:42 TP0] Decode batch. #running-req: 8, #token: full=10536, swa=100, "
    "token usage: full=0.05, swa=0.01, accept len: 3.12, cuda graph: True, "
    "gen throughput (token/s): 1234.56, #queue-req: 0"
)
DECODE_NOSPEC = (
    "[2026-11-02 10:00:13 TP0] Decode batch, #running-req: 24, #token: 233600, token usage: 0.66, "
    "cuda graph: True, gen throughput (token/s): 239.06, #queue-req: 2, "
    "est. decode TFLOPS/s (per GPU): 12.50"
)
DECODE_DSPARK = (
    "[2026-11-02 10:00:13 TP0] Decode batch, #running-req: 4, #token: 2000, token usage: 0.10, "
    "accept len: 2.40, accept rate: 0.35, cap len: 5.00, block accept len: 4.10, "
    "cuda graph: True, gen throughput (token/s): 94.00, #queue-req: 0"
)

PREFILL_049 = (
    "[2025-07-10 08:15:40 TP0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, "
    "#token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0"
)
PREFILL_055 = (
    "[2025-11-10 08:59:58 TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, "
    "token usage: 0.01, #running-req: 7, #queue-req: 0, "
)
PREFILL_0523 = (
    "[2026-11-02 10:00:12 TP0] Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, "
    "token usage: 0.01, #running-req: 23, #queue-req: 2, #pending-token: 0, cuda graph: False, "
    "input throughput (token/s): 10234.50"
)


def one(line: str) -> dict:
    recs = parse_text(line + "\n").records()
    assert len(recs) == 1, recs
    return recs[0]


@pytest.mark.parametrize(
    "line, expect",
    [
        (
            DECODE_049,
            dict(
                running_req=8,
                tokens=10536,
                token_usage=0.05,
                accept_len=3.12,
                accept_rate=None,
                gen_throughput=1234.56,
                queue_req=0,
                cuda_graph=True,
                rank="TP0",
            ),
        ),
        (DECODE_055, dict(accept_len=3.12, accept_rate=0.62, queue_req=0, time="2025-11-10 09:00:00")),
        (
            DECODE_0523,
            dict(
                running_req=24,
                tokens=233600,
                token_usage=0.66,
                accept_len=3.05,
                accept_rate=0.68,
                gen_throughput=239.06,
                queue_req=2,
            ),
        ),
        (DECODE_054_ITER, dict(iter=1234, accept_len=2.5, cuda_graph=False, queue_req=1)),
        (DECODE_TP1_MS, dict(time="2026-11-02 10:00:13.250", accept_len=1.12, gen_throughput=51.2)),
        (DECODE_HYBRID_055, dict(tokens=10536, token_usage=0.05, accept_len=3.12, rank="DP1 TP8")),
        (DECODE_HYBRID_049, dict(tokens=10536, token_usage=0.05, accept_len=3.12)),
        (DECODE_NOSPEC, dict(accept_len=None, accept_rate=None, gen_throughput=239.06, queue_req=2)),
        (DECODE_DSPARK, dict(accept_len=2.4, accept_rate=0.35, gen_throughput=94.0)),
    ],
)
def test_decode_lines_of_every_generation(line, expect):
    rec = one(line)
    assert rec["kind"] == "decode"
    for key, value in expect.items():
        assert rec.get(key) == value, (key, rec)
    assert "rank" not in rec if line.startswith("[2026-11-02 10:00:13.250]") else True


@pytest.mark.parametrize(
    "line, expect",
    [
        (
            PREFILL_049,
            dict(new_seq=1, new_token=512, cached_token=0, tokens=0, token_usage=0.0, running_req=0, queue_req=0),
        ),
        (PREFILL_055, dict(new_token=512, tokens=None, token_usage=0.01, running_req=7, queue_req=0)),
        (PREFILL_0523, dict(running_req=23, queue_req=2, pending_token=0, input_throughput=10234.5, cuda_graph=False)),
    ],
)
def test_prefill_lines_of_every_generation(line, expect):
    rec = one(line)
    assert rec["kind"] == "prefill"
    for key, value in expect.items():
        assert rec.get(key) == value, (key, rec)


def test_reference_regex_agrees_on_a_mixed_log():
    """A log mixing every shape: the bulk path and the tolerant path must agree line by line."""
    import re

    ref = re.compile(
        r"Decode batch(?: \[\d+\])?[.,] #running-req: (\d+), (?:.*?accept len: ([\d.]+), "
        r"(?:accept rate: ([\d.]+), )?)?.*?gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)"
    )
    shapes = [DECODE_049, DECODE_055, DECODE_0523, DECODE_054_ITER, DECODE_TP1_MS, DECODE_NOSPEC, DECODE_DSPARK]
    rnd = random.Random(7)
    lines = [rnd.choice(shapes).replace("#running-req: ", f"#running-req: {i}0") for i in range(300)]
    scan = parse_text("\n".join(lines) + "\n")
    assert len(scan.decode) == 300
    for i, line in enumerate(lines):
        m = ref.search(line)
        assert scan.decode.column("running_req")[i] == float(m.group(1))
        al = scan.decode.column("accept_len")[i]
        assert (math.isnan(al) and m.group(2) is None) or al == float(m.group(2))
        ar = scan.decode.column("accept_rate")[i]
        assert (math.isnan(ar) and m.group(3) is None) or ar == float(m.group(3))
        assert scan.decode.column("gen_throughput")[i] == float(m.group(4))
        assert scan.decode.column("queue_req")[i] == float(m.group(5))


STARTUP_0523 = """\
[2026-11-02 10:00:00] server_args={'model_path': '/m', 'speculative_algorithm': 'EAGLE3', 'speculative_num_steps': 5, 'tp_size': 8}
[2026-11-02 10:00:01 TP0] Load weight begin. avail mem=78.00 GB
[2026-11-02 10:00:02 TP0] Load weight end. elapsed=3.20 s, type=DeepseekV3ForCausalLM, avail mem=20.00 GB, mem usage=58.00 GB.
[2026-11-02 10:00:02 TP0] Load weight begin. avail mem=20.00 GB
[2026-11-02 10:00:03 TP0] Load weight end. elapsed=0.50 s, type=LlamaForCausalLMEagle3, avail mem=19.00 GB, mem usage=1.00 GB.
[2026-11-02 10:00:03 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 233600, KV size: 10.00 GB
[2026-11-02 10:00:03 TP0] Memory pool end. avail mem=9.00 GB
[2026-11-02 10:00:04 TP0] Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=6, avail mem=8.00 GB
[2026-11-02 10:00:16 TP0] Capture target verify CUDA graph end. bs=[1, 2, 4], elapsed=12.10 s, mem usage=1.00 GB, avail mem=7.00 GB.
[2026-11-02 10:00:16 TP0] Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4], avail mem=7.00 GB
[2026-11-02 10:01:18 TP0] Capture draft decode CUDA graph end. elapsed=62.70 s, mem usage=1.00 GB, avail mem=6.00 GB.
[2026-11-02 10:01:18 TP0] Capture draft extend CUDA graph begin. backend=full, num_tokens_per_req=6, avail mem=6.00 GB
[2026-11-02 10:01:20 TP0] Capture draft extend CUDA graph end. elapsed=2.00 s, mem usage=0.50 GB, avail mem=5.50 GB.
[2026-11-02 10:01:25] INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)
[2026-11-02 10:01:26] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK
[2026-11-02 10:01:26] The server is fired up and ready to roll!
"""

STARTUP_055 = """\
[2025-11-10 08:59:00] server_args=ServerArgs(model_path='/m', tp_size=1, speculative_algorithm='EAGLE3', speculative_num_steps=3, disable_cuda_graph=False)
[2025-11-10 08:59:01] Load weight begin. avail mem=78.00 GB
[2025-11-10 08:59:02] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=62.00 GB, mem usage=16.00 GB.
[2025-11-10 08:59:02] Load weight begin. avail mem=62.00 GB
[2025-11-10 08:59:03] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=61.00 GB, mem usage=1.00 GB.
[2025-11-10 08:59:03] KV Cache is allocated. #tokens: 400000, K size: 20.00 GB, V size: 20.00 GB
[2025-11-10 08:59:04] Capture cuda graph begin. This can take up to several minutes. avail mem=20.00 GB
[2025-11-10 08:59:10] Capture cuda graph end. Time elapsed: 6.00 s. mem usage=1.00 GB. avail mem=19.00 GB.
[2025-11-10 08:59:10] Capture draft cuda graph begin. This can take up to several minutes. avail mem=19.00 GB
[2025-11-10 08:59:20] Capture draft cuda graph end. Time elapsed: 10.00 s. mem usage=1.00 GB. avail mem=18.00 GB.
[2025-11-10 08:59:20] Capture draft extend cuda graph begin. This can take up to several minutes. avail mem=18.00 GB
[2025-11-10 08:59:22] Capture draft extend cuda graph end. Time elapsed: 2.00 s. mem usage=0.50 GB. avail mem=17.50 GB.
[2025-11-10 08:59:30] The server is fired up and ready to roll!
"""


@pytest.mark.parametrize("log", [STARTUP_0523, STARTUP_055], ids=["0.5.23", "0.5.5"])
def test_milestones_in_order_with_roles(log):
    scan = parse_text(log)
    ms = [(m["name"], m.get("role"), m.get("phase")) for m in scan.milestones()]
    assert ms[0] == ("server_args", None, None)
    assert ("weights_end", "target", None) in ms and ("weights_end", "draft", None) in ms
    assert ms.index(("weights_begin", "target", None)) < ms.index(("weights_begin", "draft", None))
    assert [n for n, _, _ in ms].count("kv_cache") == 1
    roles = {(n, r) for n, r, _ in ms if n.startswith("graph")}
    assert roles == {
        ("graph_begin", "target"),
        ("graph_end", "target"),
        ("graph_begin", "draft"),
        ("graph_end", "draft"),
    }
    assert ms[-1] == ("ready", None, None)
    assert scan.ready
    assert not scan.failures()
    kv = next(m for m in scan.milestones() if m["name"] == "kv_cache")
    assert kv["tokens"] in (233600, 400000)
    ends = [m for m in scan.milestones() if m["name"] == "graph_end"]
    assert all(m["elapsed_s"] > 0 for m in ends)


FAILURES = [
    (
        "oom",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.88",
    ),
    ("oom", "Not enough memory. Please try to increase --mem-fraction-static."),
    (
        "oom",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 139.81 GiB of which 1.02 GiB is free.",
    ),
    (
        "port-in-use",
        "[2026-11-02 10:01:25] ERROR:    [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 30000): address already in use",
    ),
    (
        "port-in-use",
        "ValueError: nccl_port at 30005 is not available in 30 seconds. nccl_port is used by a "
        "process already. process.name()='python3'",
    ),
    ("port-in-use", "[2026-11-02 10:00:00] Port is already in use. dist_init_port=5000 port_base=30000"),
    (
        "draft-context",
        "ValueError: Warning: Target model's context_length (262144) is greater than the derived "
        "context_length (2048). This may lead to incorrect model outputs or CUDA errors. Note that "
        "the derived context_length may differ from max_position_embeddings in the model's config. "
        "To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    ),
    # SGLang says "User-specified" when the model is not the draft (model_config._derive_context_length)
    (
        "context-length",
        "ValueError: User-specified context_length (8192) is greater than the derived "
        "context_length (2048). Please use a shorter context length.",
    ),
    ("cuda-graph", "Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered"),
    ("cuda-graph", "Exception: Capture cuda graph failed: custom_all_reduce.cuh:37: CUDA error: invalid argument"),
    ("cuda-graph", "RuntimeError: Capture prefill CUDA graph failed: out of memory"),
    ("nccl", "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"),
    (
        "nccl",
        "torch.distributed.DistBackendError: NCCL communicator was aborted: ncclInternalError: Internal check failed.",
    ),
    ("nccl", "RuntimeError: custom_all_reduce.cuh:368: CUDA error: an illegal memory access was encountered"),
    ("scheduler-exception", "[2026-11-02 10:00:14 TP0] Scheduler hit an exception: Traceback (most recent call last):"),
    ("warmup-failed", "[2026-11-02 10:00:20] Initialization failed. warmup error: Traceback (most recent call last):"),
    (
        "process-died",
        "[2026-11-02 10:00:20] Rank 0 scheduler died during initialization (exit code: -9). If exit "
        "code is -9 (SIGKILL), a common cause is the OS OOM killer.",
    ),
    ("process-died", "[2025-11-10 09:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs."),
    ("process-died", "[2026-11-02 10:00:14] Received sigquit from a child process. It usually means the child failed."),
]


@pytest.mark.parametrize("cls, line", FAILURES)
def test_failure_lines_are_classified(cls, line):
    assert failure_class(line) == cls
    scan = parse_text(line + "\n")
    fails = scan.failures()
    assert len(fails) == 1 and fails[0]["class"] == cls
    assert fails[0]["hint"]


def test_every_failure_class_is_covered():
    assert {c for c, _ in FAILURES} == set(FAILURE_CLASSES)


def test_traceback_failures_take_the_time_of_the_line_above():
    log = (
        "[2026-11-02 10:00:14 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/scheduler.py", line 2846, in run_scheduler_process\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "[2026-11-02 10:00:15] Received sigquit from a child process. It usually means the child failed.\n"
    )
    scan = parse_text(log)
    fails = scan.failures()
    assert [f["class"] for f in fails] == ["scheduler-exception", "oom", "process-died"]
    assert fails[1]["time"] == "2026-11-02 10:00:14" and fails[1]["line"] == 3
    verdict = classify(scan.events, exit_code=1)
    assert verdict["class"] == "oom"  # the most specific cause wins


def test_classify_without_text_uses_the_process_state():
    assert classify([], exit_code=None, process_alive=True) is None
    died = classify([], exit_code=-9, process_alive=False)
    assert died["class"] == "process-died" and died["exit_code"] == -9


def test_exit_minus_nine_hints_at_the_oom_killer():
    f = parse_text(FAILURES[16][1] + "\n").failures()[0]
    assert f["exit_code"] == -9 and "OOM killer" in f["hint"]


def test_incremental_feeding_at_any_byte_boundary_gives_the_same_records():
    log = (STARTUP_0523 + "\n".join([PREFILL_0523, DECODE_0523] * 30) + "\n" + FAILURES[0][1] + "\n").encode()
    whole = parse_text(log).records()
    rnd = random.Random(3)
    for _ in range(5):
        p = LogParser()
        recs, pos = [], 0
        while pos < len(log):
            step = rnd.randint(1, 200)
            recs += p.feed(log[pos : pos + step]).records()
            pos += step
        recs += p.finish().records()
        assert recs == whole
        assert p.bytes == len(log)


def test_lines_without_newline_are_kept_until_complete():
    p = LogParser()
    assert p.feed(DECODE_0523[:50].encode()).records() == []
    recs = p.feed((DECODE_0523[50:] + "\n").encode()).records()
    assert len(recs) == 1 and recs[0]["accept_len"] == 3.05 and recs[0]["line"] == 1


def test_weight_roles_survive_chunk_boundaries():
    lines = STARTUP_055.splitlines(keepends=True)
    p = LogParser()
    ms = []
    for line in lines:
        ms += p.feed(line).milestones()
    roles = [m["role"] for m in ms if m["name"] == "weights_begin"]
    assert roles == ["target", "draft"]


def test_server_args_dict_and_dataclass_repr():
    d = parse_server_args(STARTUP_0523.splitlines()[0])
    assert d["speculative_num_steps"] == 5 and d["tp_size"] == 8
    r = parse_server_args(STARTUP_055.splitlines()[0])
    assert r["speculative_algorithm"] == "EAGLE3" and r["disable_cuda_graph"] is False
    odd = parse_server_args("server_args=ServerArgs(model_path='/m', dtype=torch.bfloat16, tp_size=2)")
    assert odd["tp_size"] == 2 and odd["dtype"] == "torch.bfloat16"


def test_crlf_and_binary_garbage_do_not_break_parsing():
    log = (DECODE_0523 + "\r\n").encode() + b"\xff\xfe garbage\n" + (PREFILL_055 + "\n").encode()
    recs = parse_text(log).records()
    assert [r["kind"] for r in recs] == ["decode", "prefill"]
    assert recs[1]["line"] == 3


def test_cli_logs_parse_json_lines(cli, tmp_path):
    import json

    log = tmp_path / "server.log"
    log.write_text(STARTUP_055 + DECODE_055 + "\n" + FAILURES[3][1] + "\n")
    r = cli("logs", "parse", str(log), "--json")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    kinds = [x["kind"] for x in recs]
    assert kinds.count("milestone") == 13 and kinds[-2:] == ["decode", "failure"]
    dec = recs[-2]
    assert {"time", "accept_len", "accept_rate", "gen_throughput", "running_req", "queue_req", "token_usage"} <= set(
        dec
    )
    assert dec["accept_len"] == 3.12 and recs[-1]["class"] == "port-in-use"
    text = cli("logs", "parse", str(log), "--kind", "failure")
    assert text.returncode == 0 and "port-in-use" in text.stdout and "decode" not in text.stdout
    missing = cli("logs", "parse", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "nope.log: no such file" in missing.stderr


# ---------------------------------------------------------------------------------------------
# Real logs as they reach us: SGLang's lines (their shapes from 0.4.x to 0.5.23 releases, modelled
# on logs pasted in SGLang's own issue tracker: multi-rank TP0/TP1 starts, DP attention ranks,
# NPU servers, tqdm capture bars) behind whatever the deployment puts in front of them.
# ---------------------------------------------------------------------------------------------
PREFIXES = {
    "plain": "",
    "indented": "    ",
    "tab": "\t",
    "compose": "sglang-1  | ",
    "compose-long": "deepseek-router-sglang-worker-12  | ",
    "kubectl": "2025-08-11T21:13:51.123456789Z ",
    "journald": "Aug 11 21:13:51 gpu-node-3 python3[21734]: ",
    "ray": "(SGLangEngine pid=4411, ip=10.0.0.2) ",
    "bracketed-tag": "[worker-0] ",
    "tqdm-glued": "Capturing batches (bs=1 avail_mem=10.01 GB): 100%|██████████| 52/52 [00:05<00:00,  9.50it/s]",
}

CORPUS = [
    # (line, kind, expected fields)
    (
        "[2025-03-04 00:36:47 TP1] Decode batch. #running-req: 3, #token: 1290, token usage: 0.00, "
        "gen throughput (token/s): 88.12, #queue-req: 0",
        "decode",
        dict(running_req=3, tokens=1290, gen_throughput=88.12, accept_len=None, rank="TP1"),
    ),
    (
        "[2025-08-11 21:13:56 DP1 TP1] Decode batch. #running-req: 12, #token: 30312, token usage: 0.04, "
        "accept len: 2.71, cuda graph: True, gen throughput (token/s): 1422.90, #queue-req: 0",
        "decode",
        dict(running_req=12, accept_len=2.71, cuda_graph=True, rank="DP1 TP1"),
    ),
    (
        "[2026-05-28 02:59:59 TP0] Decode batch, #running-req: 45, #token: 44672, token usage: 0.33, "
        "accept len: 2.10, accept rate: 0.32, npu graph: False, gen throughput (token/s): 863.65, "
        "#queue-req: 81, ",
        "decode",
        dict(running_req=45, accept_rate=0.32, cuda_graph=False, queue_req=81),
    ),
    (
        "[2026-05-28 02:59:59 TP0] Prefill batch, #new-seq: 1, #new-token: 896, #cached-token: 0, "
        "token usage: 0.33, #running-req: 45, #queue-req: 81, #pending-token: 70187, npu graph: False, "
        "input throughput (token/s): 23512.07",
        "prefill",
        dict(new_token=896, running_req=45, pending_token=70187, input_throughput=23512.07),
    ),
    (
        "[2026-11-02 10:00:13.250 PP1 TP3] Decode batch [88], #running-req: 1, #token: 100, "
        "token usage: 0.00, accept len: 1.12, accept rate: 0.02, cuda graph: False, "
        "gen throughput (token/s): 51.20, #queue-req: 0",
        "decode",
        dict(iter=88, accept_len=1.12, time="2026-11-02 10:00:13.250", rank="PP1 TP3"),
    ),
    (
        "[2025-11-10 09:00:00 DP1 TP8 EP8] Decode batch, #running-req: 8, #full token: 10536, "
        "full token usage: 0.05, #swa token: 100, swa token usage: 0.01, accept len: 3.12, "
        "accept rate: 0.62, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0, ",
        "decode",
        dict(tokens=10536, token_usage=0.05, accept_len=3.12, rank="DP1 TP8 EP8"),
    ),
]


def _fields(rec, expect):
    return {k: rec.get(k) for k in expect}


@pytest.mark.parametrize("prefix", list(PREFIXES), ids=list(PREFIXES))
@pytest.mark.parametrize("n", range(len(CORPUS)))
def test_bulk_lines_behind_any_prefix_parse_as_plain(prefix, n):
    line, kind, expect = CORPUS[n]
    rec = one(PREFIXES[prefix] + line)
    assert rec["kind"] == kind and _fields(rec, expect) == expect
    plain = one(line)
    assert {k: v for k, v in rec.items() if k != "line"} == {k: v for k, v in plain.items() if k != "line"}


@pytest.mark.parametrize("prefix", list(PREFIXES), ids=list(PREFIXES))
def test_a_mixed_prefixed_log_keeps_every_line_in_order(prefix):
    """Prefixed bulk lines among prefixed startup lines: nothing dropped, nothing raised, line
    numbers and order kept (the old parser crashed here with IndexError)."""
    p = PREFIXES[prefix]
    log = "".join(p + x + "\n" for x in STARTUP_0523.splitlines()[:6])
    log += "".join(p + line + "\n" for line, _, _ in CORPUS)
    recs = parse_text(log).records()
    assert [r["kind"] for r in recs][-len(CORPUS) :] == [k for _, k, _ in CORPUS]
    assert [r["line"] for r in recs] == sorted(r["line"] for r in recs)
    ms = [(r["name"], r.get("role")) for r in recs if r["kind"] == "milestone"]
    assert ms[:5] == [
        ("server_args", None),
        ("weights_begin", "target"),
        ("weights_end", "target"),
        ("weights_begin", "draft"),
        ("weights_end", "draft"),
    ]


def test_a_bulk_line_without_any_stamp_is_still_read():
    rec = one(
        "Decode batch. #running-req: 2, #token: 90, token usage: 0.00, accept len: 2.00, "
        "cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0"
    )
    assert rec["kind"] == "decode" and rec["accept_len"] == 2.0 and rec["time"] is None


def test_tqdm_bar_glued_before_a_milestone():
    log = (
        "[2026-01-20 02:40:20 DP1 TP1] Load weight begin. avail mem=70.00 GB\n"
        "Capturing batches (bs=8 avail_mem=9.10 GB):  40%|████      | 21/52 [00:03<00:04,  7.40it/s]\r"
        "Capturing batches (bs=1 avail_mem=9.01 GB): 100%|██████████| 52/52 [00:05<00:00,  9.50it/s]"
        "[2026-01-20 02:40:29 DP1 TP1] Load weight end. elapsed=9.20 s, type=Qwen3ForCausalLM, "
        "avail mem=40.00 GB, mem usage=30.00 GB.\n"
    )
    ms = parse_text(log).milestones()
    assert [(m["name"], m["role"], m["time"], m["rank"]) for m in ms] == [
        ("weights_begin", "target", "2026-01-20 02:40:20", "DP1 TP1"),
        ("weights_end", "target", "2026-01-20 02:40:29", "DP1 TP1"),
    ]


def test_every_rank_loads_its_target_first():
    """TP0 and TP1 each print the target's load, then the draft's: the second rank's target load
    is the target's (a count over the whole log called it the draft)."""
    log = "".join(
        f"[2026-11-02 10:00:0{i} TP{r}] {msg}\n"
        for i, (r, msg) in enumerate(
            [
                (0, "Load weight begin. avail mem=78.00 GB"),
                (1, "Load weight begin. avail mem=78.00 GB"),
                (1, "Load weight end. elapsed=3.20 s, avail mem=20.00 GB, mem usage=58.00 GB."),
                (0, "Load weight end. elapsed=3.20 s, avail mem=20.00 GB, mem usage=58.00 GB."),
                (0, "Load weight begin. avail mem=20.00 GB"),
                (1, "Load weight begin. avail mem=20.00 GB"),
                (0, "Load weight end. elapsed=0.50 s, avail mem=19.00 GB, mem usage=1.00 GB."),
                (1, "Load weight end. elapsed=0.50 s, avail mem=19.00 GB, mem usage=1.00 GB."),
            ]
        )
    )
    got = [(m["rank"], m["name"], m["role"]) for m in parse_text(log).milestones()]
    assert got == [
        ("TP0", "weights_begin", "target"),
        ("TP1", "weights_begin", "target"),
        ("TP1", "weights_end", "target"),
        ("TP0", "weights_end", "target"),
        ("TP0", "weights_begin", "draft"),
        ("TP1", "weights_begin", "draft"),
        ("TP0", "weights_end", "draft"),
        ("TP1", "weights_end", "draft"),
    ]


def test_a_restart_in_the_same_log_counts_weight_loads_afresh():
    first = STARTUP_055.splitlines()[:5]
    log = "\n".join(first + first) + "\n"
    roles = [m["role"] for m in parse_text(log).milestones() if m["name"] == "weights_end"]
    assert roles == ["target", "draft", "target", "draft"]


@pytest.mark.parametrize(
    "text, value", [("1e999", None), ("inf", None), ("nan", None), ("1e+30", 1e30), ("3.", 3.0), ("2.50", 2.5)]
)
def test_accept_len_is_never_cut_to_its_leading_digits(text, value):
    rec = one(DECODE_0523.replace("accept len: 3.05", f"accept len: {text}"))
    assert rec["accept_len"] == value
    if value is None:
        assert rec["nonfinite"] == ["accept_len"]
    else:
        assert "nonfinite" not in rec
    assert rec["accept_rate"] == 0.68 and rec["gen_throughput"] == 239.06


def test_a_missing_field_is_not_called_nonfinite():
    rec = one(DECODE_049)
    assert rec["accept_rate"] is None and "nonfinite" not in rec


SERVER_ARGS = (
    "[2025-03-16 09:55:55] server_args=ServerArgs(model_path='/m', host='0.0.0.0', port=30000, "
    "nccl_port=None, tp_size=2, dist_init_addr=None)"
)


@pytest.mark.parametrize(
    "line, which, port",
    [
        ("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:30005')", "internal", 30005),
        ("zmq.error.ZMQError: Address already in use", "internal", None),
        (
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
            "address. port: 42173, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
            "internal",
            42173,
        ),
        (
            "[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:25641 (errno: 98 - "
            "Address already in use).",
            "internal",
            25641,
        ),
        (
            "[2025-03-16 09:56:10] ERROR:    [Errno 98] error while attempting to bind on address "
            "('0.0.0.0', 30000): address already in use",
            "server",
            30000,
        ),
    ],
)
@pytest.mark.parametrize("with_args", [True, False])
def test_whose_port_is_taken(line, which, port, with_args):
    log = (SERVER_ARGS + "\n" if with_args else "") + line + "\n"
    (f,) = parse_text(log).failures()
    assert f["class"] == "port-in-use" and f["what"] == which and f.get("port") == port
    if which == "internal":
        assert "not --port" in f["hint"]
    else:
        assert "--port is taken" in f["hint"]


def test_cuda_error_while_capturing_is_a_graph_failure():
    log = (
        "[2026-11-02 10:00:04 TP0] Capture cuda graph begin. This can take up to several minutes. "
        "avail mem=8.00 GB\nTraceback (most recent call last):\n"
        "RuntimeError: CUDA error: operation not permitted when stream is capturing\n"
    )
    v = classify(parse_text(log).events, exit_code=1)
    assert v["class"] == "cuda-graph"


def test_context_length_warning_is_not_a_failure():
    """With SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN set, SGLang logs the message and goes on
    (model_config._derive_context_length); only the raised ValueError is a failure."""
    log = (
        "[2026-11-02 10:00:01 TP0] Warning: Target model's context_length (262144) is greater than the "
        "derived context_length (2048). This may lead to incorrect model outputs or CUDA errors. Note that "
        "the derived context_length may differ from max_position_embeddings in the model's config.\n"
        "[2026-11-02 10:00:01 TP0] Overriding the draft model's max_position_embeddings to 262144.\n"
    )
    scan = parse_text(log)
    assert scan.failures() == [] and classify(scan.events) is None
    assert [(r["kind"], r["name"], r["role"]) for r in scan.records()] == [("warning", "context-override", "draft")] * 2


def test_kv_pool_oom_says_increase():
    (f,) = parse_text(FAILURES[0][1] + "\n").failures()
    assert f["what"] == "kv-pool" and "increase --mem-fraction-static" in f["hint"]
    (g,) = parse_text(FAILURES[2][1] + "\n").failures()
    assert g["what"] == "cuda-alloc" and "lower --mem-fraction-static" in g["hint"]


def test_streaming_memory_does_not_grow_with_the_log(tmp_path):
    """``stream_records`` over a log 4x longer allocates no more at its peak (tracemalloc)."""
    import tracemalloc

    from workbench.sglang.logparse import stream_records

    block = (
        "\n".join(
            [
                PREFILL_0523,
                DECODE_0523,
                '[2026-11-02 10:00:13] INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK',
            ]
            * 2000
        )
        + "\n"
    )
    peaks = []
    for reps in (4, 16):
        p = tmp_path / f"log{reps}"
        p.write_text(STARTUP_0523 + block * reps)
        tracemalloc.start()
        n = sum(1 for _ in stream_records(p, chunk=1 << 20))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert n == 4000 * reps + len(parse_text(STARTUP_0523).records())
    assert peaks[1] < 1.3 * peaks[0] and peaks[1] < 48 << 20


def test_cli_streams_prefixed_logs_as_strict_json_lines(cli, tmp_path):
    import json

    log = tmp_path / "compose.log"
    log.write_text(
        "".join("sglang-1  | " + x + "\n" for x in STARTUP_055.splitlines())
        + "sglang-1  | "
        + DECODE_055.replace("accept len: 3.12", "accept len: 1e999")
        + "\n"
        + "sglang-1  | zmq.error.ZMQError: Address already in use\n"
    )
    r = cli("logs", "parse", str(log), "--json")
    assert r.returncode == 0, r.stderr
    recs = [
        json.loads(x, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}")) for x in r.stdout.splitlines()
    ]
    assert [x["kind"] for x in recs][-2:] == ["decode", "failure"]
    assert recs[-2]["accept_len"] is None and recs[-2]["nonfinite"] == ["accept_len"]
    assert recs[-1]["what"] == "internal"
    assert [x["line"] for x in recs] == sorted(x["line"] for x in recs)


def test_follower_events_stay_bounded_and_keep_the_first_of_each_class():
    from workbench.sglang.follower import EVENTS_KEPT, Follower

    f = Follower()
    f.feed((STARTUP_0523 + FAILURES[3][1] + "\n").encode(), 0)
    off = f.offset
    chunk = ("".join(f"[2026-11-02 10:00:14 TP0] Scheduler hit an exception: {i}\n" for i in range(1000))).encode()
    for _ in range(10):
        f.feed(chunk, off)
        off = f.offset
    assert len(f.events) <= EVENTS_KEPT
    assert classify(f.events)["class"] == "port-in-use" and f.ready
    assert "server_args" in f.progress()


def test_follower_counts_and_tails_lines_alike_at_any_chunking():
    from workbench.sglang.follower import TAIL_LINES, Follower

    rnd = random.Random(5)
    shapes = [DECODE_0523, "tqdm 10%\rtqdm 20%", "plain", "", "crlf\r\nnext", PREFILL_0523]
    data = ("\n".join(rnd.choice(shapes) for _ in range(3 * TAIL_LINES)) + "\n").encode()
    whole = Follower()
    whole.feed(data, 0)
    parts, off = Follower(), 0
    while off < len(data):
        step = rnd.randint(1, 30000)
        parts.feed(data[off : off + step], off)
        off += step
    ref = data.decode().splitlines()
    assert whole.total_lines == parts.total_lines == len(ref)
    assert list(whole.tail) == list(parts.tail) == list(enumerate(ref, 1))[-TAIL_LINES:]
    assert whole.decode_lines == parts.decode_lines == sum(1 for x in ref if "Decode batch" in x)
    assert whole.series["accept_len"][-1] == 3.05 and len(whole.series["accept_len"]) <= 240


def test_streamed_records_equal_record_by_record():
    """The column-wise record stream and ``record(i)`` agree on every kind of bulk line."""
    lines = [PREFIXES[p] + line for p in PREFIXES for line, _, _ in CORPUS]
    lines += [DECODE_0523.replace("accept len: 3.05", f"accept len: {v}") for v in ("1e999", "nan", "-inf", "2")]
    lines += [DECODE_049, DECODE_HYBRID_049, DECODE_DSPARK, PREFILL_049, PREFILL_055, DECODE_NOSPEC]
    scan = parse_text("\n".join(lines) + "\n")
    for cols in (scan.decode, scan.prefill):
        assert list(cols.iter_records()) == [cols.record(i) for i in range(len(cols))]
    assert len(scan.records()) == len(lines)


class _ReadOnly(io.RawIOBase):
    """A binary file object with read() and no readinto()."""

    def __init__(self, data: bytes):
        self._f = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)

    readinto = None  # type: ignore[assignment]


@pytest.mark.parametrize("chunk", [7, 64, 700, 1 << 21])
@pytest.mark.parametrize("ending", ["\n", ""], ids=["newline", "no-newline"])
def test_streaming_any_file_at_any_chunk_gives_the_records_of_the_whole(chunk, ending):
    """Lines longer than the read buffer, a last line with no newline, a file object without
    readinto(), CRLF and a character split between two reads: the stream's records are the
    whole text's."""
    from workbench.sglang.logparse import iter_scans

    text = STARTUP_0523 + "\r\n".join([DECODE_0523, PREFILL_0523, "é € ✓", DECODE_049 * 3, FAILURES[3][1]]) + ending
    data = text.encode()
    want = parse_text(data).records()
    assert want == parse_text(text).records() and len(want) > 10
    for source in (io.BytesIO(data), _ReadOnly(data)):
        got = []
        for scan in iter_scans(source, chunk):
            got += scan.records()
        assert got == want


def test_feed_lines_refuses_to_follow_a_partial_line():
    p = LogParser()
    p.feed(DECODE_0523[:40].encode())
    with pytest.raises(ValueError, match="partial line"):
        p.feed_lines(b"x\n")


@pytest.mark.parametrize(
    "args, after_target, cls",
    [
        ("context_length=8192", False, "context-length"),  # the target's own check, before any weights
        ("context_length=8192", True, "draft-context"),  # after the target's weights: the draft's config
        ("context_length=None", False, "draft-context"),  # no --context-length: only the draft can exceed
    ],
)
def test_049_user_specified_context_failure_is_placed_by_the_log(args, after_target, cls):
    """SGLang 0.4.9 raises "User-specified context_length ..." for the target and the draft alike
    (model_config.py there); where it falls in the start says whose it is."""
    log = f"[2025-07-10 08:15:00] server_args=ServerArgs(model_path='/m', port=30000, {args})\n"
    if after_target:
        log += (
            "[2025-07-10 08:15:01] Load weight begin. avail mem=78.00 GB\n"
            "[2025-07-10 08:15:02] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
            "avail mem=62.00 GB, mem usage=16.00 GB.\n"
        )
    log += (
        "ValueError: User-specified context_length (8192) is greater than the derived context_length (2048). "
        "This may lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, set the "
        "env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1\n"
    )
    assert classify(parse_text(log).events, exit_code=1)["class"] == cls


def test_049_logged_context_warning_is_a_warning():
    rec = one(
        "[2025-07-10 08:15:00] Warning: User-specified context_length (8192) is greater than the derived "
        "context_length (2048). This may lead to incorrect model outputs or CUDA errors."
    )
    assert (rec["kind"], rec["name"]) == ("warning", "context-override") and "role" not in rec


@pytest.mark.parametrize("compiled", [False, True], ids=["columns", "compiled"])
def test_json_lines_are_json_dumps_of_the_records_byte_for_byte(compiled):
    import io
    import json

    from workbench.sglang.logjson import stream_json_bytes, stream_json_lines
    from workbench.sglang.logparse import stream_records

    lines = [PREFIXES[p] + line for p in PREFIXES for line, _, _ in CORPUS]
    lines += [DECODE_0523.replace("accept len: 3.05", f"accept len: {v}") for v in ("1e999", "nan", "-inf", "2")]
    lines += [
        DECODE_049,
        DECODE_HYBRID_049,
        DECODE_DSPARK,
        PREFILL_049,
        PREFILL_055,
        DECODE_NOSPEC,
        '[2026-11-02 10:00:13 odd\\"rank] ' + DECODE_0523.split("] ", 1)[1],
    ]
    log = (STARTUP_0523 + "\n".join(lines) + "\n" + FAILURES[3][1] + "\n").encode()
    want = [json.dumps(r) for r in stream_records(io.BytesIO(log), chunk=700)]
    assert list(stream_json_lines(io.BytesIO(log), chunk=700, compiled=compiled)) == want
    assert list(stream_json_lines(io.BytesIO(log), ["decode", "failure"], chunk=700, compiled=compiled)) == [
        w for w in want if json.loads(w)["kind"] in ("decode", "failure")
    ]
    assert (
        b"".join(stream_json_bytes(io.BytesIO(log), chunk=700, compiled=compiled)) == ("\n".join(want) + "\n").encode()
    )


_RECORDS = [
    DECODE_0523,
    DECODE_049,
    PREFILL_0523,
    FAILURES[3][1],
    STARTUP_055.splitlines()[2],
    "[2026-11-02 10:00:13 TP0] Decode batch, #running-req: 1, accept len: 1e999, #queue-req: 21e999",
]
_NOISE = [
    "[",
    "] ",
    "] Decode batch",
    "Decode batch. #",
    "accept len: ",
    "1e999",
    "nan",
    "\r",
    "\r\n",
    "|",
    "[2026-11-02 ",
    "server_args=",
    "Load weight end",
    "\x00",
    "é",
    "\ufffd",
    "sglang-1  | ",
    "    ",
]


def _log_text():
    """Lines of noise around at most one SGLang record each (two records glued on one line are
    out of scope: which of them the line gives is not defined)."""
    from hypothesis import strategies as st

    noise = st.lists(st.one_of(st.sampled_from(_NOISE), st.text(max_size=12)), max_size=3).map("".join)
    record = st.one_of(st.just(""), st.sampled_from(_RECORDS))
    line = st.tuples(noise, record, noise).map(lambda t: t[0] + t[1] + (t[2] if t[1] else ""))
    return st.lists(line, max_size=30).map(lambda ls: "\n".join(ls) + "\n")


def test_no_log_text_breaks_the_parser():
    """Fuzzed lines built from SGLang's own fragments and noise: parsing never raises, records come
    in line order, each line gives at most one record, any chunking gives the same records, and the
    JSON lines are strict JSON. (It found a character split across two reads decoded as two.)"""
    import io
    import json

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from workbench.sglang.logjson import stream_json_lines

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_log_text(), st.integers(5, 300))
    def check(text, step):
        data = text.encode("utf-8", "surrogatepass")
        recs = parse_text(data).records()
        lines = [r["line"] for r in recs]
        assert lines == sorted(set(lines))
        p, got = LogParser(), []
        for i in range(0, len(data), step):
            got += p.feed(data[i : i + step]).records()
        got += p.finish().records()
        assert got == recs
        texts = list(stream_json_lines(io.BytesIO(data), chunk=step * 7, compiled=False))
        for x in texts:
            json.loads(x, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
        assert list(stream_json_lines(io.BytesIO(data), chunk=step * 7, compiled=True)) == texts

    check()
