"""SGLang's checks before a launch: the host's own SGLang parser, and the workbench's rules.

The parser (``prepare_server_args`` in the host's python) catches unknown, ambiguous and badly
typed flags; it does not check the speculative triple or the draft, so the rules below do.
"""

from __future__ import annotations

from typing import Any

from workbench.servers.command import Command
from workbench.servers.profiles import Profile
from workbench.servers.validate import Finding

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
