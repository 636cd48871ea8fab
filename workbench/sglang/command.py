"""SGLang: profile -> the exact launch command for one SGLang version (argv + env + warnings).

Version facts (each release's ``srt/server_args.py``): 0.5.23 deprecates ``--disable-cuda-graph`` for
``--cuda-graph-backend-decode/prefill disabled``, ignores ``--num-continuous-decode-steps`` and
rejects ``--cuda-graph-max-bs`` (ambiguous prefix); older versions know only the old spellings.
0.5.23 is the first version read with the new flags, so it is the dividing line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.engine.version import Version
from workbench.errors import InputError
from workbench.servers.command import Command, launcher_for
from workbench.servers.profiles import Profile, flag_int, join_flags, split_flags

if TYPE_CHECKING:
    from workbench.servers.ranks import RankFlags

MODULE = "sglang.launch_server"
NEW_FLAGS_SINCE = Version.parse("0.5.23")
SPEC_FLAGS = {
    "algorithm": "--speculative-algorithm",
    "num_steps": "--speculative-num-steps",
    "eagle_topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
}


def build(profile: Profile, version: str | None, python: str) -> Command:
    """The launch command. ``version`` None: the spelling as written, plus warnings saying what
    0.5.23 would do with it."""
    v = Version.parse(version, what="sglang version") if version else None
    where = f"[profiles.{profile.name}].args"
    items = split_flags(list(profile.args), where)
    warnings: list[str] = []
    for flag, _ in items:
        if flag in ("--port", "--model-path", "--model"):
            raise InputError(
                f"{where}: {flag} is set by the profile's {'port' if flag == '--port' else 'model'} field, not args"
            )
        if (
            flag.startswith("--speculative-")
            and flag != "--speculative-draft-model-path"
            and flag in SPEC_FLAGS.values()
        ):
            raise InputError(f"{where}: {flag} belongs in [profiles.{profile.name}].speculative")
        if flag in ("--speculative-draft-model-path", "--speculative-draft-model"):
            raise InputError(f"{where}: {flag} is set by the profile's draft field")
    items = _respell(items, v, warnings)
    general = join_flags(items)
    # --port goes right after --host (where launch commands usually have it), else at the end
    port = ["--port", str(profile.port)]
    if "--host" in general:
        i = general.index("--host") + 2
        general = general[:i] + port + general[i:]
    else:
        general = general + port
    spec = []
    s = profile.speculative
    if s.get("algorithm"):
        spec += ["--speculative-algorithm", s["algorithm"]]
    if profile.draft:
        spec += ["--speculative-draft-model-path", profile.draft]
    for key in ("eagle_topk", "num_draft_tokens", "num_steps"):
        if key in s:
            spec += [SPEC_FLAGS[key], str(s[key])]
    argv = [*launcher_for(profile, python, MODULE), "--model-path", profile.model, *general, *spec]
    return Command(
        profile.name,
        profile.host,
        str(v) if v else None,
        argv,
        dict(profile.env),
        profile.log_path,
        profile.port,
        profile.run_dir,
        warnings,
        "sglang",
    )


def _respell(items: list[Any], v: Version | None, warnings: list[Any]) -> list[Any]:
    out = []
    new = v is not None and v >= NEW_FLAGS_SINCE
    old = v is not None and v < NEW_FLAGS_SINCE
    backends = {}
    for flag, vals in items:
        if flag == "--disable-cuda-graph":
            if new:
                warnings.append(
                    "0.5.23 deprecates --disable-cuda-graph: using --cuda-graph-backend-decode "
                    "disabled --cuda-graph-backend-prefill disabled"
                )
                out += [("--cuda-graph-backend-decode", ["disabled"]), ("--cuda-graph-backend-prefill", ["disabled"])]
                continue
            if v is None:
                warnings.append(
                    "on 0.5.23 --disable-cuda-graph is deprecated in favour of "
                    "--cuda-graph-backend-decode/prefill disabled"
                )
        elif flag == "--cuda-graph-max-bs":
            if new:
                warnings.append("0.5.23 rejects --cuda-graph-max-bs (ambiguous): using --cuda-graph-max-bs-decode")
                out.append(("--cuda-graph-max-bs-decode", vals))
                continue
            if v is None:
                warnings.append(
                    "on 0.5.23 --cuda-graph-max-bs is rejected as ambiguous (--cuda-graph-max-bs-decode/prefill)"
                )
        elif flag == "--num-continuous-decode-steps":
            if new or v is None:
                warnings.append(
                    ("0.5.23" if new else "on 0.5.23")
                    + " --num-continuous-decode-steps is accepted but ignored (read nowhere)"
                )
        elif flag in ("--cuda-graph-backend-decode", "--cuda-graph-backend-prefill") and not new:
            if vals != ["disabled"]:
                raise InputError(
                    f"{flag} {' '.join(vals)}: only SGLang 0.5.23 and later have it" + (f" (host has {v})" if v else "")
                )
            if old:
                backends[flag] = True
                if "--disable-cuda-graph" not in [f for f, _ in out]:
                    warnings.append(f"{v} predates {flag}: using --disable-cuda-graph")
                    out.append(("--disable-cuda-graph", []))
                continue
        elif flag == "--cuda-graph-max-bs-decode" and old:
            warnings.append(f"{v} predates --cuda-graph-max-bs-decode: using --cuda-graph-max-bs")
            out.append(("--cuda-graph-max-bs", vals))
            continue
        elif flag == "--disable-decode-cuda-graph" and old:
            warnings.append(f"{v} predates --disable-decode-cuda-graph: using --disable-cuda-graph")
            out.append(("--disable-cuda-graph", []))
            continue
        out.append((flag, vals))
    return out


#: Placing one rank of a multi-node server (``srt/arg_groups/fields/parallel.py``): the node count,
#: the node's rank and the rendezvous ``ADDR:PORT`` (``tcp://`` of it: ``srt/distributed/bootstrap.py``);
#: ranks >= 1 take the same command.
def rank_flags() -> RankFlags:
    from workbench.servers.ranks import RankFlags

    return RankFlags(
        nnodes=("--nnodes",),
        node_rank=("--node-rank",),
        addr=("--dist-init-addr", "--nccl-init-addr"),
        addr_has_port=True,
    )


def check_nodes(argv: list[Any], nnodes: int, where: str) -> None:
    """SGLang's own checks of a node count (``srt/arg_groups/validation_hook.py: check_server_args``),
    made before anything starts: they run only once the server resolves its arguments on the node.
    ``(tp_size * pp_size) % nnodes == 0`` (except when experts join by scaling), and no data-parallel
    replicas across nodes (``--dp-size`` with ``--enable-dp-attention`` is attention DP, allowed)."""
    from workbench.servers.command import model_index

    flags = dict(split_flags(argv[model_index(argv) :], "argv"))

    def size(*names: str) -> int:
        return flag_int(flags, names, where)

    tp = size("--tp-size", "--tensor-parallel-size", "--tp")
    pp = size("--pp-size", "--pipeline-parallel-size")
    dp = size("--dp-size", "--data-parallel-size")
    scale = (flags.get("--ep-join-mode") or [""])[0] == "scale"
    if not scale and (tp * pp) % nnodes:
        raise InputError(
            f"{where}: tp_size {tp} x pp_size {pp} does not divide over {nnodes} nodes (SGLang asserts "
            "'tp_size must be divisible by number of nodes' once the nodes start, after they met)"
        )
    if dp > 1 and "--enable-dp-attention" not in flags:
        raise InputError(
            f"{where}: --dp-size {dp} over {nnodes} nodes: SGLang refuses multi-node data-parallel replicas "
            "(use attention DP across nodes)"
        )
