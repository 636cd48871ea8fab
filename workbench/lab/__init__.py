"""The lab: a miniature EAGLE-3 world on a CPU.

``build`` (target, SpecForge-format training data, trained drafter, broken variants; cached),
``serve`` (a reference server that speaks SGLang's flags, logs and HTTP routes and performs real
greedy chain speculative decoding), ``engine`` (the decoder), ``process`` (start/stop locally).
torch and transformers are imported only inside the functions that need them.
"""
