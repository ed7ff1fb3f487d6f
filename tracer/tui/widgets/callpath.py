"""The call-path pane: the frames of the selected hit, outermost first, one colour per layer."""
from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracer.export import paths as P
from tracer.model import Frame, Hit
from tracer.tui.folding import PathRow, default_frame, path_rows
from tracer.tui.messages import FrameSelected
from tracer.tui.widgets._style import ROW_BINDINGS, RowJumps, frame_name, frame_where, layer_style


def _path_key(hit: Hit) -> tuple:
    # The innermost frame's key set is shown too: a hit with another one is another row to draw.
    inner = hit.frames[-1] if hit.frames else None
    keys = (inner.keyset, inner.keyset_note) if inner is not None else None
    return (hit.truncated, tuple(f.key() for f in hit.frames), keys)


class CallPathTable(RowJumps, DataTable):
    """Folded start-up and interpreter runs show as one row; Enter on it opens that fold."""

    BINDINGS = [Binding(k, a, d, show=False) for k, a, d in ROW_BINDINGS]

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.hit: Hit | None = None
        self.caption = ""
        self.cwd: str | None = None
        self.unfold_all = False
        """Show every frame, interpreter and start-up ones included."""
        self.full_names = False
        """Show full demangled names instead of short ones."""
        self._opened: set[int] = set()
        self._rows: list[PathRow] = []
        self.border_title = "call path · no hit yet"

    def on_mount(self) -> None:
        self.add_column("layer", key="layer")
        self.add_column("frame", key="frame")
        self.add_column("key", key="key")
        self.add_column("where", key="where")
        self.add_column("code", key="code")

    @property
    def frames(self) -> list[Frame]:
        return self.hit.frames if self.hit else []

    def show(self, hit: Hit | None, caption: str, cwd: str | None) -> None:
        """Show a hit's path with the most readable frame selected.

        A hit that took the same path as the one shown (the common case while following a hot
        breakpoint) keeps the rows and the cursor; only the caption changes.
        """
        same = (hit is not None and self.hit is not None and cwd == self.cwd
                and _path_key(hit) == _path_key(self.hit))
        self.hit, self.caption, self.cwd = hit, caption, cwd
        if same:
            self._retitle()
            return
        self._opened = set()
        self._rebuild(select_frame=default_frame(self.frames))

    def selected_frame_index(self) -> int | None:
        if not self._rows or not 0 <= self.cursor_row < len(self._rows):
            return None
        row = self._rows[self.cursor_row]
        return row.start if row.kind == "frame" else None

    def toggle_unfold(self) -> None:
        self.unfold_all = not self.unfold_all
        self._rebuild(select_frame=self._anchor())

    def toggle_full_names(self) -> None:
        self.full_names = not self.full_names
        self._rebuild(select_frame=self._anchor())

    def _anchor(self) -> int | None:
        if not self._rows or not 0 <= self.cursor_row < len(self._rows):
            return None
        return self._rows[self.cursor_row].start

    def _rebuild(self, select_frame: int | None) -> None:
        frames = self.frames
        self._rows = path_rows(frames, self.unfold_all, self._opened)
        self.clear()
        for row in self._rows:
            self.add_row(*self._cells(row, frames), key=row.key)
        self._retitle()
        if select_frame is not None:
            target = next((i for i, r in enumerate(self._rows) if r.start <= select_frame < r.end), None)
            if target is not None:
                self.move_cursor(row=target, scroll=False)
                self.call_after_refresh(self.scroll_to_center_row, target)
        self._announce()

    def _retitle(self) -> None:
        frames = self.frames
        shown = sum(1 for r in self._rows if r.kind == "frame")
        title = "call path"
        if self.hit is not None:
            title += f" · {self.caption} · {len(frames)} frames"
            if shown < len(frames):
                title += f", {len(frames) - shown} folded (u)"
            if self.hit.truncated:
                title += " · truncated"
        self.border_title = title

    def scroll_to_center_row(self, row: int) -> None:
        if 0 <= row < len(self._rows):
            visible = max(1, self.scrollable_content_region.height - self.header_height)
            self.scroll_to(y=max(0, row - visible // 2), animate=False)

    def _cells(self, row: PathRow, frames: list[Frame]) -> tuple:
        if row.kind == "fold":
            n = row.end - row.start
            return (Text(row.fold or "", style="grey50"),
                    Text(f"⋯ {n} {row.fold} frame{'s' if n != 1 else ''} (enter opens)", style="grey50 italic"),
                    "", "", "")
        f = frames[row.start]
        layer = P.layer_of(f)
        key = P.dispatch_key_of(f)
        code = Text(f.source.strip(), style="italic grey70", no_wrap=True) if f.kind == "python" and f.source else ""
        if f.keys is not None:  # the DispatchKeySet this hop was called with, read at its entry
            code = Text("called with " + (", ".join(f.keys) or "(empty)"), style="green", no_wrap=True)
        elif f.keyset_note:
            code = Text("key set not read: " + f.keyset_note, style="grey50 italic", no_wrap=True)
        return (Text(layer, style=layer_style(layer)), frame_name(f, self.full_names),
                Text(key, style="bold cyan") if key else "", frame_where(f, self.cwd, short=True), code)

    def _announce(self) -> None:
        i = self.selected_frame_index()
        frame = self.frames[i] if i is not None else None
        self.post_message(FrameSelected(frame, self.cwd))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._announce()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if not 0 <= event.cursor_row < len(self._rows):
            return
        row = self._rows[event.cursor_row]
        if row.kind == "fold":
            self._opened.add(row.start)
            self._rebuild(select_frame=row.start)
