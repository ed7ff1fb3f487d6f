"""Breakpoints by name in libraries loaded after start-up, as gdb's pending breakpoints are.

A ``--break NAME`` that our index resolved in torch's libraries is set by address, so gdb never looks
for NAME again; yet gdb's ``break NAME`` also breaks in a library loaded later that defines a NAME of
its own (a ctypes library, a ``cpp_extension.load`` build, inductor's generated code). At each stop
for library loads, every library not searched yet is searched for those names, and what it defines
becomes more address breakpoints.
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Callable

from tracer.errors import PttraceError
from tracer.recorder import resolve
from tracer.recorder.compiled_ops import CompiledOps

if TYPE_CHECKING:
    from tracer.gdb.agent.libstops import NameScans

log = logging.getLogger("pttrace.recorder")


class LaterLibraries:
    """``specs``: the names set by address at start-up; ``searched``: the libraries already searched."""

    def __init__(self, specs: list[str], searched: list[str], warn: Callable[[str], None],
                 library_ops: tuple[str, ...] = (), compiled: CompiledOps | None = None):
        self.specs = list(dict.fromkeys(specs))
        self.compiled = compiled  # --op NAME: inductor kernels that implement NAME (compiled_ops.py)
        self.library_ops = list(library_ops)  # --op ns::name: its TORCH_LIBRARY kernels, wherever registered
        self.found_ops: set[str] = set()
        self._searched = {os.path.realpath(p) for p in searched}
        self._new: list[str] = []
        self._warn = warn
        self._needles: list[list[bytes]] | None = None  # None: no test tells (see _may_define)
        self._needles_known = False
        self._scans: NameScans | None = None  # what this and earlier runs read of each library (libstops.NameScans)

    @property
    def active(self) -> bool:
        return bool(self.specs or self.library_ops or (self.compiled is not None and self.compiled.ops))

    def loaded(self, path: str) -> None:
        if self.active and os.path.realpath(path) not in self._searched:
            self._new.append(path)

    def breakpoints(self) -> list[dict]:
        """Address breakpoints ({label, library, offset, function[, plt]}) for the names the libraries
        loaded since the last call define."""
        new, self._new = self._new, []
        items: list[dict] = []
        for path in new:
            real = os.path.realpath(path)
            if real in self._searched:
                continue
            self._searched.add(real)
            if not self._may_define(real):
                continue  # (gdb did not stop for its load: libstops.py ruled it out the same way)
            items += self._library_ops(path)
            if self.compiled is not None:
                items += self.compiled.breakpoints_in(path)
            for spec in self.specs:
                try:
                    items += resolve.breakpoints_in(spec, path)
                except resolve.IndexFailure as exc:
                    why = exc.message if isinstance(exc, PttraceError) else exc
                    self._warn(f"pttrace could not search {os.path.basename(path)} for --break {spec} ({why}); "
                               f"a {spec} defined there is not broken on")
                    break
        if self._scans is not None:
            self._scans.save()
        if items:
            log.debug("breakpoints found again in libraries loaded later: %s", items)
        return items

    def _may_define(self, path: str) -> bool:
        """Whether the library may define one of the names: it holds the strings our index's search looks
        for (libstops.may_name). A library gdb did not stop for is decided here with the next one."""
        if not self._needles_known:
            self._needles_known = True
            found = [resolve.name_needles(spec) for spec in self.specs]
            custom = self.library_ops or (self.compiled is not None and self.compiled.ops)
            if not custom and all(g is not None for g in found):
                self._needles = [[n.encode("utf-8", "surrogateescape") for n in g] for g in found if g]
        if self._needles is None:
            return True
        from tracer import settings
        from tracer.gdb.agent.libstops import NameScans, may_name

        if self._scans is None:
            self._scans = NameScans(scans_file())
        return bool(self._needles) and may_name(path, self._needles, settings.current().debug_dirs, self._scans)

    def _library_ops(self, path: str) -> list[dict]:
        from tracer.dispatch import library_ops

        items: list[dict] = []
        for spec in self.library_ops:
            try:
                res = library_ops.resolve_library_op(spec, [path])
            except resolve.IndexFailure as exc:  # OSError among them
                self._warn(f"pttrace could not search {os.path.basename(path)} for --op {spec} ({exc}); a kernel "
                           "registered there is not broken on")
                continue
            for message in res.warnings:
                self._warn(message)
            if res.functions:
                self.found_ops.add(spec)
                log.info("--op %s: %d functions in %s", spec, len(res.functions), path)
            items += res.address_breakpoints()
        return items

    def unfound_ops(self) -> list[str]:
        """The --op ns::name no library registered a kernel for."""
        return [s for s in self.library_ops if s not in self.found_ops]


def scans_file() -> str:
    """Where gdb and pttrace keep what they read of each library for the names (libstops.NameScans)."""
    from tracer.settings import cache_dir

    return str(cache_dir() / "library-scans.json")
