"""The session file's records: what each holds, how it is written, how it is read back.

One module for both sides of the file. The agent inside gdb writes ``hit``, ``breakpoint`` and
``warning`` records with it; pttrace writes the others with it; every reader (``storage.load``, the
engine's tail of a live session, ``bench/``) decodes with it. It imports the standard library only:
gdb's Python runs it.

A session file is JSON lines, each one record, each written with one ``write()`` on an ``O_APPEND``
descriptor (several writers never interleave, and a file cut anywhere keeps every complete line):

``header``         ``{"schema": N, "session": {SessionInfo}}``, the first line
``breakpoint``     ``{spec, number, locations: [...], hits, pending, enabled}``, again when it changes;
                   ``{spec, removed: true}`` once it is removed (readers forget it)
``hit``            ``{seq, breakpoint, thread: {id, name, lwp}, time, frames: [...], truncated?, signal?,
                   launched_by?: {thread, frames} or {thread: null, why}}`` (a parallel worker's hit: the
                   stack of the thread that launched its region, at that moment),
                   frames outermost first
``warning``        ``{message}``: what pttrace could not see or follow
``dispatch_keys``  the target torch's DispatchKeySet numbering (``storage.decode_keyset``)
``fill``           ``{frames: [[library, offset, caller, {function, short, layer, dispatch_key, file,
                   line}], ...]}``: names for frames recorded by library and offset (see ``fill_key``)
``end``            ``{status, exit_code, ended, ...}``; a file without one is ``interrupted``
"""
from __future__ import annotations

import json
from typing import IO, Any, Iterator

SCHEMA = 1

HEADER = "header"
BREAKPOINT = "breakpoint"
HIT = "hit"
WARNING = "warning"
DISPATCH_KEYS = "dispatch_keys"
FILL = "fill"
END = "end"
KINDS = frozenset((HEADER, BREAKPOINT, HIT, WARNING, DISPATCH_KEYS, FILL, END))


class BadRecord(ValueError):
    """A line that is not a session record; ``why`` says what it is instead."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode(record: dict[str, Any]) -> bytes:
    """One JSON line. Names that are not valid UTF-8 (surrogate-escaped) are kept as \\u escapes."""
    text = _dumps(record) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


class CachedFrame(dict):
    """A frame shared by many hits (the agent caches them per pc); ``text`` keeps its JSON, encoded once."""

    __slots__ = ("text",)


def frame_text(frame: dict[str, Any]) -> str:
    text = getattr(frame, "text", None)
    if text is None:
        text = _dumps(frame)
        if isinstance(frame, CachedFrame):
            frame.text = text
    return text


def encode_hit(record: dict[str, Any]) -> bytes:
    """``encode`` of a hit, byte for byte, with each ``CachedFrame``'s JSON reused (a hot breakpoint
    repeats the same frames at every hit)."""
    if "frames" not in record:
        return encode(record)
    head, tail, frames = {}, {}, None
    for key, value in record.items():
        if key == "frames":
            frames = value
        elif frames is None:
            head[key] = value
        else:
            tail[key] = value
    text = _dumps(head)[:-1] + ',"frames":[' + ",".join([frame_text(f) for f in frames or ()]) + "]"
    text += ("," + _dumps(tail)[1:]) if tail else "}"
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a name that is not UTF-8: the slow path escapes it
        return encode(record)


def warning(message: str) -> dict[str, Any]:
    return {"type": WARNING, "message": message}


def hit(seq: int, breakpoint: str | None, thread: dict[str, Any], time: float, frames: list,
        truncated: bool = False, signal: str | None = None, launched_by: dict | None = None) -> dict[str, Any]:
    rec = {"type": HIT, "seq": seq, "breakpoint": breakpoint, "thread": thread, "time": time, "frames": frames}
    if truncated:
        rec["truncated"] = True
    if signal:
        rec["signal"] = signal
    if launched_by is not None:
        rec["launched_by"] = launched_by
    return rec


def breakpoint(spec: str, number: int | None, locations: list, pending: bool, enabled: bool,
               hits: int = 0) -> dict[str, Any]:
    return {"type": BREAKPOINT, "spec": spec, "number": number, "locations": locations, "hits": hits,
            "pending": pending, "enabled": enabled}


def breakpoint_removed(spec: str) -> dict[str, Any]:
    return {"type": BREAKPOINT, "spec": spec, "removed": True}


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------
def decode(raw: bytes) -> dict[str, Any]:
    """One line back into its record; ``BadRecord`` if it is not one."""
    try:
        rec = json.loads(raw.decode("utf-8", errors="surrogateescape"))
    except ValueError:
        raise BadRecord("not valid JSON") from None
    if not isinstance(rec, dict) or "type" not in rec:
        raise BadRecord("not a session record")
    return rec


def read(fh: IO[bytes]) -> Iterator[tuple[int, dict[str, Any] | BadRecord]]:
    """Each non-blank line of a file: (line number, its record or the ``BadRecord`` it is)."""
    for lineno, raw in enumerate(fh, 1):
        if not raw.strip():
            continue
        try:
            yield lineno, decode(raw)
        except BadRecord as bad:
            yield lineno, bad


class Tail:
    """Reads a file that is still being written: complete lines only, the cut last line kept for later."""

    def __init__(self) -> None:
        self.pos = 0
        self._partial = b""

    def lines(self, fh: IO[bytes]) -> list[bytes]:
        fh.seek(self.pos)
        chunk = fh.read()
        self.pos += len(chunk)
        if not chunk:
            return []
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        return lines


# --------------------------------------------------------------------------------------------
# Fill records: names for frames recorded by library and offset
# --------------------------------------------------------------------------------------------
FILL_NAME_FIELDS = ("function", "short", "layer", "dispatch_key")


def fill_frame(frame: Any, values: dict[str, Any]) -> None:
    """Give a frame (a ``Frame`` or its dict) the name and file:line it lacks from a fill entry."""
    get = frame.get if isinstance(frame, dict) else frame.__dict__.get
    put = frame.__setitem__ if isinstance(frame, dict) else frame.__setattr__
    if get("function") is None and values.get("function"):
        for name in FILL_NAME_FIELDS:
            if name in values:
                put(name, values[name])
    if get("file") is None and values.get("file"):
        put("file", values["file"])
        put("line", values.get("line"))


def fill_key(frame: Any, innermost: bool) -> tuple | None:
    """The key of a frame in ``fill`` records, or None if it needs none (``caller``: not the innermost
    frame, so its pc is a return address and it is looked up at offset - 1)."""
    get = frame.get if isinstance(frame, dict) else frame.__dict__.get
    offset = get("offset")
    if offset is None or get("kind") != "native" or (get("function") is not None and get("file") is not None):
        return None
    return (get("library"), int(offset), not innermost)


def hits_and_end(fh: IO[bytes]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The hit records of a file as dicts, their ``fill`` records applied, and its ``end`` record (None if
    it has none): for readers that want the records as written (tests, ``bench/``), not ``storage.load``."""
    hits, end, fills = [], None, {}
    for _lineno, rec in read(fh):
        if isinstance(rec, BadRecord):
            continue
        kind = rec["type"]
        if kind == HIT:
            hits.append(rec)
        elif kind == END:
            end = rec
        elif kind == FILL:
            fills.update(((lib, off, caller), values) for lib, off, caller, values in rec.get("frames") or [])
    if fills:
        for rec in hits:
            frames = rec.get("frames") or []
            for i, f in enumerate(frames):
                key = fill_key(f, i == len(frames) - 1)
                if key in fills:
                    fill_frame(f, fills[key])
    return hits, end
