"""The data every part of pttrace agrees on (DESIGN.md section 4): sessions, breakpoints, hits, frames.

Frames are stored outermost first. Unknown values are ``None``; ``to_dict``/``from_dict`` give the
JSON shape of the contract, and tolerate missing keys so that older or partial files still load.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any

from tracer.records import SCHEMA

LAYERS = ("python", "interpreter", "binding", "torchscript", "dispatcher", "autograd", "kernel", "parallel", "generated",
          "runtime")


@lru_cache(maxsize=None)
def _field_names(cls) -> frozenset[str]:
    # ``fields()`` rebuilds its tuple on every call: at 400k frames a load that was most of the time.
    return frozenset(f.name for f in fields(cls))


def _pick(cls, data: dict[str, Any]) -> dict[str, Any]:
    names = _field_names(cls)
    return {k: v for k, v in data.items() if k in names}


@dataclass
class Frame:
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
    keys: list[str] | None = None
    keyset_note: str | None = None  # why a hop that takes a key set had it not read (never a guess)
    # A native frame gdb left without a name or file:line: its file-relative address (pc - the
    # library's load base), which pttrace's own symbol index names (a ``fill`` record, storage.py).
    offset: int | None = None

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
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Frame":
        try:
            return cls(**data)  # the common case, and the hot one: every frame of every hit
        except TypeError:
            return cls(**_pick(cls, data))  # keys from a newer or older writer

    @property
    def location(self) -> str | None:
        if self.file is None:
            return None
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def key(self) -> tuple:
        """What makes two frames "the same place" when grouping call paths."""
        if self.kind == "python":
            return ("py", self.file, self.line, self.function)
        return ("c", self.library, self.function or (hex(self.address) if self.address else None))


@dataclass
class Location:
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
    def from_dict(cls, data: dict[str, Any]) -> "Location":
        return cls(**_pick(cls, data))


@dataclass
class Breakpoint:
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
    def from_dict(cls, data: dict[str, Any]) -> "Breakpoint":
        kw = _pick(cls, data)
        kw["locations"] = [Location.from_dict(x) for x in data.get("locations") or []]
        return cls(**kw)


@dataclass(slots=True)  # one per site, not per hit, but a million hits hold many
class Thread:
    id: int | None = None
    name: str | None = None
    lwp: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Thread":
        return cls(**_pick(cls, data or {}))


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
        thread = data.get("thread")
        return cls(Thread.from_dict(thread) if thread else None,
                   [Frame.from_dict(f) for f in data.get("frames") or []], data.get("why"))


@dataclass(slots=True)  # a million hits of a hot breakpoint: ~80 bytes each, not ~400
class Hit:
    seq: int
    breakpoint: str | None
    thread: Thread
    time: float
    frames: list[Frame]
    truncated: bool = False
    signal: str | None = None  # set when the stop is a crash rather than a breakpoint
    launched_by: "Launch | None" = None  # a parallel worker's hit: who launched its region

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
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Hit":
        return cls(
            seq=int(data["seq"]),
            breakpoint=data.get("breakpoint"),
            thread=Thread.from_dict(data.get("thread")),
            time=float(data.get("time") or 0.0),
            frames=[Frame.from_dict(f) for f in data.get("frames") or []],
            truncated=bool(data.get("truncated", False)),
            signal=data.get("signal"),
            launched_by=Launch.from_dict(data["launched_by"]) if data.get("launched_by") else None,
        )

    @property
    def innermost(self) -> Frame | None:
        return self.frames[-1] if self.frames else None


@dataclass
class SessionInfo:
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
        kw = _pick(cls, data)
        kw.setdefault("id", "unknown")
        kw.setdefault("mode", "run")
        kw.setdefault("argv", [])
        kw["warnings"] = list(kw.get("warnings") or [])
        return cls(**kw)


@dataclass
class Session:
    info: SessionInfo
    breakpoints: list[Breakpoint] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    path: str | None = None
    schema: int = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "session": self.info.to_dict(),
            "breakpoints": [b.to_dict() for b in self.breakpoints],
            "hits": [h.to_dict() for h in self.hits],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Session":
        return cls(
            info=SessionInfo.from_dict(data.get("session") or {}),
            breakpoints=[Breakpoint.from_dict(b) for b in data.get("breakpoints") or []],
            hits=[Hit.from_dict(h) for h in data.get("hits") or []],
            schema=int(data.get("schema", SCHEMA)),
        )

    def breakpoint(self, spec: str) -> Breakpoint | None:
        for bp in self.breakpoints:
            if bp.spec == spec:
                return bp
        return None
