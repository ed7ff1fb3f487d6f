"""``pttrace export SESSION``: markdown notes (default), the JSON data contract, or folded stacks."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, TextIO

from tracer.commands._sessions import add_session_dir, load
from tracer.commands._sources import add_source_dir, finder_for, trust_for
from tracer.errors import UsageError
from tracer.export import FORMATS
_BY_SUFFIX = {".md": "markdown", ".markdown": "markdown", ".json": "json", ".folded": "folded",
              ".speedscope": "speedscope"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="write a session as markdown, JSON, folded stacks or a speedscope profile",
        description="Write a recorded session as markdown notes (default), the JSON data contract, "
                    "collapsed stacks for flame-graph tools (flamegraph.pl), or speedscope's own format "
                    "(one profile per process and thread; -o x.speedscope.json).",
    )
    p.add_argument("session", metavar="SESSION", help="a session id, a unique prefix, a path, or `last`")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: from the -o suffix, else markdown)")
    p.add_argument("--all-frames", action="store_true",
                   help="keep interpreter and start-up frames (folded away by default)")
    p.add_argument("--force", action="store_true", help="overwrite the -o file if it exists")
    add_session_dir(p)
    add_source_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.export import write as write_to

    fmt = args.format
    if fmt is None:
        out = (args.output or "").lower()
        # speedscope's own examples are named x.speedscope.json: that is speedscope's format, not ours.
        fmt = "speedscope" if out.endswith(".speedscope.json") else _BY_SUFFIX.get(os.path.splitext(out)[1], "markdown")
    session = load(args.session, args)
    if args.output and args.output != "-":
        refuse_session_file(args.output, session.path)  # --force or not
        if os.path.isfile(args.output) and not args.force:
            raise UsageError(f"{args.output} exists; pass --force to overwrite it.")
    finder = finder_for(args, session) if fmt in ("markdown", "json") else None
    trust = trust_for(finder) if fmt == "markdown" else None

    def produce(out) -> None:
        write_to(session, out, fmt, all_frames=args.all_frames, finder=finder, trust=trust)

    if not args.output or args.output == "-":
        produce(sys.stdout)
        sys.stdout.flush()
        return 0
    write(args.output, produce)
    n = len(session.hits)
    print(f"pttrace: wrote {n:,} hit{'' if n == 1 else 's'} as {fmt} to {args.output}.", file=sys.stderr)
    return 0


def refuse_session_file(path: str, session_path: str | None) -> None:
    """An export never replaces a recording: the session being exported, or any other session file."""
    if not os.path.isfile(path):
        return
    try:
        same = session_path is not None and os.path.samefile(path, session_path)
    except OSError:
        same = False
    if same or _starts_with_a_header(path):
        what = "the session being exported" if same else "a pttrace session file"
        raise UsageError(f"will not write over {path}: it is {what}, the recording itself; "
                         "give -o another name (notes.md).")


def _starts_with_a_header(path: str) -> bool:
    from tracer.session.records import BadRecord, decode

    try:
        with open(path, "rb") as fh:
            return decode(fh.readline(1 << 20))["type"] == "header"
    except (OSError, BadRecord):
        return False


def write(path: str, produce: Callable[[TextIO], None] | str) -> None:
    """Write what ``produce(file)`` writes (or a text) whole or not at all: a half-written notes file is
    worse than none."""
    if isinstance(produce, str):
        text = produce

        def produce(fh: TextIO) -> None:
            fh.write(text)
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        tmp = path  # a device or a fifo (/dev/null, a pipe to a viewer): no rename possible
    else:
        tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            produce(fh)
        if tmp != path:
            os.replace(tmp, path)
    except OSError as exc:
        if tmp != path:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        reason = exc.strerror or str(exc)
        if isinstance(exc, IsADirectoryError) or os.path.isdir(path):
            reason = "it is a directory"
        raise UsageError(f"cannot write {path}: {reason}.") from None
