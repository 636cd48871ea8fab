"""The capture question asked on a host through the job bundle over a real sshd: the host's own
installed engine read there, or the rules shipped with the job; the answer says which, and is the
laptop's."""

from __future__ import annotations

import pytest

from workbench.engine import capture, table

pytestmark = pytest.mark.ssh


def test_the_host_reads_its_own_engine_or_answers_with_the_shipped_rules(ssh_host):
    from workbench.engine.host import local_installation
    from workbench.errors import InputError
    from workbench.remote import NearCompute
    from workbench.remote.engine import host_release, shipment

    _root, version = local_installation()  # the sshd runs this machine's python
    rel = host_release(ssh_host, f"sglang=={version}")
    want = table.release("sglang", version)
    assert rel.source == "host" and rel.rules == want.rules and rel.registry == want.registry
    res = capture(f"sglang=={version}", arch="DeepseekV3ForCausalLM", num_layers=61, ids=[2, 30, 58], release=rel)
    assert res.source == "host" and res.points == ["out(1)", "out(29)", "out(57)"]

    near = NearCompute(ssh_host)
    job = {"engine": "sglang==0.5.12", "archs": ["DeepseekV3ForCausalLM"], "num_layers": 61, "ids": [2, 30, 58]}
    # a release the host does not run, and no rules shipped: the host has no table, and says so
    with pytest.raises(InputError, match="was not read"):
        near.run("engine_capture", job)
    # shipped: the laptop's rules, the laptop's answer
    got, _tr = near.run("engine_capture", {**job, "rules": shipment(["DeepseekV3ForCausalLM"])})
    here = capture("sglang==0.5.12", arch="DeepseekV3ForCausalLM", num_layers=61, ids=[2, 30, 58])
    assert got["source"] == "shipped" and got["points"] == here.points == ["out(2)", "out(30)", "out(58)"]
    assert got["evidence"] == here.evidence
