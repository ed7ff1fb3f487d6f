"""What gdb's start reads from the environment: which gdb, and pttrace's cache directory (for gdb's index cache).
gdb starts before pttrace builds its settings (tracer/gdb/spawn.py), and tracer/settings.py, which every other
``PTTRACE_*`` read is in, takes these two from here: importing it (a dataclass, so the dataclasses module with
inspect and ast) was ~20% of pttrace's work before gdb's start.
"""
from __future__ import annotations

import os
from collections.abc import Mapping


def gdb_command(flag: str | None, env: Mapping[str, str] | None = None) -> str:
    """The gdb to run: ``--gdb``'s value, else ``$PTTRACE_GDB``, else gdb."""
    return flag or (os.environ if env is None else env).get("PTTRACE_GDB") or "gdb"


def cache_root() -> str:
    """pttrace's cache: ``$XDG_CACHE_HOME/pttrace``, default ``~/.cache/pttrace``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pttrace")
