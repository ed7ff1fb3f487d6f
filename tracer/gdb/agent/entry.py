"""What a stopped function carried at its entry, read once at a stop: shared by the trace breakpoints
and the stash of boxing templates (each imports this; neither imports the other)."""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.dispatch import keyset_abi
from tracer.gdb.agent import arguments, bulk
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.state import CACHES, STATE
from tracer.gdb.agent.tls import LOCAL


def entry_values(frame, name: str | None, library: str | None) -> dict | None:
    """What the stopped function carried at its entry: its arguments, and at a dispatcher hop (an
    operator's entry, a function handed a key set) the thread's local key sets. None: no parameters (or
    arguments are not read: ``$PTTRACE_NO_ARGS=1``).

    The same dict as the last hit with these registers (on this thread) when every byte its readers read
    then is unchanged, checked with one ``process_vm_readv`` (bulk.py): a hot hit's two tensors, a Scalar
    and the key sets are ~17 reads and their description in Python, measured at ~0.2 ms of a hit's ~0.5 ms
    ``stop()``. Callers copy it before adding to it."""
    if not STATE.arguments:
        return None
    try:  # the inferior asked once a hit, not at each of its ~10 memory reads
        inferior = gdb.selected_inferior()
        reader = inferior.read_memory
    except (AttributeError, *READ_ERRORS):
        return _read(frame, name, library, read_memory)
    key = arguments.entry_key(frame, name, library)
    if key is not None:
        key = key + (_thread(),)  # the key sets are the thread's
        kept = CACHES.arguments.get(key)
        if kept is not None and kept[0].unchanged(inferior):
            return kept[1]
    recorder = bulk.Recorder(reader)
    out = _read(frame, name, library, recorder)
    regions = recorder.regions_read() if key is not None and out is not None else None
    if key is not None and regions is not None:
        if len(CACHES.arguments) >= MAX_KEPT:
            CACHES.arguments.clear()
        CACHES.arguments[key] = (regions, out)
    return out


MAX_KEPT = 256  # readings kept per process: a loop over fresh tensors makes one a hit


def _read(frame, name: str | None, library: str | None, reader) -> dict | None:
    args = arguments.read_entry(frame, name, library, reader)
    if args is None:
        return None
    out: dict = {"args": args}
    if name and (name.startswith("at::_ops::") or keyset_abi.KEYSET in name):
        tls, why = LOCAL.read(reader)
        if tls is not None:
            out["tls"] = list(tls)
        else:
            out["tls_note"] = why
    return out


def _thread() -> int:
    try:
        return gdb.selected_thread().global_num
    except (AttributeError, *READ_ERRORS):
        return 0


def read_memory(address: int, length: int):
    """The selected inferior's memory, asked anew (for a caller that holds no inferior)."""
    return gdb.selected_inferior().read_memory(address, length)
