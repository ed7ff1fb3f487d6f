"""What a stopped function carried at its entry, read once at a stop: shared by the trace breakpoints
and the stash of boxing templates (each imports this; neither imports the other)."""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.dispatch import keyset_abi
from tracer.gdb.agent import arguments
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.state import STATE
from tracer.gdb.agent.tls import LOCAL


def entry_values(frame, name: str | None, library: str | None) -> dict | None:
    """What the stopped function carried at its entry: its arguments, and at a dispatcher hop (an
    operator's entry, a function handed a key set) the thread's local key sets. None: no parameters (or
    arguments are not read: ``$PTTRACE_NO_ARGS=1``)."""
    if not STATE.arguments:
        return None
    try:  # the inferior asked once a hit, not at each of its ~10 memory reads
        reader = gdb.selected_inferior().read_memory
    except (AttributeError, *READ_ERRORS):
        reader = read_memory
    args = arguments.read_entry(frame, name, library, reader)
    if args is None:
        return None
    out: dict = {"args": args}
    if name and (name.startswith("at::_ops::") or keyset_abi.KEYSET in name):
        tls, why = LOCAL.read()
        if tls is not None:
            out["tls"] = list(tls)
        else:
            out["tls_note"] = why
    return out


def read_memory(address: int, length: int):
    """The selected inferior's memory, asked anew (for a caller that holds no inferior)."""
    return gdb.selected_inferior().read_memory(address, length)
