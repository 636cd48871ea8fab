"""known_hosts over the real sshd: a changed key TYPE is a changed key (never trusted over the old
one), ``@revoked`` keys are refused even when listed, ``@cert-authority`` and malformed lines break
nothing; the CLI says so in one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.toml_files import write_toml
from workbench.hosts import ChangedHostKeyError, HostError, RevokedHostKeyError, UnknownHostKeyError, make_host
from workbench.hosts.ssh import trust_key

pytestmark = pytest.mark.ssh


def _key(tmp_path: Path, kind: str, name: str) -> str:
    args = ["-t", kind] + (["-b", "2048"] if kind == "rsa" else [])
    subprocess.run(["ssh-keygen", "-q", *args, "-N", "", "-f", str(tmp_path / name), "-C", name], check=True)
    return " ".join((tmp_path / f"{name}.pub").read_text().split()[:2])


def _host(sshd, kh: Path):
    return make_host("test", {"kind": "ssh", **sshd.host_table(known_hosts=str(kh))})


def _real(sshd) -> str:
    return " ".join(sshd.host_key.with_suffix(".pub").read_text().split()[:2])


def test_a_changed_key_type_is_a_changed_key_and_trust_never_adds_it(sshd, tmp_path):
    """known_hosts has an RSA key for the host; the host presents ed25519."""
    rsa = _key(tmp_path, "rsa", "old_rsa")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {rsa}\n")
    before = kh.read_bytes()
    host = _host(sshd, kh)
    with pytest.raises(ChangedHostKeyError, match="HOST KEY CHANGED") as err:
        host.run(["true"])
    assert err.value.key_type == "ssh-ed25519" and err.value.fingerprint not in err.value.expected
    with pytest.raises(ChangedHostKeyError, match="HOST KEY CHANGED"):
        trust_key(host)
    fp = err.value.fingerprint
    with pytest.raises(ChangedHostKeyError):
        trust_key(host, expected_fingerprint=fp)  # even the exact fingerprint: not over a known key
    assert kh.read_bytes() == before
    host.close()


def test_cli_trust_yes_refuses_a_changed_key_type(cli, workspace, sshd, tmp_path):
    rsa = _key(tmp_path, "rsa", "old_rsa")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {rsa}\n")
    write_toml(workspace / "workbench.toml", {"hosts": {"test": sshd.host_table(known_hosts=str(kh))}})
    r = cli("host", "check", "test", "--json")
    assert json.loads(r.stdout)["host_key"] == "changed"
    r = cli("host", "trust", "test", "--yes")
    assert r.returncode != 0 and "HOST KEY CHANGED" in r.stderr and "Traceback" not in r.stderr
    assert kh.read_text() == f"[127.0.0.1]:{sshd.port} {rsa}\n"


def test_marker_lines_and_malformed_lines_break_nothing(sshd, tmp_path):
    ca = _key(tmp_path, "ed25519", "ca")
    stranger = _key(tmp_path, "ed25519", "stranger")
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"@cert-authority *.example.com {ca}\n"
        f"@revoked * {stranger}\n"
        "this line is not a host key\n"
        "|1|bm90IGEgaGFzaA==|bm90IGEgaGFzaA== ssh-ed25519 AAAA\n"
        f"other.example.com {stranger}\n"
        f"[127.0.0.1]:{sshd.port} {_real(sshd)}\n"
    )
    host = _host(sshd, kh)
    assert host.run(["echo", "ok"]).check().out == "ok\n"
    assert trust_key(host)["added"] is False
    host.close()


def test_hashed_entries_are_still_read(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority * {_key(tmp_path, 'ed25519', 'ca')}\n[127.0.0.1]:{sshd.port} {_real(sshd)}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert "|1|" in kh.read_text() and "@cert-authority" in kh.read_text()
    host = _host(sshd, kh)
    assert host.run(["true"]).rc == 0
    host.close()


def test_a_revoked_key_is_refused_even_when_listed_and_never_trusted(sshd, tmp_path):
    real = _real(sshd)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {real}\n@revoked * {real}\n")
    before = kh.read_bytes()
    host = _host(sshd, kh)
    with pytest.raises(RevokedHostKeyError, match="REVOKED"):
        host.run(["true"])
    with pytest.raises(RevokedHostKeyError):
        trust_key(host)
    kh.write_text(f"@revoked * {real}\n")  # revoked and not listed: not "unknown"
    host.close()
    host = _host(sshd, kh)
    with pytest.raises(RevokedHostKeyError):
        host.run(["true"])
    with pytest.raises(RevokedHostKeyError):
        trust_key(host)
    assert kh.read_text() == f"@revoked * {real}\n"
    assert before != kh.read_bytes()
    host.close()


def test_unknown_host_with_marker_lines_can_still_be_trusted(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority *.example.com {_key(tmp_path, 'ed25519', 'ca')}\n")
    host = _host(sshd, kh)
    with pytest.raises(UnknownHostKeyError) as err:
        host.run(["true"])
    with pytest.raises(HostError, match="not the"):
        trust_key(host, expected_fingerprint="SHA256:nope")
    assert trust_key(host, expected_fingerprint=err.value.fingerprint)["added"]
    host.close()
    host = _host(sshd, kh)
    assert host.run(["true"]).rc == 0 and kh.read_text().startswith("@cert-authority")
    host.close()


@pytest.mark.parametrize(
    "key, value",
    [
        ("connect_timeout", float("inf")),
        ("command_timeout", float("nan")),
        ("connect_timeout", -1),
        ("gpu_idle_mib", float("inf")),
        ("command_timeout", True),
    ],
)
def test_host_timeouts_must_be_finite_and_positive(key, value):
    from workbench.errors import InputError
    from workbench.hosts import host_settings

    with pytest.raises(InputError, match=rf"\[hosts\.gpu\]\.{key}") as err:
        host_settings({"gpu": {"address": "x", key: value}}, "gpu")
    assert "\n" not in str(err.value)
