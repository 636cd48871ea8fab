"""The log parser on SGLang's and vLLM's line formats: every generation of the periodic lines, startup
stages, failures and their tracebacks, prefixes of every kind, streaming at any chunking, the follower
and ``logs parse`` (what it says about lines it did not recognise, and about a file that is no log)."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import msgspec
import pytest

from workbench.logs import FAILURE_CLASSES, LogParser, Reading, classify, parse_text, stream_records
from workbench.logs.follower import EVENTS_KEPT, Follower

DATA = Path(__file__).with_name("data")

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


STARTUP_0523 = (DATA / "sglang_startup_0523.log").read_text()

STARTUP_055 = (DATA / "sglang_startup_055.log").read_text()


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


def one(line: str) -> dict:
    scan = parse_text(line + "\n")
    assert len(scan.records) == 1, scan.records
    return scan.records[0]


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
        (DECODE_TP1_MS, dict(time="2026-11-02 10:00:13.250", rank=None, accept_len=1.12)),
        (DECODE_HYBRID_055, dict(tokens=10536, token_usage=0.05, accept_len=3.12, rank="DP1 TP8")),
        (DECODE_HYBRID_049, dict(tokens=10536, token_usage=0.05, accept_len=3.12)),
        (DECODE_NOSPEC, dict(accept_len=None, accept_rate=None, gen_throughput=239.06, queue_req=2)),
        (DECODE_DSPARK, dict(accept_len=2.4, accept_rate=0.35, cap_len=5.0, block_accept_len=4.1)),
    ],
)
def test_decode_lines_of_every_generation(line, expect):
    rec = one(line)
    assert rec["kind"] == "decode" and rec["engine"] == "sglang"
    assert {k: rec.get(k) for k in expect} == expect


@pytest.mark.parametrize(
    "line, expect",
    [
        (PREFILL_049, dict(new_seq=1, new_token=512, cached_token=0, tokens=0, running_req=0, queue_req=0)),
        (PREFILL_055, dict(new_token=512, tokens=None, running_req=7, pending_token=None)),
        (PREFILL_0523, dict(running_req=23, queue_req=2, pending_token=0, cuda_graph=False, input_throughput=10234.5)),
    ],
)
def test_prefill_lines_of_every_generation(line, expect):
    rec = one(line)
    assert rec["kind"] == "prefill" and {k: rec.get(k) for k in expect} == expect


def test_fast_and_item_readings_of_a_line_agree():
    """A line the common-shape regex reads and the same line read item by item (a prefix sends it
    there) give the same record."""
    odd = [  # stamps SGLang does not write, read alike all the same
        DECODE_0523.replace(" TP0]", "  TP0]"), DECODE_0523.replace(" TP0]", " TP0 ]"),
        PREFILL_0523.replace(" TP0]", " DP1  TP0]"), DECODE_TP1_MS.replace(".250]", ".250 TP3]"),
    ]  # fmt: skip
    for line in (DECODE_049, DECODE_055, DECODE_0523, DECODE_054_ITER, PREFILL_049, PREFILL_055, PREFILL_0523, *odd):
        fast, slow = one(line), one("  " + line)
        assert fast == slow, line


VLLM_TPUT = (
    "(APIServer pid=2181) INFO 12-05 04:50:13 [loggers.py:127] Engine 000: Avg prompt throughput: 1.1 tokens/s, "
    "Avg generation throughput: 690.0 tokens/s, Running: 15 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.4%, "
    "Prefix cache hit rate: 0.0%"
)
VLLM_SPEC = (
    "(APIServer pid=2181) INFO 12-05 04:50:13 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.51, "
    "Accepted throughput: 40.97 tokens/s, Drafted throughput: 81.40 tokens/s, Accepted: 462 tokens, "
    "Drafted: 918 tokens, Per-position acceptance rate: 0.778, 0.493, 0.239, Avg Draft acceptance rate: 50.3%"
)
COMMON = (DECODE_049, DECODE_055, DECODE_0523, DECODE_054_ITER, DECODE_TP1_MS, PREFILL_049, PREFILL_055,
          PREFILL_0523, VLLM_TPUT, VLLM_SPEC)  # fmt: skip


def test_the_common_shapes_take_the_one_regex_path(monkeypatch):
    """Every generation's common shape is read in the loop by its one regex, never line by line (a shape the
    regexes stop reading is no error, only slow: this is where it shows)."""

    def line_by_line(self, raw, n, scan):
        raise AssertionError(f"read line by line: {raw}")

    monkeypatch.setattr(LogParser, "_line", line_by_line)
    for line in COMMON:
        assert one(line)["kind"] in ("decode", "prefill", "metrics")


def test_numbers_read_alike_on_both_paths():
    """The one-regex path (msgspec reading each number's text) and the item-by-item path (int/float) give the
    same values for any numbers, a spelling JSON does not allow ("007", "00.5") included: the loop leaves
    that line to the items."""
    rnd = random.Random(11)

    def num(decimals: bool) -> str:
        whole = str(rnd.randrange(10 ** rnd.randint(1, 12)))
        if rnd.random() < 0.15:
            whole = "0" * rnd.randint(1, 2) + whole  # a leading zero
        return f"{whole}.{rnd.randrange(10**8):0{rnd.randint(1, 17)}d}" if decimals else whole

    for _ in range(400):
        line = (
            f"[2026-11-02 10:00:13 TP0] Decode batch, #running-req: {num(False)}, #token: {num(False)}, "
            f"token usage: {num(True)}, accept len: {num(True)}, accept rate: {num(True)}, cuda graph: True, "
            f"gen throughput (token/s): {num(True)}, #queue-req: {num(False)}"
        )
        pre = (
            f"[2026-11-02 10:00:13 TP0] Prefill batch, #new-seq: {num(False)}, #new-token: {num(False)}, "
            f"#cached-token: {num(False)}, token usage: {num(True)}, #running-req: {num(False)}, "
            f"#queue-req: {num(False)}, #pending-token: {num(False)}, cuda graph: False, "
            f"input throughput (token/s): {num(True)}"
        )
        spec = VLLM_SPEC.replace("2.51", num(True)).replace("462", num(False)).replace("0.493", num(True))
        tput = VLLM_TPUT.replace("690.0", f"{num(False)}.{rnd.randrange(10)}").replace("15 reqs", f"{num(False)} reqs")
        for text in (line, pre, spec, tput):
            assert one(text) == one("  " + text), text


def test_a_repeated_warning_reads_as_its_first():
    """A warning the engine repeats (a deprecated endpoint on every call) is given by the loop from the first
    one's record: each copy is the record a fresh reading of its line gives, whatever its stamp says."""
    msg = (
        "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
        "Please use '/server_info' instead."
    )
    stamps = [
        "2026-11-02 10:00:01", "2026-11-02 10:00:02.125", "2026-11-02 10:00:03 TP1", "2026-11-02 10:00:04 DP1 TP3",
        "2026-11-02 10:00:05  TP2", "2026-11-02 10:00:06 TP0 ", "2026-11-02T10:00:07 TP0",
    ]  # fmt: skip
    lines = [f"[{s}] {msg}" for s in stamps * 3] + [f"[2026-11-02 10:00:05] WARNING: {msg}", f"  [{stamps[0]}] {msg}"]
    rnd = random.Random(3)
    rnd.shuffle(lines)
    parser = LogParser()
    records = parser.feed("\n".join(f"{x}\n{PREFILL_055}" for x in lines) + "\n", final=True).records
    assert msg in parser._warned  # the loop gave the repeats
    alone = []
    for i, line in enumerate(lines):  # each line read by a parser of its own, at its place in the log
        alone += [{**r, "line": 2 * i + 1} for r in parse_text(line + "\n").records]
    assert len(alone) > len(lines) // 2
    got = [r for r in records if r["kind"] != "prefill"]
    assert got == alone and [list(r) for r in got] == [list(r) for r in alone]


def test_what_the_parser_remembers_stays_small_whatever_the_lines():
    """The per-message memos (rules, statements, quiet lines, repeated warnings) keep no message longer than
    ``MEMO_LEN``: a log of long distinct lines streams in the memory of a short one."""
    from workbench.logs.parser import MEMO_LEN

    parser = LogParser(dicts=False, settled=True)
    pad = "x" * (3 * MEMO_LEN)
    for i in range(50):
        parser.feed(
            f"[2026-11-02 10:00:01] Endpoint '/get_server_info' is deprecated {pad}{i}\n"
            f"[2026-11-02 10:00:02 TP0] Load weight begin. avail mem={i}.00 GB {pad}\n"
            f"[2026-11-02 10:00:03 TP0] Cache flushed successfully! {pad}{i}\n"
        )
    keys = [k[0] for k in parser._ruled] + list(parser._memo) + list(parser._quiet) + list(parser._warned)
    assert parser.lines == 150 and all(len(k) < MEMO_LEN for k in keys)


def test_the_trigger_pattern_finds_what_an_alternation_of_the_triggers_finds():
    """The rules' triggers as one trie-shaped regex find what the plain longest-first alternation finds, in
    any text: each trigger alone, inside another's words, one after another and cut short."""
    import re

    from workbench.logs import parser as P

    plain = re.compile("|".join(re.escape(t) for t in sorted(P._BY_TRIGGER, key=len, reverse=True)))
    triggers = list(P._BY_TRIGGER)
    rnd = random.Random(5)
    texts = [*triggers, *(t[:-1] for t in triggers), *(STARTUP_055.splitlines()), *(VLLM_LOG.splitlines())]
    for _ in range(2000):
        texts.append(" ".join(rnd.choice(triggers)[: rnd.randint(1, 40)] for _ in range(rnd.randint(1, 4))))
        texts.append("".join(rnd.sample(triggers, 3)))
    for text in texts:
        assert P._TRIGGERS.findall(text) == plain.findall(text), text


VLLM_LOG = (DATA / "vllm_eagle3_dies.log").read_text()


def test_a_whole_vllm_log():
    scan = parse_text(VLLM_LOG)
    assert scan.unrecognised == 0, scan.samples
    stages = [r["name"] for r in scan.of("milestone")]
    for name in (
        "server_args",
        "engine_config",
        "weights_begin",
        "weights_loaded",
        "aux_layers",
        "weights_end",
        "compile_begin",
        "compile_end",
        "kv_memory",
        "kv_cache",
        "kv_concurrency",
        "graph_end",
        "engine_init",
        "routes",
    ):
        assert name in stages, name
    roles = [r.get("role") for r in scan.of("milestone") if r["name"] == "weights_begin"]
    assert roles == ["target", "draft"]
    aux = next(r for r in scan.of("milestone") if r["name"] == "aux_layers")
    assert aux["layers"] == "(1, 5, 8)" and aux["process"] == "EngineCore_DP0" and aux["rank"] == "DP0"
    assert next(r for r in scan.of("milestone") if r["name"] == "kv_cache")["tokens"] == 427328
    assert [r["name"] for r in scan.of("ready")] == ["listening", "ready"]
    tput, spec = scan.of("metrics")
    assert tput["name"] == "throughput" and tput["gen_throughput"] == 40.5 and tput["token_usage"] == 0.004
    assert tput["engine_index"] == 0 and tput["running_req"] == 1 and tput["queue_req"] == 0
    assert spec["accept_len"] == 2.51 and spec["per_position"] == [0.778, 0.493, 0.239]
    assert spec["draft_acceptance_rate"] == 0.503 and spec["accepted_tokens"] == 462
    core, api = scan.failures()
    assert core["class"] == "aux-hidden-states" and core["text"] == "EngineCore encountered a fatal error."
    assert core["exception"].startswith("RuntimeError: shape '[-1, 192]'") and core["pid"] == 2302
    assert core["line"] == 26 and core["end_line"] == 30
    assert api["class"] == "engine-dead" and "EngineDeadError" in api["exception"]
    assert classify(scan.records)["class"] == "aux-hidden-states"


def test_vllm_lines_of_older_releases():
    """0.9's format: no process tag on the API server, the v0-era metrics and server line."""
    log = (
        "INFO 07-10 08:15:42 [api_server.py:1336] Starting vLLM API server on http://0.0.0.0:8000\n"
        "INFO 07-10 08:15:52 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 12.3 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, "
        "Prefix cache hit rate: 0.0%\n"
        "INFO 07-10 08:15:52 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: 61.9%, Mean acceptance "
        "length: 2.86, Accepted: 26 tokens, Drafted: 42 tokens, Per-position acceptance rate: 0.857, 0.643, 0.357\n"
        "INFO 07-10 08:15:52 metrics.py:455] Speculative metrics: Draft acceptance rate: 0.651, System efficiency: "
        "0.570, Number of speculative tokens: 5, Number of accepted tokens: 30, Number of draft tokens: 50, Number "
        "of emitted tokens: 40.\n"
    )
    server, tput, spec, v0 = parse_text(log).records
    assert (
        server["kind"] == "ready" and server["url"] == "http://0.0.0.0:8000" and server["src"] == "api_server.py:1336"
    )
    assert tput["gen_throughput"] == 12.3 and tput["token_usage"] == 0.015
    assert spec["accept_len"] == 2.86 and spec["draft_acceptance_rate"] == 0.619 and len(spec["per_position"]) == 3
    assert v0["name"] == "spec_decode" and v0["draft_acceptance_rate"] == 0.651 and v0["accepted_tokens"] == 30


def test_headless_workers_and_their_ranks():
    log = (
        "INFO 11-20 10:00:00 [serve.py:224] Launching vLLM (v0.20.0) headless multiproc executor, with head node "
        "address tcp://10.0.0.1:13345 for torch.distributed process group.\n"
        "(Worker_PP1_TP3 pid=77) INFO 11-20 10:00:09 [gpu_model_runner.py:2602] Starting to load model /m...\n"
        "(Worker_PP1_TP3 pid=77) ERROR 11-20 10:10:09 [multiproc_executor.py:654] WorkerProc hit an exception.\n"
    )
    head, load, err = parse_text(log).records
    assert head["kind"] == "milestone" and head["name"] == "headless" and head["version"] == "0.20.0"
    assert load["rank"] == "PP1 TP3" and load["process"] == "Worker_PP1_TP3" and load["pid"] == 77
    assert err["kind"] in ("warning", "failure") and err["rank"] == "PP1 TP3"


STARTUP = {"0.5.23": STARTUP_0523, "0.5.5": STARTUP_055}


@pytest.mark.parametrize("version", list(STARTUP))
def test_sglang_stages_in_order_with_roles(version):
    scan = parse_text(STARTUP[version])
    assert scan.unrecognised == 0, scan.samples
    ms = [(m["name"], m.get("role"), m.get("phase")) for m in scan.of("milestone")]
    assert ms[0] == ("server_args", None, None)
    assert ms.index(("weights_begin", "target", None)) < ms.index(("weights_begin", "draft", None))
    assert ("weights_end", "target", None) in ms and ("weights_end", "draft", None) in ms
    graphs = {(n, r) for n, r, _ in ms if n.startswith("graph")}
    assert graphs == {
        ("graph_begin", "target"),
        ("graph_end", "target"),
        ("graph_begin", "draft"),
        ("graph_end", "draft"),
    }
    assert [r["name"] for r in scan.of("ready")] == ["ready"] and scan.ready and not scan.failures()
    ends = [m for m in scan.of("milestone") if m["name"] == "graph_end"]
    assert all(m["elapsed_s"] > 0 for m in ends)


MULTINODE = (DATA / "sglang_multinode.log").read_text()


def test_multinode_rank_lines():
    scan = parse_text(MULTINODE)
    assert scan.unrecognised == 0, scan.samples
    kinds = [(r["kind"], r.get("name") or r.get("class")) for r in scan.records]
    assert kinds == [
        ("milestone", "weights_begin"),
        ("milestone", "health_server"),
        ("warning", "sigterm-ignored"),
        ("failure", "process-died"),
        ("failure", "process-died"),
        ("failure", "process-died"),
    ]
    died = scan.records[3]
    assert died["rank_n"] == 9 and died["exit_code"] == -9 and "out-of-memory killer" in died["hint"]
    assert scan.records[2]["node_rank"] == 1 and scan.records[4]["component"] == "scheduler_TP9"
    assert scan.records[5]["what"] == "sigquit"


WATCHDOG = (DATA / "sglang_watchdog.log").read_text()


def test_the_hung_scheduler_is_the_cause_not_the_sigquit():
    scan = parse_text(WATCHDOG)
    hung, quit_ = scan.failures()
    assert hung["class"] == "scheduler-hung" and hung["rank"] == "TP3" and hung["timeout_s"] == 300
    assert quit_["class"] == "process-died"
    assert classify(scan.records, exit_code=-9)["class"] == "scheduler-hung"
    old = one("[2025-07-10 08:15:42 TP0] Watchdog timeout (self.watchdog_timeout=300)")  # 0.4.9's wording
    assert old["class"] == "scheduler-hung"


FAILURES = [tuple(x.split("	", 1)) for x in (DATA / "failures.tsv").read_text().splitlines()[1:]]


@pytest.mark.parametrize("cls, line", FAILURES)
def test_failure_lines_are_classified(cls, line):
    scan = parse_text(line + "\n")
    fails = scan.failures()
    assert [f["class"] for f in fails] == [cls] and fails[0]["hint"]
    assert scan.unrecognised == 0


def test_every_failure_class_is_covered():
    assert {c for c, _ in FAILURES} == set(FAILURE_CLASSES)


SCHEDULER_OOM = (DATA / "sglang_scheduler_oom.log").read_text()


def test_a_traceback_is_one_failure_with_its_final_exception():
    scan = parse_text(SCHEDULER_OOM)
    oom, died = scan.failures()
    assert oom["class"] == "oom" and oom["what"] == "cuda-alloc" and oom["component"] == "Scheduler"
    assert oom["text"] == "Scheduler hit an exception" and oom["rank"] == "TP0" and oom["line"] == 1
    assert oom["exception"].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert oom["end_line"] >= 6 and died["line"] == 8
    assert classify(scan.records, exit_code=1)["class"] == "oom"
    assert scan.unrecognised == 0


def test_worker_client_oom_and_chained_tracebacks():
    log = (
        "[2025-07-10 08:15:42 TP1] TpModelWorkerClient hit an exception: Traceback (most recent call last):\n"
        '  File "/sglang/srt/managers/tp_worker_overlap_thread.py", line 129, in forward_thread_func\n'
        "KeyError: 3\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/sglang/srt/model_executor/model_runner.py", line 1300, in forward\n'
        "RuntimeError: CUDA error: out of memory\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, "
        "so the stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    )
    (f,) = parse_text(log).failures()
    assert f["class"] == "oom" and f["rank"] == "TP1" and f["component"] == "TpModelWorkerClient"
    assert (
        f["exception"].startswith("RuntimeError: CUDA error: out of memory")
        and "CUDA_LAUNCH_BLOCKING" in f["exception"]
    )


def test_a_request_exception_after_ready_is_a_warning_not_a_death():
    log = STARTUP_055 + (
        "[2025-11-10 09:00:00] Error in request:\n"
        "Traceback (most recent call last):\n"
        '  File "/x/serving.py", line 3, in handle\n'
        "ValueError: prompt too long\n"
        '[2025-11-10 09:00:01] INFO:     127.0.0.1:1 - "POST /generate HTTP/1.1" 400 Bad Request\n'
    )
    scan = parse_text(log)
    assert not scan.failures() and scan.of("warning")[-1]["exception"] == "ValueError: prompt too long"


def test_classify_without_text_uses_the_process_state():
    assert classify([], exit_code=None, process_alive=True) is None
    died = classify([], exit_code=-9, process_alive=False)
    assert died["class"] == "process-died" and died["exit_code"] == -9 and "dmesg" in died["hint"]


BIND = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use"
TCPSTORE = (
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
    "port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, message: address already in use"
)


@pytest.mark.parametrize(
    "line, what, port, args",
    [
        (BIND, "server", 30000, "port=30000"),
        (BIND, "internal", 30000, "port=8000"),
        (TCPSTORE, "internal", 29500, None),
        ("ValueError: nccl_port at 30005 is not available in 30 seconds.", "internal", 30005, None),
    ],
)
def test_whose_port_is_taken(line, what, port, args):
    log = (f"[2026-01-01 00:00:00] server_args=ServerArgs({args})\n" if args else "") + line + "\n"
    (f,) = parse_text(log).failures()
    assert f["class"] == "port-in-use" and f["what"] == what and f.get("port") == port


def test_the_context_warning_is_a_warning_and_the_raise_a_failure():
    warn = one(
        "[2026-01-01 00:00:00] Warning: Target model's context_length (4096) is greater than the derived "
        "context_length (2048). This may lead to incorrect model outputs or CUDA errors."
    )
    assert warn["kind"] == "warning" and warn["name"] == "context-override" and warn["tokens"] == 4096
    over = one("[2026-01-01 00:00:00] Overriding the draft model's max_position_embeddings to 4096.")
    assert over["kind"] == "warning" and over["name"] == "context-override"


@pytest.mark.parametrize(
    "args, after_target, cls",
    [
        ("context_length=4096", False, "context-length"),
        ("context_length=4096", True, "draft-context"),
        ("context_length=None", False, "draft-context"),
    ],
)
def test_049_user_specified_context_failure_is_placed_by_the_log(args, after_target, cls):
    """0.4.9 says "User-specified" for the draft too: the log says whose config failed."""
    log = f"[2025-07-10 08:15:40] server_args=ServerArgs(model_path='/m', {args})\n"
    if after_target:
        log += (
            "[2025-07-10 08:15:41] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
            "avail mem=20.00 GB, mem usage=58.00 GB.\n"
        )
    log += "ValueError: User-specified context_length (4096) is greater than the derived context_length (2048).\n"
    assert parse_text(log).failures()[0]["class"] == cls


def test_incremental_feeding_at_any_byte_boundary_gives_the_same_records():
    log = (STARTUP_0523 + "\n".join([PREFILL_0523, DECODE_0523] * 30) + "\n" + SCHEDULER_OOM + VLLM_LOG).encode()
    whole = parse_text(log).records
    rnd = random.Random(3)
    for _ in range(5):
        p = LogParser()
        recs, pos = [], 0
        while pos < len(log):
            step = rnd.randint(1, 300)
            recs += p.feed(log[pos : pos + step]).records
            pos += step
        recs += p.finish().records
        assert recs == whole
        assert p.bytes == len(log)


def test_lines_without_newline_are_kept_until_complete():
    p = LogParser()
    assert p.feed(DECODE_0523[:50].encode()).records == []
    recs = p.feed((DECODE_0523[50:] + "\n").encode()).records
    assert len(recs) == 1 and recs[0]["accept_len"] == 3.05 and recs[0]["line"] == 1


def test_crlf_progress_bars_and_binary_garbage_do_not_break_parsing():
    log = (
        (DECODE_0523 + "\r\n").encode()
        + b"\xff\xfe garbage\n"
        + b"Loading safetensors checkpoint shards:  50% Completed | 1/2\r"
        + b"Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  1.50it/s]\n"
        + (PREFILL_055 + "\n").encode()
    )
    scan = parse_text(log)
    assert [r["kind"] for r in scan.records] == ["decode", "prefill"] and scan.records[1]["line"] == 4
    assert scan.unrecognised == 1 and scan.samples[0][0] == 2


@pytest.mark.parametrize("prefix", list(PREFIXES), ids=list(PREFIXES))
def test_lines_behind_any_prefix_parse_as_plain(prefix):
    p = PREFIXES[prefix]
    for line in (DECODE_049, DECODE_0523, PREFILL_0523, STARTUP_0523.splitlines()[1], FAILURES[19][1]):
        got, plain = one(p + line), one(line)
        keep = ("line", "container", "task", "process", "pid")
        assert {k: v for k, v in got.items() if k not in keep} == {k: v for k, v in plain.items() if k not in keep}


@pytest.mark.parametrize(
    "prefix, fields",
    [
        ("2025-08-11T21:13:51.123456789Z stdout F ", {}),
        ("sglang-1  | ", {"container": "sglang-1"}),
        ("[pod/sglang-0/server] ", {"container": "pod/sglang-0/server"}),
        ("  3: ", {"task": 3}),
        ("\x1b[36m(VllmWorker rank=2 pid=88)\x1b[0m ", {"process": "VllmWorker rank=2", "pid": 88, "rank": "rank2"}),
        ("[1;36m(VllmWorkerProcess pid=88)[0;0m ", {"process": "VllmWorkerProcess", "pid": 88}),
    ],
)
def test_what_a_prefix_says_is_kept(prefix, fields):
    rec = one(
        prefix + "INFO 07-10 08:15:42 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 12.3 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%"
    )
    assert rec["kind"] == "metrics" and rec["time"] == "07-10 08:15:42"
    assert {k: rec.get(k) for k in fields} == fields


@pytest.mark.parametrize(
    "line, kind, fields",
    [
        (  # torch.distributed's rank prefix before its C++ log line (month without its leading zero)
            "[rank0]:[E914 04:53:45.615225908 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600012 milliseconds before timing out.",
            "failure",
            {"class": "nccl", "rank": "rank0", "time": "09-14 04:53:45", "src": "ProcessGroupNCCL.cpp:632"},
        ),
        (  # glog's short form, the rank in the message's own tag
            "[E ProcessGroupNCCL.cpp:475] [PG ID 2 PG GUID 3(default_pg) Rank 1] Timeout at NCCL work: 32, last "
            "enqueued NCCL work: 32, last completed NCCL work: 31.",
            "failure",
            {"class": "nccl", "rank": "rank1"},
        ),
        (
            "[W1014 03:44:56.000 Utils.hpp:135] Warning: Environment variable NCCL_ASYNC_ERROR_HANDLING is "
            "deprecated; use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())",
            "warning",
            {"level": "WARNING", "time": "10-14 03:44:56"},
        ),
        ("[rank3]: RuntimeError: CUDA error: out of memory", "failure", {"class": "oom", "rank": "rank3"}),
        ("[DP1 TP3] Scheduler hit an exception:", "failure", {"class": "scheduler-exception", "rank": "DP1 TP3"}),
        ("Fatal Python error: Segmentation fault", "failure", {"class": "process-died", "error": "Segmentation fault"}),
        ("AssertionError", "failure", {"class": "exception", "exception": "AssertionError"}),
        (  # a terminal UI's box around the line
            "│ INFO 03-21 20:15:46 [executor_base.py:111] # cuda blocks: 7191, # CPU blocks: 512          │",
            "milestone",
            {"name": "kv_cache", "blocks": 7191, "cpu_blocks": 512},
        ),
    ],
)
def test_torch_lines_and_bare_tags_read_as_their_prefixes_say(line, kind, fields):
    rec = one(line)
    assert rec["kind"] == kind
    assert {k: rec.get(k) for k in fields} == fields


def test_library_log_lines_in_a_server_log_are_known_not_records():
    scan = parse_text(
        "2025-03-27 21:33:31,320 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend\n"
        "[Router (Python)] 2025-05-17 01:10:45 - INFO - Launching DP server process 0 on port 31000 - "
        "launch_server.py:175\n"
        "[rank0]:[I1014 03:44:56.000 ProcessGroupNCCL.cpp:900] [PG ID 0 PG GUID 0 Rank 0] ProcessGroupNCCL "
        "initialization options: size: 2\n"
    )
    assert scan.records == [] and scan.unrecognised == 0


def test_a_restart_in_the_same_log_counts_weight_loads_afresh():
    first = STARTUP_055.splitlines()[:5]
    log = "\n".join(first + first) + "\n"
    roles = [m["role"] for m in parse_text(log).of("milestone") if m["name"] == "weights_end"]
    assert roles == ["target", "draft", "target", "draft"]


def test_every_rank_loads_its_target_first():
    log = "".join(
        f"[2026-11-02 10:00:0{i} TP{r}] {msg}\n"
        for i, (r, msg) in enumerate(
            [
                (0, "Load weight begin. avail mem=78.00 GB"),
                (1, "Load weight begin. avail mem=78.00 GB"),
                (1, "Load weight end. elapsed=3.20 s, avail mem=20.00 GB, mem usage=58.00 GB."),
                (0, "Load weight begin. avail mem=20.00 GB"),
                (1, "Load weight begin. avail mem=20.00 GB"),
            ]
        )
    )
    got = [(m["rank"], m["name"], m["role"]) for m in parse_text(log).of("milestone")]
    assert got == [
        ("TP0", "weights_begin", "target"),
        ("TP1", "weights_begin", "target"),
        ("TP1", "weights_end", "target"),
        ("TP0", "weights_begin", "draft"),
        ("TP1", "weights_begin", "draft"),
    ]


def test_a_missing_field_is_not_called_nonfinite():
    rec = one("  " + DECODE_0523.replace("accept len: 3.05", "accept len: nan"))
    assert rec["accept_len"] is None and rec["nonfinite"] == ["accept_len"]
    assert "nonfinite" not in one("  " + DECODE_NOSPEC)


def test_streaming_any_file_at_any_chunk_gives_the_records_of_the_whole(tmp_path):
    log = (STARTUP_055 + SCHEDULER_OOM + VLLM_LOG + DECODE_0523 + "\n").encode()
    whole = parse_text(log).records
    path = tmp_path / "a.log"
    path.write_bytes(log)
    for chunk in (1, 7, 64, 4096, 1 << 20):
        assert list(stream_records(path, chunk=chunk)) == whole, chunk
        assert list(stream_records(io.BytesIO(log), kinds=["failure"], chunk=chunk)) == [
            r for r in whole if r["kind"] == "failure"
        ]


def test_the_json_writer_writes_the_records_the_dicts_hold():
    """``Reading.json_bytes`` (the periodic lines' records as structs, no dict in between) writes exactly the
    records ``parse_text`` gives as dicts, field for field and in the same order, and ``Reading.records`` yields
    those dicts."""
    vllm_engine = VLLM_LOG.replace("Engine 000: ", "")  # a throughput line that names no engine
    log = STARTUP_055 + DECODE_0523 + "\n" + PREFILL_0523 + "\n" + DECODE_054_ITER + "\n" + DECODE_TP1_MS + "\n"
    log += VLLM_LOG + vllm_engine + SCHEDULER_OOM
    whole = parse_text(log).records
    kinds = {r["kind"] for r in whole}
    assert {"decode", "prefill", "metrics", "milestone", "failure"} <= kinds
    for chunk in (64, 1 << 20):
        written = b"".join(Reading(io.BytesIO(log.encode()), chunk=chunk).json_bytes())
        got = [json.loads(x) for x in written.splitlines()]
        assert got == whole and [list(r) for r in got] == [list(r) for r in whole]
        records = list(Reading(io.BytesIO(log.encode()), chunk=chunk).records())
        assert records == whole and all(type(r) is dict for r in records)
    tputs = [r for r in whole if r.get("name") == "throughput"]
    assert {r.get("engine_index", "absent") for r in tputs} == {0, "absent"}


def test_a_percentage_is_the_fraction_its_digits_give():
    """vLLM's percentages (one decimal) as fractions: the float nearest the decimal fraction, for every value."""
    for tenths in range(0, 100_001):
        text = f"{tenths // 10}.{tenths % 10}"
        assert msgspec.json.decode(text + "e-2", type=float) == round(float(text) / 100.0, 6), text
    line = (
        "(APIServer pid=1) INFO 12-05 04:50:13 [loggers.py:127] Avg prompt throughput: 1.1 tokens/s, "
        "Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.7%, "
        "Prefix cache hit rate: 33.3%"
    )
    rec = one(line)
    assert rec["token_usage"] == 0.007 and rec["prefix_cache_hit_rate"] == 0.333 and "engine_index" not in rec


def test_the_follower_stages_are_the_registry_stages():
    from workbench.logs.follower import STAGE_KEYS
    from workbench.servers.registry import STAGES

    assert tuple(k for k, _ in STAGES) == STAGE_KEYS


def test_follower_events_stay_bounded_and_keep_the_first_of_each_class():
    f = Follower()
    log = (
        SCHEDULER_OOM.encode()
        + (
            "[2026-11-02 10:00:16] Received sigquit from a child process. It usually means the child failed.\n"
            * (EVENTS_KEPT * 2)
        ).encode()
    )
    f.feed(log, 0)
    assert len(f.events) <= EVENTS_KEPT
    assert f.verdict(process_alive=False)["class"] == "oom"


def test_follower_counts_and_tails_lines_alike_at_any_chunking():
    log = (STARTUP_055 + "\r\n".join([DECODE_055] * 50) + "\nno log line\n").encode()
    ref = Follower()
    ref.feed(log, 0)
    rnd = random.Random(5)
    f, pos = Follower(), 0
    while pos < len(log):
        step = rnd.randint(1, 700)
        f.feed(log[pos : pos + step], pos)
        pos += step
    assert f.total_lines == ref.total_lines == log.count(b"\n")
    assert list(f.tail) == list(ref.tail) and f.tail[-1] == (ref.total_lines, "no log line")
    assert f.progress() == [
        "server_args",
        "weights_target",
        "weights_draft",
        "kv_cache",
        "graphs_target",
        "graphs_draft",
        "ready",
    ]
    assert f.unrecognised == 1 and f.samples == [(ref.total_lines, "no log line")]
    assert len(f.series["accept_len"]) == 50 and f.last_decode["accept_len"] == 3.12


def test_follower_reads_vllm_metrics_into_the_same_series():
    f = Follower()
    f.feed(VLLM_LOG.encode(), 0)
    assert f.engine == "vllm" and f.ready
    assert f.series["accept_len"] == [2.51] and f.series["gen_throughput"] == [40.5]
    assert f.last_decode["accept_len"] == 2.51 and f.last_decode["running_req"] == 1
    assert f.progress() == ["server_args", "weights_target", "weights_draft", "kv_cache", "graphs_target", "ready"]
    assert f.verdict(process_alive=False)["class"] == "aux-hidden-states"


def test_cli_logs_parse_json_lines_and_what_it_did_not_recognise(cli, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(STARTUP_055 + DECODE_055 + "\nthis line is no log line\n" + FAILURES[4][1] + "\n")
    r = cli("logs", "parse", str(log), "--json")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["kind"] for x in recs][-2:] == ["decode", "failure"] and recs[-1]["class"] == "port-in-use"
    assert recs == parse_text(log.read_bytes()).records
    assert (
        r.stderr == f"logs parse: 1 of {len(log.read_text().splitlines())} lines not recognised; the first 1:\n"
        f"  line 15: this line is no log line\n"
    )
    text = cli("logs", "parse", str(log), "--kind", "failure")
    assert text.returncode == 0 and "port-in-use" in text.stdout and "decode" not in text.stdout


def test_cli_says_when_a_file_is_not_a_log(cli, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\neggs\nmilk\n")
    r = cli("logs", "parse", str(notes), "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().endswith(
        "notes.txt: not an SGLang or vLLM log (none of its 3 lines is one these engines write)"
    )
    assert len(r.stderr.strip().splitlines()) == 1
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    e = cli("logs", "parse", str(empty))
    assert e.returncode == 2 and "empty.log: empty, expected an SGLang or vLLM log" in e.stderr
    missing = cli("logs", "parse", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "nope.log: no such file" in missing.stderr


def test_cli_parses_a_whole_vllm_log(cli, tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(VLLM_LOG)
    r = cli("logs", "parse", str(log))
    assert r.returncode == 0 and r.stderr == ""
    assert "aux-hidden-states" in r.stdout and "accept len 2.51" in r.stdout
