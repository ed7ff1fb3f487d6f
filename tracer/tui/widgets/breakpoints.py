"""The breakpoints pane: each spec, its hit count, whether it is on, and where gdb resolved it."""
from __future__ import annotations

import os

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracer.classify import short_name
from tracer.model import Breakpoint, Location
from tracer.tui.messages import BreakpointRemovalRequested
from tracer.tui.state import TraceState
from tracer.tui.widgets._style import ROW_BINDINGS, RowJumps


def _location_text(loc: Location) -> Text:
    t = Text(no_wrap=True)
    t.append(short_name(loc.function) or (hex(loc.address) if loc.address else "?"))
    t.append(f"  {os.path.basename(loc.library or '?')}", style="grey62")
    if loc.file:
        t.append(f"  {loc.file}:{loc.line}", style="grey70")
    if loc.note:
        t.append(f"  ({loc.note})", style="grey50")
    elif not loc.enabled:
        t.append("  (disabled)", style="grey50")
    return t


def _summary(bp: Breakpoint) -> Text:
    resolved = [loc for loc in bp.locations if loc.address]
    if len(resolved) == 1:
        return _location_text(resolved[0])
    if resolved:
        return Text(f"{len(resolved)} locations", style="bold")
    if bp.error:
        t = Text("never resolved", style="bold red")
        if bp.suggestions:
            t.append("  did you mean " + ", ".join(bp.suggestions[:3]), style="grey70")
        return t
    return Text("pending: its library is not loaded yet", style="yellow")


class BreakpointsTable(RowJumps, DataTable):
    """One row per breakpoint, plus one row per location when gdb found several."""

    BINDINGS = [Binding("delete,x", "remove_breakpoint", "remove bp"),
                *(Binding(k, a, d, show=False) for k, a, d in ROW_BINDINGS)]

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._shape: list[str] = []
        self.border_title = "breakpoints"

    def on_mount(self) -> None:
        self.add_column("spec", key="spec")
        self.add_column("hits", key="hits")
        self.add_column("on", key="on")
        self.add_column("resolved to", key="where")

    def _rows(self, state: TraceState) -> list[tuple[str, tuple]]:
        rows: list[tuple[str, tuple]] = []
        for spec, bp in state.breakpoints.items():
            on = Text("on", style="green") if bp.enabled else Text("off", style="grey50")
            rows.append((f"bp:{spec}", (Text(spec, style="bold cyan", no_wrap=True),
                                        Text(f"{state.hits_of(spec):,}", justify="right"), on, _summary(bp))))
            resolved = [loc for loc in bp.locations if loc.address]
            if len(resolved) > 1:
                for i, loc in enumerate(resolved):
                    branch = "└" if i == len(resolved) - 1 else "├"
                    rows.append((f"loc:{spec}:{i}", (Text(f"  {branch}", style="grey50"), "", "",
                                                     _location_text(loc))))
        return rows

    def update_from(self, state: TraceState) -> None:
        rows = self._rows(state)
        shape = [key for key, _ in rows]
        if shape == self._shape:
            # Same rows: only the cells change (hit counts during a run), the cursor stays put.
            for key, cells in rows:
                for column, value in zip(("spec", "hits", "on", "where"), cells):
                    self.update_cell(key, column, value)
            return
        selected = self.selected_spec
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        self._shape = shape
        self.border_title = f"breakpoints ({len(state.breakpoints)})"
        if selected is not None and f"bp:{selected}" in shape:
            self.move_cursor(row=shape.index(f"bp:{selected}"))

    @property
    def selected_spec(self) -> str | None:
        if not self._shape or self.cursor_row < 0 or self.cursor_row >= len(self._shape):
            return None
        key = self._shape[self.cursor_row]
        if key.startswith("bp:"):
            return key[3:]
        return key[4:].rsplit(":", 1)[0]

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action != "remove_breakpoint":
            return True
        source = getattr(self.app, "source", None)
        if source is None or not source.live:
            return False  # a recorded session: nothing to remove, no key to show
        return True if self.app.state.can_control else None

    def action_remove_breakpoint(self) -> None:
        spec = self.selected_spec
        if spec is not None:
            self.post_message(BreakpointRemovalRequested(spec))
