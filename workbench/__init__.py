"""eagle-workbench: a diagnostic workbench for EAGLE-3 speculative decoding served by SGLang.

The package root stays import-light: faces and scripts import ``workbench.api``.
"""

__version__ = "0.1.0"
