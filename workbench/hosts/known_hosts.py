"""known_hosts as OpenSSH writes it, marker lines included.

paramiko's reader stops at the first ``@cert-authority`` or ``@revoked`` line (it takes the marker for
a host name and fails on the key), which made every host unusable. Here:
- plain entries (hashed host names too) are parsed by paramiko, one line at a time; a malformed line
  is skipped, as OpenSSH skips it;
- ``@revoked`` keys are never accepted, for any host, even when a plain line lists them too;
- ``@cert-authority`` lines are kept out of the way: the workbench does not verify host certificates
  (paramiko cannot), so a host that only a CA vouches for is an unknown host, trusted explicitly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError

if TYPE_CHECKING:
    import paramiko


@dataclass
class KnownHosts:
    path: str
    entries: list[tuple[str, str, paramiko.PKey]] = field(default_factory=list)  # (host name or |1|hash, key type, key)
    revoked: set[tuple[str, str]] = field(default_factory=set)  # (key type, base64)
    cert_authorities: int = 0
    skipped: list[int] = field(default_factory=list)  # line numbers that could not be read

    def is_revoked(self, key: paramiko.PKey) -> bool:
        return (key.get_name(), key.get_base64()) in self.revoked

    def host_keys(self) -> paramiko.HostKeys:
        """A paramiko HostKeys of the usable entries (revoked keys left out)."""
        import paramiko

        hk = paramiko.HostKeys()
        for name, kind, key in self.entries:
            if not self.is_revoked(key):
                hk.add(name, kind, key)
        return hk

    def lookup(self, name: str) -> dict[str, Any]:
        """{key type: key} known for ``name`` (revoked keys left out)."""
        return dict(self.host_keys().lookup(name) or {})


def load(path: str) -> KnownHosts:
    from paramiko.hostkeys import HostKeyEntry

    kh = KnownHosts(path)
    if not os.path.exists(path):
        return kh
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read known_hosts: {exc.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            fields = line.split()
            if fields[0] == "@revoked" and len(fields) >= 4:
                kh.revoked.add((fields[2], fields[3]))
            elif fields[0] == "@cert-authority" and len(fields) >= 4:
                kh.cert_authorities += 1
            else:
                kh.skipped.append(n)
            continue
        try:
            entry = HostKeyEntry.from_line(line, n)
        except Exception:  # paramiko raises several kinds for one bad line; skip it like ssh does
            entry = None
        if entry is None:
            kh.skipped.append(n)
            continue
        for name in entry.hostnames:
            kh.entries.append((name, entry.key.get_name(), entry.key))
    return kh
