"""SGLang servers: profiles, version-aware launch commands, validation, lifecycle, logs, metrics."""
