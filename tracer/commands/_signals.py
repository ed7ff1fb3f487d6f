"""The ending signals (Ctrl-C, SIGTERM, a hang-up) while ``run``/``attach`` start: held, not raised.

Python's default SIGINT handler raises KeyboardInterrupt at whatever bytecode the main thread is running.
While pttrace starts, that is often inside importlib (the recorder's modules import while gdb starts), and
when it lands in importlib's lock bookkeeping (a weakref callback, whose exceptions Python prints and drops)
the global import lock stays held: the start-up's own threads (the torch facts, the CFI copies, the key
tables) then wait on it for ever. Measured: a SIGINT 0.15 s after ``pttrace run`` hung it with gdb and the
target stopped. So from the start of ``run``/``attach`` until the recording's own handlers take over, a
signal is only noted; the recording then ends at once, cleanly, as for one that came later.

A signal the parent set to be ignored (``nohup``, a background job's SIGINT) stays ignored, here and in the
recording's handlers.
"""
from __future__ import annotations

import signal

TYPE_CHECKING = False  # not typing's: it is imported before gdb starts, where each import delays the target
if TYPE_CHECKING:
    from typing import Callable

ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_held: list[int] = []
_originals: dict = {}


def _note(signum, frame) -> None:
    _held.append(signum)


def hold() -> None:
    """From now on the ending signals are noted (``take``) instead of acting; a second call keeps what the first
    noted (tracer/cli.py holds them for ``run``/``attach`` before its own imports, the command again)."""
    if _originals:
        return
    _held.clear()
    _originals.update(install(_note))


def take() -> int | None:
    """The first ending signal noted since ``hold``, once; None when none came."""
    first = _held[0] if _held else None
    _held.clear()
    return first


def install(handler: "Callable", signals=ENDING) -> dict:
    """``handler`` for each of ``signals`` not ignored by inheritance; returns what was there before."""
    old = {}
    for signum in signals:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue
        old[signum] = signal.signal(signum, handler)
    return old


def release() -> None:
    """The handlers ``hold`` found put back (after the recording, or before a TUI that handles its own)."""
    for signum, handler in list(_originals.items()):
        if signal.getsignal(signum) is _note:
            signal.signal(signum, handler)
    _originals.clear()
