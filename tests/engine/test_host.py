"""The host's own SGLang asked through the job bundle over a real sshd: the extractor runs there."""

from __future__ import annotations

import pytest

from workbench.engine import capture, rules, table

pytestmark = pytest.mark.ssh


def test_host_sglang_is_read_over_ssh(ssh_host):
    from workbench.engine.host import local_installation

    _root, version = local_installation()  # the sshd runs this machine's python
    got = rules(f"sglang=={version}", host=ssh_host, source="host")
    want = table.release(version)
    assert want is not None
    assert {r.arch: r.to_dict() for r in got} == {r.arch: r.to_dict() for r in want}
    res = capture(f"sglang=={version}", arch="DeepseekV3ForCausalLM", num_layers=61, ids=[2, 30, 58], host=ssh_host)
    assert res.source == "host" and res.points == ["out(1)", "out(29)", "out(57)"]
    # a release the host does not run: the table answers, and says so
    res = capture("sglang==0.5.12", arch="DeepseekV3ForCausalLM", num_layers=61, ids=[2, 30, 58], host=ssh_host)
    assert res.source == "table" and res.points == ["out(2)", "out(30)", "out(58)"]
