"""SGLang log lines per emulated version: the one regex of the reference covers every format."""

from __future__ import annotations

import re

from workbench.engine.version import Version
from workbench.lab.logfmt import LogFormat

DECODE_RE = re.compile(
    r"Decode batch(?: \[\d+\])?[.,] #running-req: (\d+), (?:.*?accept len: ([\d.]+), "
    r"(?:accept rate: ([\d.]+), )?)?.*?gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)"
)
VERSIONS = {
    "0.4.9": Version.parse("0.4.9"),
    "0.5.4": Version.parse("0.5.4"),
    "0.5.5": Version.parse("0.5.5"),
    "0.5.12": Version.parse("0.5.12"),
    "0.5.13": Version.parse("0.5.13"),
    "0.5.23": Version.parse("0.5.23"),
}


def test_decode_lines_per_version_parse_with_the_reference_regex():
    for name, v in VERSIONS.items():
        f = LogFormat(v, tp_size=8)
        # a window of 40 verifies that emitted 120 tokens, 4 draft tokens (3 steps)
        rate = f.accept_rate(120, 40, 3, 4)
        line = f.prefix(True) + f.decode(2, 300, 0.01, 55.5, 0, accept_len=3.0, accept_rate=rate, forward_ct=7)
        m = DECODE_RE.search(line)
        assert m, (name, line)
        assert float(m.group(2)) == 3.0 and float(m.group(4)) == 55.5
        assert " TP0]" in line
        if v <= Version.parse("0.4.9"):
            assert "Decode batch." in line and m.group(3) is None and not line.endswith(", ")
        elif v < Version.parse("0.5.12"):
            assert line.endswith(", ") and float(m.group(3)) == 0.75  # AL / (steps + 1)
        else:
            assert line.endswith("#queue-req: 0") and float(m.group(3)) == round(2 / 3, 2)  # (AL-1)/(ndt-1)
        if v == Version.parse("0.5.4"):
            assert "Decode batch [7]," in line


def test_milestones_follow_the_version():
    old, new = LogFormat(Version.parse("0.5.5")), LogFormat(Version.parse("0.5.23"))
    assert old.server_args({"model_path": "/m", "tp_size": 8}) == "server_args=ServerArgs(model_path='/m', tp_size=8)"
    assert new.server_args({"model_path": "/m"}) == "server_args={'model_path': '/m'}"
    assert (
        old.load_end("LlamaForCausalLM", "torch.bfloat16", 1.0, 70.0, 2.0)
        == "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=70.00 GB, mem usage=2.00 GB."
    )
    assert new.load_end("LlamaForCausalLM", "torch.bfloat16", 1.0, 70.0, 2.0).startswith(
        "Load weight end. elapsed=1.00 s, type=LlamaForCausalLM"
    )
    assert "dtype: torch.bfloat16, #tokens: 5" in new.kv_cache("torch.bfloat16", 5, 1, 1)
    assert (
        old.kv_cache("torch.bfloat16", 5, 1, 1) == "KV Cache is allocated. #tokens: 5, K size: 1.00 GB, V size: 1.00 GB"
    )
    assert old.graph_begin("draft", 3.0).startswith(
        "Capture draft cuda graph begin. This can take up to several minutes."
    )
    assert new.graph_begin("target", 3.0, 4).startswith(
        "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4"
    )
    p = new.prefill(1, 12, 0, 12, 0.0, 0, 0)
    assert p.startswith("Prefill batch, #new-seq: 1, #new-token: 12") and "#pending-token: 0" in p
    assert LogFormat(Version.parse("0.4.9")).prefill(1, 12, 0, 12, 0.0, 0, 0).startswith("Prefill batch. ")
