"""A server's status reads its log through ``workbench.logs`` for either engine: a vLLM server (whose
readiness is its health route's) has the startup stages and the failure cause its log tells."""

from __future__ import annotations

import time
from pathlib import Path

DATA = Path(__file__).with_name("data")


def test_a_vllm_servers_status_has_its_logs_stages_and_cause(tmp_path):
    from workbench.api import Workbench

    log = tmp_path / "vllm.log"
    log.write_bytes(b"a line no engine writes\n" + (DATA / "vllm_eagle3_dies.log").read_bytes())
    with Workbench.open(tmp_path) as wb:
        reg = wb.lifecycle.registry
        sid, _ = reg.insert(
            "v", "local", None, str(log), argv=[], env={}, draft_config_sha256=None, launched=time.time(),
            extra={"engine": "vllm"}, log_of=lambda _sid: log,
        )  # fmt: skip
        s = wb.server_status([sid], gpus=False)[0]  # no process recorded: it is gone
    assert s.engine == "vllm" and s.state == "failed"
    # the stages the log tells (ready is the health route's, never asked: the process is gone)
    assert s.progress == ["server_args", "weights_target", "weights_draft", "kv_cache", "graphs_target"]
    # the cause the log's failure lines name, with the root exception as the text
    assert s.failure["class"] == "aux-hidden-states" and "fc" in s.failure["hint"], s.failure
    assert s.failure["text"].startswith("RuntimeError: shape '[-1, 192]' is invalid"), s.failure
    assert s.log_unrecognised == 1 and s.log_unrecognised_lines == [(1, "a line no engine writes")]
