"""SGLang version numbers: ``0.5.4.post2`` < ``0.5.5`` < ``0.5.12.post1`` < ``0.5.13`` (the one parser: .postN, rc, dev)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from workbench.errors import InputError

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?(?:\.?(?:dev|rc)\d*)?(?:\+.*)?$")


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int = 0
    post: int = 0

    @classmethod
    def parse(cls, text: str) -> Version:
        m = _VERSION.match(str(text).strip())
        if not m:
            raise InputError(f"sglang version {text!r}: expected a version like 0.5.23 or 0.5.4.post2")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0))

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        return s + (f".post{self.post}" if self.post else "")

    def at_least(self, other: str) -> bool:
        return self >= Version.parse(other)
