"""``--eval``: the user's gdb expressions evaluated at each recorded hit, in the frame stopped in.

``gdb.parse_and_eval`` in the newest frame of the stopped thread, its value formatted as gdb's ``print``
would; an error is recorded as the error and the run goes on. An expression may call a function of the
target (the user's own choice, never pttrace's).
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.state import STATE
from tracer.session.evals import Evaluated, clipped, record


def _one(expr: str) -> Evaluated:
    try:
        value = gdb.parse_and_eval(expr)
        return Evaluated(expr, clipped(value.format_string()))
    except (gdb.error, gdb.MemoryError, RuntimeError, ValueError, OverflowError) as exc:
        return Evaluated(expr, error=str(exc) or type(exc).__name__)


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
