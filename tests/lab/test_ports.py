"""Loopback ports and logs of lab servers: a port is handed out once per process, a log is a file of
its own (servers started back to back once shared a port the kernel offered twice, and one server's
log overwrote another's)."""

from __future__ import annotations

import socket
import types

import pytest

from workbench.errors import WorkbenchError
from workbench.lab import process as P


def _kernel_offering(ports, monkeypatch):
    """The module's sockets bind to the ports in ``ports``, in turn, as bind(0) would."""
    offered = iter(ports)

    class Probe:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def bind(self, addr):
            assert addr[1] == 0
            self.port = next(offered)

        def getsockname(self):
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(P, "socket", types.SimpleNamespace(socket=Probe))
    monkeypatch.setattr(P, "_HANDED_OUT", set())


def test_a_port_the_kernel_offers_again_is_not_handed_out_twice(monkeypatch):
    _kernel_offering([41001, 41001, 41001, 41002, 41001, 41003], monkeypatch)
    assert [P.free_port(), P.free_port(), P.free_port()] == [41001, 41002, 41003]


def test_no_new_port_is_a_one_line_error(monkeypatch):
    _kernel_offering([41001] * 10, monkeypatch)
    assert P.free_port(attempts=3) == 41001
    with pytest.raises(WorkbenchError, match="no free port on 127.0.0.1 after 3 tries"):
        P.free_port(attempts=3)


def test_real_ports_are_distinct_and_free():
    ports = [P.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    with socket.socket() as s:  # the last one is free to bind
        s.bind(("127.0.0.1", ports[-1]))


def test_logs_named_after_the_same_port_are_files_of_their_own(tmp_path):
    a = P.new_log_path("lab-draft-41001", tmp_path)
    b = P.new_log_path("lab-draft-41001", tmp_path)
    assert a != b and a.parent == b.parent == tmp_path
    assert a.name.startswith("lab-draft-41001-") and a.suffix == ".log" and a.read_bytes() == b""
    nested = P.new_log_path("x", tmp_path / "made" / "here")
    assert nested.exists()
