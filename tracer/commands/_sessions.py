"""What the commands that read saved sessions share: ``--session-dir``, and loading with damage told."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

MAX_DAMAGE_LINES = 3


def add_session_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--session-dir", type=Path, default=None, metavar="DIR",
        help="where sessions are kept (default: $PTTRACE_SESSION_DIR, else ./sessions)",
    )


def session_dir(args: argparse.Namespace) -> Path:
    from tracer.session import storage

    return args.session_dir or storage.default_dir()


def load(ref: str, args: argparse.Namespace):
    """Resolve ``ref`` (id, prefix, path or ``last``) and load it; damaged lines are told on stderr.

    The good part of a damaged file is still returned: a crash mid-write must not cost the hits
    already on disk.
    """
    from tracer.session import storage
    from tracer.text.escape import visible

    path = storage.resolve(ref, session_dir(args))
    report = storage.LoadReport()
    session = storage.load(path, report)
    shown = visible(str(path))
    for lineno, why in report.bad_lines[:MAX_DAMAGE_LINES]:
        print(f"pttrace: line {lineno} of {shown} is damaged ({visible(why)}); skipped it and kept the rest.",
              file=sys.stderr)
    more = len(report.bad_lines) - MAX_DAMAGE_LINES
    if more > 0:
        print(f"pttrace: {more} more damaged line{'s' if more > 1 else ''} in {shown} skipped.", file=sys.stderr)
    return session
