"""Helper programs a traced program runs that are not Python (a compiler, ``openssl``): one line each.

torch.compile alone starts ``g++`` four times and ``openssl`` once on a warm cache (measured on the 2.13
wheel); each is a process pttrace lets go at its exec, with a warning. Listed one by one they bury what
matters, so every view shows them folded by program: ``g++: 4 processes (pids …)``. The session file
keeps every warning and process record as written; folding is what views do with them. A Python child
that is not followed is another warning, which stays as it is.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

# What tracer/recorder/exec_hold.py writes for a process that executed another program (and nothing
# after "traced": a raw exec system call adds why, which is kept as its own warning).
_NOT_PYTHON = re.compile(r"process (\d+) executes (.*), not Python: it is not traced")
_EXEC_OF = "exec of "
# tracer/recorder/tailer.py's unnamed_warning, as a child's recorder told it too ("process N: …"): said once a
# session, by the first process that met the library (its count is that process's first call path).
_UNNAMED = re.compile(r"(?:process \d+: )?frames (?:in (.+?) have no function name |outside every file )")


@dataclass
class HelperProgram:
    """The processes that executed one program pttrace did not trace, in the order they ran."""

    program: str
    pids: list[int] = field(default_factory=list)

    def describe(self, limit: int = 8) -> str:
        shown = ", ".join(str(p) for p in self.pids[:limit]) + (", …" if len(self.pids) > limit else "")
        n = len(self.pids)
        return (f"{self.program}: {n} process{'es' if n != 1 else ''} executed it, not Python: "
                f"not traced (pid{'s' if n != 1 else ''} {shown})")


def program_name(command: str) -> str:
    """``g++ --version`` -> ``g++``; ``/usr/bin/openssl sha512 x`` -> ``openssl``."""
    first = command.split(" ", 1)[0]
    return os.path.basename(first) or first


def fold_warnings(warnings: Sequence[str]) -> list[str]:
    """The warnings with every "process N executes P …, not Python" folded into one line per program,
    where the first of them was, and one unnamed-frames warning per library (the first); all others unchanged
    and in order."""
    programs: dict[str, HelperProgram] = {}
    unnamed: set[str] = set()
    out: list[str | HelperProgram] = []
    for w in warnings:
        u = _UNNAMED.match(w)
        if u is not None:
            if (u.group(1) or "") in unnamed:
                continue
            unnamed.add(u.group(1) or "")
        m = _NOT_PYTHON.fullmatch(w)
        if m is None:
            out.append(w)
            continue
        name = program_name(m.group(2))
        helper = programs.get(name)
        if helper is None:
            helper = programs[name] = HelperProgram(name)
            out.append(helper)
        helper.pids.append(int(m.group(1)))
    return [w.describe() if isinstance(w, HelperProgram) else w for w in out]


def is_helper(process, pids_with_hits: Iterable[int | None] = ()) -> bool:
    """A process pttrace let go at its exec of a program that is not Python, with no hit of its own."""
    return (getattr(process, "state", None) == "detached" and (process.detached or "").startswith(_EXEC_OF)
            and not process.session and process.pid not in set(pids_with_hits))


def helper_programs(processes: Sequence, pids_with_hits: Iterable[int | None] = ()) -> list[HelperProgram]:
    """The helper processes (``is_helper``) by program, in the order each program first ran."""
    with_hits = set(pids_with_hits)
    programs: dict[str, HelperProgram] = {}
    for p in processes:
        if is_helper(p, with_hits):
            name = program_name(p.argv[0]) if p.argv else program_name((p.detached or "")[len(_EXEC_OF):])
            programs.setdefault(name, HelperProgram(name)).pids.append(p.pid)
    return list(programs.values())
