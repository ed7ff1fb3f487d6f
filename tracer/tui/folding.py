"""The rows of the call-path pane: frames outermost first, with noise folded into one row each.

Two kinds of run are folded unless the user unfolds them:
  start-up     every frame above the outermost Python frame (``_start``, ``Py_RunMain``, ...):
               one row that says so, and opens on Enter;
  interpreter  CPython's own C frames between Python and native code (``cfunction_call``, ...):
               no row of its own (there is one such run under nearly every Python frame), as in
               ``pttrace show``, but the frame below it counts them (``hidden``); a run that ends
               the path (a step or an interrupt stopped in the interpreter) gets its row, so that
               the innermost row says where the target is.
One key unfolds everything.
"""
from __future__ import annotations

from dataclasses import dataclass

from tracer.export.paths import is_interpreter
from tracer.session.model import Frame


@dataclass(frozen=True)
class PathRow:
    kind: str  # "frame" | "fold" | "ts" (a TorchScript line under its interpreter frame; fold: its index)
    start: int  # index of the (first) frame in the hit's frames
    end: int  # one past the last frame: a frame row has end == start + 1
    fold: str | None = None  # "start-up" | "interpreter" for a fold row
    hidden: int = 0  # a frame row: how many interpreter frames just above it are folded without a row

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.start}" + (f":{self.fold}" if self.kind == "ts" else "")


def fold_runs(frames: list[Frame]) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each run of frames that is folded by default."""
    runs: list[tuple[int, int, str]] = []
    first_python = next((i for i, f in enumerate(frames) if f.kind == "python"), None)
    i = 0
    if first_python:
        runs.append((0, first_python, "start-up"))
        i = first_python
    while i < len(frames):
        if is_interpreter(frames[i]):
            j = i
            while j < len(frames) and is_interpreter(frames[j]):
                j += 1
            runs.append((i, j, "interpreter"))
            i = j
        else:
            i += 1
    return runs


def path_rows(frames: list[Frame], unfold_all: bool = False, opened: frozenset[int] | set[int] = frozenset()
              ) -> list[PathRow]:
    """The rows to show. ``opened`` holds the start indices of folds the user opened one by one."""
    if unfold_all:
        return [PathRow("frame", i, i + 1) for i in range(len(frames))]
    rows: list[PathRow] = []
    runs = {start: (end, kind) for start, end, kind in fold_runs(frames)}
    i = 0
    hidden = 0
    while i < len(frames):
        if i in runs and i not in opened:
            end, kind = runs[i]
            if kind != "interpreter" or end == len(frames):
                rows.append(PathRow("fold", i, end, kind))
            else:
                hidden = end - i
            i = end
            continue
        rows.append(PathRow("frame", i, i + 1, hidden=hidden))
        hidden = 0
        i += 1
    return rows


def with_torchscript(rows: list[PathRow], frames: list[Frame]) -> list[PathRow]:
    """After each shown interpreter frame that ran TorchScript, a row per scripted line it ran
    (``export.paths.torchscript_rows``), interleaved as Python frames are at eval frames."""
    from tracer.export.paths import torchscript_rows

    out: list[PathRow] = []
    for row in rows:
        out.append(row)
        if row.kind == "frame" and frames[row.start].torchscript:
            n = len(torchscript_rows(frames[row.start]))
            out += [PathRow("ts", row.start, row.start + 1, fold=str(k)) for k in range(n)]
    return out


def folded_counts(rows: list[PathRow]) -> dict[str, int]:
    """How many frames each kind of fold hides, for the pane's title: every hidden frame counted."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.kind == "fold":
            counts[row.fold or "?"] = counts.get(row.fold or "?", 0) + row.end - row.start
        elif row.hidden:
            counts["interpreter"] = counts.get("interpreter", 0) + row.hidden
    return counts


def default_frame(frames: list[Frame]) -> int | None:
    """The frame to select first: the innermost one whose source we can name (a Python line, or a
    native frame with DWARF), else the innermost frame. It puts something readable in the source
    pane at once, even for a release wheel that has no line tables."""
    if not frames:
        return None
    for i in range(len(frames) - 1, -1, -1):
        f = frames[i]
        if f.file and f.line and not is_interpreter(f) and not (f.file or "").startswith("<"):
            return i
    return len(frames) - 1
