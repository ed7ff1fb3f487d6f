"""``pttrace sessions``: the recorded sessions in a directory, one row each.

Listing must stay quick with big sessions around, so a file is skimmed, not loaded: hit lines are
counted by their first bytes and only the header, breakpoint and end records are parsed.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tracer.commands._sessions import add_session_dir, session_dir

_HIT_PREFIX_RE = re.compile(rb'^\{\s*"type"\s*:\s*"hit"\s*,')
# A hit line as pttrace writes it: its seq an integer of at most 18 digits. Another line that starts as a
# hit is decoded and counted only if it is one (a crafted ``"seq":1e400`` was counted, which show skips).
_HIT_LINE_RE = re.compile(rb'^\{"type":"hit","seq":\d{1,18},.*\}\s*$', re.S)
# Its site (schema 2): hits are read as show reads them until one of their site reads whole; that site's
# other hits then count unread (a site of an undefined stack, a damaged thread or frame made every hit line
# count here where show had none).
_SITE_RE = re.compile(rb',"site":(\d{1,18})[,}]')
MAX_SEQ = 10 ** 18


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
    failed: str | None = None  # why the recording did not start (status "failed": its end record's reason)
    readable: bool = True
    why: str = "not a readable session file"  # when it is not readable


def _child_hits(path: Path, refs: list[str], seen: set, depth: int = 0) -> int:
    """The hits of the child sessions a session names (its children that executed Python), each file once,
    as ``show`` counts them: inside the session's directory, no link, no special file, no cycle."""
    from tracer.errors import SessionError
    from tracer.session.storage import file_id, is_link, open_session_file, real_path

    total = 0
    for ref in dict.fromkeys(refs):
        named = path.parent / ref
        real = real_path(named)
        if depth > 3 or real is None or file_id(real) in seen or is_link(named) \
                or real_path(path.parent) not in real.parents:
            continue
        seen.add(file_id(real))
        more: list[str] = []
        try:
            with open_session_file(real) as fh:
                for raw in fh:
                    if _HIT_LINE_RE.match(raw):
                        total += 1
                    elif b'"session"' in raw and b'"process"' in raw:
                        more += _session_refs(raw)
        except (SessionError, OSError):
            continue
        total += _child_hits(real, more, seen, depth + 1)
    return total


def _session_refs(raw: bytes) -> list[str]:
    from tracer.session.records import BadRecord, decode

    try:
        rec = decode(raw)
    except BadRecord:
        return []
    ref = rec.get("session") if rec.get("type") == "process" else None
    return [ref] if isinstance(ref, str) and ref else []


def summarize(path: Path) -> Summary:
    """What a listing shows of one file; whatever the file holds, a Summary (``readable`` False if it
    is not a session), so that one bad file never hides the others."""
    from tracer.errors import SessionError
    from tracer.session.model import SCHEMA, RecordError, SessionInfo, check
    from tracer.session import records
    from tracer.session.records import BadRecord, decode
    from tracer.session.storage import END_TYPES, HitReader, open_session_file

    s = Summary(path=path, id=path.stem)
    info = None
    children: list[str] = []
    reader = HitReader()  # the frames, stacks and sites the hits refer to, checked as show checks them
    sites: set[int] = set()  # the sites a hit of which read whole: their other plain hits count unread

    def counts(rec: dict) -> bool:
        try:
            reader.feed(rec)
        except (BadRecord, KeyError, TypeError, ValueError):
            return False
        if type(rec.get("site")) is int:
            sites.add(rec["site"])
        return True

    if path.is_symlink():  # a shared directory is untrusted: a link may lead anywhere (a FIFO, /dev/zero)
        s.readable, s.why = False, "a symbolic link, not a session file: skipped"
        return s
    try:
        with open_session_file(path) as fh:
            for raw in fh:
                if not raw.strip():
                    continue
                if _HIT_LINE_RE.match(raw):
                    site = _SITE_RE.search(raw)
                    if (int(site.group(1)) in sites) if site is not None else b'"site"' not in raw:
                        s.hits += 1  # a hit of a site read already, or of schema 1 (its frames inline)
                        continue
                try:
                    rec = decode(raw)
                    kind = rec["type"]
                    if kind == "header" and info is None:
                        schema = rec.get("schema")
                        if type(schema) is int and schema > SCHEMA:
                            s.readable, s.why = False, f"session schema {schema}, newer than this pttrace's ({SCHEMA})"
                            return s
                        info = SessionInfo.from_dict(rec.get("session") or {})
                    elif kind == "hit":
                        seq = rec.get("seq")
                        if type(seq) is not int or not 0 <= seq < MAX_SEQ:
                            raise RecordError("a hit whose seq is not an integer")
                        if not counts(rec):
                            raise RecordError("a hit whose site, stack or frames show cannot read")
                        s.hits += 1
                    elif kind in (records.FRAME, records.STACK, records.SITE, records.ARGS, records.VARY):
                        reader.feed(rec)
                    elif kind == "breakpoint":
                        _add_spec(s, rec)
                    elif kind == "process" and isinstance(rec.get("session"), str) and rec["session"]:
                        children.append(rec["session"])
                    elif kind == "end":
                        check("the end record", rec, END_TYPES)  # as show reads it: else it is damage
                        status = rec.get("status")
                        s.status = status if isinstance(status, str) else "completed"
                        reason = rec.get("reason")
                        s.failed = reason if s.status == "failed" and isinstance(reason, str) else None
                        bps = rec.get("breakpoints")
                        for b in bps if isinstance(bps, list) else []:
                            _add_spec(s, b)
                except (BadRecord, KeyError, TypeError, ValueError):  # RecordError among them
                    if raw.endswith(b"\n"):
                        s.damaged += 1  # else a record still being written
    except SessionError as exc:
        s.readable, s.why = False, exc.message.replace(f"{path} is ", "").rstrip(".")
        return s
    except OSError as exc:
        s.readable, s.why = False, f"cannot be read ({exc.strerror})"
        return s
    if info is None:
        s.readable = False
        if path.stat().st_size == 0:
            s.why, s.status = "an empty file: nothing was ever written to it (a full disk at the start?)", "empty"
        return s
    s.id = info.id if info.id != "unknown" else s.id
    s.started = info.started
    s.argv = info.argv
    from tracer.session.storage import file_id

    s.hits += _child_hits(path, children, {file_id(path)})
    return s


def _add_spec(s: Summary, rec) -> None:
    spec = rec.get("spec") if isinstance(rec, dict) else None
    if not isinstance(spec, str) or not spec:
        return
    if rec.get("removed") is True:  # removed during the run: listed no more, as show and the TUI do
        if spec in s.breakpoints:
            s.breakpoints.remove(spec)
    elif spec not in s.breakpoints:
        s.breakpoints.append(spec)


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
    from rich.table import Table
    from rich.text import Text

    from tracer.commands._console import make_console, piped
    from tracer.session import storage
    from tracer.text.escape import visible

    directory = session_dir(args)
    files = storage.list_sessions(directory)
    console = make_console()
    if not files:
        console.print(Text(visible(f"No sessions in {directory}/ yet; record one with `pttrace run`.")))
        return 0
    table = Table(title=Text(visible(f"Sessions in {directory}/")), title_justify="left", box=box.SIMPLE_HEAD,
                  padding=(0, 1), pad_edge=False, collapse_padding=True, show_edge=False, expand=not piped())
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("date", no_wrap=True)
    table.add_column("command", overflow="fold", ratio=3)
    table.add_column("breakpoints", overflow="fold", ratio=2)
    table.add_column("hits", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for path in files:
        s = summarize(path)
        if not s.readable:
            table.add_row(Text(visible(path.stem)), "?", Text(visible(f"({s.why})"), style="grey50"), "", "",
                          Text("empty" if s.status == "empty" else "unreadable", style="red"))
            continue
        status = Text(s.status, style="green" if s.status == "completed" else "yellow")
        if s.damaged:
            status.append(f" ({s.damaged} damaged line{'s' if s.damaged > 1 else ''})", style="red")
        # The file name is what `show`/`export` accept; it is the session id unless the file was renamed.
        command = Text(_command(s.argv))
        if s.failed:  # the one end whose status alone does not say what happened
            command.append("\n" + visible(f"the recording did not start: {s.failed}"), style="yellow")
        table.add_row(Text(visible(path.stem)), Text(_date(s.started)), command,
                      Text("\n".join(s.breakpoints)), f"{s.hits:,}", status)
    console.print(table)
    return 0
