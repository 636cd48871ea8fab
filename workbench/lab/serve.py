"""The lab's reference server: ``python -m workbench.lab.serve <sglang.launch_server flags>``.

It loads the lab target (and the EAGLE-3 draft when ``--speculative-algorithm EAGLE3`` is given),
performs real greedy chain speculative decoding, writes SGLang-format logs for the emulated version
(``--lab-engine``) to stderr, and answers SGLang's HTTP routes on ``--host``/``--port``:
``/health``, ``/health_generate``, ``/server_info`` (+ ``/get_server_info``), ``/model_info``
(+ ``/get_model_info``), ``/flush_cache``, ``/generate``, ``/tokenize`` (0.5.5 on) and, with
``--enable-metrics``, ``/metrics`` (``workbench.lab.sglang_metrics``: SGLang's acceptance counters and gauges).

With ``--lab-engine vllm==X`` it speaks vLLM's surface instead (``workbench.lab.vllm_surface``: OpenAI
completions with token ids, ``/metrics`` counters, ``/reset_prefix_cache``, the ``SpecDecoding metrics``
log line), takes a vLLM profile's ``--model`` and ``--speculative-config``, and captures by vLLM's rule;
an engine failure at a request ends it as vLLM's does (``EngineCore encountered a fatal error.``, the
traceback, the API server gone).

Failure injection, ``LAB_FAIL=oom|port|draft-context|cuda-graph|crash-after-ready``, reproduces
SGLang's log text and exit behaviour: failures inside the scheduler log ``Scheduler hit an
exception: <traceback>``, then the main process logs ``Received sigquit from a child process...``
and kills itself (SIGKILL, as ``kill_process_tree`` does); a busy port is uvicorn's bind error and
exit status 1. ``LAB_FAIL_AFTER=<s>`` delays ``crash-after-ready`` to a timer instead of the first
request.

``LAB_FAIL=accept-decay`` is an engine bug that logs nothing: ``LAB_FAIL_AFTER`` seconds after the
server is ready (default 0) a growing share of verify rounds hand the drafter the previous round's
captured states (a stale buffer), all of them ``LAB_DECAY_RAMP`` seconds later (default 60): the
drafter really drafts from stale features, so acceptance decays while the config stays healthy.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar, cast
from urllib.parse import urlparse

from workbench.engine.version import Version
from workbench.lab import serverargs
from workbench.lab.logfmt import LogFormat

if TYPE_CHECKING:
    from workbench.lab.engine import GenOutput, LabEngine
    from workbench.lab.ranks import Group
    from workbench.lab.sglang_metrics import SGLangMetrics
    from workbench.lab.vllm_surface import SpecTotals

FAILURES = ("oom", "port", "draft-context", "cuda-graph", "crash-after-ready", "accept-decay")
GPU_GB = 79.11  # what the emulated card reports as available at start
CUDA_GRAPH_FAILED = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


class EngineDeadError(Exception):
    """vLLM's EngineDeadError: the request's engine died."""


def _fake_traceback(where: str, exc: BaseException) -> str:
    """A traceback in the shape SGLang prints (real frames from this process, then the error)."""
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
    if len(frames) > 1:
        return "".join(frames).rstrip()
    return (
        f'Traceback (most recent call last):\n  File "{where}", line 1, in run_scheduler_process\n'
        f"{type(exc).__name__}: {exc}"
    )


class LabServer:
    def __init__(self, args: argparse.Namespace, version: Version) -> None:
        self.args = args
        self.version = version
        self.fmt = LogFormat(
            version,
            tp_size=args.tp_size,
            log_ms=os.environ.get("SGLANG_LOG_MS") == "1",
            forward_iters=os.environ.get("SGLANG_LOG_FORWARD_ITERS") == "1",
        )
        self.fail = os.environ.get("LAB_FAIL", "").strip().lower() or None
        self.ready = False
        self.engine: LabEngine | None = None  # set by start()
        self.tokenizer: Any = None  # set by main() before start()
        self.spec = args.speculative_algorithm is not None
        self.state_lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.forward_ct = 0
        self.window: dict[str, Any] = {"ct": 0, "accept": 0, "tokens": 0, "t": time.time()}
        self.last_gen_throughput = 0.0
        self.startup_time = time.time()
        self.crashed = False
        self.seq_len = 0
        self.max_total_tokens = 0
        self.context_len = 1024  # the served context length (start() reads it)
        self.httpd: ThreadingHTTPServer | None = None
        self.group: Group | None = None  # the other ranks of a server across nodes (rank 0)
        self.dump = args.debug_tensor_dump_output_folder is not None
        self.vllm = str(args.lab_engine).strip().lower().startswith("vllm")
        self.totals: SpecTotals | None = None
        if self.vllm and self.spec:
            from workbench.lab.vllm_surface import SpecTotals

            self.totals = SpecTotals(int(args.speculative_num_steps or 1))
        self.metrics: SGLangMetrics | None = None
        if args.enable_metrics and not self.vllm:
            from workbench.lab.sglang_metrics import SGLangMetrics

            self.metrics = SGLangMetrics(version, str(args.served_model_name or args.model_path))

    # ----- logging -----
    def log(self, msg: str, scheduler: bool = True) -> None:
        if self.vllm:
            from workbench.lab.vllm_surface import prefix

            pre = prefix("EngineCore" if scheduler else "APIServer", where="serve.py:0")
        else:
            pre = self.fmt.prefix(scheduler)
        sys.stderr.write(pre + msg + "\n")
        sys.stderr.flush()

    def uvicorn(self, level: str, msg: str) -> None:
        sys.stderr.write(self.fmt.uvicorn(level, msg) + "\n")
        sys.stderr.flush()

    def die_from_scheduler(self, exc: BaseException) -> None:
        """SGLang: the scheduler logs its traceback, the parent gets SIGQUIT and kills its process tree."""
        self.log("Scheduler hit an exception: " + _fake_traceback("scheduler.py", exc))
        self.log("Received sigquit from a child process. It usually means the child failed.", scheduler=False)
        self._kill_self()

    def die_from_watchdog(self, timeout: float) -> None:
        """SGLang's scheduler watchdog (``srt/utils/watchdog.py``): no forward finished in time while a
        batch ran; it waits 5 s so the parent can print the error, then SIGQUITs it."""
        self.log(f"Scheduler watchdog timeout (self.watchdog_timeout={timeout!r}, self.soft=False)")
        time.sleep(5)
        # the serving phase's handler (managers/tokenizer_manager.py: running_phase_sigquit_handler)
        self.log("SIGQUIT received. signum=None, frame=None. It usually means one child failed.", scheduler=False)
        self._kill_self()

    @staticmethod
    def _kill_self() -> None:
        sys.stderr.flush()
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    # ----- startup -----
    def start(self) -> int:
        import torch

        from workbench.lab.engine import LabEngine

        a = self.args
        if a.lab_threads:
            torch.set_num_threads(a.lab_threads)
        self.log(self.fmt.server_args(serverargs.server_args_dict(a)), scheduler=False)
        if a.nnodes > 1:  # rank 0 of a server across nodes: every rank joins before anything loads
            from workbench.lab.ranks import Group, leader_line

            self.group = Group(self)
            self.group.wait()
            if self.vllm:
                self.log(leader_line(self))
        if self.dump:
            self.log("Cuda graph and server warmup are disabled because of using tensor dump mode", scheduler=False)
            a.disable_cuda_graph = True
        if self.fail and self.fail not in FAILURES:
            self.log(f"LAB_FAIL={self.fail!r} is not one of {', '.join(FAILURES)}; ignored", scheduler=False)
        try:
            target_cfg = self._read_json(os.path.join(a.model_path, "config.json"))
            arch = a.lab_arch or (target_cfg.get("architectures") or ["LlamaForCausalLM"])[0]
            for note in serverargs.resolve_spec(a, arch):
                self.log(note, scheduler=False)
            context = a.context_length or int(target_cfg.get("max_position_embeddings", 2048))
            self.context_len = context
            # target worker: weights, KV pool, graphs
            t0 = time.time()
            self.log(self.fmt.load_begin(GPU_GB))
            dumper = None
            if self.dump:
                from workbench.lab.dump import Dumper
                from workbench.lab.engine import torch_dtype

                dumper = Dumper(
                    a.debug_tensor_dump_output_folder,
                    a.debug_tensor_dump_layers,
                    spec=self.spec,
                    dtype=torch_dtype(a.dtype),
                )
            draft_path = a.speculative_draft_model_path if self.spec else None
            if self.spec and draft_path is None:
                raise ValueError("--speculative-draft-model-path is required for EAGLE3 in the lab")
            if draft_path is not None:
                self._check_draft_context(draft_path, context)
            self.engine = LabEngine(
                a.model_path,
                draft_path,
                dtype=a.dtype,
                engine=a.lab_engine,
                arch=arch,
                num_steps=a.speculative_num_steps or 1,
                embed_patch=a.lab_embed_patch,
                algorithm=a.speculative_algorithm or "EAGLE3",
                cuda_graph=not a.disable_cuda_graph,
                dumper=dumper,
            )
            dtype_name = str(self.engine.dtype)
            weights_gb = sum(p.numel() for p in self.engine.target.parameters()) * 2 / 1e9
            self.log(self.fmt.load_end(arch, dtype_name, time.time() - t0, GPU_GB - weights_gb, weights_gb))
            frac = a.mem_fraction_static or 0.88
            if self.fail == "oom":
                suffix = (
                    ""
                    if self.version <= Version.parse("0.4.9")
                    else f" Current value: mem_fraction_static={frac}"
                    if self.version >= Version.parse("0.5.23")
                    else f" Current value: self.server_args.mem_fraction_static={frac}"
                )
                raise RuntimeError("Not enough memory. Please try to increase --mem-fraction-static." + suffix)
            cfg = self.engine.target.config
            self.max_total_tokens = a.max_total_tokens or int(frac * 600000)
            kv_gb = self.max_total_tokens * cfg.num_hidden_layers * cfg.hidden_size * 2 / 1e9
            self.log(self.fmt.kv_cache(dtype_name, self.max_total_tokens, kv_gb, kv_gb))
            self.log(self.fmt.memory_pool_end(GPU_GB - weights_gb - 2 * kv_gb))
            bs = a.cuda_graph_bs or [1, 2, 4, 8, 12, 16, 24, 32]
            avail = GPU_GB - weights_gb - 2 * kv_gb
            if not a.disable_cuda_graph:
                ndt = a.speculative_num_draft_tokens or 1
                self.log(self.fmt.graph_begin("target", avail, ndt))
                if self.fail == "cuda-graph":
                    raise Exception(
                        "Capture cuda graph failed: CUDA error: an illegal memory access was "
                        "encountered\n" + CUDA_GRAPH_FAILED
                    )
                self.log(self.fmt.graph_end("target", 0.41, 0.05, avail - 0.05, bs))
            if self.engine.drafter is not None:
                self._start_draft(avail, bs)
            self.seq_len = 0
        except SystemExit:
            raise
        except BaseException as exc:
            self.die_from_scheduler(exc)
            return 1
        from workbench import collector

        collector.started()
        return self._serve()

    def _check_draft_context(self, draft_path: str, context: int) -> None:
        dcfg = self._read_json(os.path.join(draft_path, "config.json"))
        derived = int(dcfg.get("max_position_embeddings") or 2048)
        if self.fail == "draft-context":
            derived = min(derived, max(1, context // 2))
        if context > derived:
            allow_default = "1" if self.version <= Version.parse("0.4.9") else "0"
            allow = os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", allow_default).lower() in ("1", "true")
            msg = (
                f"Warning: Target model's context_length ({context}) is greater than the derived "
                f"context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. "
                "Note that the derived context_length may differ from max_position_embeddings in the "
                "model's config."
            )
            if not allow:
                raise ValueError(
                    msg + " To allow overriding this maximum, set the env var "
                    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
                )
            self.log(msg)
            self.log(f"Overriding the draft model's max_position_embeddings to {context}.")

    def _start_draft(self, avail: float, bs: list[int]) -> None:
        a = self.args
        eng = cast("LabEngine", self.engine)  # start() loaded it
        self.log(self.fmt.load_begin(avail))
        dw = sum(p.numel() for p in cast(Any, eng.drafter).parameters()) * 2 / 1e9  # start(): only with one
        self.log(self.fmt.load_end("LlamaForCausalLMEagle3", str(eng.dtype), 0.05, avail - dw, dw))
        cap = eng.capture
        if cap is not None and cap.fatal and eng.unsupported:
            raise ValueError(cap.fatal)  # the target model class has no EAGLE-3 capture at all
        if not a.disable_cuda_graph:
            if (a.speculative_num_steps or 1) > 1:
                self.log(self.fmt.graph_begin("draft", avail - dw, a.speculative_eagle_topk or 1, bs))
                self.log(self.fmt.graph_end("draft", 0.32, 0.02, avail - dw - 0.02, bs))
            self.log(self.fmt.graph_begin("draft extend", avail - dw, a.speculative_num_draft_tokens or 1, bs))
            self.log(self.fmt.graph_end("draft extend", 0.18, 0.01, avail - dw - 0.03, bs))

    @staticmethod
    def _read_json(path: str) -> dict[str, Any]:
        with open(path) as f:
            doc: dict[str, Any] = json.load(f)
            return doc

    # ----- serving -----
    def _serve(self) -> int:
        a = self.args
        try:
            if self.fail == "port":
                raise OSError(
                    98, f"error while attempting to bind on address ('{a.host}', {a.port}): address already in use"
                )
            self.httpd = ThreadingHTTPServer((a.host, a.port), _handler(self))
        except OSError as exc:
            bind = f"error while attempting to bind on address ('{a.host}', {a.port})"
            msg = exc.strerror if self.fail == "port" else f"{bind}: {cast(str, exc.strerror).lower()}"
            self.uvicorn("ERROR", f"[Errno {exc.errno}] {msg}")
            sys.stderr.flush()
            os._exit(1)
        self.httpd.daemon_threads = True
        self.uvicorn("INFO", f"Started server process [{os.getpid()}]")
        self.uvicorn("INFO", "Waiting for application startup.")
        self.uvicorn("INFO", "Application startup complete.")
        self.uvicorn(
            "INFO", f"Uvicorn running on http://{a.host}:{self.httpd.server_address[1]} (Press CTRL+C to quit)"
        )
        threading.Thread(target=self._warmup_then_ready, daemon=True).start()
        signal.signal(signal.SIGTERM, lambda *_: self._shutdown())
        with contextlib.suppress(KeyboardInterrupt):
            self.httpd.serve_forever(poll_interval=0.2)
        return 0

    def _shutdown(self) -> None:
        if self.group is not None:
            self.group.shutdown()
        if self.httpd is not None:
            threading.Thread(target=self.httpd.shutdown, daemon=True).start()

    def _warmup_then_ready(self) -> None:
        a = self.args
        try:
            if not (a.skip_server_warmup or self.dump or self.vllm):  # vLLM sends no warm-up request
                ids = [1] + [5] * 7
                res = self.generate_ids(ids, 8, ignore_eos=True, warmup=True)
                if self.metrics is not None:  # a request over HTTP in SGLang: its collectors count it
                    self.metrics.finished(res.prompt_tokens, res.completion_tokens, res.verify_ct)
                self.uvicorn("INFO", f'127.0.0.1:{40000 + os.getpid() % 20000} - "POST /generate HTTP/1.1" 200 OK')
            if a.debug_tensor_dump_input_file:
                import numpy as np

                ids = [int(x) for x in np.load(a.debug_tensor_dump_input_file).reshape(-1)]
                self.generate_ids(ids, 1, ignore_eos=True, warmup=True)
                self.log("Dump of the input file finished; the server exits.", scheduler=False)
                self._kill_self()
        except BaseException as exc:
            self.log("Initialization failed. warmup error: " + _fake_traceback("http_server.py", exc), scheduler=False)
            self.die_from_scheduler(exc)
            return
        self.ready = True
        if not self.vllm:
            self.log("The server is fired up and ready to roll!", scheduler=False)
        if self.fail == "crash-after-ready" and os.environ.get("LAB_FAIL_AFTER"):
            delay = float(os.environ["LAB_FAIL_AFTER"])
            threading.Timer(delay, self._crash).start()
        if self.fail == "accept-decay" and self.engine is not None:
            from workbench.lab.engine import StaleFeatures

            self.engine.fault = StaleFeatures(
                float(os.environ.get("LAB_FAIL_AFTER") or 0), float(os.environ.get("LAB_DECAY_RAMP") or 60)
            )

    def _crash(self) -> None:
        self.crashed = True
        self.die_from_scheduler(
            RuntimeError(
                "CUDA error: an illegal memory access was encountered\n"
                "CUDA kernel errors might be asynchronously reported at some other "
                "API call, so the stacktrace below might be incorrect."
            )
        )

    # ----- scheduler bookkeeping -----
    def _on_prefill(self, new_tokens: int, seconds: float) -> None:
        self.seq_len = new_tokens
        if self.vllm:
            return  # vLLM logs no line per prefill
        with self.state_lock:
            running, waiting = self.running, max(0, self.waiting)
        self.log(
            self.fmt.prefill(
                1,
                new_tokens,
                0,
                new_tokens,
                new_tokens / max(1, self.max_total_tokens),
                running=max(0, running - 1),
                queue=waiting,
                forward_ct=self.forward_ct + 1,
                cuda_graph=False,
                input_tps=new_tokens / max(seconds, 1e-6),
            )
        )

    def _on_round(self, accepted: int | None, emitted: int, seq_len: int) -> None:
        a = self.args
        if self.vllm:
            self._on_vllm_round(accepted)
            return
        if self.group is not None:
            self.group.step()
        self.forward_ct += 1
        self.seq_len = seq_len
        w = self.window
        w["ct"] += 1
        w["tokens"] += emitted
        if accepted is not None:
            w["accept"] += accepted + 1
        if w["ct"] >= max(1, a.decode_log_interval):
            dt = max(1e-6, time.time() - w["t"])
            gen = w["tokens"] / dt
            self.last_gen_throughput = gen
            al = rate = None
            if self.spec:
                al = w["accept"] / w["ct"]
                rate = self.fmt.accept_rate(
                    w["accept"], w["ct"], a.speculative_num_steps, a.speculative_num_draft_tokens
                )
            if self.metrics is not None:
                gauges = {"gen_throughput": gen}
                if al is not None and rate is not None:
                    gauges.update(
                        spec_accept_length=al,
                        spec_accept_rate=rate,
                        spec_num_steps=float(a.speculative_num_steps or 0),
                        spec_num_draft_tokens=float(a.speculative_num_draft_tokens or 0),
                    )
                self.metrics.interval(gauges)
            with self.state_lock:
                running, waiting = self.running, self.waiting
            self.log(
                self.fmt.decode(
                    max(1, running),
                    seq_len,
                    seq_len / max(1, self.max_total_tokens),
                    gen,
                    waiting,
                    accept_len=al,
                    accept_rate=rate,
                    cuda_graph=not a.disable_cuda_graph,
                    forward_ct=self.forward_ct,
                )
            )
            self.window = {"ct": 0, "accept": 0, "tokens": 0, "t": time.time()}

    def _on_vllm_round(self, accepted: int | None) -> None:
        """vLLM's counters and, every ``--decode-log-interval`` rounds, its SpecDecoding line."""
        from workbench.lab.vllm_surface import prefix, spec_line

        if self.totals is None or accepted is None:
            return
        self.totals.observe(accepted)
        if len(self.totals.window) >= max(1, self.args.decode_log_interval):
            line = spec_line(*self.totals.take_window())
            if line:
                sys.stderr.write(prefix() + line + "\n")
                sys.stderr.flush()

    def engine_died(self, exc: BaseException) -> None:
        """vLLM: the engine core logs its fatal error and traceback; the API server goes soon after."""
        from workbench.lab.vllm_surface import prefix

        sys.stderr.write(prefix("EngineCore", "ERROR", "core.py:1586") + "EngineCore encountered a fatal error.\n")
        for line in _fake_traceback("core.py", exc).splitlines():
            sys.stderr.write(prefix("EngineCore", "ERROR", "core.py:1586") + line + "\n")
        sys.stderr.write(prefix("APIServer", "ERROR", "async_llm.py:700") + "AsyncLLM output_handler failed.\n")
        sys.stderr.flush()
        self.ready = False
        threading.Timer(1.0, self._kill_self).start()

    def completions(self, body: object) -> dict[str, Any]:
        from workbench.lab.vllm_surface import completion_body, completion_response

        prompts, max_tokens, ignore_eos, return_ids = completion_body(body)
        outs = []
        metrics = None
        vocab = cast("LabEngine", self.engine).target.config.vocab_size
        for p in prompts:
            ids = self.tokenizer(p)["input_ids"] if isinstance(p, str) else [int(t) for t in p]
            if not ids or any(t < 0 or t >= vocab for t in ids):
                raise ValueError(f"prompt: token ids must be in 0..{vocab - 1}")
            try:
                res = self.generate_ids(ids, max_tokens, ignore_eos=ignore_eos)
            except Exception as exc:
                self.engine_died(exc)
                raise EngineDeadError(str(exc)) from exc
            text = self.tokenizer.decode(res.output_ids, skip_special_tokens=True)
            outs.append((text, res.output_ids, str(res.finish_reason.get("type", "length")), len(ids)))
            if self.spec and self.args.per_request_spec_decode_metrics != "none" and len(prompts) == 1:
                from workbench.lab.vllm_surface import spec_metrics

                metrics = spec_metrics(res.histogram, int(self.args.speculative_num_steps or 1))
        return completion_response(self.served_name, outs, return_ids, metrics)

    @property
    def served_name(self) -> str:
        return str(self.args.served_model_name or self.args.model_path)

    def generate_ids(
        self,
        ids: Sequence[int],
        max_new: int,
        ignore_eos: bool = False,
        return_hidden: bool = False,
        warmup: bool = False,
    ) -> GenOutput:
        eng = cast("LabEngine", self.engine)  # requests come only after start() loaded it
        with self.state_lock:
            self.waiting += 1
        with eng.lock:
            with self.state_lock:
                self.waiting -= 1
                self.running += 1
            try:
                eng.on_prefill = self._on_prefill
                eng.on_round = self._on_round
                return eng.generate(ids, max_new, ignore_eos=ignore_eos, return_hidden=return_hidden, record=not warmup)
            finally:
                with self.state_lock:
                    self.running -= 1

    # ----- route payloads -----
    def server_info(self) -> dict[str, Any]:
        a = self.args
        args = serverargs.server_args_dict(a)
        internal = dict(args)
        internal["last_gen_throughput"] = round(self.last_gen_throughput, 4)
        internal["memory_usage"] = {
            "weight": 0.01,
            "kvcache": 0.1,
            "token_capacity": self.max_total_tokens,
            "graph": 0.0 if a.disable_cuda_graph else 0.05,
        }
        if self.spec and self.engine is not None and self.engine.stats.verify_ct:
            internal["avg_spec_accept_length"] = self.engine.stats.avg_accept_length
        info = dict(args)
        info.update(
            {
                "status": "ready" if self.ready else "starting",
                "max_total_num_tokens": self.max_total_tokens,
                # as the scheduler's TpModelWorker sets it (0.4.9 to 0.5.23 alike)
                "max_req_input_len": min(self.context_len - 1, self.max_total_tokens - 1) - 5,
                "internal_states": [internal],
                "version": str(self.version),
            }
        )
        if self.version >= Version.parse("0.5.23"):
            info.update(
                {
                    "launch_command": " ".join(["python3", "-m", "sglang.launch_server", *sys.argv[1:]]),
                    "startup_time": round(time.time() - self.startup_time, 3),
                    "frontend": "python",
                }
            )
        return info

    def model_info(self) -> dict[str, Any]:
        a = self.args
        info: dict[str, Any] = {
            "model_path": a.model_path,
            "tokenizer_path": a.tokenizer_path or a.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
        }
        if self.version > Version.parse("0.4.9"):
            info["weight_version"] = "default"
        if self.version >= Version.parse("0.5.23"):
            info.update(
                {
                    "served_model_name": a.served_model_name or a.model_path,
                    "model_type": "llama",
                    "architectures": ["LlamaForCausalLM"],
                }
            )
        return info

    def flush_cache(self) -> tuple[int, str]:
        with self.state_lock:
            busy = self.running + self.waiting
        if busy:
            return 400, (
                "Cache not flushed. Please check backend logs for more details. (When there are running "
                "or waiting requests, the operation will not be performed.)"
            )
        if self.engine is not None:
            self.engine.reset_stats()
        self.window = {"ct": 0, "accept": 0, "tokens": 0, "t": time.time()}
        self.log("Cache flushed successfully!")
        return 200, (
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
            "waiting requests, the operation will not be performed.)\n"
        )

    def generate(self, body: object) -> dict[str, Any] | list[dict[str, Any]]:
        if self.fail == "crash-after-ready" and not os.environ.get("LAB_FAIL_AFTER"):
            self._crash()
        if not isinstance(body, dict):
            raise ValueError("request body must be a JSON object")
        text, ids = body.get("text"), body.get("input_ids")
        if (text is None) == (ids is None):
            raise ValueError("Either text or input_ids should be provided.")
        sp = body.get("sampling_params") or {}
        if not isinstance(sp, dict):
            raise ValueError("sampling_params must be an object")
        max_new = int(sp.get("max_new_tokens", 128))
        ignore_eos = bool(sp.get("ignore_eos", False))
        want_hidden = bool(body.get("return_hidden_states", False))
        if want_hidden and not self.args.enable_return_hidden_states:
            raise ValueError(
                "The server is not configured to return the hidden states. Please set "
                "`--enable-return-hidden-states` to enable this feature."
            )
        batch = isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list))
        prompts: list[list[int]] = []
        for item in (
            (text if isinstance(text, list) else [text])
            if text is not None
            else (cast("list[Any]", ids) if batch else [ids])
        ):  # batch: ids is a list of lists
            if text is not None:
                if not isinstance(item, str):
                    raise ValueError("text must be a string or a list of strings")
                prompts.append(self.tokenizer(item)["input_ids"])
            else:
                if not isinstance(item, list) or not all(isinstance(t, int) for t in item) or not item:
                    raise ValueError("input_ids must be a non-empty list of ints (or a list of such lists)")
                vocab = cast("LabEngine", self.engine).target.config.vocab_size
                if any(t < 0 or t >= vocab for t in item):
                    raise ValueError(f"input_ids: token id out of range 0..{vocab - 1}")
                prompts.append(item)
        outs = [self._one(p, max_new, ignore_eos, want_hidden) for p in prompts]
        return outs if batch else outs[0]

    def tokenize(self, body: object) -> dict[str, Any]:
        """SGLang's ``/tokenize`` (``OpenAIServingTokenize``): ``tokens``, ``count``, ``max_model_len``."""
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), (str, list)):
            raise ValueError("prompt: expected a string or a list of strings")
        prompt = body["prompt"]
        special = bool(body.get("add_special_tokens", True))
        texts = [prompt] if isinstance(prompt, str) else prompt
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("prompt: expected a string or a list of strings")
        ids = [self.tokenizer(t, add_special_tokens=special)["input_ids"] for t in texts]
        limit = int(getattr(self.tokenizer, "model_max_length", -1))
        if isinstance(prompt, str):
            return {"tokens": ids[0], "count": len(ids[0]), "max_model_len": limit}
        return {"tokens": ids, "count": [len(i) for i in ids], "max_model_len": limit}

    def _one(self, prompt: list[int], max_new: int, ignore_eos: bool, want_hidden: bool) -> dict[str, Any]:
        t0 = time.time()
        res = self.generate_ids(prompt, max_new, ignore_eos=ignore_eos, return_hidden=want_hidden)
        meta: dict[str, Any] = {
            "id": uuid.uuid4().hex,
            "finish_reason": res.finish_reason,
            "prompt_tokens": res.prompt_tokens,
            "completion_tokens": res.completion_tokens,
            "cached_tokens": 0,
            "e2e_latency": round(time.time() - t0, 6),
        }
        if self.spec:
            a = self.args
            vct = max(1, res.verify_ct)
            meta.update(
                {
                    "spec_verify_ct": res.verify_ct,
                    "spec_accept_length": res.completion_tokens / vct,
                    "spec_accept_rate": res.accepted_drafts / (vct * max(1, (a.speculative_num_draft_tokens or 2) - 1)),
                    "spec_num_correct_drafts": res.accepted_drafts,
                    "spec_num_proposed_drafts": res.verify_ct * a.speculative_num_steps,
                    "spec_correct_drafts_histogram": res.histogram,
                }
            )
        if want_hidden:
            meta["hidden_states"] = res.hidden_states
        if self.metrics is not None:
            self.metrics.finished(res.prompt_tokens, res.completion_tokens, res.verify_ct)
        text = self.tokenizer.decode(res.output_ids, skip_special_tokens=True)
        return {"text": text, "output_ids": res.output_ids, "meta_info": meta}


def _vllm_version(engine: str) -> str:
    """The emulated vLLM release (``vllm==0.32.0`` -> ``0.32.0``)."""
    return str(engine).split("==", 1)[1] if "==" in str(engine) else "0.32.0"


NOT_FOUND = {"detail": "Not Found"}


class _Handler(BaseHTTPRequestHandler):
    """SGLang's routes (or vLLM's, ``--lab-engine vllm==X``) over one ``LabServer`` (``_handler``)."""

    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    lab: LabServer  # set by _handler
    #: path -> the method answering it (SGLang's surface; the release decides some in the method)
    SGLANG: ClassVar[dict[str, str]] = {
        "/health": "_health",
        "/health_generate": "_health",
        "/server_info": "_server_info",
        "/get_server_info": "_server_info",
        "/model_info": "_model_info",
        "/get_model_info": "_model_info",
        "/flush_cache": "_flush",
        "/metrics": "_metrics",
        "/tokenize": "_tokenize",
        "/v1/tokenize": "_tokenize",
        "/generate": "_generate",
    }

    def log_message(self, fmt: str, *args: Any) -> None:  # uvicorn's access-log line instead of http.server's
        pass

    def _send(self, code: int, payload: object, content_type: str = "application/json") -> None:
        body = (
            payload
            if isinstance(payload, bytes)
            else (json.dumps(payload).encode() if content_type == "application/json" else str(payload).encode())
        )
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        phrase = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}.get(code, "")
        self.lab.uvicorn(
            "INFO",
            f"{self.client_address[0]}:{self.client_address[1]} - "
            f'"{self.command} {self.path} HTTP/1.1" {code} {phrase}',
        )

    def _body(self) -> Any:
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        return json.loads(raw)

    def _vllm_route(self, method: str, path: str) -> None:
        from workbench.lab.vllm_surface import metrics_text

        server = self.lab
        if path == "/health":
            return self._send(200 if server.ready else 503, b"", "text/plain")
        if path == "/version":
            return self._send(200, {"version": _vllm_version(server.args.lab_engine)})
        if path == "/v1/models":
            ctx = server.args.context_length or 1024
            model = {"id": server.served_name, "object": "model", "root": server.args.model_path}
            return self._send(200, {"object": "list", "data": [{**model, "max_model_len": ctx}]})
        if path == "/metrics":
            return self._send(200, metrics_text(server.totals, server.served_name), "text/plain")
        if path == "/reset_prefix_cache" and method == "POST":
            return self._send(200, b"", "text/plain")
        if path == "/v1/completions" and method == "POST":
            if not server.ready:
                return self._send(503, {"error": {"message": "the engine is not running"}})
            try:
                body = self._body()
                return self._send(200, server.completions(body))
            except ValueError as exc:
                return self._send(400, {"error": {"message": str(exc), "type": "BadRequestError"}})
            except EngineDeadError as exc:
                return self._send(500, {"error": {"message": f"EngineCore encountered an issue: {exc}"}})
        return self._send(404, NOT_FOUND)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        path = urlparse(self.path).path
        with contextlib.suppress(BrokenPipeError):
            if self.lab.vllm:
                self._vllm_route(method, path)
                return
            answer = self.SGLANG.get(path)
            if answer is None:
                self._send(404, NOT_FOUND)
                return
            getattr(self, answer)(method, path)

    # -- SGLang's routes ----------------------------------------------------------------------------
    def _health(self, method: str, path: str) -> None:
        if not self.lab.ready:
            return self._send(503, b"", "text/plain")
        if path == "/health_generate" or self.lab.version >= Version.parse("0.5.23"):
            self.lab.generate_ids([0], 1, ignore_eos=True, warmup=True)
        return self._send(200, b"", "text/plain")

    def _renamed(self, path: str, new: str, answer: Any) -> None:
        """``/server_info`` and ``/model_info`` from 0.5.6 on; the ``/get_*`` names before, then
        deprecated (logged)."""
        renamed = self.lab.version >= Version.parse("0.5.6")
        if path == new and not renamed:
            return self._send(404, NOT_FOUND)
        if path != new and renamed:
            self.lab.log(
                f"Endpoint '{path}' is deprecated and will be removed in a future version. Please use '{new}' instead.",
                scheduler=False,
            )
        return self._send(200, answer())

    def _server_info(self, method: str, path: str) -> None:
        self._renamed(path, "/server_info", self.lab.server_info)

    def _model_info(self, method: str, path: str) -> None:
        self._renamed(path, "/model_info", self.lab.model_info)

    def _flush(self, method: str, path: str) -> None:
        code, text = self.lab.flush_cache()
        self._send(code, text, "text/plain")

    def _metrics(self, method: str, path: str) -> None:
        if self.lab.metrics is None:  # SGLang mounts /metrics only with --enable-metrics
            return self._send(404, NOT_FOUND)
        return self._send(200, self.lab.metrics.text(), "text/plain; version=0.0.4")

    def _tokenize(self, method: str, path: str) -> None:
        if method != "POST" or self.lab.version < Version.parse("0.5.5"):
            return self._send(404, NOT_FOUND)
        try:
            return self._send(200, self.lab.tokenize(self._body()))
        except ValueError as exc:
            return self._send(400, {"error": {"message": str(exc)}})

    def _generate(self, method: str, path: str) -> None:
        if method != "POST":
            return self._send(404, NOT_FOUND)
        if not self.lab.ready:
            return self._send(503, {"error": {"message": "server is starting"}})
        try:
            body = self._body()
        except ValueError as exc:
            return self._send(400, {"error": {"message": f"invalid JSON body: {exc}"}})
        try:
            return self._send(200, self.lab.generate(body))
        except ValueError as exc:
            return self._send(400, {"error": {"message": str(exc)}})


def _handler(server: LabServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"lab": server})


def main(argv: Sequence[str] | None = None) -> int:
    gc.disable()  # until the server is up (workbench.collector.started)
    argv = sys.argv[1:] if argv is None else list(argv)
    args, version = serverargs.parse(argv)
    if args.nnodes > 1 and args.node_rank >= 1:  # a node that does not serve (no model, no tokenizer)
        from workbench.lab.ranks import run_worker

        return run_worker(args, version)
    server = LabServer(args, version)
    from transformers import AutoTokenizer

    server.tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_path or args.model_path)
    return server.start()


if __name__ == "__main__":
    sys.exit(main())
