"""The TUI's gdb prompt: a line the user types runs in gdb, in the thread and frame selected in the TUI.

The line goes through MI as ``-interpreter-exec --thread G --frame L console "LINE"``, so gdb runs it as
its console would, in that thread and frame, and everything it prints comes back with its answer. The
TUI's call path is pttrace's (each eval frame replaced by the Python frames it runs); ``frame_levels``
maps its rows to gdb's frame levels and ``GdbPrompt`` checks the mapping against gdb's own stack before
it uses it: a row that is not in the stopped thread's stack now is refused, never run in another frame.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from tracer.gdb.mi import GdbCommandError, MiConnection, mi_quote
from tracer.session.model import Frame

EVAL_FRAME = "_PyEval_EvalFrameDefault"
MAX_LEVELS = 4096  # gdb's stack listed to check a mapping: deeper than any real call path kept
COMPLETIONS = 200  # gdb's own default max-completions

# Commands that would end, replace or take over the target, or read gdb's standard input (the MI pipe):
# each with what to do instead. gdb accepts unique prefixes; these are the spellings that reach them.
_REFUSED = {
    ("quit", "q", "exit"): "q quits pttrace (it asks before it kills a launched target)",
    ("kill", "k"): "q quits pttrace and ends the target",
    ("detach",): "q detaches from an attached target",
    ("run", "r", "start", "starti", "attach", "file", "exec-file", "core-file", "target", "disconnect"):
        "pttrace runs one target from start to end; start a new `pttrace run` for another",
    ("shell", "!", "pipe", "|", "python-interactive", "pi", "edit", "tui", "interrupt"):
        "it would read gdb's standard input, which is pttrace's MI connection",
    ("break", "b", "br", "tbreak", "tb", "rbreak", "delete", "d", "clear"):
        "pttrace records its breakpoints itself: b adds one, x removes the selected one",
}
# Commands that let the target run until it stops again: only the stopped process runs (as s/n/f).
_RESUMING = ("step", "s", "next", "n", "finish", "fin", "stepi", "si", "nexti", "ni", "until", "u",
             "advance", "jump", "j", "signal", "return")
_CONTINUING = ("continue", "c", "cont", "fg")
_ABBREVIATIONS = {"ste": "step", "nex": "next", "fini": "finish", "finis": "finish", "unt": "until",
                  "unti": "until", "adv": "advance", "adva": "advance", "ju": "jump", "jum": "jump",
                  "conti": "continue", "contin": "continue", "continu": "continue", "sta": "start",
                  "star": "start", "ki": "kill", "kil": "kill", "qui": "quit", "qu": "quit", "det": "detach",
                  "deta": "detach", "detac": "detach", "bre": "break", "brea": "break", "del": "delete",
                  "dele": "delete", "delet": "delete", "tbr": "tbreak", "tbre": "tbreak", "tbrea": "tbreak",
                  "rb": "rbreak", "she": "shell", "shel": "shell", "att": "attach", "atta": "attach",
                  "attac": "attach", "ru": "run"}
_WORD = re.compile(r"\s*([A-Za-z][\w-]*|[!|])")


@dataclass(frozen=True)
class Kind:
    """What a prompt line is to pttrace: ``plain`` (gdb answers, the target stays stopped), ``resuming``
    (the stopped process runs until it stops again), ``continuing`` (every process goes on) or
    ``refused`` (``why`` says what to do instead)."""

    name: str
    why: str = ""


def command_word(line: str) -> str:
    m = _WORD.match(line)
    word = m.group(1) if m else ""
    return _ABBREVIATIONS.get(word, word)


PTTRACE_COMMANDS = {"tensor": "pttrace-tensor"}  # pttrace's own commands at the prompt, as the agent names them


def as_gdb_line(line: str) -> str:
    """``tensor EXPR`` -> ``pttrace-tensor EXPR``: pttrace's commands go to the agent's gdb commands."""
    word = command_word(line)
    if word in PTTRACE_COMMANDS:
        return PTTRACE_COMMANDS[word] + line.strip()[len(word):]
    return line


def classify(line: str) -> Kind:
    """A pure function of the typed line (tests: tests/unit/test_prompt.py)."""
    word = command_word(line)
    if not word:
        return Kind("plain")
    for words, why in _REFUSED.items():
        if word in words:
            return Kind("refused", f"`{word}` is not run at pttrace's prompt: {why}")
    if word in _RESUMING:
        return Kind("resuming")
    if word in _CONTINUING:
        return Kind("continuing")
    return Kind("plain")


def runs_code(line: str) -> bool:
    """Whether the line may call a function of the target (``call f()``, ``print x.dump()``)."""
    word = command_word(line)
    return word == "call" or (word in ("print", "p", "output", "printf", "inspect") and "(" in line)


_NO_FUNCTION = ("Cannot evaluate function -- may be inlined", "No symbol ")


def needs_symbols(error: str | None) -> bool:
    """gdb could not find a function or name: the symbols of a library it has as unwind tables only may
    have it (``call a.print()``, ``call ((c10::IValue *) p)->dump()``)."""
    return error is not None and error.startswith(_NO_FUNCTION)


def frame_levels(frames: Sequence[Frame]) -> list[int]:
    """gdb's frame level of each frame of a call path (outermost first, as a Hit keeps them).

    Each native frame is one gdb frame (inlined frames are frames of their own in gdb too); a run of
    Python frames is the one ``_PyEval_EvalFrameDefault`` frame that ran them (an eval frame runs a whole
    chain of Python-to-Python calls in 3.11+, and eval frames are always separated by native frames:
    ``_PyEval_Vector``, ``cfunction_call``, ...)."""
    levels = [0] * len(frames)
    level = -1
    previous_python = False
    for i in range(len(frames) - 1, -1, -1):
        python = frames[i].kind == "python"
        if not (python and previous_python):
            level += 1
        levels[i] = level
        previous_python = python
    return levels


@dataclass(frozen=True)
class Place:
    """Where a prompt line runs: the selected hit's thread and frame (``index`` into ``frames``)."""

    lwp: int | None
    frames: tuple[Frame, ...] = ()
    index: int | None = None


@dataclass(frozen=True)
class Answer:
    """What gdb printed for a line (console and error streams in order of kind), and where it ran;
    ``moved_to``: the frame level an ``up``/``down``/``frame N`` selected (the TUI selects its row)."""

    text: str
    error: str | None
    where: str
    moved_to: int | None = None


# gdb 13 says this when one of pttrace's own breakpoints is passed during a `call` after the breakpoint's
# locations were made again (the symbols of a library given to gdb: control.gdb_line): its numbering of
# the locations, nothing the user typed or can act on. Seen in the middle of an IValue::dump()'s lines.
_GDB_BOOKKEEPING = re.compile(r"^warning: location number not found for breakpoint \d+ address 0x[0-9a-f]+\.\n?",
                              re.M)
_MOVES = ("up", "down", "frame", "f", "select-frame")
_FRAME_LINE = re.compile(r"#(\d+)\s")


def moved_to(line: str, text: str) -> int | None:
    """The level gdb says it selected (``#3  0x... in f () at x.c:4``) after a frame-moving line."""
    if command_word(line) not in _MOVES:
        return None
    m = _FRAME_LINE.match(text)
    return int(m.group(1)) if m else None


def row_of_level(frames: Sequence[Frame], level: int) -> int | None:
    """The frame index (outermost first) shown for gdb's ``level``: the innermost of an eval frame's
    Python frames, the one the user would read first."""
    found = [i for i, lv in enumerate(frame_levels(frames)) if lv == level]
    return found[-1] if found else None


@dataclass(frozen=True)
class ThreadRow:
    """One thread as gdb lists it (``-thread-info``): gdb's id, its LWP, name, state, innermost frame."""

    id: str
    lwp: int | None
    name: str
    state: str
    frame: str
    current: bool = False


def thread_rows(payload: dict) -> list[ThreadRow]:
    """``-thread-info``'s answer as rows (a pure function: tests/unit/test_prompt.py)."""
    rows = []
    current = str(payload.get("current-thread-id") or "")
    for t in payload.get("threads") or []:
        m = re.search(r"LWP (\d+)", str(t.get("target-id") or ""))
        f = t.get("frame") if isinstance(t.get("frame"), dict) else {}
        where = str(f.get("func") or "??")
        if where == "??" and f.get("addr"):
            where = f"{f['addr']} in ?? ()"  # as gdb writes it: unknowns.name_unknowns names it
        if f.get("file") and f.get("line"):
            where += f" at {f['file']}:{f['line']}"
        elif f.get("from"):
            where += f" from {str(f['from']).rsplit('/', 1)[-1]}"
        rows.append(ThreadRow(str(t.get("id")), int(m.group(1)) if m else None, str(t.get("name") or ""),
                              str(t.get("state") or "?"), where, str(t.get("id")) == current))
    return rows


@dataclass(frozen=True)
class GdbFrame:
    level: int
    address: int | None
    function: str


def _int(text) -> int | None:
    try:
        return int(str(text), 0)
    except (TypeError, ValueError):
        return None


class GdbPrompt:
    """Runs prompt lines and completions over the MI connection; handed only the connection."""

    def __init__(self, mi: MiConnection):
        self._mi = mi

    # --- where --------------------------------------------------------------------------------
    def thread_of(self, lwp: int | None) -> tuple[str | None, str]:
        """gdb's global thread id of ``lwp`` (None: gdb's selected thread) and its name for messages."""
        res = self._mi.command("-thread-info", check=False)
        threads = (res.payload or {}).get("threads") or []
        for t in threads:
            m = re.search(r"LWP (\d+)", str(t.get("target-id") or ""))
            if lwp is not None and m and int(m.group(1)) == lwp:
                return str(t.get("id")), f"thread {t.get('id')} (LWP {lwp})"
        if lwp is not None:
            raise GdbCommandError(f"thread LWP {lwp} is not in the target any more")
        current = (res.payload or {}).get("current-thread-id")
        return (str(current) if current else None), f"thread {current}"

    def stack(self, thread: str | None) -> list[GdbFrame]:
        where = f"--thread {thread} " if thread else ""
        res = self._mi.command(f"-stack-list-frames {where}0 {MAX_LEVELS - 1}", check=False)
        rows = (res.payload or {}).get("stack") or []
        out = []
        for row in rows:
            f = row.get("frame", row) if isinstance(row, dict) else {}
            level = _int(f.get("level"))
            if level is not None:
                out.append(GdbFrame(level, _int(f.get("addr")), str(f.get("func") or "??")))
        return out

    def level_of(self, place: Place, stack: list[GdbFrame]) -> int:
        """The gdb level of the selected frame, checked against gdb's stack; ``GdbCommandError`` when
        the selected frame is not in it (a hit of the past, a thread that has moved since)."""
        if place.index is None or not place.frames:
            return 0
        frame = place.frames[place.index]
        want = frame_levels(place.frames)[place.index]
        by_level = {f.level: f for f in stack}

        def fits(level: int) -> bool:
            g = by_level.get(level)
            if g is None:
                return False
            if frame.kind == "python":
                return EVAL_FRAME in g.function
            return frame.address is None or g.address == frame.address

        if fits(want):
            return want
        # Frames pttrace left out (a stack cut at --max-depth keeps the innermost) or an eval frame shown
        # as itself: the nearest level that fits, looked for outwards from the innermost frames' match.
        if frame.kind != "python" and frame.address is not None:
            near = sorted((f.level for f in stack if f.address == frame.address), key=lambda lv: abs(lv - want))
            if near:
                return near[0]
        raise GdbCommandError("the selected frame is not in the stopped thread's stack now (a hit of the "
                              "past?): select where the target stopped, or a frame of it")

    def locate(self, place: Place) -> tuple[str | None, int, str]:
        thread, name = self.thread_of(place.lwp)
        level = self.level_of(place, self.stack(thread)) if place.index is not None else 0
        return thread, level, f"{name}, frame #{level}"

    # --- running ------------------------------------------------------------------------------
    def run(self, line: str, place: Place, timeout: float = 600.0,
            before: Callable[[], object] | None = None) -> Answer:
        """Run ``line`` in gdb at ``place``; ``before`` runs once the place is found (resuming commands
        set the processes that may run). A call into the target may take long: ``timeout`` is generous."""
        thread, level, where = self.locate(place)
        if before is not None:
            before()
        opts = (f"--thread {thread} " if thread else "") + f"--frame {level} "
        res = self._mi.command(f"-interpreter-exec {opts}console {mi_quote(line)}", timeout=timeout, check=False)
        noise = {line.strip(), (res.error or "").strip()}  # the line echoed, the error said twice
        text = "".join(res.console) + "".join(x for x in res.log if x.strip() not in noise)
        text = _GDB_BOOKKEEPING.sub("", text).rstrip("\n")
        return Answer(text, res.error, where, None if res.error else moved_to(line, text))

    def threads(self) -> list[ThreadRow]:
        return thread_rows(self._mi.command("-thread-info", check=False).payload or {})

    def complete(self, text: str) -> list[str]:
        """gdb's completions of a whole command line (``-complete``), each a whole line."""
        res = self._mi.command(f"-complete {mi_quote(text)}", timeout=30, check=False)
        payload = res.payload or {}
        matches = [str(m) for m in payload.get("matches") or []]
        if not matches and payload.get("completion"):
            matches = [str(payload["completion"])]
        return matches[:COMPLETIONS]
