"""Collapsed stacks (``frame;frame;frame count``), the input of flamegraph.pl and speedscope.

One line per distinct stack, outermost frame first. Python frames are named
``function (path:line)``, native frames by their short name; ``;`` and line breaks, which would
split a frame, are replaced.
"""
from __future__ import annotations

from tracer.export import paths as P
from tracer.session.model import Session


def _clean(name: str) -> str:
    return " ".join(name.replace(";", ",").split())


def lines(session: Session, all_frames: bool = False) -> list[str]:
    counts: dict[str, int] = {}
    cwd = session.info.cwd
    for path in P.group(session.hits, all_frames):
        stack = ";".join(_clean(P.frame_label(f, cwd)) for f in path.frames) or "(no frames)"
        # Different keys can print the same (two overloads with one short name): add them up.
        counts[stack] = counts.get(stack, 0) + path.count
    return [f"{stack} {count}" for stack, count in counts.items()]


def render(session: Session, all_frames: bool = False) -> str:
    out = lines(session, all_frames)
    return "\n".join(out) + "\n" if out else ""
