"""pttrace's switches: one frozen object, built once from the environment and the command line.

Every ``PTTRACE_*`` variable is read here and nowhere else (the agent inside gdb gets its part in
its configuration file), but for the two gdb's start needs before this module is imported (tracer/startenv.py). ``current()`` is what library code asks; the CLI installs the object it built
from its flags with ``install()``, so a flag always wins over the variable of the same switch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from collections.abc import Mapping  # not typing's: `pttrace where` would import typing for it

from tracer.startenv import cache_root, gdb_command  # noqa: F401 (gdb's start reads them before the settings)

TYPE_CHECKING = False  # not typing's (see above); mypy still reads the block
if TYPE_CHECKING:
    from pathlib import Path

# pathlib is imported where a Path is made, not here: with it come urllib.parse and ipaddress (~5 ms of a warm
# `pttrace where`, which needs no Path: it asks ``source_dir()``, ``debug_dirs()`` and ``cache_root()``).


def _path(text: str) -> Path:
    from pathlib import Path

    return Path(text)


def _sessions() -> Path:
    return _path("sessions")


_DEBUG_DIRS, _SOURCE_DIR = "PTTRACE_DEBUG_DIRS", "PTTRACE_SOURCE_DIR"


def _flag(env: Mapping[str, str], name: str) -> bool:
    return bool(env.get(name))


def _paths(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(p for p in env.get(name, "").split(os.pathsep) if p)


@dataclass(frozen=True)
class Settings:
    """pttrace's switches for one run: the environment's values, the command line's flags over them."""

    gdb: str = "gdb"
    """The gdb to run (``--gdb``, ``$PTTRACE_GDB``): a name looked up on PATH or a path; 12.1 or newer."""

    session_dir: Path = field(default_factory=_sessions)
    """Where sessions are written and looked up (``--session-dir``, ``$PTTRACE_SESSION_DIR``)."""

    all_symbols: bool = False
    """gdb reads every library's symbols as it loads, as plain gdb does (``--all-symbols``,
    ``$PTTRACE_ALL_SYMBOLS``): slow with libtorch; also turns the CFI path and index breakpoints off."""

    cfi: bool = True
    """Heavy libraries no breakpoint is in go to gdb as unwind tables only, their frames named from our
    index (off: ``--no-cfi``, ``$PTTRACE_NO_CFI=1``)."""

    cfi_libs: tuple[str, ...] = ()
    """Library basenames also given to gdb as unwind tables, whatever their size (``--cfi-lib``,
    ``$PTTRACE_CFI_LIBS=a.so:b.so``)."""

    break_by_name: bool = False
    """Every ``--break`` goes to gdb by name, none is set by address from our index
    (``--break-by-name``, ``$PTTRACE_BREAK_BY_NAME=1``): to compare with gdb's own resolution."""

    debug_dirs: tuple[str, ...] = ()
    """Roots of separate debug files, searched before /usr/lib/debug, by our index and by gdb
    (``--debug-dir``, ``$PTTRACE_DEBUG_DIRS=dir1:dir2``)."""

    stack_reuse: bool = True
    """The agent reuses a hit's native stack while every return address is in its slot
    (off: ``$PTTRACE_NO_STACK_REUSE=1``, every hit walks the whole stack)."""

    repeat: bool = True
    """The agent records an exact repeat of the hit before without redoing its work (tracer/gdb/agent/repeat.py;
    off: ``$PTTRACE_NO_REPEAT=1``, every hit takes the usual path: the reference of the tests)."""

    arguments: bool = True
    """The agent reads each hit's arguments at the function's entry (off: ``$PTTRACE_NO_ARGS=1``, hits record
    their frames only; for benchmarks: a hit with values against one without)."""

    stack_reuse_stats: str | None = None
    """A file the agent writes its stack-reuse counters to at the end (``$PTTRACE_STACK_REUSE_STATS``;
    for tests and benchmarks)."""

    source_dir: str | None = None
    """A source checkout of torch (or of one's own code) to read frames' sources from
    (``--source-dir``; ``$PTTRACE_SOURCE_DIR``)."""

    verbose: bool = False
    """Log what the recorder asks gdb and why it stops, on stderr (``--verbose``)."""

    log_file: Path | None = None
    """Write that log to this file too, whatever ``verbose`` says, and the agent's inside gdb with it
    (``--log FILE``)."""

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None, **flags) -> "Settings":
        """The environment's values, then the command line's flags (those not None) over them."""
        env = os.environ if env is None else env
        built = cls(
            gdb=gdb_command(None, env),
            session_dir=_path(env.get("PTTRACE_SESSION_DIR") or "sessions"),
            all_symbols=_flag(env, "PTTRACE_ALL_SYMBOLS"),
            cfi=not _flag(env, "PTTRACE_NO_CFI"),
            cfi_libs=_paths(env, "PTTRACE_CFI_LIBS"),
            break_by_name=_flag(env, "PTTRACE_BREAK_BY_NAME"),
            debug_dirs=_paths(env, _DEBUG_DIRS),
            stack_reuse=env.get("PTTRACE_NO_STACK_REUSE") != "1",
            repeat=env.get("PTTRACE_NO_REPEAT") != "1",
            stack_reuse_stats=env.get("PTTRACE_STACK_REUSE_STATS") or None,
            arguments=not _flag(env, "PTTRACE_NO_ARGS"),
            source_dir=env.get(_SOURCE_DIR) or None,
        )
        given = {k: v for k, v in flags.items() if v is not None}
        return replace(built, **given) if given else built

    @property
    def use_cfi(self) -> bool:
        return self.cfi and not self.all_symbols


_installed: Settings | None = None


def install(settings: Settings | None) -> None:
    """The command line's settings, for every module that asks ``current()`` from now on (None: the
    environment's again)."""
    global _installed
    _installed = settings


def current() -> Settings:
    """The installed settings; without any (library use, tests), the environment's, read afresh."""
    return _installed if _installed is not None else Settings.from_environment()


def source_dir() -> str | None:
    """``current().source_dir``, without building the settings (and their Paths) when none are installed."""
    return _installed.source_dir if _installed is not None else os.environ.get(_SOURCE_DIR) or None


def debug_dirs() -> tuple[str, ...]:
    """``current().debug_dirs``, likewise."""
    return _installed.debug_dirs if _installed is not None else _paths(os.environ, _DEBUG_DIRS)


def cache_dir() -> Path:
    """``cache_root()`` as a Path."""
    return _path(cache_root())


def write_cache_file(path: Path, text: str, prefix: str) -> None:
    """Writes a cache file whole or not at all (a reader never sees half of it); a cache that cannot be
    written is only slower next time, so an OSError is dropped."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        pass


def write_cache_bytes(path: str, data: bytes, prefix: str) -> None:
    """``write_cache_file`` for bytes at a path given as a string (no pathlib: a warm `where` writes none, a
    cold one may)."""
    import tempfile

    try:
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=prefix)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
