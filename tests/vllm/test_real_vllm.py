"""A real vLLM in the loop (the CPU build ``make vllm`` installs), one server at a time, on the lab
world laid out for vLLM's CPU attention:

- the story: the draft SpecForge's capture trained, with its ids in SGLang's convention, served by
  vLLM (a one-layer shift), measured, diagnosed by the live doctor from vLLM's own hidden-state
  extraction, fixed in vLLM's convention, relaunched and measured again (``demo --engine vllm``);
- the fixed server's accept length is vLLM's own: 1 + accepted / drafts of its Prometheus counters,
  read here beside the workbench; the lab server (SGLang's rule, the original layout) agrees within 5%;
  a stop ends the whole process tree (API server, ``VLLM::EngineCore``, ``VLLM::Worker``);
- the broken draft (id -1) starts, then kills the engine at its first request: classified.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.teardown import stop_active_servers
from workbench.vllm import local

MISSING = local.missing()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]

TOKENS = 48  # the build's measured decodes


@pytest.fixture(scope="module")
def story(lab_world, tmp_path_factory):
    """``demo --engine vllm --no-tui --json`` on a fresh workspace, its fixed server kept running."""
    from tests.conftest import run_cli
    from workbench.api import Workbench

    ws = tmp_path_factory.mktemp("vllm-demo")
    r = run_cli(
        "--workspace", str(ws), "demo", "--engine", "vllm", "--no-tui", "--json", "--size", "tiny",
        "--measure-tokens", str(TOKENS), "--keep", timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    wb = Workbench.open(ws)
    try:
        yield json.loads(r.stdout), wb
    finally:
        stop_active_servers(wb, grace=10)
        wb.close()


def _metrics(port: int):
    from workbench.vllm.client import parse_counters

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        return parse_counters(resp.read().decode())


def _tree(pgid: int) -> dict[int, str]:
    """{pid: process title} of the live processes in the server's session (vLLM retitles its
    children ``VLLM::EngineCore`` and ``VLLM::Worker``; /proc/PID/comm holds only 15 characters)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            name = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == pgid and fields[0] not in ("Z", "X"):
            out[int(d)] = name
    return out


def test_the_story_on_a_real_vllm(story, lab_world):
    out, _wb = story
    vw = lab_world["vllm"]
    assert out["engine"] == "vllm==0.32.0"
    before, after = out["before"], out["after"]
    assert before["layer_ids"] == vw["ids"]["draft"] and after["layer_ids"] == vw["ids"]["draft_vllm"]
    # the doctor's finding names the layers, from vLLM's own hidden states; the fix is in vLLM's convention
    top = out["findings"][0]
    assert top["code"] == "layer-ids-engine-mismatch" and top["source"] == "hidden states", out["findings"]
    assert all(f"out({i})" in top["message"] for i in lab_world["layers"]["trained"]), top["message"]
    assert out["fix"]["edits"][0]["value"] == vw["ids"]["draft_vllm"], out["fix"]
    # every accept length is vLLM's own: 1 + accepted / drafts of the counters it reports
    for side in (before, after):
        c = side["counters"]
        assert side["accept_length"] == pytest.approx(1 + c["accepted"] / c["drafts"], rel=1e-12)
        assert c["draft_tokens"] >= c["drafts"] and len(c["accepted_per_pos"]) == 5
        assert sum(c["accepted_per_pos"]) == c["accepted"]
    assert before["accept_length"] < after["accept_length"], (before, after)


def test_per_request_context_sweep_and_a_steady_follow_on_a_real_vllm(story, lab_world, tmp_path):
    """On the fixed server (launched with --per-request-spec-decode-metrics): each request's figures
    are vLLM's own and equal its counters around it; a context sweep up to the served limit falls past
    the drafter's trained length, the finding naming it; followed under steady load, no alarm."""
    import threading

    from workbench.lab.prompts import write_prompt_set

    out, wb = story
    sid = out["after"]["server"]
    prompts = write_prompt_set(lab_world, tmp_path / "prompts.json", "measured", TOKENS)
    one = wb.server_measure(sid, prompts=str(prompts), concurrency=1, warmup=0, max_new_tokens=24)
    assert one.per_request_source == "response metrics" and len(one.per_request) == 16
    check = one.counters_check
    assert check["agree"] and check["each"] == {"requests": 16, "agree": 16}, check
    assert check["draft_tokens"]["requests"] == one.counters["draft_tokens"]
    for x in one.requests:
        assert x["accept_len"] == pytest.approx(1 + x["accepted"] / x["rounds"], rel=1e-12)

    trained = lab_world["settings"]["prompt_len"] + lab_world["settings"]["response_len"]
    top = 1024 - TOKENS
    s = wb.server_measure(sid, prompts=str(prompts), concurrency=4, warmup=0, context=[48, 256, top])
    rows = {r["context_tokens"]: r for r in s.by_context}
    print("\naccept length by context (real vLLM):", {n: round(r["accept_length"], 3) for n, r in rows.items()})
    assert s.counters_check["agree"] and sum(r["rounds"] for r in rows.values()) == s.counters["drafts"]
    assert all(r["source"] == "vllm /metrics" and r["requests"] == 16 for r in rows.values())
    assert s.context_facts["trained_length"] == trained and s.context_facts["max_position_embeddings"] == 1024
    f = s.findings[0]
    assert f["code"] == "accept-falls-past-trained-length" and f"{trained} tokens" in f["message"], s.findings

    ids = json.loads(prompts.read_text())["prompts"]
    stop = threading.Event()

    def load():
        from workbench.vllm.client import VLLMClient

        client, i = VLLMClient(f"http://127.0.0.1:{wb.server(sid).port}", timeout=120), 0
        while not stop.is_set():
            client.complete(ids[i % len(ids)], 24)
            i += 1

    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        import time

        end = time.time() + 24
        while time.time() < end:
            series = wb.server_acceptance(sid, window_s=1.5, baseline_s=12)
            time.sleep(0.3)
    finally:
        stop.set()
        t.join(timeout=120)
    counted = [w for w in series.windows if w.rounds]
    assert series.source == "vllm /metrics" and len(counted) >= 10 and series.baseline["windows"] >= 6, series
    assert not series.alarm.raised, series.alarm
    assert all(w.counters["drafts"] == w.rounds for w in counted)


def test_counters_are_vllms_own_and_the_lab_agrees(story, lab_world, tmp_path):
    """On the fixed server: the measurement's counters are what vLLM's /metrics says before and after
    it; the lab server (SGLang's rule, the same function at head size 16) measures the same accept length
    within 5% on the same prompts and steps; the stop ends every process of the server."""
    from workbench.lab.prompts import write_prompt_set

    out, wb = story
    sid = out["after"]["server"]
    rec = wb.server(sid)
    prompts = write_prompt_set(lab_world, tmp_path / "prompts.json", "measured", TOKENS)
    c0 = _metrics(rec.port)
    m = wb.server_measure(sid, prompts=str(prompts), concurrency=4, warmup=0)  # the counters move for it alone
    c1 = _metrics(rec.port)
    d = c1 - c0
    assert m.counters == d.to_dict() and m.accept_length == pytest.approx(1 + d.accepted / d.drafts, rel=1e-12)
    assert m.per_position == pytest.approx(d.per_position) and m.engine == "vllm==0.32.0"
    met = wb.server_metrics(sid)
    assert met["counters_total"]["drafts"] == c1.drafts and met["server_info"]["steps"] == 5

    tree = _tree(rec.pgid)
    assert {"VLLM::EngineCore", "VLLM::Worker"} <= set(tree.values()), tree
    res = wb.server_stop(sid, confirm=True, grace=15, gpu_wait=0)
    assert res.result == "stopped" and not res.remaining
    assert not _tree(rec.pgid), _tree(rec.pgid)

    from tests.fixtures.lab import start_lab_server, stop_lab_server
    from workbench.servers.measure import run_protocol
    from workbench.sglang.client import SGLangClient

    lab = start_lab_server(
        lab_world, "draft", steps=5, extra=["--lab-engine", "sglang==0.5.23", "--dtype", "float32"], log_dir=tmp_path
    )
    try:
        ml = run_protocol(SGLangClient(lab.url, timeout=600), 0, prompts=str(prompts), concurrency=4)
    finally:
        stop_lab_server(lab)
    real, stand_in = m.accept_length, ml.accept_length
    print(f"\naccept length at 5 steps: real vLLM {real:.4f}, lab server (SGLang's rule) {stand_in:.4f}")
    assert abs(real - stand_in) <= 0.05 * real, (real, stand_in)


def test_broken_draft_kills_the_engine_classified(story, lab_world):
    """Id -1 captures nothing in vLLM (read in its code): the launch checks refuse the draft, naming
    the id. Launched anyway, the real engine starts, then dies at the first request with the draft's fc
    fed fewer states than it takes, as the capture model says; the workbench classifies the death."""
    import dataclasses

    from workbench.errors import WorkbenchError

    _out, wb = story
    wb.session_profile("broken", {"extends": "lab-story", "draft": lab_world["vllm"]["draft_broken"]})
    with pytest.raises(WorkbenchError, match=r"not launched: Layer id -1 .*vllm==0\.32\.0 cannot capture it"):
        wb.launch("broken", confirm=True)
    preview = wb.launch_preview("broken")
    waived = dataclasses.replace(preview, findings=[f for f in preview.findings if f.severity != "error"])
    st = wb.launch("broken", confirm=True, wait=True, preview=waived)
    assert st.state == "ready", st.failure
    with pytest.raises(WorkbenchError):
        wb.server_measure(st.id, max_new_tokens=8, concurrency=1)
    for _ in range(120):
        s = wb.server_status([st.id], gpus=False)[0]
        if s.state in ("failed", "exited"):
            break
        import time

        time.sleep(0.5)
    assert s.state in ("failed", "exited") and s.process in ("gone", "zombie"), s
    # the log's failure lines name the cause: the draft's fc takes more states than the target captured
    assert s.failure["class"] == "aux-hidden-states", s.failure
    assert "shape '[-1, 192]' is invalid" in s.failure["text"], s.failure
