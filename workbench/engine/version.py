"""Release numbers of both engines, one type: ``0.5.4.post2`` < ``0.5.5`` < ``0.10.1.1`` < ``0.10.2``.

A release is its numeric parts (three or four: vLLM has ``0.9.0.1`` and ``0.10.1.1``) and a post
number; a ``rc``/``dev`` suffix or a local ``+cpu`` label names the release it precedes or builds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.errors import InputError

_VERSION = re.compile(r"^v?(\d+(?:\.\d+){1,3})(?:\.?post(\d+))?(?:\.?(?:dev|rc)\d*)?(?:\+[\w.]*)?$")


@dataclass(frozen=True, order=True)
class Version:
    parts: tuple[int, ...]  # at least three: 0.5 is 0.5.0
    post: int = 0

    @classmethod
    def parse(cls, text: str | Version, what: str = "version") -> Version:
        """``what`` names the field the text came from in the error (e.g. "sglang version")."""
        if isinstance(text, Version):
            return text
        m = _VERSION.match(str(text).strip())
        if not m:
            raise InputError(f"{what} {text!r}: expected a release like 0.5.23, 0.5.4.post2 or 0.10.1.1")
        parts = tuple(int(p) for p in m.group(1).split("."))
        return cls(parts + (0,) * (3 - len(parts)), int(m.group(2) or 0))

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1]

    @property
    def patch(self) -> int:
        return self.parts[2]

    def __str__(self) -> str:
        s = ".".join(map(str, self.parts))
        return s + (f".post{self.post}" if self.post else "")

    def at_least(self, other: str | Version) -> bool:
        return self >= Version.parse(other)


def sort_versions(versions: list[str]) -> list[str]:
    return sorted(versions, key=Version.parse)
