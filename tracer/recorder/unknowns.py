"""gdb's ``0x00007fffe35eec40 in ?? () from libtorch_cpu.so`` with pttrace's name for the address.

gdb has torch's big libraries as unwind tables only (start-up time and memory), so it names none of
their functions; pttrace's own symbol index does (tracer/symbols). Its messages in the TUI (a stop, a
step's ``Run till exit from #0 ...``, a ``bt`` at the prompt) get that name where gdb wrote ``??``.
"""
from __future__ import annotations

import re

from tracer.dispatch.classify import short_name
from tracer.errors import PttraceError

_UNKNOWN = re.compile(r"(0x[0-9a-fA-F]+) in \?\? \(\)")
_MANGLED = re.compile(r"\b_Z[A-Za-z0-9_]+")


def mappings(pid: int | None) -> list[tuple[int, int, int, str]]:
    """(start, end, file offset, path) of each file mapping of process ``pid``."""
    out = []
    try:
        with open(f"/proc/{pid}/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi, int(parts[2], 16), parts[5].rstrip("\n")))
    except (OSError, ValueError):
        return []
    return out


def name_of(address: int, maps: list[tuple[int, int, int, str]]) -> str | None:
    """The short name pttrace's index gives the function holding ``address`` (None: it cannot tell)."""
    for lo, hi, offset, path in maps:
        if lo <= address < hi:
            base = min((m[0] - m[2] for m in maps if m[3] == path), default=lo - offset)
            try:
                from tracer.symbols import symbol_at

                found = symbol_at(path, address - base)
            except (PttraceError, OSError):
                return None
            return short_name(found[0].name) if found is not None else None
    return None


def name_unknowns(text: str, pid: int | None) -> str:
    """``text`` with each ``ADDR in ?? ()`` named where pttrace's index knows the address."""
    if "?? ()" not in text or not pid:
        return text
    maps = mappings(pid)

    def named(m: re.Match) -> str:
        name = name_of(int(m.group(1), 16), maps)
        return f"{m.group(1)} in {name} ()" if name else m.group(0)

    return _UNKNOWN.sub(named, text)


def demangled(text: str) -> str:
    """gdb's ``Single stepping until exit from function _ZN2at12_GLOBAL__N_1...`` (a minimal symbol's
    linkage name) with the C++ name a reader knows, short as the call path shows it."""
    if "_Z" not in text:
        return text
    from tracer.dispatch.classify import short_name
    from tracer.symbols.demangle import demangle

    def one(m: re.Match) -> str:
        try:
            full = demangle(m.group(0))
        except Exception:  # noqa: BLE001 - a name the demangler refuses stays as gdb wrote it
            return m.group(0)
        # The short name the call path shows (a boxing adapter's full name is 400 characters: gdb's
        # sentence around it scrolled out of the output pane).
        return short_name(full) or full

    return _MANGLED.sub(one, text)


def name_frame(frame: dict, pid: int | None) -> dict:
    """An MI frame (``*stopped``'s) with ``func`` from pttrace's index where gdb gave none."""
    if frame.get("func") not in (None, "??") or not frame.get("addr") or not pid:
        return frame
    try:
        name = name_of(int(str(frame["addr"]), 16), mappings(pid))
    except ValueError:
        return frame
    return dict(frame, func=name) if name else frame
