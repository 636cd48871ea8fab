"""``TimelineWidget``: the journal in time order, filterable; selecting an entry shows the draft
config that was live for it (on the same ``Workbench.timeline*`` methods as the TUI).

    from workbench.notebook import TimelineWidget
    TimelineWidget(wb, category="measurement")
"""

from __future__ import annotations

import html

import ipywidgets as w

from workbench.errors import WorkbenchError

CATEGORIES = ["launch", "config", "measurement", "finding", "other"]


class TimelineWidget(w.VBox):
    def __init__(
        self,
        wb=None,
        *,
        workspace: str | None = None,
        category: str | None = None,
        server: int | None = None,
        profile: str = "",
        config: str = "",
    ):
        if wb is None:
            from workbench.api import Workbench

            wb = Workbench.open(workspace)
        self.wb = wb
        self.entries: list = []
        self.category = w.Dropdown(
            options=[("all", None)] + [(c, c) for c in CATEGORIES], value=category, description="category"
        )
        self.server = w.Text(value="" if server is None else str(server), description="server")
        self.profile = w.Text(value=profile, description="profile")
        self.config = w.Text(value=config, description="config")
        self.refresh_button = w.Button(description="Refresh")
        self.table = w.HTML()
        self.select = w.Dropdown(options=[], description="entry", layout=w.Layout(width="100%"))
        self.detail = w.HTML()
        self.error_line = w.HTML()
        for control in (self.category, self.server, self.profile, self.config):
            control.observe(lambda _c: self.refresh(), names="value")
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.select.observe(lambda _c: self.show_entry(), names="value")
        super().__init__(
            [
                w.HBox([self.category, self.server, self.profile, self.config, self.refresh_button]),
                self.error_line,
                self.table,
                self.select,
                self.detail,
            ]
        )
        self.refresh()

    def _filters(self) -> dict:
        server = self.server.value.strip()
        if server and not server.isdigit():
            raise WorkbenchError(f"server: {server!r} is not a server id (a whole number)")
        return {
            "category": self.category.value,
            "server": int(server) if server else None,
            "profile": self.profile.value.strip() or None,
            "config": self.config.value.strip() or None,
        }

    def refresh(self) -> None:
        try:
            self.entries = self.wb.timeline(**self._filters()).entries
        except WorkbenchError as exc:
            self.error_line.value = f"<b style='color:#c00'>{html.escape(str(exc))}</b>"
            return
        self.error_line.value = ""
        rows = "".join(
            f"<tr><td>{e.id}</td><td>{e.time}</td><td>{e.category}</td><td>{html.escape(e.kind)}</td>"
            f"<td>{'' if e.server is None else e.server}</td><td>{html.escape(e.profile or '')}</td>"
            f"<td>{html.escape(e.summary)}</td></tr>"
            for e in self.entries
        )
        self.table.value = (
            "<table><tr><th>#</th><th>time</th><th>category</th><th>kind</th><th>server</th>"
            f"<th>profile</th><th>summary</th></tr>{rows}</table>"
        )
        self.select.options = [(f"{e.id} {e.time} {e.kind}: {e.summary}", e.id) for e in self.entries]
        if self.entries:
            self.select.value = self.entries[-1].id

    def show_entry(self) -> None:
        entry = next((e for e in self.entries if e.id == self.select.value), None)
        if entry is None:
            self.detail.value = ""
            return
        live = self.wb.timeline_live_config(entry.id)
        live_html = (
            "<i>nothing ties this entry to a draft config</i>"
            if live is None
            else f"<b>{html.escape(live.location)} v{live.version}</b> ({live.sha256[:12]}, "
            f"{html.escape(live.reason)}; {html.escape(live.basis)})<pre>{html.escape(live.content)}</pre>"
        )
        self.detail.value = f"{entry_view_html(entry)}<div>config live for it: {live_html}</div>"


def entry_view_html(entry) -> str:
    """The entry as the TUI's Timeline shows it (``workbench.display.entry_view``): a view, not JSON."""
    from workbench.display import entry_view

    rows = []
    for line in entry_view(entry.payload):
        pad = f"padding-left:{1 + 1.5 * line.depth:.1f}em"
        if line.kind == "heading":
            count = f" ({line.value})" if line.value else ""
            rows.append(f"<tr><td colspan=2 style='{pad};font-weight:bold'>{html.escape(line.label)}{count}</td></tr>")
        elif line.kind == "item":
            rows.append(f"<tr><td colspan=2 style='{pad}'>• {html.escape(line.value)}</td></tr>")
        else:
            label, value = html.escape(line.label), html.escape(line.value)
            rows.append(f"<tr><td style='{pad};color:#666'>{label}</td><td>{value}</td></tr>")
    head = (
        f"<b>{html.escape(entry.kind)}</b> {html.escape(entry.time)} {html.escape(entry.subject)}"
        f"<br><b>{html.escape(entry.summary)}</b>"
    )
    return f"<div>{head}<table class='timeline-entry'>{''.join(rows)}</table></div>"
