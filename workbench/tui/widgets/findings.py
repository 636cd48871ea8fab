"""Findings, one way on every screen that shows them (Doctor, Diagnose, Launch): a table whose
severity cells take their colour from the widget's tcss, and a detail pane for the highlighted
finding (message, cost, evidence, fix). Styles live in ``DEFAULT_CSS`` as component classes, so a
theme or an app stylesheet changes them in one place.

A finding whose fix was written says so in place of its severity ("fixed", "fix written": the
server loads it when relaunched) instead of staying red. ``f`` applies the highlighted finding's
fix, on the screen that offers it (``check_action("apply_fix")``), and only while the findings
have the keys: a letter typed for an input never reaches it (results never take the focus)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Static

from workbench.display import evidence_label
from workbench.tui.widgets.table import Table

SEVERITIES = ("error", "warning", "info")


#: A line under the detail (what a key does now), or a function of the item giving it.
Hint = str | Callable[["FindingItem"], str | None] | None


@dataclass
class FindingItem:
    """A finding as a row: ``cells`` after the severity column; ``source``/``cost``/``share`` when
    the finding is ranked by what it costs (the live doctor)."""

    finding: Any  # code, severity, message, evidence, fix
    cells: tuple = ()
    source: str | None = None
    cost: float | None = None
    share: float | None = None
    status: str | None = None  # "fixed", "fix written" (shown instead of the severity)


class FindingsView(Table):
    """``columns``: the headers after "severity". Highlighting a row shows it in the
    ``FindingDetail`` whose id is ``detail`` (if any)."""

    DEFAULT_CSS = """
    FindingsView > .findings--error { color: $text-error; text-style: bold; }
    FindingsView > .findings--warning { color: $text-warning; }
    FindingsView > .findings--info { color: $text-muted; }
    FindingsView > .findings--fixed { color: $text-success; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {*(f"findings--{s}" for s in SEVERITIES), "findings--fixed"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "screen.apply_fix", "Apply fix", id="findings.apply_fix", tooltip="shows the diff first"),
    ]

    class Chosen(Message):
        """The highlighted finding changed (``item`` None when the table is empty)."""

        def __init__(self, view: FindingsView, item: FindingItem | None) -> None:
            super().__init__()
            self.view = view
            self.item = item

    def __init__(self, columns: Iterable[str], *, detail: str | None = None, numbered: bool = False, **kw) -> None:
        kw.setdefault("cursor_type", "row")
        kw.setdefault("zebra_stripes", True)
        super().__init__(**kw)
        self.numbered = numbered
        self.detail_id = detail
        self.items: list[FindingItem] = []
        self._columns = (["#"] if numbered else []) + ["severity", *columns]
        self.hint: Hint = None

    def on_mount(self) -> None:
        self.add_columns(*self._columns)

    def severity_text(self, severity: str, status: str | None = None) -> Text:
        if status:
            return Text(status, style=self.get_component_rich_style("findings--fixed", partial=True))
        return Text(
            severity,
            style=self.get_component_rich_style(f"findings--{severity}", partial=True)
            if severity in SEVERITIES
            else "",
        )

    def show(self, items: list[FindingItem], *, hint: Hint = None) -> None:
        """The findings, the first highlighted; the focus stays where the user left it."""
        self.items, self.hint = list(items), hint
        self.clear()
        for i, item in enumerate(self.items):
            lead = [str(i + 1)] if self.numbered else []
            self.add_row(*lead, self.severity_text(item.finding.severity, item.status), *item.cells, key=str(i))
        if self.items:
            self.move_cursor(row=0)
            self._chosen(0)
        else:
            self._chosen(None)

    def mark(self, index: int, status: str | None) -> None:
        """Say in place of the severity what became of finding ``index`` ("fixed")."""
        item = self.items[index]
        item.status = status
        column = self.ordered_columns[1 if self.numbered else 0].key
        self.update_cell(str(index), column, self.severity_text(item.finding.severity, status))

    def selected_index(self) -> int | None:
        key = self.cursor_key
        return int(key) if key is not None and key.isdigit() and int(key) < len(self.items) else None

    def selected(self) -> FindingItem | None:
        index = self.selected_index()
        return self.items[index] if index is not None else None

    def refresh_detail(self, hint: Hint = None) -> None:
        """Redraw the detail of the highlighted finding (e.g. its fix was applied: new hint)."""
        self.hint = hint
        self._chosen(self.selected_index())

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table is self:
            self._chosen(self.selected_index())

    def _chosen(self, row: int | None) -> None:
        item = self.items[row] if row is not None and 0 <= row < len(self.items) else None
        if self.detail_id and self.screen is not None:
            for detail in self.screen.query(f"#{self.detail_id}"):
                if isinstance(detail, FindingDetail):
                    detail.show(item, hint=self.hint)
        self.post_message(self.Chosen(self, item))


class FindingDetail(Static):
    """The highlighted finding in full. ``skip`` evidence keys and ``evidence_limit`` keep long
    evidence (a whole verdict table) out of the pane."""

    DEFAULT_CSS = """
    FindingDetail > .finding--code { text-style: bold; }
    FindingDetail > .finding--error { color: $text-error; text-style: bold; }
    FindingDetail > .finding--warning { color: $text-warning; }
    FindingDetail > .finding--info { color: $text-muted; }
    FindingDetail > .finding--heading { text-style: bold; }
    FindingDetail > .finding--label { color: $text-muted; }
    FindingDetail > .finding--edit { color: $text-accent; }
    FindingDetail > .finding--hint { color: $text-muted; text-style: italic; }
    FindingDetail > .finding--ok { color: $text-success; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "finding--code",
        "finding--heading",
        "finding--label",
        "finding--edit",
        "finding--hint",
        "finding--ok",
        *(f"finding--{s}" for s in SEVERITIES),
    }

    def __init__(self, empty: str = "", *, skip: Iterable[str] = (), evidence_limit: int | None = None, **kw) -> None:
        super().__init__(empty, **kw)
        self.empty = empty
        self.skip = set(skip)
        self.evidence_limit = evidence_limit

    def _style(self, name: str):
        return self.get_component_rich_style(f"finding--{name}", partial=True)

    def show_text(self, text: str, kind: str = "") -> None:
        """A message instead of a finding ("No findings.", a verdict)."""
        self.update(Text(text, style=self._style(kind)) if kind else Text(text))

    def show(self, item: FindingItem | None, *, hint: Hint = None) -> None:
        if item is None:
            self.update(self.empty)
            return
        if callable(hint):
            hint = hint(item)
        f, out = item.finding, Text()
        out.append(f"{f.code}  ", style=self._style("code"))
        if item.status:  # what became of it first; what it was, after
            out.append(item.status, style=self._style("ok"))
            out.append(f" (was {f.severity})", style=self._style("label"))
        else:
            out.append(f.severity, style=self._style(f.severity) if f.severity in SEVERITIES else "")
        if getattr(f, "evidence_class", None):
            out.append(f"  rests on: {evidence_label(f.evidence_class)}", style=self._style("label"))
        if item.source:
            out.append(f"  (from {item.source})")
        out.append("\n\n" + f.message + "\n")
        if item.cost is not None:
            out.append(f"\ncosts {item.cost:.2f} accept length", style=self._style("heading"))
            if item.share is not None:
                out.append(f" ({100 * item.share:.0f}% of the gap)")
            out.append("\n")
        evidence = [(k, v) for k, v in (getattr(f, "evidence", None) or {}).items() if k not in self.skip]
        if self.evidence_limit is not None:
            evidence = evidence[: self.evidence_limit]
        if evidence:
            out.append("\nevidence\n", style=self._style("heading"))
            for key, value in evidence:
                out.append(f"  {key}: ", style=self._style("label"))
                out.append((value if isinstance(value, str) else json.dumps(value, default=str)) + "\n")
        fix = getattr(f, "fix", None)
        if fix and not isinstance(fix, str):
            out.append("\nfix\n", style=self._style("heading"))
            out.append(fix.summary + "\n")
            for e in fix.edits:
                out.append(f"  {e.text()}\n", style=self._style("edit"))
            for line in getattr(fix, "launch", None) or []:
                out.append(f"  {line}\n", style=self._style("edit"))
        elif isinstance(fix, str) and fix:
            out.append("\nfix\n", style=self._style("heading"))
            out.append(f"  {fix}\n", style=self._style("edit"))
        if hint:
            out.append(hint + "\n", style=self._style("hint"))
        self.update(out)


class VerdictTable(Table):
    """A table with verdict cells (ok / ambiguous / MISMATCH, match / no-match) coloured by tcss:
    the capture table of the Doctor, the alignment of Diagnose."""

    DEFAULT_CSS = """
    VerdictTable > .verdict--ok { color: $text-success; }
    VerdictTable > .verdict--warn { color: $text-warning; }
    VerdictTable > .verdict--bad { color: $text-error; text-style: bold; }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"verdict--ok", "verdict--warn", "verdict--bad"}
    #: Words the engines and the alignment use, by how they read.
    KIND: ClassVar[dict[str, str]] = {
        "ok": "ok",
        "match": "ok",
        "ambiguous": "warn",
        "no-match": "bad",
        "MISMATCH": "bad",
        "missing": "bad",
    }

    def mark(self, text: str, kind: str | None = None) -> Text:
        kind = kind or self.KIND.get(text)
        return Text(text, style=self.get_component_rich_style(f"verdict--{kind}", partial=True) if kind else "")
