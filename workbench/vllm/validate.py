"""vLLM's checks before a launch: its own ``serve`` parser on the host (``probe.py``), and the
workbench's rules for the speculative settings, which the parser takes as an opaque JSON object."""

from __future__ import annotations

from typing import Any

from workbench.servers.command import Command
from workbench.servers.profiles import Profile
from workbench.servers.validate import Finding

#: the draft architectures vLLM's EAGLE-3 path takes as they are (SpecForge/SGLang's name, or its own)
EAGLE3_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM")


def rule_findings(profile: Profile, cmd: Command, draft_config: dict[str, Any] | None) -> list[Finding]:
    out: list[Finding] = []
    s = profile.speculative
    where = f"[profiles.{profile.name}].speculative"
    algo = str(s.get("algorithm") or "").lower()
    topk, steps, ndt = s.get("eagle_topk"), s.get("num_steps"), s.get("num_draft_tokens")
    if topk not in (None, 1):
        out.append(
            Finding(
                "error",
                "spec-topk-vllm",
                f"{where}.eagle_topk = {topk}: vLLM's EAGLE-3 drafts a chain (topk 1); its trees are a "
                "speculative_token_tree, not a topk",
                "eagle_topk = 1 (or leave it out)",
            )
        )
    if ndt is not None and steps is not None and ndt != steps + 1:
        out.append(
            Finding(
                "error",
                "spec-chain-tokens",
                f"{where}: vLLM verifies num_steps + 1 = {steps + 1} tokens a round (num_speculative_tokens "
                f"{steps} and the bonus token), not num_draft_tokens {ndt}",
                f"num_draft_tokens = {steps + 1} (or leave it out)",
            )
        )
    if (algo in ("eagle", "eagle3") or s) and not profile.draft:
        out.append(
            Finding(
                "error",
                "spec-no-draft",
                f"[profiles.{profile.name}].draft: {algo or 'speculative decoding'} needs a draft model path",
                'set draft = "/path/to/draft"',
            )
        )
    if profile.draft and not s.get("num_steps"):
        out.append(
            Finding(
                "error",
                "spec-no-steps",
                f"{where}.num_steps: vLLM needs num_speculative_tokens for an EAGLE draft",
                "num_steps = 3 (the chain length)",
            )
        )
    if draft_config is not None:
        archs = " ".join(draft_config.get("architectures") or [])
        is_eagle3 = any(a in archs for a in EAGLE3_ARCHS) or "eagle_config" in draft_config
        if algo == "eagle" and is_eagle3:
            out.append(
                Finding(
                    "error",
                    "spec-eagle3-under-eagle",
                    f"the draft is an EAGLE-3 model ({archs or 'eagle_config present'}) but the method is eagle",
                    'speculative.algorithm = "EAGLE3"',
                )
            )
    return out


def parser_findings(probe: dict[str, Any]) -> list[Finding]:
    if not probe.get("version"):
        return [
            Finding(
                "warning",
                "vllm-missing",
                f"vLLM is not installed for {probe.get('python', 'the host python')}: the host's own parser "
                "could not check the arguments",
                "set [hosts.NAME].python (or the profile's launcher) to vLLM's python",
                "host",
            )
        ]
    if probe.get("ok") is False:
        return [
            Finding(
                "error",
                "parser-rejected",
                f"vLLM {probe['version']} rejects the arguments: {probe.get('error')}",
                "fix the flag the parser names",
                "vllm",
            )
        ]
    if probe.get("ok"):
        return [Finding("info", "parser-ok", f"vLLM {probe['version']}'s parser accepts the arguments", "", "vllm")]
    return []
