"""Names and file:line for the native frames gdb left without them, from pttrace's own symbol index.

The agent records such a frame with its ``library`` and file-relative ``offset`` (a library given to
gdb as unwind tables only has no names in gdb at all; a library whose separate debug file gdb did not
find has names but no file:line). ``FrameFiller`` looks each (library, offset) up once: the function
holding it (``tracer.symbols.symbol_at``: full demangled name, then short name, layer and dispatch
key as the agent would have given them) and, where the library has DWARF (itself, a build-id or
``.gnu_debuglink`` file, ``$PTTRACE_DEBUG_DIRS``), its file:line. A caller frame is looked up at
offset - 1: its pc is a return address, which may be past the end of the call's function.
The engine appends the answers to the session as ``fill`` records (tracer/session/records.py).
"""
from __future__ import annotations

import threading

from tracer.dispatch.classify import classify, dispatch_key, kernel_below_adapter, short_name
from tracer.errors import PttraceError
from tracer.session.model import Frame, fill_path


def _named(name: str | None, library: str, file: str | None, line: int | None) -> dict:
    return {"function": name, "short": short_name(name), "layer": classify(name, library),
            "dispatch_key": dispatch_key(name), "file": file, "line": line}


class FrameFiller:
    def __init__(self) -> None:
        self.unreadable: dict[str, str] = {}  # library -> why our index could not read it
        self._answers: dict[tuple, dict | None] = {}
        self._written: set[tuple] = set()
        self._lock = threading.Lock()

    def lookup(self, key: tuple) -> dict | None:
        """What our index knows of (library, offset, caller); None if nothing."""
        if key in self._answers:
            return self._answers[key]
        library, offset, caller = key
        values: dict = {}
        if library:
            addr = offset - 1 if caller and offset > 0 else offset
            try:
                from tracer.symbols import line_for_address, symbol_at

                found = symbol_at(library, addr)
                if found is not None:
                    sym = found[0]
                    name = sym.name + "@plt" if sym.plt else sym.name
                    values = {"function": name, "short": short_name(name), "layer": classify(name, library),
                              "dispatch_key": dispatch_key(name)}
                line = line_for_address(library, addr)
                if line is not None and line.inlined:
                    # gdb's frames where it reads the DWARF: the function the code belongs to, at its call
                    # of the outermost inlined one, then each inlined function at its call of the next.
                    outer = line.inlined[-1]
                    values["file"], values["line"] = outer.file, outer.line
                    steps = [(s.function, s.file, s.line) for s in reversed(line.inlined[:-1])]
                    values["inlined"] = [_named(fn, library, file, ln)
                                         for fn, file, ln in [*steps, (line.function, line.file, line.line)]]
                elif line is not None and line.file:
                    values["file"], values["line"] = line.file, line.line
            except (PttraceError, OSError) as exc:  # the frame keeps its library and offset
                self.unreadable.setdefault(library, exc.message if isinstance(exc, PttraceError) else str(exc))
        self._answers[key] = values or None
        return self._answers[key]

    def fill(self, frames: list[Frame]) -> list:
        """Fill these frames of one call path (outermost first) in place, a frame in inlined code followed
        by the inlined functions' frames; returns the new ``fill`` entries to append to the session (each
        key once)."""
        new = []
        with self._lock:
            looked = []
            for i, key, had_name in fill_path(frames, self.lookup):
                looked.append(key)
                f = frames[i]
                # As the agent does for named frames: a runtime function called by a boxing adapter
                # is the kernel it wraps (its name alone does not say so).
                if not had_name and i and kernel_below_adapter(f.layer, frames[i - 1].function):
                    f.layer = "kernel"
                    answer = self._answers[key]
                    if answer is not None:
                        self._answers[key] = dict(answer, layer="kernel")
            for key in looked:
                if key not in self._written:
                    self._written.add(key)
                    new.append([key[0], key[1], key[2], self._answers[key]])
        return new
