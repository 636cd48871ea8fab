"""SGLang version numbers: the one parser lives in ``workbench.engine.version`` (core, shipped to
hosts with the capture rules); this name stays for the server code that imports it here."""

from workbench.engine.version import Version

__all__ = ["Version"]
