"""gdb started as the first act of ``pttrace run``/``attach``: its command line needs only gdb, the interpreter
and the program, so gdb starts (and imports the agent) while pttrace builds its configuration, imports the
recorder and opens the session. Everything else is checked after (launch.StartedGdb), and a refusal closes the
gdb started here: bad input still gets its one sentence and exit code 2.

This module imports little (os, subprocess and tracer.startenv): each import before gdb's start delays the target's.
The MI connection (tracer/gdb/mi.py, with dataclasses and typing) takes the process over afterwards.
"""
from __future__ import annotations

import os
import subprocess

from tracer import startenv

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tracer.gdb.mi import MiConnection

GDB_AUTO_LOAD = "/usr/share/gdb/auto-load"  # where distributions install helpers (Debian's python3.X-dbg)
# The directory that holds the ``tracer`` package: the agent is imported into gdb's Python from it.
AGENT_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# gdb set for pttrace: asynchronous MI, no pager or questions, pending breakpoints. On gdb's command line
# (each as -iex, run in order before gdb reads a file) rather than one MI command after another: the first of
# those waited for gdb's start and the agent's import before pttrace's own start-up could go on.
GDB_SETTINGS = ("set mi-async on", "set pagination off", "set confirm off", "set breakpoint pending on",
                "set print thread-events off",
                # gdb's cache over all memory, in pages, until the first hit: each library event's walk of the
                # dynamic linker's list reads a page once instead of each name 8 bytes at a time (agent/memcache.py)
                "mem 0 0 cache", "set dcache line-size 4096")


def agent_import(parent: str = AGENT_PACKAGE_PARENT) -> str:
    """The gdb command that imports the agent (it defines the ``pttrace-*`` commands); a second run of it only
    checks (the agent's own import is not repeated, a failed one raises its error again)."""
    return (f"python import sys; sys.path[:0] = [] if {parent!r} in sys.path else [{parent!r}]; "
            "import tracer.gdb.agent")


def which(name: str) -> str | None:
    """``shutil.which`` for an executable file, without importing shutil (it imports bz2 and lzma: ~3 ms before
    gdb's start)."""
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def python_gdb_helper(python: str, auto_load: str = GDB_AUTO_LOAD) -> str | None:
    """The interpreter's own ``python3.X-gdb.py``, the only script we let gdb auto-load: beside the
    executable or its libpython (pyenv, source builds), or under gdb's auto-load directory, named by
    the executable's path (Debian's ``python3.X-dbg``)."""
    import glob

    real = os.path.realpath(python)
    candidates = [real + "-gdb.py"]
    libdir = os.path.join(os.path.dirname(os.path.dirname(real)), "lib")
    candidates += sorted(glob.glob(os.path.join(glob.escape(libdir), "libpython3*.so*-gdb.py")))
    candidates.append(auto_load + real + "-gdb.py")
    for c in candidates:
        if os.path.isfile(c):
            return c
    return None


def index_cache_settings() -> list[str]:
    """DWARF indexes of debug builds are reused across runs, in pttrace's own cache directory (none when it
    cannot be made: gdb then indexes every time)."""
    index_cache = os.path.join(startenv.cache_root(), "gdb-index")
    try:
        os.makedirs(index_cache, exist_ok=True)
    except OSError:
        return []
    return [f"set index-cache directory {index_cache}", "set index-cache enabled on"]


def debug_file_settings() -> list[str]:
    """gdb looks for separate debug files in pttrace's decompressed copies first (tracer/symbols/plain_debug.py),
    then where it always does; nothing when no copy was ever made."""
    plain = os.path.join(startenv.cache_root(), "debug-files")  # plain_debug.DIRECTORY
    if ":" in plain or not os.path.isdir(plain):
        return []
    return [f"python gdb.execute('set debug-file-directory ' + {plain!r} + ':' + gdb.parameter('debug-file-directory'))"]


def gdb_argv(gdb: str, helper: str | None, program: list[str] | None) -> list[str]:
    """gdb's command line; ``program``: the launched target's argv (None when attaching)."""
    # -nx: no gdbinit from anywhere. The auto-load safe path is *replaced* by the interpreter's
    # own helper (adding to it would keep gdb's defaults, e.g. /usr/share/gdb/auto-load): no other
    # script beside any library is ever run. -iex, not -ex: it must hold before gdb reads a file.
    argv = [gdb, "-nx", "-q", "--interpreter=mi3"]
    if helper and ":" not in helper:  # the safe path is ':'-separated
        argv += ["-iex", f"set auto-load safe-path {helper}"]
    else:
        argv += ["-iex", "set auto-load safe-path /nonexistent", "-iex", "set auto-load python-scripts off"]
    for setting in (*GDB_SETTINGS, *index_cache_settings(), *debug_file_settings()):
        argv += ["-iex", setting]
    # The agent, imported as gdb starts, before it reads any MI command (launch.StartedGdb checks it came in).
    argv += ["-ex", agent_import()]
    if program is not None:
        argv += ["--args", *program]
    return argv


def start_process(argv: list[str], env: dict[str, str] | None, cwd: str | None) -> subprocess.Popen:
    """A gdb process speaking MI on its pipes, in a session of its own: a Ctrl-C in the user's terminal must
    reach pttrace, not gdb or the target."""
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=cwd, start_new_session=True)


def gdb_env() -> dict[str, str]:
    env = dict(os.environ)
    env["SHELL"] = "/bin/sh"
    env.pop("DEBUGINFOD_URLS", None)  # never fetch anything over the network
    return env


def spawn_gdb(argv: list[str], cwd: str | None) -> MiConnection:
    """gdb started: it loads while pttrace does its own start-up (its first command waits for it)."""
    from tracer.gdb.mi import MiConnection

    return MiConnection(start_process(argv, gdb_env(), cwd))


class EarlyGdb:
    """gdb started before pttrace's configuration is built (``start``): the gdb and interpreter it was started
    for, so that launch.StartedGdb takes it when the configuration asks for the same, or closes it."""

    def __init__(self, argv: list[str], proc: subprocess.Popen):
        self.argv = argv  # gdb's command line, for launch.StartedGdb to compare with what the run asks for
        self.proc = proc
        self._mi: MiConnection | None = None

    def connect(self) -> MiConnection:
        """The MI connection over the gdb started (made once)."""
        if self._mi is None:
            from tracer.gdb.mi import MiConnection

            self._mi = MiConnection(self.proc)
        return self._mi

    @classmethod
    def start(cls, gdb: str | None, python: str, program: list[str] | None, prompt: bool,
              cwd: str | None = None) -> "EarlyGdb | None":
        """gdb started for ``python`` with ``program`` after it (None: attaching); ``gdb``: ``--gdb``'s value.
        None when gdb or the interpreter is not found, or gdb cannot be started: the checks after say why,
        in the order they always did."""
        path = which(startenv.gdb_command(gdb))
        py = which(python) or python
        if path is None or not (os.path.isfile(py) and os.access(py, os.X_OK)):
            return None
        program = None if program is None else [py, *program]
        helper = python_gdb_helper(py) if prompt else None
        argv = gdb_argv(path, helper, program)
        try:
            proc = start_process(argv, gdb_env(), cwd)
        except OSError:  # arguments too long for the kernel, say: the checks after say it in a sentence
            return None
        return cls(argv, proc)

    def close(self) -> None:
        """gdb asked to exit, killed if it does not (MiConnection.close): never left behind."""
        self.connect().close()
