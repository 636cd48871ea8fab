"""Hosts against a real sshd on loopback (and the local host through the same interface)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from workbench.hosts import (
    CasConflictError,
    ChangedHostKeyError,
    HostError,
    HostTimeoutError,
    UnknownHostKeyError,
    make_host,
)
from workbench.hosts.base import sha256
from workbench.hosts.local import LocalHost

pytestmark = pytest.mark.ssh

NASTY = [
    "plain",
    "two words",
    "it's",
    'say "hi"',
    "a;b",
    "$(touch /tmp/pwned-wb)",
    "`id`",
    "line1\nline2",
    "tab\there",
    "*",
    "~",
    "-n",
    "",
    "back\\slash",
    "ünïcødé",
    "$HOME",
    "&&",
    "|",
    ">out",
]
ECHO_ARGV = "import sys, json; sys.stdout.write(json.dumps(sys.argv[1:]))"


def test_argv_arrives_unchanged_over_ssh(ssh_host):
    r = ssh_host.run([ssh_host.python, "-c", ECHO_ARGV, *NASTY]).check()
    assert json.loads(r.out) == NASTY
    env = {"WB_A": "x y; $(id) 'q' \"d\"\nz"}
    r = ssh_host.run([ssh_host.python, "-c", "import os; print(os.environ['WB_A'], end='')"], env=env).check()
    assert r.out == env["WB_A"]
    import os

    assert not os.path.exists("/tmp/pwned-wb")


def test_argv_arrives_unchanged_locally():
    h = LocalHost()
    assert json.loads(h.run([h.python, "-c", ECHO_ARGV, *NASTY]).check().out) == NASTY


def test_bad_env_name_is_refused(ssh_host):
    from workbench.errors import InputError

    with pytest.raises(InputError, match="valid variable name"):
        ssh_host.run(["true"], env={"A B": "1"})


def test_fake_nvidia_smi_is_on_the_remote_path(ssh_host):
    q = ["nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu", "--format=csv,noheader,nounits"]
    r = ssh_host.run(q).check()
    assert r.out.splitlines()[0] == "0, 0, 143771, 0" and len(r.out.splitlines()) == 8
    assert ssh_host.run(["nvidia-smi", "--query-gpu=index", "--format=csv"]).rc == 2


def test_one_transport_is_reused(sshd, ssh_host):
    before = sshd.logins()
    for _ in range(5):
        ssh_host.run(["true"]).check()
    ssh_host.stat("/etc/hostname")
    assert ssh_host.connects == 1
    assert sshd.logins() - before == 1


def test_reconnects_after_a_drop(sshd, ssh_host):
    ssh_host.run(["true"]).check()
    sshd.restart()
    assert ssh_host.run(["echo", "back"], idempotent=True).check().out == "back\n"
    assert ssh_host.connects == 2


def test_unreachable_host_is_a_clear_error(sshd, ssh_host):
    sshd.stop()
    try:
        with pytest.raises(HostError, match="test"):
            ssh_host.run(["true"])
    finally:
        sshd.start()


def test_timeout_on_a_slow_command(ssh_host):
    t0 = time.monotonic()
    with pytest.raises(HostTimeoutError, match="did not finish"):
        ssh_host.run(["sleep", "5"], timeout=0.5)
    assert time.monotonic() - t0 < 3
    assert ssh_host.run(["true"]).rc == 0  # the transport is still usable


def test_files_atomic_cas_offset_stat(ssh_host, tmp_path):
    path = str(tmp_path / "conf.json")
    assert ssh_host.stat(path) is None
    v1 = ssh_host.write_bytes(path, b'{"a": 1}\n', expect=None)
    assert v1 == sha256(b'{"a": 1}\n')
    with pytest.raises(CasConflictError, match="changed since it was read"):
        ssh_host.write_bytes(path, b"x", expect=None)  # must not exist, but does
    (tmp_path / "conf.json").write_bytes(b'{"a": 2}\n')  # someone else edits it
    with pytest.raises(CasConflictError):
        ssh_host.write_bytes(path, b'{"a": 3}\n', expect=v1)
    assert (tmp_path / "conf.json").read_bytes() == b'{"a": 2}\n'  # nothing half-written
    (tmp_path / "conf.json").chmod(0o640)
    ssh_host.write_bytes(path, b'{"a": 3}\n', expect=sha256(b'{"a": 2}\n'))
    assert (tmp_path / "conf.json").read_bytes() == b'{"a": 3}\n'
    assert (tmp_path / "conf.json").stat().st_mode & 0o777 == 0o640  # mode kept
    assert ssh_host.read_bytes(path, offset=5) == b" 3}\n"
    assert ssh_host.read_bytes(path, offset=2, length=3) == b'a":'
    st = ssh_host.stat(path)
    assert st.size == 9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf.json"]  # no temp or lock left
    with pytest.raises(HostError, match="no such file"):
        ssh_host.read_bytes(str(tmp_path / "missing"))


def test_local_files_cas(tmp_path):
    h = LocalHost()
    p = str(tmp_path / "f")
    v = h.write_bytes(p, b"one", expect=None)
    with pytest.raises(CasConflictError):
        h.write_bytes(p, b"two", expect=sha256(b"other"))
    h.write_bytes(p, b"two", expect=v)
    assert h.read_bytes(p, offset=1) == b"wo" and h.stat(p).size == 3


def test_unknown_host_key_is_refused_with_its_fingerprint_then_trusted(sshd, tmp_path):
    from workbench.hosts.ssh import trust_key

    kh = tmp_path / "known_hosts"
    kh.write_text("")
    host = make_host("test", {"kind": "ssh", **sshd.host_table(known_hosts=str(kh))})
    real_fp = subprocess.run(
        ["ssh-keygen", "-lf", str(sshd.host_key) + ".pub"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    with pytest.raises(UnknownHostKeyError) as err:
        host.run(["true"])
    assert err.value.fingerprint == real_fp and "host trust test" in str(err.value)
    with pytest.raises(HostError, match="not the"):
        trust_key(host, expected_fingerprint="SHA256:someoneelse")
    assert kh.read_text() == ""
    out = trust_key(host, expected_fingerprint=real_fp)
    assert out["added"] and f"[127.0.0.1]:{sshd.port}" in kh.read_text()
    host.close()
    host2 = make_host("test", {"kind": "ssh", **sshd.host_table(known_hosts=str(kh))})
    assert host2.run(["echo", "ok"]).check().out == "ok\n"
    assert trust_key(host2)["added"] is False  # already known: nothing written twice
    host2.close()


def test_changed_host_key_is_refused_loudly(sshd, tmp_path):
    from workbench.hosts.ssh import trust_key

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    kind, b64 = (tmp_path / "other.pub").read_text().split()[:2]
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {kind} {b64}\n")
    host = make_host("test", {"kind": "ssh", **sshd.host_table(known_hosts=str(kh))})
    with pytest.raises(ChangedHostKeyError, match="HOST KEY CHANGED") as err:
        host.run(["true"])
    assert err.value.expected != err.value.fingerprint
    with pytest.raises(ChangedHostKeyError):
        trust_key(host)
    assert b64 in kh.read_text()  # never replaced silently


def test_ssh_config_alias_and_proxyjump(sshd):
    before = sshd.logins()
    alias = make_host(
        "box", {"kind": "ssh", "address": "gpu-box", "ssh_config": str(sshd.ssh_config), "python": sys.executable}
    )
    assert alias.resolved.port == sshd.port and alias.resolved.hostname == "127.0.0.1"
    assert alias.run(["echo", "via alias"]).check().out == "via alias\n"
    alias.close()
    jumped = make_host("far", {"kind": "ssh", "address": "behind-jump", "ssh_config": str(sshd.ssh_config)})
    assert jumped.resolved.proxy_jump == "gpu-box"
    assert jumped.run(["echo", "via jump"]).check().out == "via jump\n"
    jumped.close()
    assert sshd.logins() - before == 3  # alias; jump host + target through it


def test_port_forward_reaches_a_remote_port(ssh_host):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"hello " + self.path.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with ssh_host.forward(srv.server_address[1]) as tunnel:
            assert tunnel.local_port != srv.server_address[1]
            for i in range(3):
                with urllib.request.urlopen(f"{tunnel.url}/x{i}", timeout=5) as resp:
                    assert resp.read() == f"hello /x{i}".encode()
    finally:
        srv.shutdown()


def test_ping(ssh_host):
    assert 0 <= ssh_host.ping() < 5


def test_the_cas_writer_defines_under_an_old_host_python():
    """``casfile`` is sent as source to a host's python, which may predate ``X | None`` and
    ``dict[...]`` at run time: every annotation evaluated where it is defined (parameters, returns,
    module and class attributes) is a string or a plain name."""
    import ast

    from workbench.hosts import casfile

    tree = ast.parse(Path(casfile.__file__).read_text(encoding="utf-8"))
    lazy = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    evaluated = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            evaluated += [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x]
            evaluated.append(node.returns)
        elif isinstance(node, (ast.Module, ast.ClassDef)):
            evaluated += [s.annotation for s in node.body if isinstance(s, ast.AnnAssign)]
    plain = (ast.Name, ast.Attribute, ast.Constant)
    late = [ast.unparse(x) for x in evaluated if x is not None and not isinstance(x, plain)]
    assert lazy or not late, f"annotations a host's python 3.8 would fail on: {late}"
    assert len(evaluated) > 10  # (the walk found the signatures)
