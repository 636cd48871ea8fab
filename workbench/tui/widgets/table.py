"""The TUI's table: a DataTable whose header always has its columns' widths, and whose rows ``/``
filters.

A DataTable measures rows it was given when it is next idle, and a column widens then. Lines it
drew before that stay in its render caches, whose key does not include the widths: a header
drawn between ``add_row`` and that idle moment (the rows are not laid out yet, the header is)
kept the old width while the rows below it took the new one, so the columns after a widened one
sat a cell or more left of their values until something else redrew the table.

Filtering keeps every row the screen added and shows those whose cells contain each word typed
(any case); a row's key stays its key, so a screen finds what is highlighted by ``cursor_key``,
never by its position among the rows shown."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import CellType, ColumnKey, RowKey


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def matches(words: list[str], cells: Iterable[Any]) -> bool:
    text = " ".join(_plain(c) for c in cells).lower()
    return all(w in text for w in words)


class Table(DataTable[CellType]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "slash", "filter", "Filter", id="table.filter", tooltip="show only the rows that contain what you type"
        ),
        Binding("escape", "clear_filter", "Clear filter", id="table.clear_filter", show=False),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filter_text = ""
        self._all: list[tuple[tuple[Any, ...], str, int, Any]] = []  # every row: cells, key, height, label

    # -- rows, all of them kept --------------------------------------------------------------------
    def add_row(self, *cells: CellType, height: int | None = 1, key: str | None = None, label: Any = None) -> RowKey:
        key = key if key is not None else f"row-{len(self._all)}"
        self._all.append((cells, key, height or 1, label))
        if self.filter_text and not matches(self.filter_text.lower().split(), cells):
            return RowKey(key)
        return super().add_row(*cells, height=height, key=key, label=label)

    def clear(self, columns: bool = False) -> Table[CellType]:
        self._all = []
        super().clear(columns)
        return self

    def update_cell(
        self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, *, update_width: bool = False
    ) -> None:
        index = self._column_locations.get(column_key if isinstance(column_key, ColumnKey) else ColumnKey(column_key))
        wanted = row_key.value if isinstance(row_key, RowKey) else row_key
        for i, (cells, key, height, label) in enumerate(self._all):
            if key == wanted and index is not None:
                self._all[i] = ((*cells[:index], value, *cells[index + 1 :]), key, height, label)
        if wanted in self.rows or RowKey(wanted) in self.rows:
            super().update_cell(row_key, column_key, value, update_width=update_width)

    @property
    def total_rows(self) -> int:
        return len(self._all)

    @property
    def cursor_key(self) -> str | None:
        """The key of the highlighted row (None when no row shows)."""
        if not self.row_count or not (0 <= self.cursor_row < self.row_count):
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def move_to_key(self, key: str) -> bool:
        """Highlight the row with ``key`` if it shows."""
        try:
            row = self.get_row_index(key)
        except Exception:  # not shown (filtered out) or gone
            return False
        self.move_cursor(row=row)
        return True

    # -- filtering ------------------------------------------------------------------------------------
    def set_filter(self, text: str) -> str:
        """Show only the rows containing every word of ``text``; what the filter bar says of it."""
        self.filter_text = text.strip()
        keep = self.cursor_key
        super().clear()
        words = self.filter_text.lower().split()
        for cells, key, height, label in self._all:
            if not words or matches(words, cells):
                super().add_row(*cells, height=height, key=key, label=label)
        if (keep is None or not self.move_to_key(keep)) and self.row_count:
            self.move_cursor(row=0)
        shown = self.row_count
        return f"{shown} of {len(self._all)} rows" if self.filter_text else ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            return bool(self.filter_text)  # else escape goes on to whatever else it does
        return True

    def action_clear_filter(self) -> None:
        from workbench.tui.widgets.filter import FilterBar

        for bar in self.screen.query(FilterBar):
            if bar.target is self:
                bar.action_clear()
                return
        self.set_filter("")

    def action_filter(self) -> None:
        from workbench.tui.widgets.filter import FilterBar

        for bar in self.screen.query(FilterBar):
            bar.open(self)
            return

    # -- header widths (see the module's docstring) -------------------------------------------------
    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        widths = self._widths()
        super()._update_dimensions(new_rows)
        if self._widths() != widths and hasattr(self, "_update_count"):  # (a Textual that renames it: as before)
            self._update_count += 1  # part of every render cache's key: each line is drawn again

    def _widths(self) -> tuple:
        return tuple(c.content_width for c in self.columns.values())
