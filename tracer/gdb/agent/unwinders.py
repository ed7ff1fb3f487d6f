"""A shortcut past gdb's search for Python frame unwinders while none is registered, and the agent's own
unwinder of the libraries gdb has as unwind tables only (cfi_unwind.py), after any registered one."""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.cfi_unwind import CFI

# gdb 13 takes (unwind info, the unwinder's name) from _execute_unwinders; gdb 12 the unwind info alone.
_NAMED = int(gdb.VERSION.split(".")[0]) >= 13


class UnwinderGate:
    """gdb calls ``gdb._execute_unwinders`` for every frame it unwinds, and that walks every objfile
    (~70 with torch) for Python unwinders; none is registered here, so answer "none" at once while
    that stays true. Which objfiles have unwinders is recomputed whenever objfiles come or go, an
    unwinder is registered, or gdb's frame cache is flushed."""

    def __init__(self) -> None:
        self.original = gdb._execute_unwinders
        self.with_unwinders = None  # objfiles holding unwinders; None: to be recomputed

    def invalidate(self, *_args) -> None:
        self.with_unwinders = None

    def __call__(self, pending_frame):
        objfiles = self.with_unwinders
        if objfiles is None:
            objfiles = self.with_unwinders = [o for o in gdb.objfiles() if o.frame_unwinders]
        if objfiles or gdb.frame_unwinders or gdb.current_progspace().frame_unwinders:
            info = self.original(pending_frame)
            if info is not None:
                return info
        info = CFI(pending_frame)
        if info is None or not _NAMED:
            return info
        return info, "pttrace-cfi"

    def install(self) -> None:
        if type(getattr(gdb._execute_unwinders, "__self__", None)).__name__ == "UnwinderGate":
            return  # installed already
        for event in ("new_objfile", "free_objfile", "clear_objfiles"):
            registry = getattr(gdb.events, event, None)
            if registry is not None:
                registry.connect(self.invalidate)
        try:
            import gdb.unwinder as unwinder_module
        except ImportError:
            unwinder_module = None
        if unwinder_module is not None:
            register = unwinder_module.register_unwinder

            def register_unwinder(locus, unwinder, replace=False):
                self.invalidate()
                return register(locus, unwinder, replace)

            unwinder_module.register_unwinder = register_unwinder
        invalidate_frames = gdb.invalidate_cached_frames

        def invalidate_cached_frames():
            self.invalidate()
            return invalidate_frames()

        gdb.invalidate_cached_frames = invalidate_cached_frames
        gdb._execute_unwinders = self.__call__


def install() -> None:
    if hasattr(gdb, "_execute_unwinders"):
        UnwinderGate().install()
