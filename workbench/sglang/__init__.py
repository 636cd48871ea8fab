"""SGLang as an engine: its version-aware launch command, its own parser as a check, its client, its
log parser, and its adapter for the engine-neutral lifecycle (``workbench.servers``)."""
