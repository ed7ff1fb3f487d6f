"""The one way commands make a rich console: full width in a terminal, never wrapped in a pipe.

rich lays out for 80 columns when stdout is not a terminal, so ``pttrace show last | less`` cut C++
names into ``wrappe``/``r_CPU_``. Piped or redirected, lines are as long as their text (as ``git log``
and ``ls -l`` write them); ``COLUMNS`` still wins when set."""
from __future__ import annotations

import os
import sys

# Wide enough for any line pttrace prints; rules and expanded tables are drawn narrow instead (below).
PIPE_WIDTH = 100_000
RULE_WIDTH = 100


def piped(stream=None) -> bool:
    stream = stream or sys.stdout
    try:
        return not stream.isatty() and "COLUMNS" not in os.environ
    except (AttributeError, ValueError):
        return True


def make_console(**kwargs):
    """A rich Console for a command's output (rich is imported here, only by commands that print)."""
    from rich.console import Console

    wide = piped()
    console = Console(highlight=False, **({"width": PIPE_WIDTH} if wide else {}), **kwargs)
    if wide:
        # A rule spans the console's width: in a pipe, a fixed one.
        plain_rule = console.rule

        def rule(title="", **kw) -> None:
            saved = console.width
            console.width = RULE_WIDTH
            try:
                plain_rule(title, **kw)
            finally:
                console.width = saved

        console.rule = rule  # type: ignore[method-assign]
    return console
