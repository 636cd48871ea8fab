"""Compute near the data over a real sshd: the job bundle shipped once per version, jobs run with
the host's python, only the result comes back, and the bytes moved stay under 1% of the tensors."""

from __future__ import annotations

import json

import pytest

from workbench.errors import InputError
from workbench.remote import NearCompute
from workbench.remote.bundle import ALLOWED, EXCLUDED, current

ENGINE = "sglang==0.5.12"


def test_bundle_is_the_core_only_and_deterministic():
    b = current()
    assert b.tarball() == b.tarball() and len(b.digest) == 64 and b.name == f"wb-{b.digest[:16]}"
    mods = b.modules()
    assert {
        "workbench.remote.runner",
        "workbench.remote.jobs",
        "workbench.hidden.align",
        "workbench.drafter.evaluate",
        "workbench.layers",
    } <= set(mods)
    assert not [m for m in mods for e in EXCLUDED if (m == e or m.startswith(e + ".")) and m not in ALLOWED]
    # the code stays small, compressed as it ships (xz); the doctor's key table travels with it, the
    # rule tables do not (a job gets the entries it needs in its arguments)
    import lzma

    code = lzma.compress(b"".join(data for rel, data in b.files if rel.endswith(".py")), preset=9)
    data = lzma.compress(b"".join(data for rel, data in b.files if not rel.endswith(".py")), preset=9)
    assert b.tarball("gz") == b.tarball("gz")
    assert len(code) < 150_000 and len(data) < 100_000
    assert "workbench/doctor/config_keys.json" in b.data_files()
    assert not any(p.endswith("_rules.json") for p in b.data_files())


def _job(data, **extra):
    return {
        "train": str(data.training),
        "infer": str(data.dump),
        "count": 4,
        "engine": ENGINE,
        "num_layers": data.num_layers,
        "arch": "LlamaForCausalLM",
        "draft_config": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [k + 1 for k in data.trained]}},
        "draft_config_path": "/srv/draft/config.json",
        **extra,
    }


pytestmark = pytest.mark.ssh


def test_align_near_the_data_over_ssh_moves_under_one_percent(ssh_host, host_data, tmp_path):
    near = NearCompute(ssh_host, cache_root=str(tmp_path / "cache"))
    result, cold = near.run("align", _job(host_data))
    al = result["align"]
    # the host chose where to run, by the engine's own rule, and says why
    assert result["device_choice"]["device"] == result["device"].split(":")[0] and result["device_choice"]["reason"]
    assert [b["physical"] for b in al["best"]] == ["out(1)", "out(5)", "out(8)"]
    assert [b["verdict"] for b in al["best"]] == ["match"] * 3
    assert al["tokens_compared"] == 4 * 512
    rec = al["recommendation"]
    assert rec["layer_ids"] == [1, 5, 8] and rec["current_ids"] == [2, 6, 9] and rec["differs"]
    (finding,) = al["findings"]
    assert finding["code"] == "layer-ids-engine-mismatch" and finding["evidence"]["shift"] == 1
    assert finding["fix"]["edits"] == [
        {"key": "eagle_config.eagle_aux_hidden_state_layer_ids", "value": [1, 5, 8], "delete": False}
    ]

    # the cold run shipped the bundle; even so, well under 1% of the tensor bytes crossed the network
    assert cold.shipped_bytes == len(current().tarball())
    assert cold.tensor_bytes > 15_000_000
    assert cold.wire_sent and cold.wire_received and cold.moved_bytes == cold.wire_sent + cold.wire_received
    assert cold.moved_bytes >= cold.shipped_bytes + len(json.dumps(result)) // 2
    assert cold.ratio <= 0.01, cold.text()
    print(cold.text())
    assert (tmp_path / "cache" / current().name / ".complete").read_text() == current().digest

    # warm: one round trip, nothing shipped
    result2, warm = near.run("align", _job(host_data))
    assert warm.shipped_bytes == 0 and warm.round_trips == 1
    assert warm.ratio < cold.ratio / 2
    assert result2["align"]["matrix"] == al["matrix"]


def test_the_same_job_in_process_gives_the_same_numbers(ssh_host, host_data, tmp_path):
    from workbench.hosts.local import LocalHost

    remote, _ = NearCompute(ssh_host, cache_root=str(tmp_path / "c")).run("align", _job(host_data, count=2))
    local, tr = NearCompute(LocalHost()).run("align", _job(host_data, count=2))
    assert tr.moved_bytes == 0 and tr.bundle == "in-process"
    import numpy as np

    assert np.allclose(np.array(local["align"]["matrix"]), np.array(remote["align"]["matrix"]), rtol=1e-9, atol=1e-12)


def test_probe_and_errors_are_one_line(ssh_host, tmp_path):
    near = NearCompute(ssh_host, cache_root=str(tmp_path / "cache"))
    p = near.probe()
    assert p["libs"]["torch"] and p["libs"]["numpy"] and p["libs"]["safetensors"] and p["cuda"] is False
    with pytest.raises(InputError) as err:
        near.run("align", {"train": str(tmp_path / "nowhere"), "infer": str(tmp_path)})
    msg = str(err.value)
    assert msg.startswith("host test: ") and "nowhere" in msg and "\n" not in msg


def test_a_new_version_gets_its_own_folder(ssh_host, tmp_path, monkeypatch):
    from workbench.remote import bundle as B

    near = NearCompute(ssh_host, cache_root=str(tmp_path / "cache"))
    near.probe()
    old = current()
    changed = B.Bundle((*old.files, ("workbench/remote/zz_marker.py", b"X = 1\n")), "f" * 64)
    monkeypatch.setattr(B, "current", lambda: changed)
    _, tr = near.run("probe")
    assert tr.shipped_bytes > 0
    names = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert names == sorted([old.name, changed.name])
    assert (tmp_path / "cache" / changed.name / "workbench" / "remote" / "zz_marker.py").exists()


def test_a_host_python_without_lzma_gets_the_gzip_copy(tmp_path):
    """The installer refuses the xz bundle with its own marker on a python built without lzma (the
    near side then resends it gzip'd), and installs the gzip'd one there."""
    import subprocess
    import sys

    from workbench.remote.near import INSTALL

    nolzma = tmp_path / "nolzma"
    nolzma.mkdir()
    (nolzma / "lzma.py").write_text("raise ImportError('built without lzma')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(nolzma)}
    b = current()
    root = tmp_path / "root"
    root.mkdir()
    for fmt in ("xz", "gz"):
        tar = tmp_path / f"b.tar.{fmt}"
        tar.write_bytes(b.tarball(fmt))
        r = subprocess.run(
            [sys.executable, "-B", "-c", INSTALL, str(root), b.name, str(tar), b.digest],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        if fmt == "xz":
            assert r.returncode == 3 and json.loads(r.stdout) == {"installed": False, "no_lzma": True}
            assert not (root / b.name).exists()
        else:
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout) == {"installed": True}
            assert (root / b.name / "workbench" / "remote" / "jobs.py").is_file()
