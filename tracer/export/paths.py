"""Distinct call paths: hits grouped by the frames they went through, with how many took each.

Every renderer (markdown, folded stacks, the ``show`` tree, ``diff``) works on these groups, so a
session of 10,000 hits that took 12 paths is rendered 12 times, not 10,000.

Folding (the default view) hides what is noise for someone reading PyTorch's layers:
  - interpreter frames (CPython's own C code: ``_PyEval_EvalFrameDefault``, ``cfunction_call``, ...);
  - start-up frames above the outermost Python frame (``_start``, ``__libc_start_main``, ``Py_RunMain``).
``all_frames=True`` keeps every recorded frame.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence, overload

from tracer.export.source import repo_path
from tracer.session.hit_table import HitTable, SiteHits
from tracer.session import torchscript as ts
from tracer.session.model import Frame, Hit


# --- what a frame is; the recorder fills layer, short name and key (export never re-classifies:
# imports go down only, DESIGN.md section 5)

def layer_of(frame: Frame) -> str:
    if frame.kind == "python":
        return frame.layer or "python"  # "compiler", "generated": torch.compile's wrappers and output code
    if frame.layer:
        return frame.layer
    return "runtime"


def frame_note(frame: Frame) -> str | None:
    """What a frame ran that its name does not say: ``compiled: graph 1`` for the Python frame dynamo
    ran a compiled graph in place of."""
    if frame.compiled:
        return f"compiled: {frame.compiled}"
    if frame.kind == "native" and is_interpreter_loop(frame.function):
        if frame.torchscript is None:
            return "TorchScript: its function, line and graph node were not read (the session's warnings say why)"
        rows = torchscript_rows(frame)
        if not rows or all(r.why for r in rows):
            return "TorchScript: not read: " + "; ".join(dict.fromkeys(r.why or "" for r in rows))
        return "TorchScript " + " → ".join(f"{r.function or '?'} {os.path.basename(r.file or '?')}:{r.line or '?'}"
                                           + (f" {r.node}" if r.node else "") for r in rows if not r.why)
    return None


@dataclass(frozen=True)
class TsRow:
    """One line of TorchScript at an interpreter frame: a scripted function at a line (``node``: the graph
    node it runs, on the innermost line of each level), or why a level was not read."""

    function: str | None = None
    file: str | None = None
    line: int | None = None
    text: str | None = None
    node: str | None = None
    why: str | None = None

    def label(self, cwd: str | None = None) -> str:
        if self.why and not self.file:
            if self.function or self.node:  # a level read but its node has no line
                return f"TorchScript {self.function or '?'}  [{self.node or '?'}]  (no line: {self.why})"
            return f"TorchScript: not read: {self.why}"
        where = f"{display_path(self.file, cwd) or '?'}:{self.line if self.line is not None else '?'}"
        out = f"TorchScript {self.function or '?'}  {where}"
        if self.text:
            out += f"  {self.text}"
        if self.node:
            out += f"  [{self.node}]"
        if self.why:
            out += f"  ({self.why})"
        return out


GRAPH_NOT_READ = "value types and node attributes (a constant's value) are not read"


def frame_graphs(frame: Frame, graphs: dict) -> list:
    """The graphs (``session.torchscript.TsGraph``, from ``session.graphs``) of the scripted functions an
    interpreter frame ran, outermost first, each once."""
    ids = dict.fromkeys(level.graph for level in frame.torchscript or () if level.graph is not None)
    return [graphs[i] for i in ids if i in graphs]


def torchscript_rows(frame: Frame) -> list[TsRow]:
    """The scripted lines an interpreter frame was running, outermost first: per level the calls inlining
    replaced, then the node's own line with its graph node."""
    rows: list[TsRow] = []
    for level in frame.torchscript or ():
        if not level.places:
            rows.append(TsRow(function=level.function, node=level.node, why=level.why or "no source range"))
            continue
        for k, p in enumerate(level.places):
            last = k == len(level.places) - 1
            rows.append(TsRow(p.function, p.file, p.line, p.text, level.node if last else None,
                              level.why if last else None))
    return rows


def is_interpreter_loop(function: str | None) -> bool:
    """TorchScript's interpreter loop (``InterpreterStateImpl::runTemplate``/``runImpl``), where the
    scripted function's levels are interleaved."""
    return ts.is_interpreter_loop(function)


def generated_kernel(frames: list[Frame], i: int, cwd: str | None = None):
    """What inductor's files say of the kernel a native frame in its generated code runs
    (``tracer.scripted.inductor.GeneratedKernel``), None for other frames and for the outer frames of a
    kernel's library (the kernel is told once, at its innermost frame)."""
    from tracer.scripted import inductor

    f = frames[i]
    if f.kind != "native" or f.library is None or not inductor.is_generated(f.library):
        return None
    if i + 1 < len(frames) and frames[i + 1].kind == "native" and frames[i + 1].library == f.library:
        return None
    module = next((g.file for g in reversed(frames[:i])
                   if g.kind == "python" and g.file and inductor.CACHE_DIR.search(g.file)), None)
    return inductor.describe(f.library, module, cwd)


def short_of(frame: Frame) -> str:
    """The name to show in a table row or a tree node; never empty."""
    if frame.kind == "python":
        return frame.function or "??"
    if frame.short:
        return frame.short
    if frame.function:
        return frame.function
    if frame.address is not None:
        return hex(frame.address)
    return "??"


def dispatch_key_of(frame: Frame) -> str | None:
    if frame.kind == "python":
        return None
    return frame.dispatch_key


def library_name(frame: Frame) -> str | None:
    return os.path.basename(frame.library) if frame.library else None


_PACKAGES_RE = re.compile(r"/(?:site|dist)-packages/")


def in_packages(file: str) -> bool:
    """Whether a Python file is an installed package's or the standard library's, not one's own code."""
    return bool(_PACKAGES_RE.search(file) or re.search(r"/lib/python3\.\d+/", file))


@overload
def display_path(file: str, cwd: str | None = None) -> str: ...
@overload
def display_path(file: None, cwd: str | None = None) -> None: ...
@overload
def display_path(file: str | None, cwd: str | None = None) -> str | None: ...


def display_path(file: str | None, cwd: str | None = None) -> str | None:
    """A path short enough for a table cell: relative to site-packages, the cwd, or PyTorch's tree."""
    if not file:
        return file
    m = None
    for m in _PACKAGES_RE.finditer(file):
        pass
    if m is not None:
        return file[m.end():]
    in_repo = repo_path(file)
    if in_repo and os.path.isabs(file):
        return in_repo
    if cwd and os.path.isabs(file):
        prefix = cwd.rstrip("/") + "/"
        if file.startswith(prefix):
            return file[len(prefix):]
    return file


def frame_location(frame: Frame, cwd: str | None = None) -> str | None:
    path = display_path(frame.file, cwd)
    if path is None:
        return None
    return f"{path}:{frame.line}" if frame.line is not None else path


def frame_label(frame: Frame, cwd: str | None = None) -> str:
    """One line naming a frame: ``forward (torch/nn/modules/activation.py:361)`` or a short C++ name."""
    name = short_of(frame)
    if frame.kind == "python":
        where = frame_location(frame, cwd)
        return f"{name} ({where})" if where else name
    return name


def innermost_python(frames: list[Frame]) -> Frame | None:
    """The Python line closest to the native code: where the user's (or torch's) code called in.

    importlib's frozen frames (``<frozen importlib._bootstrap>``) are skipped when a real file is
    further out: "from torch/__init__.py:445" says more than "from _call_with_frames_removed".
    """
    fallback = None
    for f in reversed(frames):
        if f.kind == "python":
            if f.file and not f.file.startswith("<"):
                return f
            fallback = fallback or f
    return fallback


def in_parallel_worker(frames: list[Frame]) -> bool:
    """A stack of an intra-op worker thread: parallel machinery at its root and no Python frame above it
    (the thread that launched the region, and its Python line, are another thread's)."""
    natives = [f for f in frames if f.kind != "python"]
    return len(natives) == len(frames) and any(layer_of(f) == "parallel" for f in natives[:6])


WORKER_NOTE = "an intra-op parallel worker thread: which call and Python line launched its region is not recorded"


def launch_origin(hit: Hit) -> Frame | None:
    """The Python line whose call launched the parallel region a worker's hit ran in."""
    lb = hit.launched_by
    return innermost_python(lb.frames) if lb is not None and lb.frames else None


def is_ancestor(outer: list[Frame], inner: list[Frame]) -> bool:
    """Whether the stack ``inner`` runs inside the call ``outer`` stopped at the entry of: it holds
    ``outer``'s stack, ``outer``'s innermost function still active."""
    n = len(outer)
    if n == 0 or len(inner) <= n - 1:
        return False
    if any(x.key() != y.key() for x, y in zip(outer[:-1], inner[: n - 1])):
        return False
    return len(inner) >= n and inner[n - 1].kind == outer[-1].kind and inner[n - 1].function == outer[-1].function


def launch_text(hit: Hit, hits: Sequence[Hit], cwd: str | None = None) -> str | None:
    """One line on who launched a worker's region: thread, Python line, the kernel, the hit it ran inside."""
    lb = hit.launched_by
    if lb is None:
        return None
    if lb.thread is None:
        return f"launcher not found: {lb.why or 'unknown'}"
    text = f"launched by thread {lb.thread.id}"
    origin = innermost_python(lb.frames)
    where = frame_location(origin, cwd) if origin is not None else None
    if where:
        text += f" from {where}"
    entries = [short_of(f) for f in lb.frames if f.kind != "python" and short_of(f).startswith("at::_ops::")]
    if entries:
        text += f" via {entries[-1]}"
    kernels = [f for f in lb.frames if f.kind != "python" and layer_of(f) == "kernel"
               and not short_of(f).startswith(("at::TensorIterator", "at::internal::"))]
    if kernels:
        text += f" in {short_of(kernels[-1])}"
    parent = next((h for h in reversed(hits) if h.seq < hit.seq and h.thread.id == lb.thread.id
                   and is_ancestor(h.frames, lb.frames)), None)
    if parent is not None:
        text += f" (inside hit #{parent.seq})"
    return text


# --- folding

def is_interpreter(frame: Frame) -> bool:
    return frame.kind != "python" and layer_of(frame) == "interpreter"


def visible_frames(frames: list[Frame], all_frames: bool = False) -> list[Frame]:
    """The frames a reader sees, outermost first: from the first Python frame on, CPython's own frames
    left out, except the innermost (the breakpoint's: a CPython function broken on is still shown)."""
    if all_frames:
        return list(frames)
    first_python = next((i for i, f in enumerate(frames) if f.kind == "python"), 0)
    last = len(frames) - 1
    return [f for i, f in enumerate(frames[first_python:], first_python) if i == last or not is_interpreter(f)]


def portable_key(frame: Frame, cwd: str | None = None) -> tuple:
    """Like ``Frame.key`` but comparable across runs and machines (for ``diff``).

    Library directories and site-packages prefixes differ between environments, and addresses move
    with ASLR, so only basenames, package-relative paths and names are kept.
    """
    if frame.kind == "python":
        return ("py", display_path(frame.file, cwd), frame.line, frame.function)
    return ("c", library_name(frame), frame.function)


# --- grouping

@dataclass
class CallPath:
    """One distinct call path and the hits that took it."""

    key: tuple
    frames: list[Frame]  # visible frames of the first hit that took this path, outermost first
    hits: Sequence[Hit] = field(default_factory=list)  # a list, or a big session's ``SiteHits``
    hidden: int = 0  # frames folded away in that first hit
    firsts: list[Hit] | None = None  # of a big session: the first hit of each of its sites, in order

    @property
    def _distinct(self) -> Iterable[Hit]:
        """Hits that tell every breakpoint, thread and signal of the path: its sites' firsts, or all."""
        return self.firsts if self.firsts is not None else self.hits

    @property
    def count(self) -> int:
        return len(self.hits)

    @property
    def first(self) -> Hit:
        return self.hits[0]

    @property
    def innermost(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def breakpoints(self) -> list[str]:
        seen: dict[str, None] = {}
        for h in self._distinct:
            if h.breakpoint is not None:
                seen.setdefault(h.breakpoint, None)
        return list(seen)

    @property
    def threads(self) -> list[str]:
        seen: dict[str, None] = {}
        for h in self._distinct:
            t = h.thread
            label = f"{t.id}" if t.id is not None else "?"
            if t.names:
                label += f" ({t.names})"
            seen.setdefault(label, None)
        return list(seen)

    @property
    def signals(self) -> list[str]:
        return sorted({h.signal for h in self._distinct if h.signal})

    @property
    def truncated(self) -> bool:
        return any(h.truncated for h in self._distinct)

    @property
    def layers(self) -> list[str]:
        """The layers crossed, outermost first, consecutive repeats merged."""
        out: list[str] = []
        for f in self.frames:
            layer = layer_of(f)
            if not out or out[-1] != layer:
                out.append(layer)
        return out

    @property
    def title(self) -> str:
        inner = self.innermost
        return short_of(inner) if inner is not None else "(no frames)"


def group(hits: Iterable[Hit], all_frames: bool = False, portable: bool = False,
          cwd: str | None = None) -> list[CallPath]:
    """Distinct call paths in order of their first hit.

    ``portable`` groups by :func:`portable_key` (with the session's ``cwd``), for comparing sessions
    recorded in different places.
    """
    if isinstance(hits, HitTable):
        return _group_table(hits, all_frames, portable, cwd)
    paths: dict[tuple, CallPath] = {}
    for hit in hits:
        key, shown = _path_key(hit, all_frames, portable, cwd)
        path = paths.get(key)
        if path is None:
            path = paths[key] = CallPath(key=key, frames=shown, hidden=len(hit.frames) - len(shown), hits=[])
        assert isinstance(path.hits, list)  # made just above
        path.hits.append(hit)
    return list(paths.values())


def _path_key(hit: Hit, all_frames: bool, portable: bool, cwd: str | None) -> tuple[tuple, list[Frame]]:
    shown = visible_frames(hit.frames, all_frames)
    if portable:
        key = tuple(portable_key(f, cwd) for f in shown)
    else:
        key = tuple(f.key() for f in shown)
    origin = launch_origin(hit)
    if origin is not None:  # a worker's hits from different Python lines are different paths
        key += (("launched from",) + (portable_key(origin, cwd) if portable else origin.key()),)
    return key, shown


def _group_table(table: HitTable, all_frames: bool, portable: bool, cwd: str | None) -> list[CallPath]:
    """``group`` once a site: a million hits of a hot breakpoint cost what their few sites cost."""
    counts = table.site_counts()
    firsts = table.first_rows(counts)
    paths: dict[tuple, CallPath] = {}
    sites: dict[tuple, set[int]] = {}
    for site in sorted(counts, key=firsts.__getitem__):
        first = table[firsts[site]]
        key, shown = _path_key(first, all_frames, portable, cwd)
        path = paths.get(key)
        if path is None:
            path = paths[key] = CallPath(key=key, frames=shown, hidden=len(first.frames) - len(shown), firsts=[])
            sites[key] = set()
        assert path.firsts is not None  # made just above
        path.firsts.append(first)
        sites[key].add(site)
    for key, path in paths.items():
        path.hits = SiteHits(table, sites[key], sum(counts[s] for s in sites[key]))
    return list(paths.values())


# --- reading order

IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


def at_import(path: CallPath) -> bool:
    """The path's hit ran inside an ``import`` (CPython's import machinery is on its Python stack):
    what a module does as it loads (``initModule`` and its kin), not what the program computes."""
    return any(f.kind == "python" and f.file in IMPORT_FILES for f in path.frames)


def reading_order(paths: list[CallPath], breakpoints: Sequence[str] = ()) -> tuple[list[CallPath], list[CallPath]]:
    """(the paths a reader studies, the paths taken at import time), each in the order the breakpoints
    were given (``--break A --break B``: A's paths first), then by first hit."""
    rank = {spec: i for i, spec in enumerate(breakpoints)}

    def key(item: tuple[int, CallPath]) -> tuple[int, int]:
        n, path = item
        ranks = [rank[b] for b in path.breakpoints if b in rank]
        return (min(ranks) if ranks else len(rank), n)

    ordered = [p for _, p in sorted(enumerate(paths), key=key)]
    return [p for p in ordered if not at_import(p)], [p for p in ordered if at_import(p)]
