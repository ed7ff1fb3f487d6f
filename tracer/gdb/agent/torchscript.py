"""TorchScript's running function, source line and graph node, read at a hit whose stack passes through the
interpreter's loop (``InterpreterStateImpl::runTemplate``), and put on that frame (``torchscript``).

The layout (tracer/scripted/interp_layout.py) comes from the recorder: in the configuration when it was
cached, else as a file the recorder's background probe writes (~2 min once per torch build): the agent
looks for it at most once a second and uses it from then on. Which frames are the interpreter's loop is
told by their offset in libtorch_cpu (the layout's ``run_ranges``): gdb has no names for them at the hit
(pttrace gives gdb libtorch_cpu's unwind tables only). Only the innermost interpreter of a thread is
reachable (``tls_int_state_ptr_``); an outer one, when interpreters nest, says so.
"""
from __future__ import annotations

import bisect
import json
import linecache
import time

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import native
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.state import STATE
from tracer.scripted import interp_frames as IF
from tracer.scripted.interp_graph import read_graph
from tracer.scripted.interp_layout import InterpreterLayout
from tracer.values.memory import BadValue, Memory

LIBRARY = "libtorch_cpu.so"
POLL = 1.0  # seconds between looks for a layout still being established
MAX_TEXT = 200
OUTER = "an outer interpreter: only the innermost one of a thread is reachable (tls_int_state_ptr_)"


class _Reader:
    """The installed layout and what was learnt with it in this run."""

    def __init__(self) -> None:
        self.layout: InterpreterLayout | None = None
        self.file: str | None = None  # where the recorder's probe will write the layout
        self.next_look = 0.0
        self.starts: list[int] = []
        self.loops: dict[int, bool] = {}  # pc -> in the interpreter's loop
        self.frames_offset: int | None = None
        self.graphs: dict[tuple[int, int], int] = {}  # (pid, CodeImpl address) -> its graph record's id
        self.mem = Memory(lambda a, n: gdb.selected_inferior().read_memory(a, n))

    def configure(self, cfg: dict | None) -> None:
        cfg = cfg or {}
        self.file = cfg.get("file")
        if cfg.get("layout"):
            self.install(cfg["layout"])
        else:  # why a hit through the interpreter has no TorchScript frames (storage says it if one has)
            OUT.write({"type": "torchscript", "ready": False, "why": cfg.get("why") or "no layout was given"})

    def install(self, data: dict) -> None:
        self.layout = InterpreterLayout(**data)
        self.starts = [start for start, _ in self.layout.run_ranges]
        self.loops.clear()

    def ready(self) -> bool:
        if self.layout is not None:
            return True
        if not self.file or time.monotonic() < self.next_look:
            return False
        self.next_look = time.monotonic() + POLL
        try:
            with open(self.file, encoding="utf-8") as fh:
                data = json.load(fh)
            self.install(data)
        except (OSError, ValueError, TypeError):
            return False
        OUT.write({"type": "torchscript", "ready": True, "seq": STATE.hits + 1})
        return True

    def in_loop(self, f: dict) -> bool:
        pc = f.get("address")  # None for a Python frame
        if pc is None:
            return False
        known = self.loops.get(pc)  # a pc is one library's: its kind and library were looked at once
        if known is None:
            if f.get("kind") != "native" or not (f.get("library") or "").endswith(LIBRARY):
                self.loops[pc] = False
                return False
            base = native.lib_base(f["library"])
            known = False
            if base is not None and self.layout is not None:
                offset = pc - base
                i = bisect.bisect_right(self.starts, offset) - 1
                known = i >= 0 and offset < self.layout.run_ranges[i][0] + self.layout.run_ranges[i][1]
            self.loops[pc] = known
        return known

    def levels(self, newest, library: str) -> list[dict]:
        """The innermost interpreter's frames, outermost first, as recorded (or one level saying why not)."""
        layout = self.layout
        assert layout is not None
        if layout.problems and not layout.offsets:
            return [{"why": "; ".join(layout.problems)}]
        try:
            fs = int(newest.read_register("fs_base")) & (2 ** 64 - 1)
            base = native.lib_base(library)
            if base is None:
                return [{"why": f"{library} is not mapped"}]
            state = IF.tls_state(self.mem, layout, base, fs)
            if not state:
                return [{"why": "the thread's interpreter state pointer is null"}]
            if self.frames_offset is None:
                self.frames_offset = IF.frames_offset(self.mem, layout, state)
            try:
                found = IF.read_levels(self.mem, layout, state, self.frames_offset)
            except BadValue:
                self.frames_offset = IF.frames_offset(self.mem, layout, state)
                found = IF.read_levels(self.mem, layout, state, self.frames_offset)
        except BadValue as exc:
            return [{"why": str(exc)}]
        except READ_ERRORS as exc:
            return [{"why": f"gdb could not read the thread's registers ({exc})"}]
        return [dict(_level_dict(lv), **self.graph_of(lv)) for lv in found] or [{"why": "the interpreter has no frames"}]

    def graph_of(self, level: IF.Level) -> dict:
        """{graph: id} of the level's code, its graph read and written once (a ``graph`` record)."""
        if level.code is None or self.layout is None:
            return {}
        try:
            pid = gdb.selected_inferior().pid
        except READ_ERRORS:
            pid = 0
        key = (pid, level.code)
        gid = self.graphs.get(key)
        if gid is None:
            gid = self.graphs[key] = len(self.graphs) + 1
            OUT.write({"type": "graph", "graph": read_graph(self.mem, self.layout, level.code, gid, level.function)})
        return {"graph": gid}


def _level_dict(level: IF.Level) -> dict:
    out: dict = {"function": level.function, "node": level.node,
                 "places": [_place_dict(p) for p in level.places]}
    if level.node is None and level.node_kind is not None:
        out["node_kind"] = level.node_kind
    if level.why:
        out["why"] = level.why
    return out


def _place_dict(place: IF.Place) -> dict:
    out: dict = {"function": place.function, "file": place.file, "line": place.line}
    text = _line_text(place.file, place.line)
    if text:
        out["text"] = text
    return out


def _line_text(file: str | None, line: int | None) -> str | None:
    """The source line as the file reads now (the interpreter keeps the text too, but as a rope of
    string views: the file is what the user wrote, and the same file a Python frame's line comes from)."""
    if not file or not line:
        return None
    text = linecache.getline(file, line).strip()
    return text[:MAX_TEXT] or None


READER = _Reader()


def loop_frames(frames: list) -> list[int]:
    """The indexes of ``frames`` in the interpreter's loop (READER ready)."""
    return [i for i, f in enumerate(frames) if READER.in_loop(f)]


def mark_torchscript(frames: list, newest, loops: list[int] | None = None) -> None:
    """Replace, in ``frames`` (outermost first), the innermost interpreter-loop frame by a copy carrying
    the TorchScript levels it runs, and each outer interpreter's by one saying why it has none.
    ``loops``: loop_frames(frames), when the caller has it already."""
    if not READER.ready():
        return
    if loops is None:
        loops = loop_frames(frames)
    if not loops or newest is None:
        return
    # one interpreter's activation may be several frames in a row (runTemplate, a runImpl not inlined):
    # each is marked at its innermost frame
    *outer, inner = [i for i in loops if i + 1 not in loops]
    frames[inner] = dict(frames[inner], torchscript=READER.levels(newest, frames[inner]["library"]))
    for i in outer:
        frames[i] = dict(frames[i], torchscript=[{"why": OUTER}])
