"""Shared look: one colour per layer (the same as ``pttrace show``), and how names are shown."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rich.text import Text

from tracer.export import paths as P
from tracer.session.model import Frame

# The same hues as ``pttrace show``, as exact colours: Textual maps the named ANSI colours through
# its theme, where magenta (binding) and red (kernel) come out as the same pink.
LAYER_STYLES = {
    "python": "#98c379",
    "interpreter": "grey50",
    "binding": "#c678dd",
    "dispatcher": "#61afef",
    "autograd": "#e5c07b",
    "kernel": "bold #ff5f5f",
    "torchscript": "#56b6c2",
    "compiler": "#7fa7d9",
    "parallel": "#c678dd",
    "generated": "#d19a66",
    "runtime": "grey62",
}


def layer_style(layer: str | None) -> str:
    return LAYER_STYLES.get(layer or "", "")


SHORT_NAME_WIDTH = 64
"""A short name longer than this is cut in its middle, so that one lambda inside a template does
not push the other columns (file:line) out of the pane; the full name is one key (d) away."""


def fit(name: str, width: int) -> str:
    """``name`` cut in the middle to ``width`` characters: a C++ name's head (its namespace) and
    tail (the function itself) say the most."""
    if len(name) <= width:
        return name
    tail = (width - 1) // 3
    return name[: width - 1 - tail] + "…" + name[len(name) - tail:]


def frame_name(frame: Frame, full: bool = False, width: int = SHORT_NAME_WIDTH) -> Text:
    """A frame's name as a Text (never markup: ``<…>`` and ``[clone .cold]`` are not tags)."""
    layer = P.layer_of(frame)
    if full and frame.kind == "native" and frame.function:
        name = frame.function
    else:
        name = fit(P.short_of(frame), width)
    return Text(name, style=layer_style(layer), no_wrap=True)


def searched_texts(frame: Frame) -> list[str]:
    """What a search finds a frame by: what the panes show of it (its names, ``file.py:9`` as the rows
    write it and the whole path:line, its library, its layer and dispatch key)."""
    texts = [frame.function or "", frame.short or "", frame.file or "",
             os.path.basename(frame.library) if frame.library else "", P.layer_of(frame), frame.dispatch_key or ""]
    if frame.file and frame.line:
        texts += [f"{os.path.basename(frame.file)}:{frame.line}", f"{frame.file}:{frame.line}"]
    return texts


def frame_where(frame: Frame, cwd: str | None, short: bool = False) -> Text:
    """Where a frame is: file:line for Python (just the file name when ``short``), else the library."""
    if frame.kind == "python":
        if short and frame.file and not frame.file.startswith("<"):
            where = f"{os.path.basename(frame.file)}:{frame.line}" if frame.line else os.path.basename(frame.file)
        else:
            where = P.frame_location(frame, cwd) or "?"
        return Text(where, style="green", no_wrap=True)
    t = Text(no_wrap=True)
    t.append(os.path.basename(frame.library) if frame.library else "?", style="grey62")
    loc = P.frame_location(frame, cwd)
    if loc and short and frame.file:
        loc = f"{os.path.basename(frame.file)}:{frame.line}" if frame.line else os.path.basename(frame.file)
    if loc:
        t.append(f"  {loc}", style="grey70")
    return t


ROW_BINDINGS = [
    # A table's home/end scroll sideways by default; in these tables they go to the first/last row.
    ("home", "first_row", "first"),
    ("end", "last_row", "last"),
]


class RowJumps:
    """home/end move the cursor to the first/last row (mixed into the DataTables)."""

    if TYPE_CHECKING:  # what the DataTable it is mixed into has
        row_count: int

        def move_cursor(self, *, row: int | None = None, column: int | None = None, animate: bool = False,
                        scroll: bool = True) -> None: ...

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)
