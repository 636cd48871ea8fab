"""Checks before a launch: the host's own SGLang parser, and the workbench's rules.

The parser (``prepare_server_args`` in the host's python) catches unknown, ambiguous and badly
typed flags; it does not check the speculative triple or the draft, so the rules below do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from workbench.results import Result
from workbench.sglang.command import Command
from workbench.sglang.profiles import Profile

if TYPE_CHECKING:
    from workbench.hosts.base import Host

PROBE_KEYS = [
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
    "tp_size",
    "port",
    "mem_fraction_static",
    "disable_cuda_graph",
]


@dataclass
class Finding(Result):
    severity: str  # "error" blocks the launch; "warning" and "info" do not
    code: str
    message: str
    fix: str = ""
    source: str = "workbench"


def rule_findings(profile: Profile, cmd: Command, draft_config: dict[str, Any] | None) -> list[Finding]:
    out: list[Finding] = []
    s = profile.speculative
    where = f"[profiles.{profile.name}].speculative"
    triple = [k for k in ("num_steps", "eagle_topk", "num_draft_tokens") if k in s]
    algo = (s.get("algorithm") or "").upper()
    if triple and len(triple) < 3:
        missing = sorted({"num_steps", "eagle_topk", "num_draft_tokens"} - set(triple))
        out.append(
            Finding(
                "error",
                "spec-partial",
                f"{where}: num_steps, eagle_topk and num_draft_tokens go together or not at all "
                f"(missing {', '.join(missing)}); SGLang fails on a partial set",
                "give all three, or none to let SGLang choose",
            )
        )
    if triple and not algo:
        out.append(
            Finding(
                "error",
                "spec-no-algorithm",
                f"{where}: step/topk/token values without an algorithm",
                'set speculative.algorithm (e.g. "EAGLE3")',
            )
        )
    if len(triple) == 3:
        steps, topk, ndt = s["num_steps"], s["eagle_topk"], s["num_draft_tokens"]
        if topk == 1 and ndt != steps + 1:
            out.append(
                Finding(
                    "error",
                    "spec-chain-tokens",
                    f"{where}: with eagle_topk = 1 the draft is a chain, so num_draft_tokens must be "
                    f"num_steps + 1 = {steps + 1} (SGLang silently changes {ndt} to {steps + 1})",
                    f"num_draft_tokens = {steps + 1}",
                )
            )
        if ndt > steps * topk + 1:
            out.append(
                Finding(
                    "error",
                    "spec-tokens-bound",
                    f"{where}: num_draft_tokens {ndt} > num_steps * eagle_topk + 1 = {steps * topk + 1}: "
                    "the tree has fewer candidates than tokens to verify (a runtime error)",
                    f"num_draft_tokens <= {steps * topk + 1}",
                )
            )
    if algo in ("EAGLE", "EAGLE3") and not profile.draft:
        out.append(
            Finding(
                "error",
                "spec-no-draft",
                f"[profiles.{profile.name}].draft: {algo} needs a draft model path "
                "(without one SGLang loads the target as the draft)",
                'set draft = "/path/to/draft"',
            )
        )
    if draft_config is not None and algo:
        archs = " ".join(draft_config.get("architectures") or [])
        is_eagle3 = "Eagle3" in archs or "eagle_config" in draft_config
        if algo == "EAGLE" and is_eagle3:
            out.append(
                Finding(
                    "error",
                    "spec-eagle3-under-eagle",
                    f"the draft is an EAGLE-3 model ({archs or 'eagle_config present'}) but the algorithm "
                    "is EAGLE: SGLang skips the fc over aux hidden states and accept len sits at 1.00",
                    'speculative.algorithm = "EAGLE3"',
                )
            )
        if algo == "EAGLE3" and archs and not is_eagle3:
            out.append(
                Finding(
                    "warning",
                    "spec-draft-not-eagle3",
                    f"algorithm EAGLE3 but the draft's architectures are {archs}",
                    "check the draft checkpoint",
                )
            )
    return out


def parser_findings(probe: dict[str, Any]) -> list[Finding]:
    if not probe.get("version"):
        return [
            Finding(
                "warning",
                "sglang-missing",
                f"SGLang is not installed for {probe.get('python', 'the host python')}: the host's own "
                "parser could not check the arguments",
                "set [hosts.NAME].python to SGLang's python",
                "host",
            )
        ]
    if probe.get("ok") is False:
        return [
            Finding(
                "error",
                "parser-rejected",
                f"SGLang {probe['version']} rejects the arguments: {probe.get('error')}",
                "fix the flag the parser names",
                "sglang",
            )
        ]
    if probe.get("ok"):
        return [
            Finding(
                "info",
                "parser-ok",
                f"SGLang {probe['version']}'s parser accepts the arguments"
                + (" (triton stubbed)" if probe.get("triton") == "stub" else ""),
                "",
                "sglang",
            )
        ]
    return []


def doctor_findings(
    host: Host,
    profile: Profile,
    version: str | None,
    draft_config: dict[str, Any] | None,
    cuda_graph: bool = True,
) -> list[Finding]:
    """The doctor's static findings for the draft (and the target's config when readable), under
    the rules of the host's SGLang version. A remote draft is checked from its config.json.
    ``cuda_graph``: the launch decodes with CUDA graphs (no --disable-cuda-graph)."""
    if draft_config is None:
        return []
    import os
    import tempfile

    from workbench.doctor import run_static
    from workbench.hosts.local import LocalHost

    algo = profile.speculative.get("algorithm")
    engine = f"sglang=={version}" if version else "sglang"
    local = isinstance(host, LocalHost)
    with tempfile.TemporaryDirectory(prefix="wb-doctor-") as tmp:
        draft = os.path.expanduser(profile.draft) if local and profile.draft else None
        if draft is None or not os.path.isdir(draft):
            draft = os.path.join(tmp, "draft")
            os.makedirs(draft)
            with open(os.path.join(draft, "config.json"), "w") as fh:
                json.dump(draft_config, fh)
        target = None
        if profile.model.startswith(("/", "~", ".")):
            try:
                raw = host.read_bytes(profile.model.rstrip("/") + "/config.json")
                target = os.path.join(tmp, "target")
                os.makedirs(target)
                with open(os.path.join(target, "config.json"), "wb") as fh:
                    fh.write(raw)
            except Exception:
                target = None
        try:
            report = run_static(draft, target, engine=engine, algorithm=algo, cuda_graph=cuda_graph)
        except Exception as exc:  # the doctor must never block a launch by crashing
            return [Finding("info", "doctor-error", f"the doctor could not check the draft: {exc}", "", "doctor")]
    out = []
    for f in report.findings:
        if f.code == "weights-not-checked" and not local:
            continue  # only config.json travels for a remote draft
        fix = f.fix.summary if f.fix is not None else ""
        out.append(Finding(f.severity, f.code, f.message, fix, "doctor"))
    return out


def parse_probe(stdout: str) -> dict[str, Any]:
    try:
        return cast("dict[str, Any]", json.loads(stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"version": None, "ok": None, "error": f"probe printed no JSON: {stdout[-200:]!r}"}
