"""The EAGLE-3 drafter: weight names (``names``, pure Python), the torch module (``model``) and
SGLang-format checkpoints (``checkpoint``). Import the submodules directly; torch loads lazily."""
