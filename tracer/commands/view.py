"""``pttrace view SESSION``: browse a recorded session in the TUI (no gdb, no target)."""
from __future__ import annotations

import argparse
import dataclasses
import sys

from tracer.commands._sessions import add_session_dir, session_dir
from tracer.errors import UsageError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("view", help="browse a recorded session in the terminal UI",
                              description="Open a recorded session in the terminal UI: its breakpoints, "
                                          "hits, the call path of each hit and the source of each frame.")
    p.add_argument("session", metavar="SESSION", help="a session id, a unique prefix, a path, or `last`")
    add_session_dir(p)
    from tracer.commands._sources import add_source_dir

    add_source_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.session import storage

    path = storage.resolve(args.session, session_dir(args))
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("`pttrace view` needs a terminal; use `pttrace show` or `pttrace export` otherwise.")
    from tracer.commands._sources import checked_source_dir

    source_dir = checked_source_dir(args)
    if source_dir:
        # The source pane reads the setting where `pttrace run` and `attach` give it too.
        from tracer import settings

        settings.install(dataclasses.replace(settings.current(), source_dir=source_dir))
    from tracer.tui.app import view_session

    return view_session(path)
