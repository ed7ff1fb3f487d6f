"""``--eval``: the user's gdb expressions evaluated at each recorded hit, in the frame stopped in.

``gdb.parse_and_eval`` in the newest frame of the stopped thread, its value formatted as gdb's ``print``
would; an error is recorded as the error and the run goes on. A function call in an expression is
refused: it would run the target from inside the breakpoint's stop(), where gdb leaves the target's other
threads as they are (seen in CI: a torch thread left in its tracing stop, the main thread waiting on it,
the run hung). The prompt's ``call`` at a stop runs one as gdb does.
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.state import STATE
from tracer.session.evals import Evaluated, clipped, record


NO_CALLS = ("not evaluated: it calls a function of the target, which would run the target inside the "
            "breakpoint's stop (it can leave its other threads stopped and hang the run); call it at the TUI's "
            "gdb prompt (:) at a stop instead")


def _one(expr: str) -> Evaluated:
    try:
        gdb.execute("set may-call-functions off", to_string=True)
        try:
            value = gdb.parse_and_eval(expr)
            return Evaluated(expr, clipped(value.format_string()))
        finally:
            gdb.execute("set may-call-functions on", to_string=True)
    except (gdb.error, gdb.MemoryError, RuntimeError, ValueError, OverflowError) as exc:
        text = str(exc) or type(exc).__name__
        return Evaluated(expr, error=NO_CALLS if "may-call-functions" in text else text)


def write_evals(seq: int, newest=None) -> None:
    """Evaluate each ``--eval`` expression at hit ``seq`` (``newest``: its frame #0) and record them."""
    if not STATE.evals:
        return
    try:
        if newest is not None and newest.is_valid():
            newest.select()
    except gdb.error:
        pass
    OUT.write(record(seq, [_one(e) for e in STATE.evals]))


def write_not_evaluated(seq: int, why: str) -> None:
    """A hit recorded away from its stop (its stack read later): its expressions were not evaluated."""
    if STATE.evals:
        OUT.write(record(seq, [Evaluated(e, error=f"not evaluated: {why}") for e in STATE.evals]))
