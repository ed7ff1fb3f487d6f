"""The data contract (DESIGN.md section 4) as one JSON object: ``schema``, ``session``, ``breakpoints``, ``hits``.

Laid out for people and for speed: the top level is indented, each hit is one compact line. The
indenting encoder of the standard library is pure Python and several times slower than the compact
one, which matters at 10,000 hits.
"""
from __future__ import annotations

import json

from tracer.model import Session


def _compact(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _list(items: list[str]) -> str:
    if not items:
        return "[]"
    return "[\n    " + ",\n    ".join(items) + "\n  ]"


def render(session: Session) -> str:
    session_obj = json.dumps(session.info.to_dict(), ensure_ascii=False, indent=2).replace("\n", "\n  ")
    parts = [
        f'  "schema": {int(session.schema)}',
        f'  "session": {session_obj}',
        f'  "breakpoints": {_list([_compact(b.to_dict()) for b in session.breakpoints])}',
        f'  "hits": {_list([_compact(h.to_dict()) for h in session.hits])}',
    ]
    return "{\n" + ",\n".join(parts) + "\n}\n"
