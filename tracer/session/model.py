"""The data every part of pttrace agrees on (DESIGN.md section 4): sessions, breakpoints, hits, frames.

Frames are stored outermost first. Unknown values are ``None``; ``to_dict``/``from_dict`` give the
JSON shape of the contract, and tolerate missing keys so that older or partial files still load.
``from_dict`` is the edge where a record becomes the model: a value of the wrong type (a session
file is anyone's to edit) raises ``RecordError`` naming it, so that the reader skips that record and
says so, and nothing past the edge ever meets a ``null`` frame or a string where a number belongs.
Control characters are made visible before, where the JSON line is decoded (``records.decode``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Sequence

from tracer.session.records import FILL_NAME_FIELDS, LAYERS, SCHEMA, merge_varying  # noqa: F401 (LAYERS: re-exported)
from tracer.session.torchscript import TsLevel, TsRecordError, levels_from



_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    # ``fields()`` rebuilds its tuple on every call: at 400k frames a load that was most of the time.
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls))
    return names


def _pick(cls, data: dict[str, Any]) -> dict[str, Any]:
    names = _field_names(cls)
    return {k: v for k, v in data.items() if k in names}


# ---------------------------------------------------------------- validation at the edge

class RecordError(ValueError):
    """A record holding a value of the wrong type; the message names it (``frame 3: line is a string``)."""


STR, INT, BOOL, NUM, STRS = "a string", "an integer", "true or false", "a number", "a list of strings"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "a number", float: "a number", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__)


# Integers a session may hold: what the hit table's 64-bit columns take (a crafted 10**23 is refused).
INT_RANGE = range(-(1 << 63), 1 << 63)


def _fits(value: Any, want: str) -> bool:
    t = type(value)
    if want == STR:
        return t is str
    if want == INT:
        return t is int and value in INT_RANGE
    if want == BOOL:
        return t is bool
    if want == NUM:
        return (t is int and value in INT_RANGE) or (t is float and math.isfinite(value))
    return t is list and all(type(x) is str for x in value)  # STRS


def check(what: str, data: Any, types: dict[str, str], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``data`` if it is an object whose known keys hold ``types`` (or null); raises ``RecordError``."""
    if type(data) is not dict:
        raise RecordError(f"{what} is {_kind(data)}, not an object")
    for key in required:
        if data.get(key) is None:
            raise RecordError(f"{what} has no {key}")
    for key, value in data.items():
        want = types.get(key)
        if want is not None and value is not None and not _fits(value, want):
            if type(value) is int and want in (INT, NUM):
                raise RecordError(f"{what}: {key} is a number out of range")
            raise RecordError(f"{what}: {key} is {_kind(value)}, not {want}")
    return data


def objects(what: str, value: Any) -> list:
    """A list of records (null: none); anything else raises ``RecordError``."""
    if value is None:
        return []
    if type(value) is not list:
        raise RecordError(f"{what} is {_kind(value)}, not a list")
    return value


_FRAME_TYPES = {
    "kind": STR, "function": STR, "short": STR, "library": STR, "address": INT, "file": STR, "line": INT,
    "layer": STR, "dispatch_key": STR, "source": STR, "decl_file": STR, "decl_line": INT, "inlined": BOOL,
    "keyset": INT, "keys": STRS, "offset": INT, "compiled": STR,
}
# Key and type tuples of frames already checked: a session repeats a few dozen frame shapes over
# hundreds of thousands of frames, so most frames cost one set lookup (lists are checked each time).
_GOOD_FRAME_SHAPES: set[tuple] = set()


@dataclass
class Frame:
    """One frame of a recorded call path, Python or native."""

    kind: str  # "python" | "native"
    function: str | None = None
    short: str | None = None
    library: str | None = None
    address: int | None = None
    file: str | None = None
    line: int | None = None
    layer: str | None = None
    dispatch_key: str | None = None
    source: str | None = None
    # Extra detail that is not part of the minimal contract but helps readers.
    decl_file: str | None = None
    decl_line: int | None = None
    inlined: bool = False
    # A dispatcher hop's DispatchKeySet, read at its entry (raw bits) and decoded to key names.
    keyset: int | None = None
    keys: Sequence[str] | None = None
    keyset_note: str | None = None  # why a hop that takes a key set had it not read (never a guess)
    # A native frame gdb left without a name or file:line: its file-relative address (pc - the
    # library's load base), which pttrace's own symbol index names (a ``fill`` record, storage.py).
    offset: int | None = None
    # A Python frame whose code dynamo replaced: the compiled graph(s) it runs instead ("graph 1"),
    # from the __compiled_fn_N its code loads (tracer/gdb/agent/pycode.py).
    compiled: str | None = None
    # TorchScript's interpreter loop: the scripted levels it was running (tracer/session/torchscript.py)
    torchscript: tuple[TsLevel, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        # Every field is a scalar, so a shallow copy equals ``asdict`` (which deep-copies, ~20x slower).
        d = dict(self.__dict__)
        if self.kind != "python":
            d.pop("source", None)
        if not self.inlined:
            d.pop("inlined", None)
        if self.decl_file is None and self.decl_line is None:
            d.pop("decl_file", None)
            d.pop("decl_line", None)
        if self.keyset is None:
            d.pop("keyset", None)
        if self.keys is None:
            d.pop("keys", None)
        if self.keyset_note is None:
            d.pop("keyset_note", None)
        if self.offset is None:
            d.pop("offset", None)
        if self.compiled is None:
            d.pop("compiled", None)
        if self.torchscript is None:
            d.pop("torchscript", None)
        else:
            d["torchscript"] = [level.to_dict() for level in self.torchscript]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], what: str = "a frame") -> "Frame":
        if type(data) is not dict:
            raise RecordError(f"{what} is {_kind(data)}, not an object")
        shape = (*data, *map(type, data.values()))  # its keys, then their values' types
        if shape in _GOOD_FRAME_SHAPES:
            return cls(**data)  # the hot case: every frame of every hit
        check(what, data, _FRAME_TYPES, ("kind",))
        if list not in shape and _field_names(cls) >= data.keys():
            _GOOD_FRAME_SHAPES.add(shape)
        frame = cls(**_pick(cls, data))  # keys from a newer or older writer are left out
        if "torchscript" in data:
            try:
                frame.torchscript = levels_from(data["torchscript"])
            except TsRecordError as exc:
                raise RecordError(f"{what}: {exc}") from None
        return frame

    def fill_key(self, innermost: bool) -> tuple | None:
        """Its key in ``fill`` records, or None if it needs none (not innermost: its pc is a return
        address, looked up at offset - 1). A frame of an inlined function is named with the frame it is
        inlined in (``fill_path``)."""
        if self.offset is None or self.kind != "native" or self.inlined or (
                self.function is not None and self.file is not None):
            return None
        return (self.library, int(self.offset), not innermost)

    def fill(self, values: dict[str, Any]) -> None:
        """The name and file:line it lacks, from a ``fill`` entry (a name gdb gave is kept)."""
        if self.function is None and values.get("function"):
            for name in FILL_NAME_FIELDS:
                if name in values:
                    setattr(self, name, values[name])
        if self.file is None and values.get("file"):
            self.file, self.line = values["file"], values.get("line")

    def inlined_frame(self, values: dict[str, Any]) -> "Frame":
        """The frame of a function inlined at this frame's pc, from an entry of a fill's ``inlined``."""
        return Frame("native", library=self.library, address=self.address, offset=self.offset, inlined=True,
                     **{k: values.get(k) for k in (*FILL_NAME_FIELDS, "file", "line")})

    @property
    def location(self) -> str | None:
        if self.file is None:
            return None
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def key(self) -> tuple:
        """What makes two frames "the same place" when grouping call paths."""
        if self.kind == "python":
            return ("py", self.file, self.line, self.function)
        if self.torchscript:  # the scripted lines it ran tell paths apart, as Python lines do
            return ("c", self.library, self.function, tuple(level.key() for level in self.torchscript))
        return ("c", self.library, self.function or (hex(self.address) if self.address else None))


def fill_path(frames: list[Frame], answer: Callable[[tuple], dict[str, Any] | None]) -> list[tuple[int, tuple, bool]]:
    """Fill one call path (outermost first) in place from ``answer(key)``, a ``fill`` entry or None: each frame
    recorded by library and offset gets its name and file:line, and one whose pc is in inlined code the
    frames of the inlined functions after it (``inlined``, innermost last, as gdb's are where it reads the
    DWARF). Returns (its index, key, whether it had a name) for each frame answered. A frame keeps its key once
    filled (frames are shared by paths: a path met later is expanded too); a path expanded before is left."""
    done = []
    real = [i for i, f in enumerate(frames) if not f.inlined]
    innermost = real[-1] if real else -1  # the frame of the stop pc: inlined frames of it follow it
    i = 0
    while i < len(frames):
        f = frames[i]
        if f.offset is None or f.kind != "native" or f.inlined:
            i += 1
            continue
        key = (f.library, int(f.offset), i != innermost)
        values = answer(key)
        if values is None:
            i += 1
            continue
        done.append((i, key, f.function is not None))  # frames are only ever inserted after it
        f.fill(values)
        below = values.get("inlined")
        nxt = frames[i + 1] if i + 1 < len(frames) else None
        if below and not (nxt is not None and nxt.inlined and nxt.offset == f.offset and nxt.library == f.library):
            frames[i + 1:i + 1] = [f.inlined_frame(v) for v in below]
            if innermost > i:
                innermost += len(below)
            i += len(below)
        i += 1
    return done


@dataclass
class Location:
    """One place gdb resolved a breakpoint to."""

    function: str | None = None
    library: str | None = None
    address: int | None = None
    file: str | None = None
    line: int | None = None
    enabled: bool = True
    note: str | None = None  # e.g. "plt stub: not stopped at"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], what: str = "a location") -> "Location":
        return cls(**_pick(cls, check(what, data, _LOCATION_TYPES)))


@dataclass
class Breakpoint:
    """A breakpoint the session asked for: its spec, gdb's number, locations and hits."""

    spec: str
    number: int | None = None
    locations: list[Location] = field(default_factory=list)
    hits: int = 0
    pending: bool = True
    enabled: bool = True
    suggestions: list[str] = field(default_factory=list)
    error: str | None = None
    removed: bool = False  # the record that says it was removed (a session never lists such a one)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["locations"] = [loc.to_dict() for loc in self.locations]
        if not self.removed:
            d.pop("removed")
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], what: str = "a breakpoint") -> "Breakpoint":
        kw = _pick(cls, check(what, data, _BREAKPOINT_TYPES, ("spec",)))
        kw["locations"] = [Location.from_dict(x, f"location {i} of {what}")
                           for i, x in enumerate(objects(f"the locations of {what}", data.get("locations")), 1)]
        for key in ("hits", "pending", "enabled", "suggestions"):
            if kw.get(key, 0) is None:
                del kw[key]
        return cls(**kw)


@dataclass(slots=True)  # one per site, not per hit, but a million hits hold many
class Thread:
    """The thread a hit was recorded on: gdb's id, the OS and Python names, the LWP."""

    id: int | None = None
    name: str | None = None  # the OS name (gdb's)
    lwp: int | None = None
    python_name: str | None = None  # threading's name (Thread(name=...)), when the interpreter keeps one
    pid: int | None = None  # the process it is in (Session.processes); None in sessions of one process

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.python_name is None:
            del d["python_name"]
        if self.pid is None:
            del d["pid"]
        return d

    @property
    def names(self) -> str:
        """The OS name, and threading's when it differs: ``python3 [Python: known-worker]``."""
        if self.python_name is None or self.python_name == self.name:
            return self.name or ""
        return f"{self.name or '?'} [Python: {self.python_name}]"

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Thread":
        return cls(**_pick(cls, check("the thread", data, _THREAD_TYPES))) if data is not None else cls()


@dataclass
class Launch:
    """The thread that launched the intra-op parallel region a worker thread's hit ran in: its stack at
    that moment (outermost first), or why it was not found."""

    thread: "Thread | None"
    frames: list["Frame"] = field(default_factory=list)
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"thread": self.thread.to_dict() if self.thread else None,
                             "frames": [f.to_dict() for f in self.frames]}
        if self.why:
            d["why"] = self.why
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Launch":
        check("launched_by", data, {"why": STR})
        thread = data.get("thread")
        return cls(Thread.from_dict(thread) if thread else None,
                   [Frame.from_dict(f, f"launching frame {i}") for i, f in enumerate(objects("launching frames",
                                                                                          data.get("frames")))],
                   data.get("why"))


_ARG_TYPES = {"type": STR, "name": STR, "where": STR, "unreadable": STR, "keyset": INT, "none": BOOL,
              "address": INT, "length": INT, "vary": INT,
              "named_by": STR}


@dataclass(eq=False)
class FrameValues:
    """What one frame of a hit carried, read where it was (the frame a breakpoint stopped in at its entry;
    a debug build's outer frames from DWARF): its arguments, one dict each in the session's shape
    (``records``: ``args``), and the thread's local dispatch key sets there (``tls``, as stored)."""

    frame: Frame  # the very frame of the hit's list (frames are shared: identity, not index)
    args: tuple[dict, ...] = ()
    tls: tuple[int, int] | None = None
    tls_note: str | None = None  # why the TLS key sets were not read at a dispatcher hop
    decision: Any = None  # tracer.dispatch.decision.Decision, worked out where the session is loaded

    def to_dict(self, index: int | None) -> dict[str, Any]:
        d: dict[str, Any] = {"frame": index, "args": list(self.args)}
        if self.tls is not None:
            d["tls"] = list(self.tls)
        if self.tls_note is not None:
            d["tls_note"] = self.tls_note
        return d

    @classmethod
    def from_dict(cls, data: Any, frames: list[Frame], what: str = "the values") -> "FrameValues":
        check(what, data, {"frame": INT, "tls_note": STR}, ("frame",))
        index = data["frame"]
        if not 0 <= index < len(frames):
            raise RecordError(f"{what} name no frame of the hit ({index})")
        args = tuple(check(f"argument {i} of {what}", a, _ARG_TYPES)
                     for i, a in enumerate(objects(f"the arguments of {what}", data.get("args"))))
        tls = data.get("tls")
        if tls is not None and (type(tls) is not list or len(tls) != 2 or not all(type(x) is int for x in tls)):
            raise RecordError(f"{what}: tls is not [included, excluded]")
        return cls(frames[index], args, tuple(tls) if tls is not None else None, data.get("tls_note"))


def values_of(data: Any, frames: list[Frame]) -> tuple[FrameValues, ...] | None:
    """A hit's ``values`` (a list of ``FrameValues`` dicts, as recorded) against its frames."""
    if not data:
        return None
    return tuple(FrameValues.from_dict(v, frames, f"values {i}") for i, v in enumerate(objects("values", data)))


@dataclass(frozen=True, eq=False)
class Varying:
    """What one hit carried that changes from hit to hit (``records.VARYING``: data pointers, a small
    tensor's values), apart from what its site shares, so that a loop over fresh tensors keeps one site:
    ``items[i]`` are the fields of the argument or tensor of ``shared`` marked ``"vary": i``."""

    shared: tuple[FrameValues, ...]
    items: tuple[dict, ...]

    def merged(self) -> tuple[FrameValues, ...]:
        """The hit's own values: ``shared`` with its items put back (the decision is the shared one's)."""
        items = list(self.items)
        return tuple(FrameValues(fv.frame, tuple(merge_varying(a, items) for a in fv.args), fv.tls, fv.tls_note,
                                 fv.decision) for fv in self.shared)


@dataclass(slots=True)  # a million hits of a hot breakpoint: ~80 bytes each, not ~400
class Hit:
    """One recorded hit: its sequence number, breakpoint, thread, time and call path."""

    seq: int
    breakpoint: str | None
    thread: Thread
    time: float
    frames: list[Frame]
    truncated: bool = False
    signal: str | None = None  # set when the stop is a crash rather than a breakpoint
    launched_by: "Launch | None" = None  # a parallel worker's hit: who launched its region
    values: "tuple[FrameValues, ...] | None" = None  # what frames carried (arguments, TLS key sets)
    # What changes from hit to hit, apart (``Varying``): set, ``values`` is either ``varying.shared`` (a hit
    # as ``storage.HitReader`` reads it) or its merge (from a ``HitTable``, which keeps the two apart).
    varying: "Varying | None" = None

    def to_dict(self) -> dict[str, Any]:
        d = {
            "seq": self.seq,
            "breakpoint": self.breakpoint,
            "thread": self.thread.to_dict(),
            "time": self.time,
            "frames": [f.to_dict() for f in self.frames],
        }
        if self.truncated:
            d["truncated"] = True
        if self.signal:
            d["signal"] = self.signal
        if self.launched_by is not None:
            d["launched_by"] = self.launched_by.to_dict()
        values = self.varying.merged() if self.varying is not None and self.values is self.varying.shared else self.values
        if values:
            d["values"] = [v.to_dict(_index_of(self.frames, v.frame)) for v in values]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Hit":
        check("the hit", data, _HIT_TYPES, ("seq",))
        hit = cls(
            seq=data["seq"],
            breakpoint=data.get("breakpoint"),
            thread=Thread.from_dict(data.get("thread")),
            time=float(data.get("time") or 0.0),
            frames=[Frame.from_dict(f, f"frame {i}") for i, f in enumerate(objects("frames", data.get("frames")))],
            truncated=bool(data.get("truncated", False)),
            signal=data.get("signal"),
            launched_by=Launch.from_dict(data["launched_by"]) if data.get("launched_by") else None,
        )
        hit.values = values_of(data.get("values"), hit.frames)
        return hit

    @property
    def innermost(self) -> Frame | None:
        return self.frames[-1] if self.frames else None


def _index_of(frames: list[Frame], frame: Frame) -> int | None:
    for i, f in enumerate(frames):
        if f is frame:
            return i
    return None


@dataclass
class Process:
    """One process of the recording: the target, or a child pttrace followed (several records of one pid
    in the file, merged). ``role``: "DataLoader worker N", "rank R", or None (its argv says what it is)."""

    pid: int
    ppid: int | None = None
    argv: list[str] = field(default_factory=list)
    role: str | None = None
    rank: int | None = None
    worker: int | None = None
    inferior: int | None = None
    started: str | None = None
    ended: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    state: str | None = None  # "exited", "detached"; None while it ran (or the session was cut)
    detached: str | None = None  # why pttrace let it go
    attached: bool | None = None
    session: str | None = None  # its own session file (a child that executed Python), beside this one
    attached_late: bool | None = None  # traced from a moment after its exec, not from its start
    host: str | None = None  # the machine it ran on (socket.gethostname()); older sessions have none

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != []}

    def merge(self, data: dict[str, Any]) -> None:
        """A later record of this pid: its values win."""
        check("the process", data, _PROCESS_TYPES, ("pid",))
        for key, value in _pick(Process, data).items():
            if value is not None and key != "pid":
                setattr(self, key, list(value) if key == "argv" else value)

    @property
    def label(self) -> str:
        """How views name it: ``pid 123 (DataLoader worker 0)``."""
        return f"pid {self.pid}" + (f" ({self.role})" if self.role else "")

    @property
    def outcome(self) -> str:
        if self.state == "detached":
            return "detached" + (f" ({self.detached})" if self.detached else "")
        if self.signal:
            return f"killed by {self.signal}"
        if self.exit_code is not None:
            return f"exit code {self.exit_code}"
        return "running" if self.ended is None else "ended"


@dataclass
class SessionInfo:
    """A session's header and end: what ran, with which Python, torch and gdb, and how it ended."""

    id: str
    mode: str  # "run" | "attach"
    argv: list[str]
    pid: int | None = None
    python: str | None = None
    torch_version: str | None = None
    torch_git_version: str | None = None
    gdb_version: str | None = None
    started: str | None = None
    status: str = "running"
    warnings: list[str] = field(default_factory=list)
    exit_code: int | None = None
    ended: str | None = None
    cwd: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SessionInfo":
        kw = {k: v for k, v in _pick(cls, check("the session", data, _INFO_TYPES)).items() if v is not None}
        kw.setdefault("id", "unknown")
        kw.setdefault("mode", "run")
        kw["argv"] = list(kw.get("argv") or [])
        kw["warnings"] = list(kw.get("warnings") or [])
        return cls(**kw)


@dataclass
class Session:
    """A session file read back (storage.load): its header, breakpoints and hits."""

    info: SessionInfo
    breakpoints: list[Breakpoint] = field(default_factory=list)
    hits: Sequence[Hit] = field(default_factory=list)  # a HitTable once loaded (storage.load)
    path: str | None = None
    schema: int = SCHEMA
    processes: list[Process] = field(default_factory=list)  # in the order they started
    evals: dict = field(default_factory=dict)  # --eval: hit seq -> [session.evals.Evaluated], in --eval order
    graphs: dict = field(default_factory=dict)  # TorchScript: graph id -> session.torchscript.TsGraph

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "session": self.info.to_dict(),
            "processes": [p.to_dict() for p in self.processes],
            "breakpoints": [b.to_dict() for b in self.breakpoints],
            "hits": [h.to_dict() for h in self.hits],
        }

    def process(self, pid: int | None) -> Process | None:
        for p in self.processes:
            if p.pid == pid:
                return p
        return None


    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Session":
        """The JSON export read back: contract 2 (hits refer to ``stacks`` of ``frames``) or 1 (each hit
        with its frames)."""
        check("the session document", data, {"schema": INT})
        if "stacks" in data:
            hits = _hits_of_stacks(data)
        else:
            hits = [Hit.from_dict(h) for h in objects("hits", data.get("hits"))]
        return cls(
            info=SessionInfo.from_dict(data.get("session") or {}),
            breakpoints=[Breakpoint.from_dict(b) for b in objects("breakpoints", data.get("breakpoints"))],
            hits=hits,
            schema=data.get("schema", SCHEMA),
            processes=[Process(**_pick(Process, check("the process", p, _PROCESS_TYPES, ("pid",))))
                       for p in objects("processes", data.get("processes"))],
        )

    def breakpoint(self, spec: str) -> Breakpoint | None:
        for bp in self.breakpoints:
            if bp.spec == spec:
                return bp
        return None


def _hits_of_stacks(data: dict[str, Any]) -> list[Hit]:
    frames = [Frame.from_dict(f, f"frame {i}") for i, f in enumerate(objects("frames", data.get("frames")))]

    def stack(what: str, index: Any) -> list[Frame]:
        if type(index) is not int or not 0 <= index < len(stacks):
            raise RecordError(f"{what} names no stack ({_kind(index)})")
        return stacks[index]

    stacks: list[list[Frame]] = []
    for i, ids in enumerate(objects("stacks", data.get("stacks"))):
        if type(ids) is not list or not all(type(x) is int and 0 <= x < len(frames) for x in ids):
            raise RecordError(f"stack {i} is not a list of frame indexes")
        stacks.append([frames[x] for x in ids])
    hits = []
    for h in objects("hits", data.get("hits")):
        check("the hit", h, _HIT_TYPES, ("seq",))
        launch = h.get("launched_by")
        if launch:
            check("launched_by", launch, {"why": STR})
            launch = Launch(Thread.from_dict(launch["thread"]) if launch.get("thread") else None,
                            stack("its launcher", launch["stack"]) if launch.get("stack") is not None else [],
                            launch.get("why"))
        frames_of = stack(f"hit {h['seq']}", h.get("stack"))
        carried = h.get("values")
        if type(carried) is int:  # contract 2: an index into the document's interned "values"
            table = objects("values", data.get("values"))
            if not 0 <= carried < len(table):
                raise RecordError(f"hit {h['seq']} names no values ({carried})")
            carried = table[carried]
        hits.append(Hit(seq=h["seq"], breakpoint=h.get("breakpoint"), thread=Thread.from_dict(h.get("thread")),
                        time=float(h.get("time") or 0.0), frames=frames_of,
                        truncated=bool(h.get("truncated", False)), signal=h.get("signal"),
                        launched_by=launch or None, values=values_of(carried, frames_of)))
    return hits


_LOCATION_TYPES = {"function": STR, "library": STR, "address": INT, "file": STR, "line": INT, "enabled": BOOL,
                   "note": STR}
_BREAKPOINT_TYPES = {"spec": STR, "number": INT, "hits": INT, "pending": BOOL, "enabled": BOOL,
                     "suggestions": STRS, "error": STR}
_THREAD_TYPES = {"id": INT, "name": STR, "lwp": INT, "python_name": STR, "pid": INT}
_PROCESS_TYPES = {"pid": INT, "ppid": INT, "argv": STRS, "role": STR, "rank": INT, "worker": INT, "inferior": INT,
                  "started": STR, "ended": STR, "exit_code": INT, "signal": STR, "state": STR, "detached": STR,
                  "attached": BOOL, "session": STR, "attached_late": BOOL,
                  "host": STR}
_HIT_TYPES = {"seq": INT, "breakpoint": STR, "time": NUM, "truncated": BOOL, "signal": STR}
_INFO_TYPES = {"id": STR, "mode": STR, "argv": STRS, "pid": INT, "python": STR, "torch_version": STR,
               "torch_git_version": STR, "gdb_version": STR, "started": STR, "status": STR, "warnings": STRS,
               "exit_code": INT, "ended": STR, "cwd": STR}
