"""``pttrace sessions``: the recorded sessions in a directory, one row each.

Listing must stay quick with big sessions around, so a file is skimmed, not loaded: hit lines are
counted by their first bytes and only the header, breakpoint and end records are parsed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tracer.commands._sessions import add_session_dir, session_dir

_HIT_PREFIX_RE = re.compile(rb'^\{\s*"type"\s*:\s*"hit"\s*,')


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("sessions", help="list recorded sessions",
                              description="List the recorded sessions: id, date, command, breakpoints, "
                                          "hits and status.")
    add_session_dir(p)
    p.set_defaults(func=run)


@dataclass
class Summary:
    path: Path
    id: str
    started: str | None = None
    argv: list[str] = field(default_factory=list)
    breakpoints: list[str] = field(default_factory=list)
    hits: int = 0
    status: str = "interrupted"
    damaged: int = 0
    readable: bool = True


def summarize(path: Path) -> Summary:
    s = Summary(path=path, id=path.stem)
    header = None
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if not raw.strip():
                    continue
                if _HIT_PREFIX_RE.match(raw) and raw.rstrip().endswith(b"}"):
                    s.hits += 1
                    continue
                try:
                    rec = json.loads(raw)
                except ValueError:
                    s.damaged += 1
                    continue
                kind = rec.get("type") if isinstance(rec, dict) else None
                if kind == "header" and header is None:
                    header = rec.get("session") or {}
                elif kind == "hit":
                    s.hits += 1
                elif kind == "breakpoint" and rec.get("spec") and rec["spec"] not in s.breakpoints:
                    s.breakpoints.append(str(rec["spec"]))
                elif kind == "end":
                    s.status = str(rec.get("status") or "completed")
                    for b in rec.get("breakpoints") or []:
                        if b.get("spec") and b["spec"] not in s.breakpoints:
                            s.breakpoints.append(str(b["spec"]))
                elif kind is None:
                    s.damaged += 1
    except OSError:
        s.readable = False
        return s
    if header is None:
        s.readable = False
        return s
    s.id = str(header.get("id") or s.id)
    s.started = header.get("started")
    s.argv = [str(a) for a in header.get("argv") or []]
    return s


def _date(started: str | None) -> str:
    if not started:
        return "?"
    # ISO 8601 with seconds: keep "YYYY-MM-DD HH:MM".
    return started.replace("T", " ")[:16]


def _command(argv: list[str]) -> str:
    """The command line with the program as its base name: the interpreter's full path (in every row,
    and in `show`) would crowd out the script and its arguments."""
    if not argv:
        return "?"
    return shlex.join([os.path.basename(argv[0]) or argv[0], *argv[1:]])


def run(args: argparse.Namespace) -> int:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tracer import storage

    directory = session_dir(args)
    files = storage.list_sessions(directory)
    console = Console(highlight=False)
    if not files:
        console.print(Text(f"No sessions in {directory}/ yet; record one with `pttrace run`."))
        return 0
    table = Table(title=f"Sessions in {directory}/", title_justify="left", box=box.SIMPLE_HEAD,
                  padding=(0, 1), pad_edge=False, collapse_padding=True, show_edge=False, expand=True)
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("date", no_wrap=True)
    table.add_column("command", overflow="fold", ratio=3)
    table.add_column("breakpoints", overflow="fold", ratio=2)
    table.add_column("hits", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for path in files:
        s = summarize(path)
        if not s.readable:
            table.add_row(Text(path.stem), "?", Text("(not a readable session file)", style="grey50"), "", "",
                          Text("unreadable", style="red"))
            continue
        status = Text(s.status, style="green" if s.status == "completed" else "yellow")
        if s.damaged:
            status.append(f" ({s.damaged} damaged line{'s' if s.damaged > 1 else ''})", style="red")
        # The file name is what `show`/`export` accept; it is the session id unless the file was renamed.
        table.add_row(Text(path.stem), _date(s.started), Text(_command(s.argv)),
                      Text("\n".join(s.breakpoints)), f"{s.hits:,}", status)
    console.print(table)
    return 0
