"""The call-path pane: the frames of the selected hit, outermost first, one colour per layer."""
from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracer.export import paths as P
from tracer.session.model import Frame, Hit
from tracer.tui.folding import PathRow, default_frame, fold_runs, folded_counts, path_rows, with_torchscript
from tracer.tui.messages import FrameSelected
from tracer.tui.widgets._style import (SHORT_NAME_WIDTH, ROW_BINDINGS, RowJumps, frame_name, frame_where,
                                      layer_style, searched_texts)
from tracer.tui.widgets.table import Table


def _place(frame: Frame) -> tuple:
    """Everything a row shows of a frame: two hits with equal places draw the same rows.
    (``Frame.key()`` groups paths by function: a step inside one function keeps its key.)"""
    return (frame.kind, frame.library, frame.function, frame.short, frame.address, frame.file, frame.line,
            frame.source, frame.layer, frame.dispatch_key, frame.keyset, frame.keyset_note, frame.torchscript)


def _path_key(hit: Hit) -> tuple:
    return (hit.truncated, tuple(_place(f) for f in hit.frames))


def followed_text(label: str | None) -> str | None:
    """``op:conv2d>convolution`` -> ``convolution, inside conv2d (--follow-ops)``."""
    from tracer.export.op_calls import FOLLOWED, op_of_label

    op = op_of_label(label)
    if not op or FOLLOWED not in op:
        return None
    root, child = op.split(FOLLOWED, 1)[0], op.rsplit(FOLLOWED, 1)[1]
    return f"{child}, inside {root} (--follow-ops)"


def _ts_cells(r: P.TsRow) -> tuple:
    """A scripted line the interpreter frame above it ran: its function, graph node, file:line and text."""
    if r.why and not r.file:
        return ("", Text("torchscript", style=layer_style("torchscript")),
                Text(f"  ↳ {r.function}" if r.function else "  ↳ not read", style="yellow"),
                Text(r.node, style="bold cyan") if r.node else "", "", Text(r.why, style="yellow italic", no_wrap=True))
    where = f"{r.file.rsplit('/', 1)[-1] if r.file else '?'}:{r.line if r.line is not None else '?'}"
    return ("", Text("torchscript", style=layer_style("torchscript")), Text(f"  ↳ {r.function or '?'}", style="bold"),
            Text(r.node, style="bold cyan") if r.node else "", Text(where, style="green", no_wrap=True),
            Text(r.text or "", style="italic grey70", no_wrap=True))


class CallPathTable(RowJumps, Table):
    """Folded start-up frames show as one row; a run of interpreter frames between two shown frames
    is counted in the "+" column of the frame below it. Enter on either opens that fold."""

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
        self.needle = ""
        """The search text: frames that contain it are marked."""
        self.name_width = SHORT_NAME_WIDTH
        """Short names are cut in the middle to this width, less in a narrow pane."""
        self._opened: set[int] = set()
        self._rows: list[PathRow] = []
        self._center_on: int | None = None
        """The row to centre once Textual has sized the table for the rows shown."""
        self.border_title = "call path · no hit yet"

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        # "+N": N frames folded just above this row (interpreter runs get no row of their own).
        for label, key in (("+", "hidden"), ("layer", "layer"), ("frame", "frame"), ("key", "key"),
                           ("where", "where"), ("code", "code")):
            self.add_column(label, key=key)

    @property
    def frames(self) -> list[Frame]:
        return self.hit.frames if self.hit else []

    def show(self, hit: Hit | None, caption: str, cwd: str | None, stopped: bool = False) -> None:
        """Show a hit's path with the most readable frame selected; ``stopped``: the target is
        stopped here (a step, finish or interrupt): frame #0, the innermost, is selected, as gdb does.

        A hit that took the same path as the one shown (the common case while following a hot
        breakpoint) keeps the rows and the cursor; only the caption changes.
        """
        same = (hit is not None and self.hit is not None and cwd == self.cwd
                and _path_key(hit) == _path_key(self.hit))
        carried_before = self.hit.values if self.hit is not None else None
        self.hit, self.caption, self.cwd = hit, caption, cwd
        if same and hit is not None and (not stopped or self.selected_frame_index() == len(hit.frames) - 1):
            self._retitle()
            if hit.values is not carried_before:  # this hit's own arguments: the source pane shows them
                self._announce()
            return
        self._opened = set()
        frames = self.frames
        if stopped:
            # Stepping through CPython's own code: the frames where it stopped are shown, not folded.
            self._opened = {start for start, end, kind in fold_runs(frames)
                            if kind == "interpreter" and end == len(frames)}
        self._rebuild(select_frame=(len(frames) - 1 if frames else None) if stopped else default_frame(frames))

    def on_resize(self) -> None:
        # The other columns before "where" take about 36 cells: the name comes before the place.
        width = max(24, min(SHORT_NAME_WIDTH, self.size.width - 36))
        if width != self.name_width:
            self.name_width = width
            if self.hit is not None:
                self._rebuild(select_frame=self._anchor())
        elif self._rows:
            self._center_later(self.cursor_row)  # the height changed

    def mark(self, text: str) -> None:
        """Mark the frames that contain ``text`` and put the cursor on the innermost of them."""
        needle = text.lower()
        if needle == self.needle:
            return
        self.needle = needle
        hits = [i for i, f in enumerate(self.frames) if self._matches(f)]
        self._rebuild(select_frame=hits[-1] if hits else self._anchor())

    def _matches(self, frame: Frame) -> bool:
        if not self.needle:
            return False
        return any(self.needle in text.lower() for text in searched_texts(frame))

    def selected_frame_index(self) -> int | None:
        if not self._rows or not 0 <= self.cursor_row < len(self._rows):
            return None
        row = self._rows[self.cursor_row]
        return row.start if row.kind in ("frame", "ts") else None

    def stop_over(self, why: str) -> None:
        """The target has left the stop shown (it runs on, or the run ended): the title says so, never
        "where finish stopped" for a stop that is over. "over" comes first: a narrow pane cuts the title's end."""
        if self.caption.startswith("where "):
            self.caption = f"over: {why} (was {self.caption})"
            self._retitle()

    def select_frame(self, index: int) -> None:
        """Put the cursor on frame ``index`` (opening its fold), as gdb's ``up``/``frame N`` select it."""
        if not any(r.kind == "frame" and r.start == index for r in self._rows):
            self._opened |= {start for start, end, _ in fold_runs(self.frames) if start <= index < end}
        self._rebuild(select_frame=index)

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
        self._rows = with_torchscript(path_rows(frames, self.unfold_all, self._opened), frames)
        self.clear(columns=True)  # columns too: their widths only ever grow (d twice hid columns)
        self._add_columns()
        for row in self._rows:
            self.add_row(*self._cells(row, frames), key=row.key)
        self._retitle()
        if select_frame is not None:
            target = next((i for i, r in enumerate(self._rows) if r.start <= select_frame < r.end), None)
            if target is not None:
                self.move_cursor(row=target, scroll=False)
                self._center_later(target)
        self._announce()

    def _retitle(self) -> None:
        frames = self.frames
        title = "call path"
        if self.hit is not None:
            title += f" · {self.caption} · {len(frames)} frames"
            folded = folded_counts(self._rows)
            if folded:
                parts = ", ".join(f"{n} {kind}" for kind, n in folded.items())
                title += f", {sum(folded.values())} folded ({parts}; u shows them)"
            if self.hit.truncated:
                title += " · truncated"
            followed = followed_text(self.hit.breakpoint)
            if followed:  # --follow-ops: an operator called inside the followed one
                title += f" · {followed}"
            launch = P.launch_text(self.hit, [], self.cwd)
            if launch:  # a parallel worker's hit: the thread and Python line that launched its region
                title += f" · {launch}"
            if self.needle:
                matched = [i for i, f in enumerate(frames) if self._matches(f)]
                hidden = sum(1 for i in matched if not any(r.kind == "frame" and r.start == i for r in self._rows))
                title += f" · {len(matched)} contain “{self.needle}”" + (f" ({hidden} folded)" if hidden else "")
        self.border_title = title

    def _center_later(self, row: int) -> None:
        self._center_on = row
        self.call_after_refresh(self._center_when_sized)

    def watch_virtual_size(self) -> None:
        if self._center_on is not None:
            self.call_after_refresh(self._center_when_sized)

    def _center_when_sized(self) -> None:
        """Centre the row once the table is sized for the rows shown. Textual sizes it at the table's
        own Idle, which a busy machine delivers after the refresh a centring waited for: a scroll then is
        clamped to the previous hit's height (3 rows: none), and Textual's own scroll to the cursor, made
        once sized, leaves the selected frame at the pane's last row (issue 31)."""
        if self._center_on is None or self.virtual_size.height != self.header_height + len(self._rows):
            return  # (watch_virtual_size comes back)
        row, self._center_on = self._center_on, None
        self.scroll_to_center_row(row)

    def scroll_to_center_row(self, row: int) -> None:
        if 0 <= row < len(self._rows):
            visible = max(1, self.scrollable_content_region.height - self.header_height)
            if row >= len(self._rows) - visible // 2:
                self.scroll_end(animate=False, immediate=True, force=True)  # frame #0 at a stop: the pane's end
            else:
                # force: a table just grown has no scrollbar until the next layout, and Textual drops a
                # scroll made without one (the 80x24 terminal test, 3 runs in 15 at load 9: a log showed
                # the centring of hit #3 called once sized, and the view never moved from Textual's own)
                self.scroll_to(y=max(0, row - visible // 2), animate=False, force=True)
            if self.show_vertical_scrollbar:
                # Textual moves the scrollbar's thumb only when scroll_y changes while the bar is shown: a
                # scroll made before the new rows showed the bar left the thumb at the top, the view at
                # the bottom (seen in the 80x24 snapshot, one run in three under load).
                self.vertical_scrollbar.position = self.scroll_target_y

    def _cells(self, row: PathRow, frames: list[Frame]) -> tuple:
        if row.kind == "fold":
            n = row.end - row.start
            return ("", Text(row.fold or "", style="grey50"),
                    Text(f"⋯ {n} {row.fold} frame{'s' if n != 1 else ''} (enter opens)", style="grey50 italic"),
                    "", "", "")
        if row.kind == "ts":
            return _ts_cells(P.torchscript_rows(frames[row.start])[int(row.fold or 0)])
        hidden = Text(f"+{row.hidden}", style="grey50") if row.hidden else ""
        f = frames[row.start]
        layer = P.layer_of(f)
        key = P.dispatch_key_of(f)
        code = Text(f.source.strip(), style="italic grey70", no_wrap=True) if f.kind == "python" and f.source else ""
        if f.keys is not None:  # the DispatchKeySet this hop was called with, read at its entry
            code = Text("called with " + (", ".join(f.keys) or "(empty)"), style="green", no_wrap=True)
        elif f.keyset_note:
            code = Text("key set not read: " + f.keyset_note, style="grey50 italic", no_wrap=True)
        note = None if f.torchscript else P.frame_note(f)  # (TorchScript's lines have rows of their own)
        if note:  # what ran in its place or what it implements (compiled code): first, then its line
            code = Text.assemble((f"[{note}] ", "bold #7fa7d9"), code, no_wrap=True)
        name = frame_name(f, self.full_names, self.name_width)
        if self._matches(f):
            name.stylize("reverse")
        return (hidden, Text(layer, style=layer_style(layer)), name,
                Text(key, style="bold cyan") if key else "", frame_where(f, self.cwd, short=True), code)

    def _announce(self) -> None:
        i = self.selected_frame_index()
        frame = self.frames[i] if i is not None else None
        self.post_message(FrameSelected(frame, self.cwd, self.hit))

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
        elif row.hidden:  # the interpreter frames folded just above this one
            self._opened.add(row.start - row.hidden)
            self._rebuild(select_frame=row.start)
