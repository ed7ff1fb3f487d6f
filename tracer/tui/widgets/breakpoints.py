"""The breakpoints pane: each spec, its hit count, whether it is on, and where gdb resolved it."""
from __future__ import annotations

import os

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracer.dispatch.classify import short_name
from tracer.session.model import Breakpoint, Frame, Location
from tracer.tui.messages import BreakpointRemovalRequested, BreakpointToggleRequested
from tracer.tui.state import TraceState
from tracer.tui.widgets._style import ROW_BINDINGS, RowJumps
from tracer.tui.widgets.table import Table


def _location_text(loc: Location) -> Text:
    t = Text(no_wrap=True)
    t.append(short_name(loc.function) or (hex(loc.address) if loc.address else "?"))
    if loc.library:  # gdb's early news of a location does not name its library
        t.append(f"  {os.path.basename(loc.library)}", style="grey62")
    if loc.file:
        t.append(f"  {loc.file}:{loc.line}", style="grey70")
    if loc.note:
        t.append(f"  ({loc.note})", style="grey50")
    elif not loc.enabled:
        t.append("  (disabled)", style="grey50")
    return t


def _summary(bp: Breakpoint, first: Frame | None) -> Text:
    resolved = [loc for loc in bp.locations if loc.address]
    if len(resolved) == 1:
        return _location_text(resolved[0])
    if resolved:
        return Text(f"{len(resolved)} locations", style="bold")
    if first is not None:
        # Hit before gdb told us where it resolved: the hits say it.
        return _location_text(Location(function=first.function, library=first.library, address=first.address))
    if bp.error:
        t = Text("never resolved", style="bold red")
        others = [name for name in bp.suggestions if name != bp.spec]
        if len(others) < len(bp.suggestions):  # the name exists, in a library the program never loaded
            t.append("  defined in a torch library the program never loaded", style="grey70")
        elif others:
            t.append("  did you mean " + ", ".join(others[:3]), style="grey70")
        return t
    # A launched target may load the library later; an attached one has loaded what it will.
    return Text("pending: no library loaded so far defines it", style="yellow")


SPEC_WIDTH = 32
COUNT_WIDTH = 6  # "999.9k": every count fits, whatever the terminal's width


def count_text(n: int) -> str:
    """A hit count in at most COUNT_WIDTH characters: 9,999 then 12.9k, 999.9k, 1.3M (never cut)."""
    if n < 10_000:
        return f"{n:,}"
    if n < 999_950:
        return f"{n / 1000:.1f}k"
    if n < 999_950_000:
        return f"{n / 1_000_000:.1f}M"
    return f"{n / 1_000_000_000:.1f}G"


def _fit(spec: str, width: int = SPEC_WIDTH) -> str:
    """A long spec cut in the middle: its end (the function's own name) matters most."""
    if len(spec) <= width:
        return spec
    if width < 16:  # a narrow pane: the end alone ("…_sigmoid"), a head of two letters says nothing
        return "…" + spec[-(width - 1):]
    keep = width - 1
    return spec[: keep // 3] + "…" + spec[-(keep - keep // 3):]


class BreakpointsTable(RowJumps, Table):
    """One row per breakpoint, plus one row per location when gdb found several."""

    BINDINGS = [Binding("delete,x", "remove_breakpoint", "remove"),
                Binding("space", "toggle_breakpoint", "on/off"),
                *(Binding(k, a, d, show=False) for k, a, d in ROW_BINDINGS)]

    def __init__(self, state: TraceState, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.state = state
        """The app's: whether a breakpoint can change now, and each one's on/off."""
        self._shape: list[str] = []
        self._shown: dict[str, tuple] = {}  # spec -> what its row shows: (record, first frame, hits)
        self._reveal: str | None = None  # a spec just added: its row is brought into view when it comes
        self.spec_width = SPEC_WIDTH
        """Specs are cut in the middle to this width, less in a narrow pane: the hits column stays in view."""
        self.border_title = "breakpoints"

    def on_mount(self) -> None:
        self._add_columns()

    def on_resize(self) -> None:
        # At 80x24 the pane is ~20 cells wide: a 19-character spec pushed the hits column out of view.
        # Each column takes its width plus 2 cells of padding; 2 more for the vertical scrollbar.
        width = max(8, min(SPEC_WIDTH, self.size.width - (COUNT_WIDTH + 2) - 2 - 2))
        if width != self.spec_width:
            self.spec_width = width
            if self._shown:
                self._reveal = self.selected_spec or self._reveal  # the cursor stays on its breakpoint
                self._shown, self._shape = {}, []  # every row again, with the specs cut to the new width
                self.clear(columns=True)  # columns too: a column's width only ever grows
                self._add_columns()
                self.update_from(self.state)

    def _add_columns(self) -> None:
        self.add_column("spec", key="spec")
        self.add_column("hits", key="hits", width=COUNT_WIDTH)  # fixed: a redraw never narrows or drops it
        self.add_column("on", key="on")
        self.add_column("resolved to", key="where")

    def _rows(self, state: TraceState) -> list[tuple[str, tuple]]:
        rows: list[tuple[str, tuple]] = []
        for spec, bp in state.breakpoints.items():
            on = Text("on", style="green") if bp.enabled else Text("off", style="grey50")
            rows.append((f"bp:{spec}", (Text(_fit(spec, self.spec_width), style="bold cyan", no_wrap=True),
                                        Text(count_text(state.hits_of(spec)), justify="right"), on,
                                        _summary(bp, state.first_frames.get(spec)))))
            resolved = [loc for loc in bp.locations if loc.address]
            if len(resolved) > 1:
                for i, loc in enumerate(resolved):
                    branch = "└" if i == len(resolved) - 1 else "├"
                    rows.append((f"loc:{spec}:{i}", (Text(f"  {branch}", style="grey50"), "", "",
                                                     _location_text(loc))))
        return rows

    def update_from(self, state: TraceState) -> None:
        """Redraw what changed. During a run that is the hit counts of a few breakpoints, while
        there may be thousands of them (``--op`` breaks on every hop of an operator)."""
        shown = {spec: (bp, state.first_frames.get(spec), state.hits_of(spec))
                 for spec, bp in state.breakpoints.items()}
        old = self._shown
        if shown.keys() == old.keys() and all(shown[spec][0] is old[spec][0] for spec in shown):
            for spec, (bp, first, hits) in shown.items():
                if hits != old[spec][2]:
                    self.update_cell(f"bp:{spec}", "hits", Text(count_text(hits), justify="right"))
                if first is not old[spec][1]:
                    self.update_cell(f"bp:{spec}", "where", _summary(bp, first))
            self._shown = shown
            return
        self._shown = shown
        rows = self._rows(state)
        shape = [key for key, _ in rows]
        selected = self.selected_spec
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        self._shape = shape
        self.border_title = f"breakpoints ({len(state.breakpoints)})"
        if self._reveal is not None and f"bp:{self._reveal}" in shape:
            selected, self._reveal = self._reveal, None
        if selected is not None and f"bp:{selected}" in shape:
            self.move_cursor(row=shape.index(f"bp:{selected}"))

    def reveal(self, spec: str) -> None:
        """Put the cursor on ``spec``'s row now, or as soon as the row exists."""
        self._reveal = spec
        if f"bp:{spec}" in self._shape:
            self._reveal = None
            self.move_cursor(row=self._shape.index(f"bp:{spec}"))

    @property
    def selected_spec(self) -> str | None:
        if not self._shape or self.cursor_row < 0 or self.cursor_row >= len(self._shape):
            return None
        key = self._shape[self.cursor_row]
        if key.startswith("bp:"):
            return key[3:]
        return key[4:].rsplit(":", 1)[0]

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action not in ("remove_breakpoint", "toggle_breakpoint"):
            return True
        if not self.state.live or self.state.finished:
            return False  # a recorded session or an ended run: nothing to remove, no key to show
        return True if self.state.can_control else None

    def action_remove_breakpoint(self) -> None:
        spec = self.selected_spec
        if spec is not None:
            self.post_message(BreakpointRemovalRequested(spec))

    def action_toggle_breakpoint(self) -> None:
        spec = self.selected_spec
        bp = self.state.breakpoints.get(spec) if spec is not None else None
        if spec is not None and bp is not None:
            self.post_message(BreakpointToggleRequested(spec, not bp.enabled))
