"""SGLang's log lines, per emulated version (pure Python).

Formats follow the released wheels (0.4.9, 0.5.4, 0.5.4.post1-0.5.5, 0.5.12-0.5.13, 0.5.23):
the ``[time{ms}{rank}]`` prefix, ``server_args=`` (dataclass repr before 0.5.23, a dict after),
weight-load, KV-cache and graph-capture milestones, ``Prefill batch`` / ``Decode batch`` lines and
the version's accept-rate formula.

``LogFormat(version, tp_size)``: ``prefix(rank)``, ``server_args(args)``, ``load_begin()``,
``load_end(...)``, ``kv_cache(...)``, ``graph_lines(...)``, ``prefill(...)``, ``decode(...)``,
``accept_rate(...)``.
"""

from __future__ import annotations

import time
from typing import Any

from workbench.engine.version import Version

V0_4_9 = Version.parse("0.4.9")
V0_5_4 = Version.parse("0.5.4")
V0_5_5 = Version.parse("0.5.5")
V0_5_12 = Version.parse("0.5.12")
V0_5_23 = Version.parse("0.5.23")


class LogFormat:
    def __init__(
        self, version: Version | str, tp_size: int = 1, log_ms: bool = False, forward_iters: bool = False
    ) -> None:
        self.v = Version.parse(version)
        self.tp_size = tp_size
        self.log_ms = log_ms
        self.forward_iters = forward_iters

    # -- prefix -------------------------------------------------------------------------------
    def stamp(self, t: float | None = None) -> str:
        t = time.time() if t is None else t
        s = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
        if self.log_ms and self.v >= V0_5_23:
            s += f".{int((t % 1) * 1000):03d}"
        return s

    def prefix(self, scheduler: bool) -> str:
        rank = " TP0" if scheduler and self.tp_size > 1 else ""
        return f"[{self.stamp()}{rank}] "

    def uvicorn(self, level: str, message: str) -> str:
        return f"[{self.stamp()}] {(level + ':').ljust(9)} {message}"

    # -- milestones ------------------------------------------------------------------------------
    def server_args(self, args: dict[str, Any]) -> str:
        if self.v >= V0_5_23:
            return f"server_args={args!r}"
        body = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"server_args=ServerArgs({body})"

    @staticmethod
    def load_begin(avail: float) -> str:
        return f"Load weight begin. avail mem={avail:.2f} GB"

    def load_end(self, model_class: str, dtype: str, elapsed: float, avail: float, usage: float) -> str:
        if self.v >= V0_5_23:
            return (
                f"Load weight end. elapsed={elapsed:.2f} s, type={model_class}, avail mem={avail:.2f} GB, "
                f"mem usage={usage:.2f} GB."
            )
        return (
            f"Load weight end. type={model_class}, dtype={dtype}, avail mem={avail:.2f} GB, mem usage={usage:.2f} GB."
        )

    def kv_cache(self, dtype: str, tokens: int, k_gb: float, v_gb: float) -> str:
        if self.v >= V0_5_23:
            return f"KV Cache is allocated. dtype: {dtype}, #tokens: {tokens}, K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"
        return f"KV Cache is allocated. #tokens: {tokens}, K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"

    @staticmethod
    def memory_pool_end(avail: float) -> str:
        return f"Memory pool end. avail mem={avail:.2f} GB"

    def graph_begin(self, role: str, avail: float, num_tokens: int = 1, bs: list[int] | None = None) -> str:
        """role: 'target' | 'draft' | 'draft extend'."""
        if self.v >= V0_5_23:
            name = {"target": "target verify", "draft": "draft decode", "draft extend": "draft extend"}[role]
            bs_part = f"bs={bs}, " if role != "target" and bs else ""
            return (
                f"Capture {name} CUDA graph begin. backend=full, num_tokens_per_req={num_tokens}, "
                f"{bs_part}avail mem={avail:.2f} GB"
            )
        name = {"target": "cuda graph", "draft": "draft cuda graph", "draft extend": "draft extend cuda graph"}[role]
        return f"Capture {name} begin. This can take up to several minutes. avail mem={avail:.2f} GB"

    def graph_end(self, role: str, elapsed: float, usage: float, avail: float, bs: list[int]) -> str:
        if self.v >= V0_5_23:
            name = {"target": "target verify", "draft": "draft decode", "draft extend": "draft extend"}[role]
            bs_part = f"bs={bs}, " if role == "target" else ""
            return (
                f"Capture {name} CUDA graph end. {bs_part}elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, "
                f"avail mem={avail:.2f} GB."
            )
        name = {"target": "cuda graph", "draft": "draft cuda graph", "draft extend": "draft extend cuda graph"}[role]
        return f"Capture {name} end. Time elapsed: {elapsed:.2f} s. mem usage={usage:.2f} GB. avail mem={avail:.2f} GB."

    # -- batches -------------------------------------------------------------------------------
    def _head(self, what: str, forward_ct: int) -> str:
        if self.v <= V0_4_9:
            return f"{what} batch."
        if self.v == V0_5_4:
            return f"{what} batch [{forward_ct}],"
        if self.forward_iters:
            return f"{what} batch [{forward_ct}],"
        return f"{what} batch,"

    def prefill(
        self,
        new_seq: int,
        new_token: int,
        cached: int,
        used: int,
        usage: float,
        running: int,
        queue: int,
        forward_ct: int = 0,
        cuda_graph: bool = False,
        input_tps: float = 0.0,
    ) -> str:
        head = self._head("Prefill", forward_ct)
        if self.v <= V0_4_9:
            return (
                f"{head} #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached}, "
                f"#token: {used}, token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queue}"
            )
        line = (
            f"{head} #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached}, "
            f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queue}, "
        )
        if self.v < V0_5_12:
            return line
        return line + f"#pending-token: 0, cuda graph: {cuda_graph}, input throughput (token/s): {input_tps:.2f}"

    def accept_rate(self, accept_tokens: int, forward_ct: int, num_steps: int, num_draft_tokens: int) -> float | None:
        """The version's accept rate for one log window (None where the version prints none)."""
        if self.v <= V0_4_9 or forward_ct == 0:
            return None
        if self.v < V0_5_12:
            return accept_tokens / (forward_ct * (num_steps + 1))
        denom = (num_draft_tokens or num_steps + 1) - 1
        return (accept_tokens - forward_ct) / (forward_ct * max(1, denom))

    def decode(
        self,
        running: int,
        used: int,
        usage: float,
        gen_tps: float,
        queue: int,
        *,
        accept_len: float | None = None,
        accept_rate: float | None = None,
        cuda_graph: bool = True,
        forward_ct: int = 0,
    ) -> str:
        head = self._head("Decode", forward_ct)
        spec = ""
        if accept_len is not None:
            spec = f"accept len: {accept_len:.2f}, "
            if accept_rate is not None:
                spec += f"accept rate: {accept_rate:.2f}, "
        line = (
            f"{head} #running-req: {running}, #token: {used}, token usage: {usage:.2f}, {spec}"
            f"cuda graph: {cuda_graph}, gen throughput (token/s): {gen_tps:.2f}, #queue-req: {queue}"
        )
        if V0_5_4 <= self.v < V0_5_12:
            line += ", "
        return line
