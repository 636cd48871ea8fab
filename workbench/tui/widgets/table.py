"""The TUI's table: a DataTable whose header always has its columns' widths.

A DataTable measures rows it was given when it is next idle, and a column widens then. Lines it
drew before that stay in its render caches, whose key does not include the widths: a header
drawn between ``add_row`` and that idle moment (the rows are not laid out yet, the header is)
kept the old width while the rows below it took the new one, so the columns after a widened one
sat a cell or more left of their values until something else redrew the table."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widgets import DataTable
from textual.widgets.data_table import CellType, RowKey


class Table(DataTable[CellType]):
    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        widths = self._widths()
        super()._update_dimensions(new_rows)
        if self._widths() != widths and hasattr(self, "_update_count"):  # (a Textual that renames it: as before)
            self._update_count += 1  # part of every render cache's key: each line is drawn again

    def _widths(self) -> tuple:
        return tuple(c.content_width for c in self.columns.values())
