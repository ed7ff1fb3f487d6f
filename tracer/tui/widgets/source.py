"""The source pane: the selected frame's file around its line, highlighted, or why it cannot be shown."""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from rich.console import Group
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Span, Text
from textual import work
from textual.message import Message
from textual.widgets import Static

from tracer import settings
from tracer.export import paths as P
from tracer.session.model import Frame, FrameValues
from tracer.tui import source_files as SF

THEME = "monokai"
LINE_STYLE = "on #3b3b1f"


_HIGHLIGHTED: "OrderedDict[tuple, list[Text]]" = OrderedDict()
_HIGHLIGHTED_MAX = 16
_lock = threading.Lock()


def _coloured(code: str, lang: str) -> Text:
    """``code`` lexed and coloured, on the pane's own background: the theme paints a background
    behind every token, which shows as boxes around the words on Textual's surface colour."""
    text = Syntax(code, lang, theme=THEME).highlight(code)
    text.style = ""
    spans = []
    for span in text.spans:
        style = span.style if isinstance(span.style, Style) else Style.parse(span.style)
        spans.append(Span(span.start, span.end, Style(color=style.color, bold=style.bold, italic=style.italic,
                                                       underline=style.underline)))
    text.spans = spans
    return text


def highlighted(path: str, mtime_ns: int, lang: str) -> list[Text] | None:
    """The file's lines as highlighted Texts if they were lexed already (lexing a big file takes
    a few hundred ms: it happens in a worker, see ``SourcePane``)."""
    with _lock:
        lines = _HIGHLIGHTED.get((path, mtime_ns, lang))
        if lines is not None:
            _HIGHLIGHTED.move_to_end((path, mtime_ns, lang))
        return lines


def highlight(path: str, mtime_ns: int, lang: str) -> list[Text] | None:
    """Lex the file once per file and version; the result is kept for ``highlighted``."""
    found = highlighted(path, mtime_ns, lang)
    if found is not None:
        return found
    lines = SF.read_lines(Path(path))
    if lines is None:
        return None
    if lang == "text":
        result = [Text(line) for line in lines]
    else:
        code = "\n".join(lines)
        text = _coloured(code, lang)
        result = list(text.split("\n", allow_blank=True))[: len(lines)]
    with _lock:
        _HIGHLIGHTED[(path, mtime_ns, lang)] = result
        while len(_HIGHLIGHTED) > _HIGHLIGHTED_MAX:
            _HIGHLIGHTED.popitem(last=False)
    return result


class SourcesFound(Message):
    """A worker found the sources of a frame without DWARF (tracer.sources: an index may be built)."""

    def __init__(self, frame: Frame) -> None:
        super().__init__()
        self.frame = frame


class SourceHighlighted(Message):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path


def _github_link(frame: Frame, session_info) -> str | None:
    try:
        from tracer.export.source import github_url, pinned_ref
    except ImportError:
        return None
    try:
        ref = pinned_ref(getattr(session_info, "torch_git_version", None), getattr(session_info, "torch_version", None))
        return github_url(frame.file, frame.line, ref)
    except Exception:
        return None


def _line_tables_advice(frame: Frame) -> str:
    """Where line tables for this frame's library would come from: torch's wheel, the Python
    interpreter, or another library (a torch build's advice is wrong for CPython's own code)."""
    lib = frame.library or ""
    if "/torch/" in lib:
        return "Release wheels carry function names only; a debug build (DEBUG=1 or REL_WITH_DEB_INFO=1) has them."
    if P.layer_of(frame) == "interpreter" or "python" in os.path.basename(lib):
        return ("This is CPython's own C code, and this interpreter was built without debug information: "
                "an interpreter with it (a pyenv or source build, or the distribution's python3-dbg symbols) "
                "gives its lines.")
    return "Its debug information (a -dbg/-dbgsym package, or a build with -g) would give its lines."


class SourcePane(Static, can_focus=True):
    """Shows a window of the file fitted to the pane, the frame's line in the middle (focusable, so
    that z can maximize it)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(Text("the source of the frame selected in the call path shows here",
                              style="grey50"), **kwargs)
        self.frame: Frame | None = None
        self.cwd: str | None = None
        self.session_info = None
        self.colouring = False
        """True while the file is shown plain because a worker is still lexing it."""
        self.finding = False
        """True while a worker looks for the sources of a frame without DWARF (tracer.sources)."""
        self.shown = None
        """The rich renderable on screen (what tests read)."""
        self.border_title = "source"
        self._finder = None
        self.carried: FrameValues | None = None
        """What the frame carried at the hit shown (arguments, the decision), shown above its source."""
        self.graphs: dict = {}
        """TorchScript: the session's graphs by id (``session.graphs``), shown at an interpreter frame."""

    def finder(self):
        """One SourceFinder per pane: the settings' source directory, the session's torch commit."""
        if self._finder is None:
            from tracer.errors import UsageError
            from tracer.sources import SourceFinder, source_dir_setting

            commit = getattr(self.session_info, "torch_git_version", None)
            try:
                self._finder = SourceFinder(source_dir_setting(None), commit)
            except UsageError as e:  # a bad source directory: said in the pane, the rest still works
                self._finder = SourceFinder(None, commit)
                self._finder.notes.append(str(e))
        return self._finder

    def show(self, frame: Frame | None, cwd: str | None, hit=None) -> None:
        """``hit``: the hit shown, whose values the frame carried (its arguments and the dispatcher's
        decision) show above its source."""
        from tracer.export.values import frame_values

        carried = frame_values(hit, frame) if hit is not None and frame is not None else None
        if frame is self.frame and cwd == self.cwd and carried is self.carried:
            return
        self.frame, self.cwd, self.carried = frame, cwd, carried
        self._render_frame()

    def show_graphs(self, graphs: dict) -> None:
        """TorchScript's graphs, read with the session after its frames: shown at an interpreter frame."""
        self.graphs = graphs
        if self.frame is not None and self.frame.torchscript:
            self._render_frame()

    def on_resize(self) -> None:
        self._render_frame()

    def _render_frame(self) -> None:
        self.colouring = self.finding = False
        frame = self.frame
        if frame is None:
            self.border_title = "source"
            self._show(Text("select a frame in the call path", style="grey50"))
            return
        where = P.frame_location(frame, self.cwd)
        self.border_title = f"source · {where}" if where else f"source · {P.short_of(frame)}"
        located = SF.locate(frame, self.cwd)
        if located.path is None and frame.file and settings.current().source_dir:
            mapped = self.finder().local_file(frame.file)  # a DWARF path from another machine
            if mapped and SF.may_show(frame, mapped):
                located = SF.Located(Path(mapped), moved_from=frame.file)
        scripted = _torchscript_notes(frame, self.graphs, self.cwd)
        if scripted is not None:
            self._show(scripted)
            return
        kernel = _kernel_notes(frame, self.cwd)
        if located.path is not None and frame.line:
            body = self._excerpt(frame.line, located.path, located.moved_from)
            if body is not None:
                self._show(Group(kernel, body) if kernel is not None else body)
                return
        if kernel is not None:
            self._show(kernel)
            return
        if frame.kind != "python" and not frame.file and frame.function:
            refs = self.finder().known(frame.function, frame.library)
            if refs is None:
                self.finding = True
                self._find_sources(frame)
            elif refs:
                self._show(self._found(frame, refs))
                return
        self._show(self._not_here(frame, located))

    @work(thread=True, group="sources", exclusive=True, exit_on_error=False)
    def _find_sources(self, frame: Frame) -> None:
        self.finder().refs(frame.function, frame.library)  # kept by the finder: ``known`` answers next
        self.post_message(SourcesFound(frame))

    def on_sources_found(self, message: SourcesFound) -> None:
        message.stop()
        if message.frame is self.frame:
            self._render_frame()

    def _found(self, frame: Frame, refs: list) -> Text:
        """Each place found without DWARF: its label, where, and a few lines around it, the line marked."""
        out = Text(no_wrap=True, overflow="ellipsis")
        notes = self.finder().notes
        for note in notes:
            out.append(f"{note}\n", style="yellow")
        height = max(3, self.content_region.height or 15) - len(notes)
        each = max(1, (height - 2 * len(refs)) // max(1, len(refs)))  # lines of context per place
        for n, ref in enumerate(refs):
            where = (P.display_path(ref.file, self.cwd) or "") + (f":{ref.line}" if ref.line else "")
            out.append(f"{ref.label}", style="bold cyan")
            if ref.candidates > 1:
                out.append(f" (one of {ref.candidates})", style="cyan")
            out.append(f"  {where}  ", style="bold")
            out.append(f"{ref.what}\n", style="grey62")
            lines = SF.read_lines(Path(ref.file)) if ref.line else None
            if lines and 1 <= ref.line <= len(lines):
                start, end = SF.window(len(lines), ref.line, min(each, 7))
                width = len(str(end))
                for k in range(start, end + 1):
                    mark = k == ref.line
                    out.append(f"{'▶' if mark else ' '}{k:>{width}} ", style="bold yellow" if mark else "grey50")
                    out.append(lines[k - 1] + "\n", style=LINE_STYLE if mark else "")
            if n != len(refs) - 1:
                out.append("\n")
        out.rstrip()
        return out

    def _show(self, renderable) -> None:
        head = _carried_text(self.carried) if self.carried is not None else None
        if head is not None:
            renderable = Group(head, renderable)
        self.shown = renderable
        self.update(renderable)


    def _excerpt(self, line_no: int, path: Path, moved_from: str | None):
        """The file around line ``line_no``, marked; None if it cannot be read or is shorter."""
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return None
        lang = SF.language(str(path))
        lines = highlighted(str(path), mtime, lang)
        self.colouring = lines is None
        if lines is None:
            plain = SF.read_lines(path)
            if plain is None:
                return None
            lines = [Text(line) for line in plain]  # plain now, colours when the worker is done
            self._highlight(str(path), mtime, lang)
        if not lines or not 1 <= line_no <= len(lines):
            return None
        notes: list[Text] = []
        if moved_from:
            notes.append(Text(f"recorded at {moved_from}; shown from {path}", style="grey62"))
        height = max(3, self.content_region.height or 15) - len(notes)
        start, end = SF.window(len(lines), line_no, height)
        width = len(str(end))
        out = Text(no_wrap=True, overflow="ellipsis")
        for n in range(start, end + 1):
            mark = n == line_no
            gutter = Text(f"{'▶' if mark else ' '}{n:>{width}} ", style="bold yellow" if mark else "grey50")
            line = lines[n - 1].copy()
            if mark:
                line.stylize(LINE_STYLE)
                line.pad_right(max(0, (self.content_region.width or 80) - width - 2 - line.cell_len))
                line.stylize(LINE_STYLE)
            out.append_text(gutter)
            out.append_text(line)
            if n != end:
                out.append("\n")
        return Group(*notes, out) if notes else out

    @work(thread=True, group="highlight", exit_on_error=False)
    def _highlight(self, path: str, mtime: int, lang: str) -> None:
        if highlight(path, mtime, lang) is not None:
            self.post_message(SourceHighlighted(path))

    def on_source_highlighted(self, message: SourceHighlighted) -> None:
        message.stop()
        located = SF.locate(self.frame, self.cwd) if self.frame is not None else None
        if located is not None and located.path is not None and str(located.path) == message.path:
            self._render_frame()

    def _why_not_shown(self, frame: Frame, why: str) -> str:
        # Only a file plausibly the frame's source is read (export/local_files.py): a session may name any path.
        if not SF.present(frame, self.cwd):
            where = frame.file if frame.kind == "python" else f"{frame.file} (line {frame.line})"
            return f"{where} is not on this machine.\n"
        return f"{frame.file} is here but not shown: it {why}.\n"

    def _not_here(self, frame: Frame, located: SF.Located) -> Text:
        t = Text()
        if frame.kind == "python":
            if frame.file and frame.file.startswith("<"):
                t.append(f"{frame.file} is not a file: Python compiled this code from a string or froze it.\n",
                         style="yellow")
            else:
                t.append(self._why_not_shown(frame, "does not say what the recording says at that line"),
                         style="bold yellow")
            if frame.source:
                t.append(f"\nline {frame.line}, as recorded:\n", style="grey62")
                t.append_text(_coloured(frame.source.strip(), "python"))
            return t
        name = frame.function or (hex(frame.address) if frame.address else "??")
        if frame.file:
            t.append(self._why_not_shown(frame, "is not named by its library's line tables here (--source-dir DIR "
                                               "vouches for the files under DIR)"), style="bold yellow")
        else:
            lib = os.path.basename(frame.library) if frame.library else "this library"
            t.append(f"No file:line for this frame: {lib} has no line tables (DWARF).\n", style="bold yellow")
            t.append(_line_tables_advice(frame) + "\n", style="grey62")
        t.append("\nfunction  ", style="grey62")
        t.append(name + "\n", style="bold")
        if frame.library:
            t.append("library   ", style="grey62")
            t.append(frame.library + "\n")
        if frame.address:
            t.append("address   ", style="grey62")
            t.append(hex(frame.address) + "\n")
        if frame.decl_file:
            t.append("declared  ", style="grey62")
            t.append(f"{frame.decl_file}:{frame.decl_line}\n")
        url = _github_link(frame, self.session_info) if frame.file else None
        if url:
            t.append("on GitHub ", style="grey62")
            t.append(url + "\n", style="underline")
        return t


def _torchscript_notes(frame: Frame, graphs: dict, cwd: str | None) -> Text | None:
    """At TorchScript's interpreter frame: the scripted lines it ran with their graph nodes, then the graphs
    of those functions as ``graph->dump()`` prints them (read from memory, types and attributes left out)."""
    if frame.kind != "native" or not frame.torchscript:
        return None
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("TorchScript, outermost first\n", style="bold")
    for r in P.torchscript_rows(frame):
        out.append(f"  {r.label(cwd)}\n", style="yellow" if r.why else "")
    for graph in P.frame_graphs(frame, graphs):
        out.append(f"\ngraph of {graph.function or '?'} (read from memory; {P.GRAPH_NOT_READ})\n", style="bold")
        for line in graph.dump():
            out.append(line + "\n", style="steel_blue")
        if graph.why:
            out.append(f"not read: {graph.why}\n", style="yellow")
    out.rstrip()
    return out


def _kernel_notes(frame: Frame, cwd: str | None) -> Text | None:
    """Above the generated C++ of an inductor kernel's frame: which kernel, its ops and FX nodes, and
    the user's lines they came from, with their text (``tracer.scripted.inductor``)."""
    from tracer.scripted import inductor

    if frame.kind != "native" or frame.library is None or not inductor.is_generated(frame.library):
        return None
    kernel = inductor.describe(frame.library, None, cwd)
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(kernel.summary() + "\n", style="bold #7fa7d9")
    for node in kernel.user_lines:
        t.append(f"from {P.display_path(node.file, cwd)}:{node.line} {node.function}  ", style="bold")
        t.append((node.code or "") + "\n", style="italic")
    if kernel.module:
        t.append(f"called from {P.display_path(kernel.module, cwd)}:{kernel.module_line or '?'}\n", style="grey62")
    if kernel.cpp and not frame.file:
        t.append(f"defined at {P.display_path(kernel.cpp, cwd)}:{kernel.cpp_line or '?'} (no line tables "
                 "for this frame)\n", style="grey62")
    if kernel.missing:
        t.append(kernel.missing + "\n", style="yellow")
    return t


def _carried_text(fv: FrameValues) -> Text | None:
    """The frame's arguments (a line each) and the dispatcher's decision at the hit, as ``show`` prints them."""
    from tracer.export import values as V

    lines = [V.arg_text(a, i) for i, a in enumerate(fv.args)]
    decision = V.decision_lines(fv)
    if not lines and not decision:
        return None
    out = Text(no_wrap=False)
    out.append("carried\n", style="bold")
    for line in lines:
        out.append(f"  {line}\n")
    for line in decision:
        out.append(f"  {line}\n", style="cyan")
    return out
