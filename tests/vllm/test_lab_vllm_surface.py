"""The lifecycle of a vLLM server against the lab server's vLLM surface (fast: no real vLLM): launch,
readiness from /health asked on the host, the measurement protocol on vLLM's counters, live metrics
over a window, an engine death classified, the stop."""

from __future__ import annotations

import json
import sys

import pytest

from tests.fixtures.teardown import stop_active_servers
from tests.fixtures.toml_files import write_toml

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wbv(lab_world, tmp_path_factory):
    from workbench.api import Workbench
    from workbench.lab.process import free_port
    from workbench.lab.prompts import write_prompt_set

    root = tmp_path_factory.mktemp("vllm-surface")
    write_prompt_set(lab_world, root / "prompts.json", "measured", 24)
    base = {
        "engine": "vllm",
        "vllm_version": "0.32.0",
        "host": "local",
        "launcher": [sys.executable, "-m", "workbench.lab.serve", "--lab-engine", "vllm==0.32.0"],
        "model": lab_world["target"],
        "log": str(root / "logs" / "lab.log"),
        "args": ["--host", "127.0.0.1", "--decode-log-interval", "8", "--per-request-spec-decode-metrics", "summary"],
        "speculative": {"algorithm": "EAGLE3", "num_steps": 3},
        "ready_timeout": 120,
        "stop_grace": 5,
    }
    # vLLM's ids for the trained layers, and the broken ones (id -1 never fires in vLLM)
    ids = lab_world["vllm"]["ids"]
    profiles = {
        "good": {**base, "draft": lab_world["draft"], "port": free_port()},
        "broken": {**base, "draft": lab_world["draft_broken"], "port": free_port()},
    }
    write_toml(root / "workbench.toml", {"profiles": profiles})
    with Workbench.open(root) as wb:
        yield wb, root, ids
        stop_active_servers(wb)


def test_launch_ready_measure_metrics_stop(wbv):
    wb, root, _ids = wbv
    pv = wb.launch_preview("good")
    assert pv.engine == "vllm" and pv.ok and "--speculative-config" in pv.command["argv"]
    st = wb.launch("good", confirm=True, wait=True, preview=pv)
    assert st.state == "ready" and st.engine == "vllm" and st.health == 200, st
    m = wb.server_measure(st.id, prompts=str(root / "prompts.json"), concurrency=2)
    c = m.counters
    assert c["drafts"] > 0 and m.accept_length == pytest.approx(1 + c["accepted"] / c["drafts"])
    assert m.per_position == pytest.approx([p / c["drafts"] for p in c["accepted_per_pos"]])
    assert m.engine == "vllm==0.32.0" and m.completion_tokens == 16 * 24 and not m.notes
    # per request, vLLM's own figures (--per-request-spec-decode-metrics), which sum to its counters
    assert all(r["accept_len"] is not None and r["accept_len"] >= 1 for r in m.requests) and len(m.requests) == 16
    assert m.per_request_source == "response metrics" and m.counters_check["agree"], m.counters_check
    assert m.counters_check["draft_tokens"]["requests"] == c["draft_tokens"]
    # the journal keeps the counters; the accept length read back is the same
    row = wb.measurements(st.id)[-1]
    assert row["counters"] == c and row["accept_length"] == pytest.approx(m.accept_length)
    # live metrics: the counters' difference over a window with traffic in it
    import threading

    t = threading.Thread(target=lambda: wb.server_measure(st.id, max_new_tokens=16, concurrency=1))
    met0 = wb.server_metrics(st.id)
    t.start()
    t.join()
    met = wb.server_metrics(st.id)
    assert met["counters"]["drafts"] > 0 and met["accept_length"] == pytest.approx(
        1 + met["counters"]["accepted"] / met["counters"]["drafts"]
    )
    assert met["counters_total"]["drafts"] == met0["counters_total"]["drafts"] + met["counters"]["drafts"]
    assert met["server_info"]["steps"] == 3 and met["server_info"]["version"] == "0.32.0"
    log = wb.server_log(st.id).decode()
    assert "SpecDecoding metrics: Mean acceptance length:" in log
    # the command line says where the accept length comes from
    from tests.conftest import run_cli

    r = run_cli("--workspace", str(root), "server", "measure", str(st.id), "--max-new-tokens", "8", timeout=300)
    assert r.returncode == 0 and "accepted /" in r.stdout and "vllm==0.32.0's counters" in r.stdout, r.stdout + r.stderr
    r = run_cli("--workspace", str(root), "server", "status", timeout=120)
    assert "[vllm]" in r.stdout and " ready " in r.stdout, r.stdout
    res = wb.server_stop(st.id, confirm=True, grace=5, gpu_wait=0)
    assert res.result == "stopped" and wb.server(st.id).state == "stopped"


def test_engine_death_at_the_first_request_is_classified(wbv):
    import dataclasses

    from workbench.errors import WorkbenchError

    wb, _root, _ids = wbv
    with pytest.raises(WorkbenchError, match=r"not launched: Layer id -1 "):
        wb.launch("broken", confirm=True)
    preview = wb.launch_preview("broken")  # launched anyway: the lab dies as vLLM does
    waived = dataclasses.replace(preview, findings=[f for f in preview.findings if f.severity != "error"])
    st = wb.launch("broken", confirm=True, wait=True, preview=waived)
    assert st.state == "ready"
    with pytest.raises(WorkbenchError):
        wb.server_measure(st.id, max_new_tokens=8, concurrency=1)
    for _ in range(100):
        s = wb.server_status([st.id], gpus=False)[0]
        if s.state in ("failed", "exited"):
            break
        import time

        time.sleep(0.2)
    assert s.state in ("failed", "exited"), s
    # the log's failure lines name the cause (the draft's fc takes more states than the target captured)
    assert s.failure["class"] == "aux-hidden-states" and "fc" in s.failure["hint"], s.failure
    assert s.failure["text"].startswith("RuntimeError: shape '[-1, 192]' is invalid for input of size"), s.failure


def test_sweep_over_chain_lengths_with_a_baseline(wbv):
    """A sweep on a vLLM profile: each point a relaunch with --speculative-config of that chain length,
    measured on vLLM's counters; the baseline without speculation has none."""
    wb, root, _ids = wbv
    from workbench.api import SweepRun

    run = SweepRun(max_new_tokens=16, concurrency=2, prompts=str(root / "prompts.json"), stop_grace=5, gpu_wait=0)
    res = wb.server_sweep("good", steps=[1, 2], baseline=True, confirm=True, run=run)
    by = {p.key: p for p in res.points}
    assert set(by) == {"baseline", "s1-k1-n2", "s2-k1-n3"} and all(p.state == "measured" for p in by.values())
    assert by["baseline"].server_accept_len is None
    for key, steps in (("s1-k1-n2", 1), ("s2-k1-n3", 2)):
        argv = wb.server(by[key].server_id).argv
        spec = json.loads(argv[argv.index("--speculative-config") + 1])
        assert spec["num_speculative_tokens"] == steps
        row = next(r for r in wb.measurements(by[key].server_id) if r["kind"] == "protocol")
        c = row["counters"]
        assert by[key].server_accept_len == pytest.approx(1 + c["accepted"] / c["drafts"])
        assert len(c["accepted_per_pos"]) == steps
    assert not wb.servers(active=True)
