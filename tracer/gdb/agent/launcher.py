"""Which thread launched the intra-op parallel region a worker thread's hit runs in.

A hit in an OpenMP worker (``gomp_thread_start → invoke_parallel<…> → …``) has no Python frame and no
operator above it: those are on the thread that launched the region, which at that moment is inside
``GOMP_parallel`` (or ATen's own pool launcher) waiting for its workers. Reading another thread's stack
means selecting it, which a breakpoint's ``stop`` must not do, so such a hit is deferred and recorded by
``pttrace-rerecord`` (as a hit in a library without symbols is), with the launcher's stack beside it.
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS

# Where a worker thread of an intra-op parallel region starts, and where its launching thread waits.
WORKER_ROOTS = ("gomp_thread_start", "c10::ThreadPool::main_loop")
LAUNCHERS = ("GOMP_parallel", "at::internal::_parallel_run")
_MAX_WALK = 512


def in_worker(frames: list[dict]) -> bool:
    """A worker's stack: rooted in a pool's thread start, with no Python frame."""
    if any(f["kind"] == "python" for f in frames):
        return False
    return any((f.get("function") or "").startswith(WORKER_ROOTS) for f in frames[:8])


def _waits_in_launcher(thread) -> bool:
    thread.switch()
    frame = gdb.newest_frame()
    for _ in range(_MAX_WALK):
        if frame is None:
            return False
        name = frame.name() or ""
        if name.startswith(LAUNCHERS):
            return not in_root_of_worker(frame)  # a nested region's launcher is a worker itself
        frame = frame.older()
    return False


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
    try:
        for thread in gdb.selected_inferior().threads():
            if thread.num == current.num or not thread.is_valid():
                continue
            try:
                if _waits_in_launcher(thread):
                    found.append(thread)
            except READ_ERRORS:
                continue
        if len(found) != 1:
            why = ("no other thread is inside a parallel launcher (GOMP_parallel, at::parallel_for)" if not found
                   else f"{len(found)} threads are inside a parallel launcher: which one launched it is not known")
            return {"thread": None, "why": why}
        found[0].switch()
        frames, _ = call_path()
        th = found[0]
        return {"thread": {"id": th.num, "name": th.name, "lwp": th.ptid[1] or None}, "frames": frames}
    finally:
        current.switch()
