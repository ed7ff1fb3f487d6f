"""speedscope's own file format (https://www.speedscope.app/file-format-schema.json): one sampled
profile per process and thread, as py-spy and Austin write theirs.

A hit is a sample of weight 1, in the order it was recorded (speedscope's "Time Order" view shows the
hits as they came); consecutive hits of one thread with the same call path are one sample of their
count, so a million hits of a hot loop stay small. Frames are shared by every profile, named as the
folded format names them (``function (path:line)`` for Python, the short name for native code), with
``file`` and ``line`` where the frame has them.
"""
from __future__ import annotations

import json

from tracer import __version__
from tracer.export import paths as P
from tracer.session.hit_table import HitTable
from tracer.session.model import Frame, Hit, Session

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


class _Profile:
    def __init__(self, name: str) -> None:
        self.name = name
        self.samples: list[list[int]] = []
        self.weights: list[int] = []

    def add(self, stack: list[int]) -> None:
        if self.samples and (self.samples[-1] is stack or self.samples[-1] == stack):
            self.weights[-1] += 1
            return
        self.samples.append(stack)
        self.weights.append(1)

    def to_dict(self) -> dict:
        total = sum(self.weights)
        return {"type": "sampled", "name": self.name, "unit": "none", "startValue": 0, "endValue": total,
                "samples": self.samples, "weights": self.weights}


class _Frames:
    """speedscope's shared frame table, one entry per distinct (name, file, line)."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.items: list[dict] = []
        self._index: dict[tuple, int] = {}
        self._stacks: dict[tuple[int, bool], list[int]] = {}

    def frame(self, f: Frame) -> int:
        name = " ".join(P.frame_label(f, self.cwd).split()) or "?"
        file = P.display_path(f.file, self.cwd) if f.file else None
        key = (name, file, f.line)
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self.items)
            item: dict = {"name": name}
            if file:
                item["file"] = file
                if f.line:
                    item["line"] = f.line
            self.items.append(item)
        return index

    def stack(self, frames: list[Frame], all_frames: bool) -> list[int]:
        """Outermost first, as speedscope's sampled profiles want them; computed once per frame list."""
        key = (id(frames), all_frames)
        stack = self._stacks.get(key)
        if stack is None:
            stack = self._stacks[key] = [self.frame(f) for f in P.visible_frames(frames, all_frames)]
        return stack


def _profile_name(session: Session, hit: Hit) -> tuple[tuple, str]:
    t = hit.thread
    thread = f"thread {t.id}" if t.id is not None else "thread ?"
    if t.names:
        thread += f" ({t.names})"
    pid = t.pid if t.pid is not None else session.info.pid
    process = session.process(t.pid) if t.pid is not None else None
    label = process.label if process is not None else (f"pid {pid}" if pid is not None else "process")
    return (pid, t.id, t.lwp), f"{label} · {thread}"


def document(session: Session, all_frames: bool = False) -> dict:
    frames = _Frames(session.info.cwd)
    profiles: dict[tuple, _Profile] = {}
    hits = session.hits if isinstance(session.hits, HitTable) else HitTable(session.hits)
    for hit in hits:
        key, name = _profile_name(session, hit)
        profile = profiles.get(key)
        if profile is None:
            profile = profiles[key] = _Profile(name)
        profile.add(frames.stack(hit.frames, all_frames))
    info = session.info
    title = " ".join(info.argv) if info.argv else f"pttrace session {info.id}"
    return {"$schema": SCHEMA, "shared": {"frames": frames.items},
            "profiles": [p.to_dict() for p in profiles.values()],
            "name": f"pttrace: {title}", "activeProfileIndex": 0, "exporter": f"pttrace {__version__}"}


def render(session: Session, all_frames: bool = False) -> str:
    return json.dumps(document(session, all_frames), separators=(",", ":")) + "\n"
