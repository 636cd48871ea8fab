"""The lab server checked against a real vLLM on the same world: accept length for three drafts.

    python benchmarks/vllm_lab_bench.py [--size tiny] [--steps 3] [--tokens 48] [--out FILE]

For each draft, a real vLLM (the CPU build ``make vllm`` installs, vLLM's rule, the world laid out at
head size 32) and the lab server (SGLang's rule, ``sglang==0.5.23``, the world as built) serve the same
target and drafter weights and decode the world's measured prompts as token ids, greedy, fp32, the
same chain length. The ids each engine gets are those that make it capture the same points (translated
by each engine's rule, read from its code):

- ``trained``: the points the drafter was trained on (vLLM ``[2, 6, 9]``, SGLang ``[1, 5, 8]`` in the
  tiny world);
- ``sglang_ids_under_vllm``: the draft's ids as SGLang's convention writes them, served by vLLM (the
  one-layer shift), against the lab with the ids that capture those same shifted points;
- ``broken``: the id -1: vLLM's engine dies at the first request (its failure as the workbench
  classifies it); the lab server with vLLM's surface and rule (``--lab-engine vllm==0.32.0``) beside it.

Accept length is vLLM's own (1 + accepted / drafts of its ``/metrics`` counters over the workload) and
the lab server's (its ``/server_info`` average since the flush). Prints one JSON object with the figures,
the relative differences, vLLM's time to ready and each measurement's wall time, and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _draft_copy(src: str, dst: Path, ids: list[int]) -> str:
    dst.mkdir(parents=True, exist_ok=True)
    for f in Path(src).iterdir():
        if f.is_file() and f.name != "config.json":
            shutil.copy2(f, dst / f.name)
    cfg = json.loads((Path(src) / "config.json").read_text())
    cfg["eagle_config"] = {**cfg.get("eagle_config", {}), "eagle_aux_hidden_state_layer_ids": ids}
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return str(dst)


def _vllm(wb, name: str, table: dict, prompts: str) -> dict:
    from workbench.errors import WorkbenchError

    wb.session_profile(name, table)
    t0 = time.monotonic()
    st = wb.launch(name, confirm=True, wait=True)
    ready = time.monotonic() - t0
    out: dict = {"ready_s": round(ready, 1), "state": st.state}
    try:
        if st.state != "ready":
            out["failure"] = st.failure
            return out
        t1 = time.monotonic()
        try:
            m = wb.server_measure(st.id, prompts=prompts, concurrency=4)
        except WorkbenchError as exc:
            out["error"] = str(exc)[:300]
            for _ in range(120):
                s = wb.server_status([st.id], gpus=False)[0]
                if s.state in ("failed", "exited"):
                    break
                time.sleep(0.5)
            out.update(state=s.state, failure=s.failure)
            return out
        out.update(
            accept_length=m.accept_length,
            counters=m.counters,
            per_position=m.per_position,
            completion_tokens=m.completion_tokens,
            measure_s=round(time.monotonic() - t1, 2),
        )
        return out
    finally:
        for rec in wb.servers(active=True):
            wb.server_stop(rec.id, confirm=True, grace=15, gpu_wait=0)


def _lab(world: dict, draft: str, steps: int, prompts: str, engine: str, log_dir: Path) -> dict:
    from workbench.lab.process import free_port, start_server, stop_server, wait_ready
    from workbench.servers.measure import run_protocol
    from workbench.sglang.client import SGLangClient
    from workbench.vllm.client import VLLMClient

    port = free_port()
    extra = ["--lab-engine", engine, "--dtype", "float32"]
    t0 = time.monotonic()
    proc = start_server(
        world["target"], draft, port=port, extra=extra, steps=steps, log_path=log_dir / f"lab-{port}.log", wait=False
    )
    out: dict = {"engine": engine}
    try:
        wait_ready(proc, 300)
        out["ready_s"] = round(time.monotonic() - t0, 1)
        client = VLLMClient(proc.url, 600) if engine.startswith("vllm") else SGLangClient(proc.url, 600)
        t1 = time.monotonic()
        try:
            m = run_protocol(client, 0, prompts=prompts, concurrency=4)
            out.update(accept_length=m.accept_length, counters=m.counters, measure_s=round(time.monotonic() - t1, 2))
        except Exception as exc:  # the lab's imitation of an engine death
            time.sleep(2)
            log = (log_dir / f"lab-{port}.log").read_text(errors="replace").splitlines()
            out.update(error=str(exc)[:200], log_tail=[x for x in log if "Error" in x][-2:])
    finally:
        stop_server(proc)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    from workbench.api import Workbench
    from workbench.lab.build import MEASURE_ENGINE, build, cpu_model, ids_for_points
    from workbench.lab.prompts import write_prompt_set
    from workbench.vllm import local

    if local.missing():
        print(json.dumps({"skipped": local.missing()}))
        return 0
    world = build(a.size)
    vw = world["vllm"]
    n = world["layers"]["num_layers"]
    tmp = Path(tempfile.mkdtemp(prefix="wb-vllm-bench-"))
    prompts = str(write_prompt_set(world, tmp / "prompts.json", "measured", a.tokens))
    from workbench.engine import capture

    shifted_points = capture(vw["engine"], arch="LlamaForCausalLM", num_layers=n, ids=vw["ids"]["draft"]).points
    lab_shifted = ids_for_points(MEASURE_ENGINE, shifted_points, n)
    base = {
        "engine": "vllm",
        "host": "local",
        "launcher": [local.python(), "-m", local.MODULE],
        "model": vw["target"],
        "port": 0,
        "log": str(tmp / "vllm.log"),
        "args": ["--host", "127.0.0.1", "--enforce-eager", "--dtype", "float32", "--max-model-len", "1024"],
        "env": local.environment(tmp / "run"),
        "speculative": {"algorithm": "EAGLE3", "num_steps": a.steps},
        "ready_timeout": 900,
        "stop_grace": 15,
    }
    from workbench.lab.process import free_port

    rows = {}
    with Workbench.open(tmp / "ws") as wb:
        for name, draft, lab_draft, lab_engine in (
            ("trained", vw["draft_vllm"], world["draft"], MEASURE_ENGINE),
            (
                "sglang_ids_under_vllm",
                vw["draft"],
                _draft_copy(world["draft"], tmp / "lab_shifted", lab_shifted),
                MEASURE_ENGINE,
            ),
            ("broken", vw["draft_broken"], world["draft_broken"], vw["engine"]),
        ):
            real = _vllm(wb, name, {**base, "draft": draft, "port": free_port()}, prompts)
            try:
                lab = _lab(world, lab_draft, a.steps, prompts, lab_engine, tmp)
            except Exception as exc:  # the row keeps vLLM's figures whatever the lab did
                lab = {"engine": lab_engine, "error": str(exc)[:300]}
            row = {
                "vllm_ids": json.loads((Path(draft) / "config.json").read_text())["eagle_config"][
                    "eagle_aux_hidden_state_layer_ids"
                ],
                "lab_ids": json.loads((Path(lab_draft) / "config.json").read_text())["eagle_config"][
                    "eagle_aux_hidden_state_layer_ids"
                ],
                "vllm": real,
                "lab": lab,
            }
            if real.get("accept_length") and lab.get("accept_length"):
                row["relative_difference"] = round(
                    abs(real["accept_length"] - lab["accept_length"]) / real["accept_length"], 4
                )
            rows[name] = row
    out = {
        "world": world["dir"],
        "steps": a.steps,
        "tokens": a.tokens,
        "prompts": 16,
        "dtype": "float32",
        "lab_measured_bf16": world["accept_length"]["measured"],
        "drafts": rows,
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()},
    }
    text = json.dumps(out, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
