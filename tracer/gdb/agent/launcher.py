"""Which thread launched the intra-op parallel region a worker thread's hit runs in.

A hit in an OpenMP worker (``gomp_thread_start → invoke_parallel<…> → …``) has no Python frame and no
operator above it: those are on the thread that launched the region, which at that moment is inside
``GOMP_parallel`` (or ATen's own pool launcher) waiting for its workers. Reading another thread's stack
means selecting it, which a breakpoint's ``stop`` must not do, so such a hit is deferred and recorded by
``pttrace-rerecord`` (as a hit in a library without symbols is), with the launcher's stack beside it.
"""
from __future__ import annotations

import re

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import native
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.state import STATE

# Where a worker thread of an intra-op parallel region starts, and where its launching thread waits.
WORKER_ROOTS = ("gomp_thread_start", "c10::ThreadPool::main_loop")
LAUNCHERS = ("GOMP_parallel", "at::internal::_parallel_run")
_MAX_WALK = 512
_OPENMP = re.compile(r"(^|/)lib(gomp|iomp5|omp)[^/]*\.so")


def in_worker(frames: list[dict]) -> bool:
    """A worker's stack: rooted in a pool's thread start, with no Python frame."""
    if any(f["kind"] == "python" for f in frames):
        return False
    return any((f.get("function") or "").startswith(WORKER_ROOTS) for f in frames[:8])


def _waits_in_launcher(thread, unread: list[str]) -> bool:
    """Whether the thread waits in a launcher; the libraries without symbols its stack passes through
    (gdb unwinds no further there) are added to ``unread``."""
    thread.switch()
    frame = gdb.newest_frame()
    names = []
    for _ in range(_MAX_WALK):
        if frame is None:
            break
        name = frame.name() or ""
        lib = gdb.solib_name(frame.pc()) if not name else None
        if lib and lib not in STATE.cfi_libs and not native.symbols_loaded(lib) and lib not in unread:
            unread.append(lib)
        names.append(name or hex(frame.pc()))
        # By name, or by library: GOMP_parallel's own frame can be nameless to gdb (its call to
        # gomp_team_end is its last instruction, so the return address is past its end).
        if name.startswith(LAUNCHERS) or _in_openmp(frame):
            return not in_root_of_worker(frame)  # a worker (or a nested region's launcher) is not it
        frame = frame.older()
    LOG.debug("thread %s is not in a launcher: %s", thread.num, " <- ".join(names[:12]))
    return False


def _in_openmp(frame) -> bool:
    return bool(_OPENMP.search(gdb.solib_name(frame.pc()) or ""))


def in_root_of_worker(frame) -> bool:
    """Whether a frame belongs to a worker (its stack starts at a pool's thread start)."""
    while frame is not None:
        if (frame.name() or "").startswith(WORKER_ROOTS):
            return True
        frame = frame.older()
    return False


def find(call_path) -> dict:
    """``{thread, frames}`` of the one thread waiting in a launcher, or ``{thread: None, why}``.
    The selected thread is selected again before returning."""
    current = gdb.selected_thread()
    found = []
    unreadable = []
    unread: list[str] = []
    try:
        for thread in gdb.selected_inferior().threads():
            if thread.num == current.num or not thread.is_valid():
                continue
            try:
                if _waits_in_launcher(thread, unread):
                    found.append(thread)
            except READ_ERRORS as exc:
                unreadable.append(f"thread {thread.num} ({exc})")
                continue
        if len(found) != 1:
            why = ("no other thread is inside a parallel launcher (GOMP_parallel, at::parallel_for) as far as gdb "
                   "can unwind the other threads (code without unwind tables, such as MKL's kernels, ends an unwind)"
                   if not found
                   else f"{len(found)} threads are inside a parallel launcher: which one launched it is not known")
            if unreadable:
                why += "; could not read the stack of " + ", ".join(unreadable)
            return {"thread": None, "why": why, "unread": unread}
        found[0].switch()
        frames, _ = call_path()
        th = found[0]
        return {"thread": {"id": th.num, "name": th.name, "lwp": th.ptid[1] or None}, "frames": frames}
    finally:
        current.switch()
