"""Sessions on disk: append-only JSON lines (their records: ``tracer/session/records.py``), so a crash loses
nothing already written.

A file without its ``end`` loads as ``interrupted``. Frames recorded with a raw ``keyset`` get their
``keys`` decoded with the file's ``dispatch_keys`` record, if any. ``fill`` records name the frames the
agent recorded by library and offset; without one a frame keeps its library and offset, so a file cut
off before its fill lost nothing.
"""
from __future__ import annotations

from array import array
import datetime as _dt
import io
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from tracer import settings
from tracer.session import evals, records
from tracer.session import torchscript as TS
from tracer.session import ts_status as ts_views
from tracer.errors import SessionError
from tracer.session.helpers import fold_warnings
from tracer.session.hit_table import HitTable
from tracer.session.model import (BOOL, INT, NUM, SCHEMA, STR, STRS, Breakpoint, Frame, Hit, Launch, Process, RecordError, Session,
                          SessionInfo, Thread, Varying, check, fill_path, objects, values_of)

SUFFIX = ".jsonl"


def new_session_id(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now()
    # os.urandom is what secrets.token_hex reads; importing secrets (base64, hmac) cost every run ~5 ms
    return now.strftime("%Y%m%d-%H%M%S-") + os.urandom(2).hex()


def now_iso() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


class SessionWriter:
    """Appends records to a session file, one ``write()`` per record."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except FileExistsError as exc:  # mkdir's word for a file where the directory should be
            raise SessionError(f"cannot write the session file {self.path}: {self.path.parent} is not a "
                               "directory.") from exc
        except OSError as exc:
            raise SessionError(f"cannot write the session file {self.path}: {exc.strerror}.") from exc

    def write(self, record: dict[str, Any]) -> None:
        data = records.encode(record)
        try:
            os.write(self._fd, data)
        except OSError as exc:
            raise SessionError(f"cannot write the session file {self.path}: {exc.strerror}.") from exc

    def header(self, info: SessionInfo) -> None:
        self.write({"type": "header", "schema": SCHEMA, "session": info.to_dict()})

    def warning(self, message: str) -> None:
        self.write({"type": "warning", "message": message})

    def dispatch_keys(self, table: dict[str, Any]) -> None:
        self.write({**table, "type": "dispatch_keys"})

    def fill(self, entries: list) -> None:
        """Names for frames recorded by library and offset: ``[[library, offset, caller, fields], ...]``."""
        if entries:
            self.write({"type": "fill", "frames": entries})

    def breakpoint(self, bp: Breakpoint) -> None:
        self.write({"type": "breakpoint", **bp.to_dict()})

    def end(self, status: str, exit_code: int | None = None, **extra: Any) -> None:
        self.write({"type": "end", "status": status, "exit_code": exit_code, "ended": now_iso(), **extra})

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@dataclass
class LoadReport:
    """What went wrong while reading a file, told line by line, without losing the good part."""

    bad_lines: list[tuple[int, str]] = field(default_factory=list)


_SITE_TYPES = {"breakpoint": STR, "seq": INT, "time": NUM, "signal": STR}


_SEQ_MAX = 1 << 63  # a hit's seq is kept as a 64-bit integer (HitTable.seqs); a bigger one is damage


class HitReader:
    """``records.Reader`` building model objects: the hits of one stack share one list of ``Frame``s
    (a million hits of a hot breakpoint hold its frames once), the hits of one site one ``Thread``."""

    def __init__(self) -> None:
        self.records = records.Reader(Frame.from_dict)
        self._threads: dict[int, Thread] = {}  # site id -> its thread
        self._values: dict[tuple[int, int], Any] = {}  # (args id, stack id) -> its FrameValues, shared
        self._varying: dict[tuple[int, int, int], Varying] = {}  # (args id, stack id, vary id) -> the latest

    def feed(self, rec: dict[str, Any]) -> Hit | dict[str, Any] | None:
        """A ``Hit`` for a hit record, else what ``records.Reader.feed`` returns."""
        out = self.records.feed(rec)
        if out is None or out["type"] != records.HIT:
            return out
        site = out.get("site")
        if site is None:
            return Hit.from_dict(out)
        thread = self._threads.get(site)
        if thread is None:  # the site's first hit: its breakpoint and thread checked once
            check("the hit's site", {"breakpoint": out["breakpoint"]}, _SITE_TYPES)
            thread = self._threads[site] = Thread.from_dict(out["thread"])
        # What each hit line adds (a cheaper check than Hit.from_dict: this runs a million times).
        seq, time, signal = out["seq"], out["time"], out["signal"]
        if (type(seq) is not int or not -_SEQ_MAX <= seq < _SEQ_MAX
                or (time is not None and type(time) not in (int, float))
                or (signal is not None and type(signal) is not str)):
            check("the hit", {"seq": seq, "time": time, "signal": signal}, _SITE_TYPES, ("seq",))
        launch = out.get("launched_by")
        if launch is not None:
            check("the hit's launcher", launch, {"why": STR})
            launch = Launch(Thread.from_dict(launch["thread"]) if launch.get("thread") else None,
                            launch.get("frames") or [], launch.get("why"))
        values = None
        if out.get("values") is not None:
            key = (out["values_id"], out["stack"])
            values = self._values.get(key)
            if values is None:
                values = self._values[key] = values_of(out["values"], out["frames"])
        varying = None
        if values is not None and out.get("vary") is not None:  # kept apart: a HitTable merges on demand
            vkey = (out["values_id"], out["stack"], out["vary_id"])
            varying = self._varying.get(vkey)
            if varying is None:
                if len(self._varying) >= 4096:  # one a hit in a loop over fresh tensors: only repeats are shared
                    self._varying.clear()
                varying = self._varying[vkey] = Varying(values, tuple(out["vary"]))
        return Hit(seq=seq, breakpoint=out["breakpoint"], thread=thread, time=float(time or 0.0),
                   frames=out["frames"], truncated=out["truncated"], signal=out["signal"], launched_by=launch,
                   values=values, varying=varying)


# A hit line as the agent's Interner writes it for a hit with no signal and no launcher: read without
# json (a million of them are most of a big session's lines); anything else takes the general way. The
# time's digits are bounded, so that it is always a finite float.
_TIME = rb"-?\d{1,20}(?:\.\d+)?(?:[eE][-+]?\d{1,2})?"
# (at most 18 digits: a longer number takes the general way, which refuses what a 64-bit column cannot hold)
_PLAIN_HIT = re.compile(rb'\{"type":"hit","seq":(\d{1,18}),"time":(' + _TIME + rb'),"site":(\d{1,18})\}\n?')
_PLAIN_HITS = re.compile(rb'^\{"type":"hit","seq":(\d{1,18}),"time":(' + _TIME + rb'),"site":(\d{1,18})\}$', re.M)
_CHUNK = 1 << 18  # ~4,000 hit lines: what findall holds at once


def not_a_file(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file, in a few words; None when it is."""
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return what
    return "not a regular file"


def open_session_file(path: Path):
    """A session file opened for reading, only if it is a regular file: a FIFO or a device named like a
    session (a shared directory is untrusted) is refused without being opened, so it cannot block."""
    try:
        what = not_a_file(os.stat(path).st_mode)
        if what is None:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            what = not_a_file(os.fstat(fd).st_mode)  # it may have been swapped since the stat
            if what is not None:
                os.close(fd)
    except FileNotFoundError:
        raise SessionError(f"no session file at {path}.") from None
    except OSError as exc:
        raise SessionError(f"cannot read the session file {path}: {exc.strerror}.") from None
    if what is not None:
        raise SessionError(f"{path} is {what}, not a session file: not read.")
    return os.fdopen(fd, "rb")


def _chunks(path: Path) -> Iterator[tuple[int, bytes]]:
    """The file 256 KB at a time, cut after a line break (the last one may have none): (first line's number,
    its lines)."""
    fh = open_session_file(path)
    lineno, carry = 1, b""
    with fh:
        try:
            while True:
                data = fh.read(_CHUNK)
                if not data:
                    if carry:
                        yield lineno, carry
                    return
                data = carry + data
                cut = data.rfind(b"\n") + 1
                chunk, carry = data[:cut], data[cut:]
                if chunk:
                    yield lineno, chunk
                    lineno += chunk.count(b"\n")
        except OSError as exc:
            raise SessionError(f"cannot read the session file {path}: {exc.strerror}.") from None


def _plain_chunk(chunk: bytes, plain_sites: dict[int, int], table: HitTable) -> bool:
    """Add the hits of ``chunk`` to ``table`` if it holds nothing but plain hits of sites already met
    (most of a hot breakpoint's session): three columns converted at once, no line looked at alone."""
    rows = _PLAIN_HITS.findall(chunk)
    if not rows or len(rows) != chunk.count(b"\n"):
        return False
    seqs, times, sites = zip(*rows)
    if not all(int(s) in plain_sites for s in set(sites)):
        return False
    table.seqs.extend(map(int, seqs))
    table.times.extend(map(float, times))
    table.rows.extend(map(plain_sites.__getitem__, map(int, sites)))
    if table.vary is not None:  # plain hits have no values of their own
        table.vary.extend(array("i", bytes(4 * len(seqs))))
    return True


class _Gathered:
    """What the records of one session file say, gathered as ``load`` reads them (hits go to ``table``)."""

    def __init__(self, path: Path, table: HitTable):
        self.path = path
        self.table = table
        self.session: Session | None = None
        self.bps: dict[str, Breakpoint] = {}
        self.plain_sites: dict[int, int] = {}  # a file's site id -> its index in the table, once its first hit is read
        self.warnings: list[str] = []
        self.ended: dict[str, Any] | None = None
        self.ended_bps: list[Breakpoint] = []
        self.key_table: dict[str, Any] | None = None
        self.fills: dict[tuple, dict[str, Any]] = {}
        self.op_tables: dict[str, Any] = {}  # struct -> {op, rows}: the --op operators' dispatch tables
        self.processes: dict[int, Process] = {}
        self.evals: dict[int, list] = {}  # --eval: hit seq -> its values (session.evals)
        self.ts = ts_views.TsGathered()  # TorchScript: the agent's status records and the graphs

    def take(self, kind: object, rec: Any, raw: dict[str, Any]) -> str | None:
        """One record, as ``HitReader.feed`` made it; why it is not one, if it is not."""
        if kind == "header":
            schema = check("the header", rec, {"schema": INT}).get("schema") or 0
            if schema > SCHEMA:
                raise SessionError(f"{self.path} uses session schema {schema}, newer than this pttrace understands "
                                   f"({SCHEMA}); upgrade pttrace to read it.")
            self.session = Session(info=SessionInfo.from_dict(rec.get("session") or {}), schema=schema,
                                   path=str(self.path))
        elif kind == "breakpoint" and rec.get("removed"):
            self.bps.pop(str(rec["spec"]), None)
        elif kind == "breakpoint":
            bp = Breakpoint.from_dict(rec)
            self.bps[bp.spec] = _kept_locations(self.bps.get(bp.spec), bp)
        elif kind == "hit":
            site = self.table.append(rec)
            if raw.get("site") is not None and rec.signal is None and rec.launched_by is None:
                # a site's values are the site's own: its plain hits share them
                self.plain_sites[raw["site"]] = site
        elif kind == "warning":
            self.warnings.append(check("the warning", rec, {"message": STR}, ("message",))["message"])
        elif kind == "dispatch_keys":
            self.key_table = _key_table(rec)
        elif kind == records.PROCESS:
            pid = check("the process", rec, {"pid": INT}, ("pid",))["pid"]
            self.processes.setdefault(pid, Process(pid)).merge(rec)
        elif kind == "fill":
            self.fills.update(_fill_entries(rec))
        elif kind == "dispatch_tables":
            self.op_tables.update(_op_tables(rec))
        elif kind == evals.EVALS:
            seq, values = evals.read(rec)
            self.evals[seq] = values
        elif kind in (TS.STATUS, TS.GRAPH):
            return self.ts.take(kind, rec)
        elif kind == "end":
            self.ended = check("the end record", rec, END_TYPES)
            self.ended_bps = [Breakpoint.from_dict(b, f"breakpoint {i} of the end record")
                              for i, b in enumerate(objects("its breakpoints", rec.get("breakpoints")), 1)]
        else:
            return f"unknown record type {kind!r}"
        return None

    def session_read(self, report: LoadReport, more: bool) -> Session:
        """The session the records make: its end (or why it has none), warnings, hit counts, names."""
        session, table, ended, bps = self.session, self.table, self.ended, self.bps
        if session is None:
            if report.bad_lines:
                lineno, why = report.bad_lines[0]
                raise SessionError(f"{self.path} is not a pttrace session: line {lineno} is {why}.")
            raise SessionError(f"{self.path} is not a pttrace session: it has no header line.")
        info = session.info
        for w in self.warnings:
            if w not in info.warnings:
                info.warnings.append(w)
        if ended is not None:
            info.status = str(ended.get("status") or "completed")
            info.exit_code = ended.get("exit_code")
            info.ended = ended.get("ended")
            for w in ended.get("warnings") or []:
                if w not in info.warnings:
                    info.warnings.append(w)
            for bp in self.ended_bps:
                bps[bp.spec] = _kept_locations(bps.get(bp.spec), bp)
        else:
            info.status = "loading" if more else "interrupted"
        for lineno, why in report.bad_lines:
            info.warnings.append(f"line {lineno} of the session file is damaged: {why}; skipped")
        # Hit counts come from the hits themselves: they are what was actually recorded.
        counts: dict[str, int] = {}
        for site, n in table.site_counts().items():
            spec = table.sites[site].breakpoint
            if spec is not None:
                counts[spec] = counts.get(spec, 0) + n
        for spec, bp in bps.items():
            bp.hits = counts.get(spec, 0)
        session.breakpoints = list(bps.values())
        table.sort()
        if self.fills:
            apply_fills(table, self.fills)
        if ended is None and not more:
            _name_from_index(table)
        if self.key_table is not None:
            _decode_keysets(table, self.key_table)
        _decide(table, self.key_table, self.op_tables)
        session.hits = table
        session.processes = list(self.processes.values())
        session.evals = self.evals
        session.graphs = self.ts.graphs
        return session


def load(path: str | os.PathLike, report: LoadReport | None = None, hits: bool = True,
         _depth: int = 0, head: bool = False, _read: set | None = None) -> Session:
    """Read a session file. Bad lines are skipped and listed in ``report`` (and the warnings).
    ``hits=False``: everything but the hits (a million of them take a second to read).
    ``head=True``: only the file's first 256 KB (its header, the first few thousand hits: a screen's worth,
    read at once whatever the file's size); a file longer than that loads as ``loading``.
    The hits are a ``HitTable``: a few numbers a hit, their frames held once a stack."""
    path = Path(path)
    report = report if report is not None else LoadReport()
    table = HitTable()
    got = _Gathered(path, table)
    plain_sites = got.plain_sites
    reader = HitReader()
    plain, add = _PLAIN_HIT.fullmatch, table.add
    more = False
    for first_line, chunk in _chunks(path):
        if head and first_line > 1:
            more = True
            break
        if hits and _plain_chunk(chunk, plain_sites, table):
            continue
        for lineno, raw in enumerate(io.BytesIO(chunk), first_line):
            if raw.startswith(records.HIT_PREFIX):
                if not hits:
                    continue
                m = plain(raw)
                if m is not None:
                    site = plain_sites.get(int(m[3]))
                    if site is not None:
                        add(int(m[1]), float(m[2]), site)
                        continue
            if not raw.strip():
                continue
            try:
                decoded = records.decode(raw)
            except records.BadRecord as bad:
                if raw.endswith(b"\n"):
                    report.bad_lines.append((lineno, bad.why))
                continue  # else: a last line still being written (or cut by a crash), not damage
            kind = decoded.get("type")
            try:
                rec = reader.feed(decoded)
                if rec is None or kind == records.STACK:
                    continue  # a definition, kept by the reader
                why = got.take(kind, rec, decoded)
                if why is not None:
                    report.bad_lines.append((lineno, why))
            except SessionError:
                raise
            except records.BadRecord as bad:
                report.bad_lines.append((lineno, bad.why))
            except (KeyError, TypeError, ValueError) as exc:  # RecordError (a value of the wrong type) among them
                report.bad_lines.append((lineno, f"malformed {kind} record ({exc})"))
    session = got.session_read(report, more)
    if _depth < 4 and not more:
        _merge_children(session, table, path, _depth, _read if _read is not None else {file_id(path)})
    session.info.warnings = fold_warnings(session.info.warnings)
    if not head:
        session.info.warnings.extend(got.ts.warnings(table))
    return session


def _kept_locations(before: Breakpoint | None, after: Breakpoint) -> Breakpoint:
    """A later record of a breakpoint with no location, after one that had them, keeps them: gdb forgets a
    process's libraries once it has detached from it (a target that executed Python and was handed to a
    recorder of its own), and its last dump then lists none, though the breakpoint resolved and was hit."""
    if before is not None and before.locations and not after.locations:
        after.locations, after.pending, after.suggestions, after.error = before.locations, False, [], None
    return after


def real_path(path: Path) -> Path | None:
    """Where ``path`` leads once its links are resolved, or None when nothing can be said (a link loop, a
    name too long, a NUL byte): a shared session directory may hold any of them, and ``Path.resolve`` raises
    on a loop under Python 3.11 (a ``loop.jsonl -> loop.jsonl`` named as a child was a traceback in show,
    export, diff and sessions)."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None


def is_link(path: Path) -> bool:
    """Whether ``path`` is a symbolic link. A name that cannot even be looked at (too long, a NUL) is not
    one: opening it fails with its own sentence."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def file_id(path: Path) -> tuple[int, int] | Path:
    """What makes two names one file: its device and inode (a hard link is the same file under another
    name: a session naming a hard link of itself counted its hits twice), else the name itself."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return path
    return (st.st_dev, st.st_ino)


def _merge_children(session: Session, table: HitTable, path: Path, depth: int, read: set) -> None:
    """The sessions of children that executed Python (tracer/recorder/children.py), read into this one:
    their hits numbered after this session's, their processes and warnings added. Each file is read
    once (``read``: this load's files so far, by ``file_id``), so a record naming its own file, a hard link
    of it, or files naming each other, adds nothing and cannot loop."""
    merged = False
    for p in list(session.processes):
        if not p.session:
            continue
        named = path.parent / p.session
        sub_path = real_path(named)
        if sub_path is None or real_path(path.parent) not in sub_path.parents:
            session.info.warnings.append(f"process {p.pid}'s session {p.session} is outside this session's "
                                         "directory: not read")
            continue
        if is_link(named):
            session.info.warnings.append(f"process {p.pid}'s session {p.session} is a symbolic link: not read")
            continue
        if file_id(sub_path) in read:
            session.info.warnings.append(f"process {p.pid}'s session {p.session} is a file this session has "
                                         "already read (its own, or one that names it back): not read again")
            continue
        read.add(file_id(sub_path))
        try:
            sub = load(sub_path, _depth=depth + 1, _read=read)
        except (SessionError, OSError) as exc:
            session.info.warnings.append(f"the session of process {p.pid} ({p.session}) cannot be read: "
                                         f"{getattr(exc, 'message', exc)}")
            continue
        offset = max(table.seqs) if len(table) else 0
        for hit in sub.hits:
            hit.seq += offset
            table.append(hit)
        session.evals.update({seq + offset: values for seq, values in sub.evals.items()})
        merged = True
        for sp in sub.processes:
            mine = session.process(sp.pid)
            if mine is None:
                session.processes.append(sp)
            else:
                mine.merge({k: v for k, v in sp.to_dict().items()})
        for w in sub.info.warnings:
            w = f"process {p.pid}: {w}"
            if w not in session.info.warnings:
                session.info.warnings.append(w)
        counts = {bp.spec: bp.hits for bp in sub.breakpoints}
        theirs = {bp.spec: bp for bp in sub.breakpoints}
        for bp in session.breakpoints:
            bp.hits += counts.get(bp.spec, 0)
            if bp.spec in theirs:  # where the child's gdb resolved it, when the main's lists nothing
                _kept_locations(theirs[bp.spec], bp)
    if merged:
        table.sort()
    # A target that executed Python and was handed over ends in its own recorder's session: its exit code
    # is there (the main session's end record could not know it).
    target = session.processes[0] if session.processes else None
    if session.info.exit_code is None and target is not None and target.exit_code is not None:
        session.info.exit_code = target.exit_code


def _distinct_paths(hits: Sequence[Hit]) -> list[list[Frame]]:
    """Each frame list once (the hits of one stack share theirs), a parallel worker's launcher's too."""
    if isinstance(hits, HitTable):
        return hits.frame_lists()
    paths = {id(h.frames): h.frames for h in hits}
    paths.update((id(h.launched_by.frames), h.launched_by.frames) for h in hits if h.launched_by is not None)
    return list(paths.values())


END_TYPES = {"status": STR, "exit_code": INT, "ended": STR, "warnings": STRS}
_FILL_TYPES = {"function": STR, "short": STR, "layer": STR, "dispatch_key": STR, "file": STR, "line": INT}


def _fill_entries(rec: dict[str, Any]) -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for i, entry in enumerate(objects("the fill's frames", rec.get("frames")), 1):
        if type(entry) is not list or len(entry) != 4:
            raise RecordError(f"fill entry {i} is not [library, offset, caller, names]")
        library, offset, caller, values = entry
        if type(library) is not str or type(offset) is not int or type(caller) is not bool:
            raise RecordError(f"fill entry {i} is not [library, offset, caller, names]")
        out[(library, offset, caller)] = check(f"fill entry {i}", values, _FILL_TYPES)
        for step in objects(f"fill entry {i}'s inlined frames", values.get("inlined")):
            check(f"an inlined frame of fill entry {i}", step, _FILL_TYPES)
    return out


def _key_table(rec: dict[str, Any]) -> dict[str, Any]:
    keys = objects("its keys", rec.get("keys"))
    if not all(type(k) is list and len(k) == 2 and type(k[0]) is str and type(k[1]) is int for k in keys):
        raise RecordError("its keys are not [name, mask] pairs")
    bits = rec.get("bits") or {}
    if type(bits) is not dict or not all(type(v) is str for v in bits.values()):
        raise RecordError("its bits are not {bit: name}")
    out = {"keys": keys, "bits": bits}
    defaults = rec.get("tls_defaults")
    if type(defaults) is list and len(defaults) == 2 and all(type(x) is int for x in defaults):
        out["tls_defaults"] = defaults
    return out


def apply_fills(hits: Sequence[Hit], fills: dict[tuple, dict[str, Any]]) -> None:
    for frames in _distinct_paths(hits):
        if any(f.offset is not None for f in frames):
            fill_path(frames, fills.get)


def _name_from_index(hits: Sequence[Hit]) -> None:
    """A session whose writer was killed (no ``end``) may lack the fill records of its last hits: their
    frames are named here, from pttrace's index of each frame's library, as the writer would have."""
    from tracer.session.fill import FrameFiller

    filler = None
    for frames in _distinct_paths(hits):
        if any(f.offset is not None and f.fill_key(False) is not None for f in frames):
            filler = filler or FrameFiller()
            filler.fill(frames)


def decode_keyset(bits: int, table: dict[str, Any]) -> list[str]:
    """Key names of a raw DispatchKeySet, in the numbering ``table`` describes (a ``dispatch_keys`` record).

    A runtime key (``CPU``, ``AutogradCPU``) is present when all the bits of its mask are (its
    functionality bit and its backend bit); bits no key accounts for are named from ``bits``, or
    given as ``bit N`` when the table does not know them either: never guessed.
    """
    from tracer.dispatch.decision import key_masks

    names: list[str] = []
    covered = 0
    for name, mask in key_masks(table):
        if mask and bits & mask == mask:
            names.append(name)
            covered |= mask
    rest = bits & ~covered & 0xFFFFFFFFFFFFFFFF
    labels = table.get("bits") or {}
    bit = 0
    while rest:
        if rest & 1:
            label = labels.get(str(bit))
            names.append(f"{label} (alone)" if label else f"bit {bit} (unknown)")
        rest >>= 1
        bit += 1
    return names


def _decode_keysets(hits: Sequence[Hit], table: dict[str, Any]) -> None:
    # A tuple: frames stay hashable by value (the JSON export caches encoded frames by their fields),
    # and one decoded tuple is shared by every frame with the same key set.
    cache: dict[int, tuple[str, ...]] = {}
    for frames in _distinct_paths(hits):
        for f in frames:
            if f.keyset is not None and f.keys is None:
                keys = cache.get(f.keyset)
                if keys is None:
                    keys = cache[f.keyset] = tuple(decode_keyset(f.keyset, table))
                f.keys = keys


def _op_tables(rec: dict[str, Any]) -> dict[str, Any]:
    tables = rec.get("tables")
    if type(tables) is not dict:
        raise RecordError("its tables are not {struct: {op, rows}}")
    out = {}
    for struct, item in tables.items():
        check(f"the dispatch table of {struct}", item, {"op": STR}, ("op",))
        rows = [check(f"a row of the dispatch table of {struct}", r, {"key": STR, "registered_at": STR, "kind": STR,
                                                                       "fallthrough": BOOL}, ("key",))
                for r in objects(f"the rows of {struct}", item.get("rows"))]
        out[struct] = {"op": item["op"], "rows": rows}
    return out


def _decide(table: HitTable, key_table: dict[str, Any] | None, op_tables: dict[str, Any] | None = None) -> None:
    """Each distinct ``FrameValues``' key sets decoded (arguments, tensors) and its dispatch decision."""
    from tracer.dispatch.decision import decide

    cache: dict[int, tuple[str, ...]] = {}

    def names(bits: int) -> tuple[str, ...]:
        keys = cache.get(bits)
        if keys is None:
            keys = cache[bits] = tuple(decode_keyset(bits, key_table or {}))
        return keys

    seen: set[int] = set()
    for site in table.sites:
        for fv in site.values or ():
            if id(fv) in seen:
                continue
            seen.add(id(fv))
            if key_table is not None:
                for arg in fv.args:
                    if type(arg.get("keyset")) is int:
                        arg["keys"] = list(names(arg["keyset"]))
                    for t in [arg.get("tensor")] + list(arg.get("tensors") or []):
                        if type(t) is dict and type(t.get("key_set")) is int:
                            t["keys"] = list(names(t["key_set"]))
            fv.decision = d = decide(fv.frame.function, fv.args, fv.tls, key_table, op_tables)
            if d is not None and key_table is not None:
                for bits in [d.included, d.excluded, d.computed, *(ks for _, ks in d.tensors)]:
                    if bits is not None:
                        d.names[bits] = names(bits)


def default_dir() -> Path:
    return settings.current().session_dir


def list_sessions(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(directory.glob("*" + SUFFIX), key=lambda p: p.name)


def _begins_as_session(path: Path) -> bool:
    """Whether the file's first line is a header record, by a look at its first bytes."""
    try:
        with open_session_file(path) as fh:
            first = fh.read(4096).split(b"\n", 1)[0]
    except (SessionError, OSError):
        return False
    return b'"type"' in first and b'"header"' in first


def resolve(ref: str, directory: Path | None = None) -> Path:
    """A session reference: a path, an id, a unique id prefix, or ``last``."""
    directory = directory or default_dir()
    candidate = Path(ref)
    if candidate.suffix == SUFFIX or os.sep in ref:
        if candidate.is_file():
            return candidate
        if os.path.lexists(candidate):
            what = not_a_file(os.lstat(candidate).st_mode) if not candidate.exists() else not_a_file(candidate.stat().st_mode)
            raise SessionError(f"{ref} is {what or 'not a regular file'}, not a session file.")
        raise SessionError(f"no session file at {ref}.")
    if candidate.is_file():
        return candidate
    files = list_sessions(directory)
    if ref == "last":
        # never a FIFO or a link, nor a file that does not begin as a session does (an export written
        # into the directory under a session's name made every `last` fail until it was removed)
        files = [p for p in files if not p.is_symlink() and p.is_file()]
        newest_first = sorted(files, key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
        found = next((p for p in newest_first if _begins_as_session(p)), None)  # only the newest opened
        if found is None:
            raise SessionError(f"no sessions in {directory}/ yet; record one with `pttrace run`.")
        return found
    exact = [p for p in files if p.stem == ref]
    if exact:
        return exact[0]
    matches = [p for p in files if p.stem.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionError(f"no session {ref!r} in {directory}/; `pttrace sessions` lists them.")
    names = ", ".join(p.stem for p in matches[:5])
    raise SessionError(f"session prefix {ref!r} is ambiguous: it matches {names}.")
