"""The data contract (DESIGN.md section 4) as one JSON object: ``schema``, ``session``, ``breakpoints``, ``hits``.

Laid out for people and for speed: the top level is indented, each hit is one compact line.
Two things keep 10,000 hits quick: the compact encoder (the indenting one is pure Python), and
encoding each distinct frame once. A training loop's hits repeat the same few dozen frames, so a
frame's JSON text is cached by its values and hits are assembled from those texts.
"""
from __future__ import annotations

import dataclasses
import json

from tracer.model import Frame, Hit, Session

CONTRACT = 1  # the version of this object's shape; the session file's own schema (records.SCHEMA) is apart
_FRAMES_SLOT = "\x00frames\x00"
_FRAMES_SLOT_JSON = json.dumps(_FRAMES_SLOT)


def _compact(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class _HitEncoder:
    def __init__(self, finder=None) -> None:
        self._frames: dict[tuple, str] = {}
        self._finder = finder

    def frame(self, f: Frame) -> str:
        key = tuple(f.__dict__.values())
        text = self._frames.get(key)
        if text is None:
            d = f.to_dict()
            if self._finder is not None and f.kind != "python" and not f.file:
                # Places found without DWARF (tracer.sources): definition / op / generated from.
                refs = self._finder.refs(f.function, f.library)
                if refs:
                    d["sources"] = [r.to_dict() for r in refs]
            text = self._frames[key] = _compact(d)
        return text

    def hit(self, h: Hit) -> str:
        # The hit's own fields through Hit.to_dict (its key order and optional keys), frames spliced in.
        head = dataclasses.replace(h, frames=[]).to_dict()
        head["frames"] = _FRAMES_SLOT
        frames = "[" + ",".join(self.frame(f) for f in h.frames) + "]"
        return _compact(head).replace(_FRAMES_SLOT_JSON, frames, 1)


def _array(out: list[str], items) -> None:
    """Append a JSON array, one compact item a line, to ``out`` (joined once at the end: 100 MB copies add up)."""
    first = True
    for item in items:
        out.append("[\n    " if first else ",\n    ")
        out.append(item)
        first = False
    out.append("[]" if first else "\n  ]")


def render(session: Session, finder=None) -> str:
    encoder = _HitEncoder(finder)
    hits = [encoder.hit(h) for h in session.hits]  # first: finding sources may add warnings
    info = session.info.to_dict()
    if finder is not None and finder.notes:
        info["warnings"] = list(info.get("warnings") or []) + finder.notes
    session_obj = json.dumps(info, ensure_ascii=False, indent=2).replace("\n", "\n  ")
    out = ["{\n", f'  "schema": {CONTRACT},\n', f'  "session": {session_obj},\n', '  "breakpoints": ']
    _array(out, (_compact(b.to_dict()) for b in session.breakpoints))
    out.append(',\n  "hits": ')
    _array(out, hits)
    out.append("\n}\n")
    return "".join(out)
