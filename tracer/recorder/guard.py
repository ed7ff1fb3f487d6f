"""Keeping an attached target alive when gdb cannot: the breakpoint instructions gdb leaves behind (in the
target and in each child of it that gdb followed: a fork child has its own copies of those pages).

gdb writes an ``int3`` (0xCC) over the first byte of every breakpoint location, its own internal ones
included (the dynamic linker's library-load hook), while the target runs. If gdb dies or hangs, the
kernel lets the target go on with those bytes in place, and its next pass over one kills it with
SIGTRAP. Every such write turned a page of a file-backed executable mapping into a private copy
(``/proc/PID/pagemap`` then no longer marks it a file page): comparing those pages with the library
file finds each byte gdb changed, and writing the file's byte back through ``/proc/PID/mem`` removes it.

Each byte is written on its own (one byte is atomic for a thread fetching it); a thread that reaches a
breakpoint between gdb's death and the repair still dies of it, and so does one that gdb was handling
at the moment it was killed: the kernel delivers the SIGTRAP gdb did not get to cancel.
"""
from __future__ import annotations

import os
import signal
import struct
from dataclasses import dataclass

from tracer.errors import PttraceError

PAGE = os.sysconf("SC_PAGE_SIZE")
INT3 = 0xCC
_ENTRY = struct.Struct("<Q")
_PRESENT = 1 << 63
_SWAPPED = 1 << 62  # a private copy swapped out
_FILE_PAGE = 1 << 61


class RepairError(PttraceError):
    """The target's memory or its mappings cannot be read or written (permissions, or it is gone)."""


@dataclass(frozen=True)
class Repair:
    """What putting an attached target back in order did."""

    restored: int  # breakpoint bytes put back
    libraries: tuple[str, ...]  # where they were
    resumed: bool  # the target was left stopped (SIGSTOP from gdb's last stop) and was continued


def _executable_file_mappings(pid: int) -> list[tuple[int, int, int, str]]:
    """(start, end, file offset, path) of the target's executable mappings of files."""
    found = []
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) < 6 or "x" not in parts[1]:
                continue
            path = parts[5].rstrip("\n")
            if not path.startswith("/") or path.endswith(" (deleted)"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            found.append((start, end, int(parts[2], 16), path))
    return found


def _copied_pages(pagemap, start: int, end: int) -> list[int]:
    """Addresses of the pages in [start, end) that are present and no longer the file's own."""
    pagemap.seek(start // PAGE * _ENTRY.size)
    data = pagemap.read((end - start) // PAGE * _ENTRY.size)
    pages = []
    for i, (entry,) in enumerate(_ENTRY.iter_unpack(data)):
        if (entry & _PRESENT and not entry & _FILE_PAGE) or entry & _SWAPPED:
            pages.append(start + i * PAGE)
    return pages


def remove_breakpoints(pid: int, resume: bool = True) -> Repair:
    """Put back every byte gdb replaced with int3 in the target's code; continue it if it was left
    stopped (unless ``resume`` is False: held for a recorder of its own). Raises RepairError when the
    target cannot be read or written."""
    restored = 0
    libraries: list[str] = []
    try:
        mappings = _executable_file_mappings(pid)
        with open(f"/proc/{pid}/pagemap", "rb") as pagemap, open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
            for start, end, offset, path in mappings:
                pages = _copied_pages(pagemap, start, end)
                if not pages:
                    continue
                try:
                    lib = open(path, "rb")
                except OSError:
                    continue  # replaced or removed since it was mapped: nothing to compare with
                with lib:
                    for page in pages:
                        mem.seek(page)
                        now = mem.read(PAGE)
                        lib.seek(offset + page - start)
                        orig = lib.read(len(now))
                        for i in range(min(len(now), len(orig))):
                            if now[i] == INT3 and orig[i] != INT3:
                                mem.seek(page + i)
                                mem.write(orig[i:i + 1])
                                restored += 1
                                if path not in libraries:
                                    libraries.append(path)
    except OSError as exc:
        raise RepairError(f"cannot repair process {pid}'s code: {exc.strerror or exc}") from None
    return Repair(restored, tuple(libraries), resumed=_continue_if_stopped(pid) if resume else False)


def leave_attached(pid: int | None, gdb_lost: bool) -> tuple[str | None, list[str]]:
    """After gdb: repair the attached target. Returns the session status this makes true (None: as it
    was) and what the session must say."""
    if not pid or not alive(pid):
        return ("target-crashed", [f"process {pid} is gone: it ended after gdb was lost"]) if gdb_lost else (None, [])
    tracer = traced_by(pid)
    if tracer:
        return None, [f"process {pid} is still traced by process {tracer}; pttrace left its code alone"]
    try:
        repair = remove_breakpoints(pid)
    except RepairError as exc:
        return None, [f"{exc.message}; breakpoints gdb inserted may still be in process {pid} and kill it "
                      "with SIGTRAP when reached"]
    messages = []
    if repair.restored:
        where = ", ".join(os.path.basename(p) for p in repair.libraries)
        messages.append(f"gdb left {repair.restored} breakpoint instruction(s) in process {pid} ({where}); "
                        "pttrace put the original bytes back" + (" and continued it" if repair.resumed else ""))
    elif repair.resumed:
        messages.append(f"process {pid} was left stopped; pttrace continued it")
    return "detached", messages


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    return process_state(pid) not in (None, "Z", "X")


def _continue_if_stopped(pid: int) -> bool:
    """gdb stops every thread with SIGSTOP at a stop; if it died then, the process is left stopped."""
    if process_state(pid) != "T":
        return False
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        return False
    return True


def process_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat (R, S, T, t, Z...), None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return None


def state_and_cpu(pid: int, tid: int | None = None) -> tuple[str, int] | None:
    """The state letter and the CPU time (user + system, in clock ticks) of a process or one of its threads."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(path) as fh:
            fields = fh.read().rsplit(")", 1)[-1].split()
        return fields[0], int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def zombie_end(pid: int) -> tuple[int | None, str | None] | None:
    """How a process that has ended but is not reaped yet (a zombie) ended: (exit code, None) or (None, the
    signal's name), read from the last field of /proc/PID/stat (Linux 3.5+: the status waitpid would
    return). None when it is not a zombie, or when the kernel would not show us the status: it shows 0
    instead to a reader that may not ptrace the process, so only a reader that may (root, or the same user
    where Yama's ptrace_scope is below 2: pttrace is an ancestor of every process its gdb holds) trusts it."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[-1].split()
        if fields[0] != "Z" or len(fields) < 50 or not _may_read_status(pid):
            return None
        status = int(fields[49])
    except (OSError, IndexError, ValueError):
        return None
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return None, signal.Signals(number).name
        except ValueError:
            return None, f"signal {number}"
    return None


def ended_whole(pid: int) -> tuple[int | None, str | None] | None:
    """``zombie_end`` of a process every thread of which has ended (a zombie leader with threads still
    running is a process that runs on): None otherwise."""
    end = zombie_end(pid)
    try:
        alone = os.listdir(f"/proc/{pid}/task") == [str(pid)]
    except OSError:
        return None
    return end if alone else None


def _may_read_status(pid: int) -> bool:
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            scope = int(fh.read())
    except (OSError, ValueError):
        scope = 0  # no Yama: the same user may
    return scope < 2 and os.stat(f"/proc/{pid}").st_uid == os.getuid()


def status_number(pid: int, field: str) -> int | None:
    """A number of /proc/PID/status (``PPid``, ``TracerPid``); None if there is no such process or field."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def traced_by(pid: int) -> int:
    return status_number(pid, "TracerPid") or 0
