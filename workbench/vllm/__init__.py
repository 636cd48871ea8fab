"""vLLM as an engine: its launch command (``--speculative-config``), its own argument parser as a check,
its client (OpenAI completions with token ids, ``/metrics`` counters, ``/reset_prefix_cache``) and its
adapter for the engine-neutral lifecycle (``workbench.servers``)."""
