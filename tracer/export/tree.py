"""Call paths for the terminal: rich ``Tree``s, one colour per layer (``show`` and ``diff``).

Names go into ``Text`` objects, never into markup strings: ``[clone .cold]`` and ``<…>`` would be
read as rich markup otherwise.
"""
from __future__ import annotations

from rich.text import Text
from rich.tree import Tree

from tracer.export import paths as P
from tracer.model import Frame

LAYER_STYLES = {
    "python": "green",
    "interpreter": "grey50",
    "binding": "magenta",
    "dispatcher": "bright_blue",
    "autograd": "yellow",
    "kernel": "bold red",
    "torchscript": "cyan",
    "parallel": "magenta",
    "generated": "bright_yellow",
    "runtime": "grey62",
}
_LAYER_WIDTH = max(len(k) for k in LAYER_STYLES)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def frame_text(frame: Frame, cwd: str | None = None, dim: bool = False) -> Text:
    layer = P.layer_of(frame)
    style = LAYER_STYLES.get(layer, "")
    t = Text()
    name_style = ("bold " if layer in ("kernel", "python") else "") + style
    t.append(f"{layer:<{_LAYER_WIDTH}}  ", style=style if not dim else "grey50")
    t.append(P.short_of(frame), style=name_style if not dim else "grey50")
    key = P.dispatch_key_of(frame)
    if key:
        t.append(f"  [{key}]", style="cyan" if not dim else "grey50")
    lib = P.library_name(frame)
    if lib:
        t.append(f"  {lib}", style="grey50")
    loc = P.frame_location(frame, cwd)
    if loc:
        t.append(f"  {loc}", style="grey62" if not dim else "grey50")
    if frame.kind == "python" and frame.source:
        t.append(f"  {frame.source.strip()}", style="italic" if not dim else "grey50")
    if frame.inlined:
        t.append("  (inlined)", style="grey50")
    return t


def path_label(n: int | str, path: P.CallPath, cwd: str | None = None, counts: str | None = None) -> Text:
    t = Text()
    t.append(f"path {n}", style="bold")
    t.append(f"  {counts or plural(path.count, 'hit')}", style="bold cyan")
    t.append(f"  {path.title}", style="bold")
    origin = P.innermost_python(path.frames)
    if origin is not None and origin is not path.innermost:
        loc = P.frame_location(origin, cwd)
        if loc:
            t.append(f"  from {loc}", style="green")
    if path.breakpoints:
        t.append("  breakpoint " + ", ".join(path.breakpoints), style="grey62")
    if path.signals:
        t.append("  signal " + ", ".join(path.signals), style="bold red")
    return t


def add_path(parent: Tree, label: Text, path: P.CallPath, cwd: str | None = None,
             diverge_at: int | None = None, note: str | None = None) -> Tree:
    """A path node with one child per frame, top-down. Frames before ``diverge_at`` are dimmed."""
    node = parent.add(label)
    if path.truncated:
        node.add(Text("(stack truncated: outermost frames missing)", style="grey50"))
    if not path.frames:
        node.add(Text("(no frames recorded)", style="grey50"))
    for i, frame in enumerate(path.frames):
        dim = diverge_at is not None and i < diverge_at
        t = frame_text(frame, cwd, dim=dim)
        if diverge_at is not None and i == diverge_at and note:
            t.append(f"  ← {note}", style="bold")
        node.add(t)
    return node
