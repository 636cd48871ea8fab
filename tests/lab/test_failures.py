"""LAB_FAIL injection: each failure shows SGLang's text and exit behaviour; bad flags fail like argparse."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine.version import Version

pytestmark = pytest.mark.slow

CLASS = {
    "oom": "oom",
    "draft-context": "draft-context",
    "cuda-graph": "cuda-graph",
    "port": "port-in-use",
    "crash-after-ready": "scheduler-exception",
}
EXPECT = {
    "oom": [
        "Scheduler hit an exception: Traceback",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "self.server_args.mem_fraction_static=0.88",
        "Received sigquit from a child process. It usually means the child failed.",
    ],
    "draft-context": [
        "ValueError: Warning: Target model's context_length (1024) is greater than the derived context_length (512).",
        "set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
        "Received sigquit from a child process.",
    ],
    "cuda-graph": [
        "Capture cuda graph begin.",
        "Exception: Capture cuda graph failed:",
        "4. disable CUDA graph by --disable-cuda-graph.",
        "Received sigquit from a child process.",
    ],
    "port": ["ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', ", "address already in use"],
    "crash-after-ready": [
        "The server is fired up and ready to roll!",
        "Scheduler hit an exception: Traceback",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "Received sigquit from a child process.",
    ],
}


def test_each_injected_failure(lab_servers):
    from workbench.lab.process import wait_exit

    procs = {}
    for fail in EXPECT:
        env = {"LAB_FAIL": fail}
        if fail == "crash-after-ready":
            env["LAB_FAIL_AFTER"] = "0.5"
        procs[fail] = lab_servers.start("draft", env=env, wait=False, extra=["--mem-fraction-static", "0.88"])
    for fail, p in procs.items():
        rc = wait_exit(p, 240)
        text = Path(p.log_path).read_text()
        assert rc is not None, (fail, text[-1500:])
        for needle in EXPECT[fail]:
            assert needle in text, (fail, needle, text[-1500:])
        if fail == "port":
            assert rc == 1 and "Load weight end" in text  # the bind comes after loading, as in SGLang
        else:
            assert rc == -signal.SIGKILL  # kill_process_tree on SIGQUIT
        if fail != "crash-after-ready":
            assert "fired up" not in text
        from workbench.sglang.logparse import classify, parse_text

        assert classify(parse_text(text).events, exit_code=rc)["class"] == CLASS[fail]
        lab_servers.procs.remove(p)


def test_draft_context_override_env_only_warns(lab_servers):
    p = lab_servers.start("draft", env={"LAB_FAIL": "draft-context", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    text = Path(p.log_path).read_text()
    assert p.ready and "Overriding the draft model's max_position_embeddings to 1024." in text
    lab_servers.stop(p)


def test_unknown_flag_is_rejected_like_argparse(lab_world):
    r = subprocess.run(
        [sys.executable, "-m", "workbench.lab.serve", "--model-path", lab_world["target"], "--no-such-flag", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "launch_server.py: error: unrecognized arguments: --no-such-flag 1" in r.stderr
    assert r.stderr.startswith("usage: launch_server.py")


def test_prefix_flags_parse_like_sglang():
    from workbench.lab.serverargs import parse

    args, version = parse(["--model", "/m", "--tp", "8", "--speculative-algo", "eagle3", "--mem-frac", "0.7"])
    assert (args.model_path, args.tp_size, args.speculative_algorithm, args.mem_fraction_static) == (
        "/m",
        8,
        "EAGLE3",
        0.7,
    )
    assert version == Version.parse("0.5.12")
    _, v = parse(["--model-path", "/m", "--lab-engine", "sglang-0.5.13"])
    assert v == Version.parse("0.5.13")


def test_story_launch_flags_are_accepted():
    from workbench.lab.serverargs import parse

    argv = [
        "--model-path",
        "/shared/kimi-k2.5-int4",
        "--trust-remote-code",
        "--tp-size",
        "8",
        "--mem-fraction-static",
        "0.88",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--num-continuous-decode-steps",
        "4",
        "--disable-custom-all-reduce",
        "--disable-cuda-graph",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "/d/4",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "6",
        "--speculative-num-steps",
        "5",
    ]
    args, _ = parse(argv)
    assert (args.tp_size, args.speculative_num_steps, args.disable_cuda_graph) == (8, 5, True)
    args, _ = parse(["--model-path", "/m", "--lab-engine", "sglang-0.5.23", "--cuda-graph-backend-decode", "disabled"])
    assert args.cuda_graph_backend_decode == "disabled"
    with pytest.raises(SystemExit):
        parse(["--model-path", "/m", "--cuda-graph-backend-decode", "disabled"])  # 0.5.12 has no such flag
