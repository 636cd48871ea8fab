"""Pieces of ``workbench.api.Workbench``, one mixin per area of the product.

Each mixin uses ``self.workspace``, ``self.journal`` and ``self._record`` from the base class and
imports its core modules lazily so that ``import workbench.api`` stays light.
"""
