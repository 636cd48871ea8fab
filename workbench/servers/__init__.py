"""Engine-neutral server lifecycle: profiles, launch, status, follow, stop, measurement, sweeps;
each engine (``workbench.sglang``, ``workbench.vllm``) brings an adapter (``engines.py``)."""
