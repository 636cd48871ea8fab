"""The lab server: routes, real speculation equal to greedy, logs, accept length by config."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.fixtures.lab import http
from tests.lab.test_logformat import DECODE_RE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def servers(lab_servers):
    """Correct-config speculative server (sglang 0.5.12 emulation) and a plain one, started together."""
    spec = lab_servers.start(
        "draft",
        extra=[
            "--decode-log-interval",
            "5",
            "--enable-return-hidden-states",
            "--tp-size",
            "8",
            "--disable-custom-all-reduce",
        ],
        wait=False,
    )
    plain = lab_servers.start(None, extra=["--lab-engine", "sglang-0.5.23"], wait=False)
    from workbench.lab.process import wait_ready

    for p in (spec, plain):
        wait_ready(p, 240)
        assert p.ready, Path(p.log_path).read_text()[-2000:]
    return {"spec": spec, "plain": plain}


def prompts(world, n=8):
    from workbench.lab.capture import make_prompts
    from workbench.lab.settings import corpus_style

    s = world["settings"]
    return make_prompts(s["prompt_len"], n, s["seed"] + 3, s["seed"], corpus_style(s)).tolist()


def test_routes(servers, lab_world):
    spec, plain = servers["spec"], servers["plain"]
    assert http(spec, "/health")[0] == 200
    assert http(spec, "/health_generate")[0] == 200
    code, info = http(spec, "/server_info")
    assert code == 200 and info["version"] == "0.5.12" and info["status"] == "ready"
    assert (
        info["speculative_algorithm"],
        info["speculative_num_steps"],
        info["speculative_eagle_topk"],
        info["speculative_num_draft_tokens"],
    ) == ("EAGLE3", 3, 1, 4)
    assert info["speculative_draft_model_path"] == lab_world["draft"] and info["tp_size"] == 8
    assert isinstance(info["internal_states"], list) and "max_total_num_tokens" in info
    assert http(spec, "/get_server_info")[1]["speculative_num_steps"] == 3
    assert "'/get_server_info' is deprecated" in Path(spec.log_path).read_text()
    code, mi = http(spec, "/model_info")
    assert code == 200 and mi["model_path"] == lab_world["target"] and mi["is_generation"] is True
    assert http(spec, "/get_model_info")[0] == 200
    assert http(spec, "/nope")[0] == 404
    # the plain server emulates 0.5.23: new-only fields, no spec average
    code, pinfo = http(plain, "/server_info")
    assert pinfo["version"] == "0.5.23" and "launch_command" in pinfo
    assert "avg_spec_accept_length" not in pinfo["internal_states"][0]


def test_generate_text_ids_batch_and_bad_input(servers):
    spec = servers["spec"]
    code, out = http(
        spec,
        "/generate",
        {"text": "file : K12 is a b c . ask K12 ?", "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}},
    )
    assert code == 200 and len(out["output_ids"]) == 12 and isinstance(out["text"], str)
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 12 and meta["prompt_tokens"] == 12
    assert meta["spec_verify_ct"] >= 1 and 1.0 <= meta["spec_accept_length"] <= 12
    assert sum(meta["spec_correct_drafts_histogram"]) == meta["spec_verify_ct"]
    code, outs = http(spec, "/generate", {"input_ids": [[1, 5, 6], [1, 7]], "sampling_params": {"max_new_tokens": 3}})
    assert code == 200 and isinstance(outs, list) and len(outs) == 2
    for body in ({}, {"text": "a", "input_ids": [1]}, {"input_ids": [10**6]}, {"input_ids": "x"}):
        code, err = http(spec, "/generate", body)
        assert code == 400 and err["error"]["message"], body
    code, err = http(servers["plain"], "/generate", {"input_ids": [1, 5], "return_hidden_states": True})
    assert code == 400 and "--enable-return-hidden-states" in err["error"]["message"]


def test_return_hidden_states_are_packed_aux_rows(servers, lab_world):
    spec = servers["spec"]
    ids = prompts(lab_world, 1)[0]
    _, out = http(
        spec,
        "/generate",
        {"input_ids": ids, "return_hidden_states": True, "sampling_params": {"max_new_tokens": 10, "ignore_eos": True}},
    )
    hs = out["meta_info"]["hidden_states"]
    width = 3 * 64
    assert len(hs[0]) == len(ids) and all(len(r) == width for r in hs[0])  # prefill rows
    assert len(hs) == 1 + out["meta_info"]["completion_tokens"] - 1  # one per later token
    assert all(len(r) == width for r in hs[1:])


def test_speculative_output_equals_plain_greedy(servers, lab_world):
    spec, plain = servers["spec"], servers["plain"]
    for ids in prompts(lab_world, 6):
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}}
        a, b = http(spec, "/generate", body)[1], http(plain, "/generate", body)[1]
        assert a["output_ids"] == b["output_ids"]
        assert a["meta_info"]["spec_verify_ct"] < 40  # speculation really accepted drafts


def test_flush_cache_resets_average_and_refuses_while_busy(servers, lab_world):
    spec = servers["spec"]
    assert http(spec, "/flush_cache", method="POST")[0] == 200
    assert "avg_spec_accept_length" not in http(spec, "/server_info")[1]["internal_states"][0]
    http(spec, "/generate", {"input_ids": prompts(lab_world, 1)[0], "sampling_params": {"max_new_tokens": 16}})
    assert http(spec, "/server_info")[1]["internal_states"][0]["avg_spec_accept_length"] >= 1.0
    long = threading.Thread(
        target=http,
        args=(
            spec,
            "/generate",
            {"input_ids": [1, 5] * 40, "sampling_params": {"max_new_tokens": 600, "ignore_eos": True}},
        ),
    )
    long.start()
    try:
        import time

        code = None
        for _ in range(100):  # wait until the request is running, then flush
            time.sleep(0.05)
            code, _ = http(spec, "/flush_cache", method="POST")
            if code == 400:
                break
        assert code == 400
    finally:
        long.join()
    assert http(spec, "/flush_cache", method="POST")[0] == 200


def test_logs_have_milestones_and_parse(servers):
    text = Path(servers["spec"].log_path).read_text()
    for needle in (
        "server_args=ServerArgs(",
        "Load weight begin. avail mem=",
        "type=LlamaForCausalLMEagle3",
        "KV Cache is allocated. #tokens:",
        "Capture cuda graph begin.",
        "Capture draft cuda graph end.",
        "The server is fired up and ready to roll!",
        "Prefill batch, #new-seq: 1",
    ):
        assert needle in text, needle
    lines = [line for line in text.splitlines() if "Decode batch" in line]
    assert lines and all(" TP0] " in line for line in lines)
    parsed = [DECODE_RE.search(line) for line in lines]
    assert all(parsed)
    for m in parsed:
        al, rate = float(m.group(2)), float(m.group(3))
        assert 1.0 <= al <= 4.0
        assert abs(rate - (al - 1) / 3) <= 0.006  # 0.5.12's accept rate: (AL - 1) / (draft tokens - 1)
    # the workbench's own parser reads the same lines, milestones and the ready marker
    from workbench.logs import parse_text

    scan = parse_text(text)
    decode = scan.of("decode")
    assert scan.ready and len(decode) == len(lines)
    assert [r["accept_len"] for r in decode] == [float(m.group(2)) for m in parsed]
    names = [e["name"] for e in scan.of("milestone", "ready")]
    for name in ("server_args", "weights_begin", "weights_end", "kv_cache", "graph_begin", "graph_end", "ready"):
        assert name in names, name
    assert not scan.failures()
    assert scan.unrecognised == 0, scan.samples  # every line the stand-in writes is one SGLang writes
