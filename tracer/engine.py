"""The recorder: launches (or attaches to) a Python under gdb, sets breakpoints, and records hits.

pttrace drives gdb over MI (start, breakpoints, run, interrupt, detach, stepping); the agent
sourced into gdb records each hit straight into the session file. The engine reports what happens
as ``EngineEvent``s to a listener (the CLI summary, or the TUI), from its own threads.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tracer import records, storage
from tracer.errors import GdbDied, GdbNotFound, PermissionDenied, PttraceError, SessionError, TargetError, UsageError
from tracer.gdb.mi import GdbCommandError, MiConnection, mi_quote
from tracer.model import Session, SessionInfo

MIN_GDB = (12, 1)
PTRACE_HINT = (
    "Attaching needs the same user as the target (or root), and Yama's ptrace_scope must allow it: "
    "`sudo bash -c 'echo 0 > /proc/sys/kernel/yama/ptrace_scope'` (in a container, also --cap-add=SYS_PTRACE)."
)
AGENT_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)


@dataclass
class EngineEvent:
    kind: str  # "state" | "output" | "hit" | "breakpoints" | "stopped" | "finished" | "warning"
    data: object = None


@dataclass
class TraceConfig:
    breakpoints: list[str]
    python: str = sys.executable
    script: str | None = None
    script_args: list[str] = field(default_factory=list)
    pid: int | None = None
    session_dir: Path = Path("sessions")
    max_hits: int = 0
    timeout: float | None = None
    max_depth: int = 256
    mode: str = "record"  # "record": record and continue; "stop": stop at each hit
    forward_output: bool = True
    cwd: str | None = None
    force: bool = False
    live: bool = False  # emit "hit" events as hits are written (for the TUI)
    all_symbols: bool = False  # let gdb read every library's symbols (slow; the plain-gdb behaviour)
    layers: list[str] = field(default_factory=list)  # record only hits whose innermost frame is in these
    # Breakpoints our symbol index resolved (``--op``): {label, library, offset, function}.
    address_breakpoints: list[dict] = field(default_factory=list)
    # The target torch's DispatchKeySet numbering (``tracer.ops.key_table``), written once into the
    # session so that the raw key sets the agent records can be decoded when it is read.
    dispatch_keys: dict | None = None
    # Or the same table still being computed (a concurrent.futures.Future: asking the target's torch
    # takes ~1.3 s the first time): written into the session when it comes, before the end at the latest.
    dispatch_keys_later: Any = None
    # What was found before gdb starts that the session must say (--op: what it does not follow).
    notes: list[str] = field(default_factory=list)


def gdb_path() -> str:
    found = shutil.which(os.environ.get("PTTRACE_GDB", "gdb"))
    if not found:
        raise GdbNotFound(
            "gdb is not installed (pttrace needs gdb 12.1 or newer).",
            hint="Install it with your package manager, e.g. `sudo apt-get install gdb`.",
        )
    return found


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pttrace"


def gdb_version(path: str) -> str:
    # `gdb --version` costs ~0.1 s a run: remember its answer for this very gdb binary.
    try:
        st = os.stat(path)
        key = f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        key = None
    memo = _cache_home() / "gdb-version.json"
    first = None
    if key:
        try:
            known = json.loads(memo.read_text())
            first = known.get(key) if isinstance(known, dict) else None
        except (OSError, ValueError):
            pass
    if not isinstance(first, str):
        try:
            out = subprocess.run([path, "-nx", "--version"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GdbNotFound(f"cannot run gdb at {path}: {exc}.") from None
        first = out.splitlines()[0] if out else ""
        if key and re.search(r"(\d+)\.(\d+)", first):
            try:
                memo.parent.mkdir(parents=True, exist_ok=True)
                tmp = memo.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({key: first}))
                os.replace(tmp, memo)
            except OSError:
                pass
    m = re.search(r"(\d+)\.(\d+)", first)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_GDB:
        raise GdbNotFound(f"{path} is {first or 'not a gdb'}; pttrace needs gdb {MIN_GDB[0]}.{MIN_GDB[1]} or newer.")
    return first.strip()


GDB_AUTO_LOAD = "/usr/share/gdb/auto-load"  # where distributions install helpers (Debian's python3.X-dbg)


def python_gdb_helper(python: str, auto_load: str = GDB_AUTO_LOAD) -> str | None:
    """The interpreter's own ``python3.X-gdb.py``, the only script we let gdb auto-load: beside the
    executable or its libpython (pyenv, source builds), or under gdb's auto-load directory, named by
    the executable's path (Debian's ``python3.X-dbg``)."""
    real = os.path.realpath(python)
    candidates = [real + "-gdb.py"]
    libdir = Path(real).parent.parent / "lib"
    candidates += [str(p) for p in sorted(libdir.glob("libpython3*.so*-gdb.py"))]
    candidates.append(auto_load + real + "-gdb.py")
    for c in candidates:
        if os.path.isfile(c):
            return c
    return None


def describe_python(python: str) -> dict:
    """Version facts about the target interpreter and its torch, without importing torch."""
    code = (
        "import sys, json, importlib.util\n"
        "s = importlib.util.find_spec('torch')\n"
        "print(json.dumps({'python': sys.version.split()[0], 'executable': sys.executable,"
        " 'torch': s.origin if s else None}))\n"
    )
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise UsageError(f"--python {python} cannot be run: {exc.strerror}.") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--python {python} did not answer within 60 s.") from None
    try:
        facts = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise UsageError(f"--python {python} is not a Python interpreter.") from None
    facts["torch_version"] = facts["torch_git_version"] = None
    if facts.get("torch"):
        version_py = Path(facts["torch"]).parent / "version.py"
        try:
            text = version_py.read_text()
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
            g = re.search(r"^git_version\s*=\s*['\"]([^'\"]+)", text, re.M)
            facts["torch_version"] = m.group(1) if m else None
            facts["torch_git_version"] = g.group(1) if g else None
        except OSError:
            pass
    return facts


class Engine:
    """One traced run or attach. Use ``start()``, then ``wait()``; ``stop()`` from any thread."""

    def __init__(self, config: TraceConfig, listener: Callable[[EngineEvent], None] | None = None):
        self.config = config
        if os.environ.get("PTTRACE_ALL_SYMBOLS"):
            config.all_symbols = True  # gdb reads every library's symbols, as plain gdb does
        self.listener = listener or (lambda ev: None)
        self.mi: MiConnection | None = None
        self.session_path: Path | None = None
        self.writer: storage.SessionWriter | None = None
        self.info: SessionInfo | None = None
        self.target_pid: int | None = None
        self.status = "running"
        self.exit_code: int | None = None
        self.end_reason: str | None = None
        self._stop_requested: str | None = None
        self._interrupting = False  # interrupt() was asked for: its SIGINT stop is ours
        self._finished = threading.Event()
        self._tmp = tempfile.TemporaryDirectory(prefix="pttrace-")
        self._pty_master: int | None = None
        self._threads: list[threading.Thread] = []
        self.target_state = "starting"
        self.warnings: list[str] = []
        self._new_libs: list[str] = []
        self._loaded_libs: set[str] = set()
        self._needed_libs: set[str] | None = None
        self._heavy_libs: set[str] = set()
        self._gdb_specs: list[str] = []  # breakpoints gdb resolves by name (for libraries we skip)
        self._keys_lock = threading.Lock()
        self._keys_done = False  # the key table was written, or the session closed without it
        self._skipped_libs: set[str] = set()  # libraries loaded without their symbols
        self._index_breakpoints: list[dict] = []  # --break specs resolved by our symbol index
        self.write_error: str | None = None
        # Heavy libraries gdb gets as unwind tables only (a CFI-only copy, tracer/symbols/cfi.py)
        # instead of their symbols; their frames are named from our index (``fill`` records).
        self._started = False  # start() is done: breakpoints added from now on come from a UI
        self._cfi = False  # whether that path is on for this run
        self._cfi_libs: set[str] = set()  # libraries given to gdb that way now
        self._cfi_copies: dict[str, str | None] = {}  # library -> its copy (None: cannot be had)
        self._cfi_lock = threading.Lock()
        from tracer.fill import FrameFiller

        self._filler = FrameFiller()
        self._scan_lock = threading.Lock()
        self._scan_tail = records.Tail()

    # --- helpers --------------------------------------------------------------------------------
    def _emit(self, kind: str, data: object = None) -> None:
        try:
            self.listener(EngineEvent(kind, data))
        except Exception:
            pass

    def _warn(self, message: str) -> None:
        if message in self.warnings:
            return
        self.warnings.append(message)
        if self.writer:
            self.writer.warning(message)
        self._emit("warning", message)

    # --- start-up -------------------------------------------------------------------------------
    def _validate(self) -> dict:
        cfg = self.config
        if not cfg.breakpoints and not cfg.address_breakpoints:
            raise UsageError("give at least one breakpoint with --break SYMBOL.")
        if cfg.pid is None:
            if not cfg.script:
                raise UsageError("give the script to run, e.g. `pttrace run scripts/hello-world.py --break initModule`.")
            script = Path(cfg.script)
            if not script.exists():
                raise UsageError(f"script not found: {cfg.script}.")
            if not script.is_file() or not os.access(script, os.R_OK):
                raise UsageError(f"script is not a readable file: {cfg.script}.")
        py = shutil.which(cfg.python) or cfg.python
        if not os.path.isfile(py) or not os.access(py, os.X_OK):
            raise UsageError(f"--python {cfg.python} is not an executable file.")
        cfg.python = py
        return describe_python(py)

    def _gdb_argv(self, gdb: str, helper: str | None) -> list[str]:
        # -nx: no gdbinit from anywhere. The auto-load safe path is *replaced* by the interpreter's
        # own helper (adding to it would keep gdb's defaults, e.g. /usr/share/gdb/auto-load): no other
        # script beside any library is ever run. -iex, not -ex: it must hold before gdb reads a file.
        argv = [gdb, "-nx", "-q", "--interpreter=mi3"]
        if helper and ":" not in helper:  # the safe path is ':'-separated
            argv += ["-iex", f"set auto-load safe-path {helper}"]
        else:
            argv += ["-iex", "set auto-load safe-path /nonexistent", "-iex", "set auto-load python-scripts off"]
        if self.config.pid is None:
            argv += ["--args", self.config.python, self.config.script, *self.config.script_args]
        return argv

    def _open_pty(self) -> str:
        import termios
        import tty

        master, slave = os.openpty()
        try:
            tty.setraw(slave)
            attrs = termios.tcgetattr(slave)
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
        except termios.error:
            pass
        name = os.ttyname(slave)
        self._pty_master = master
        self._pty_slave = slave
        t = threading.Thread(target=self._pump_output, name="target-output", daemon=True)
        t.start()
        self._threads.append(t)
        return name

    def _pump_output(self) -> None:
        assert self._pty_master is not None
        while True:
            try:
                data = os.read(self._pty_master, 65536)
            except OSError:
                break
            if not data:
                break
            text = data.decode("utf-8", errors="replace")
            if self.config.forward_output:
                try:
                    sys.stdout.write(text)
                    sys.stdout.flush()
                except (OSError, ValueError):
                    pass
            self._emit("output", text)

    def start(self) -> Path:
        cfg = self.config
        facts = self._validate()
        gdb = gdb_path()
        gversion = gdb_version(gdb)
        helper = python_gdb_helper(cfg.python)
        sid = storage.new_session_id()
        self.session_path = Path(cfg.session_dir) / (sid + storage.SUFFIX)
        self.writer = storage.SessionWriter(self.session_path)
        argv = [cfg.python, cfg.script, *cfg.script_args] if cfg.pid is None else _cmdline(cfg.pid)
        self.info = SessionInfo(
            id=sid,
            mode="run" if cfg.pid is None else "attach",
            argv=argv,
            pid=cfg.pid,
            python=facts.get("python"),
            torch_version=facts.get("torch_version"),
            torch_git_version=facts.get("torch_git_version"),
            gdb_version=gversion,
            started=storage.now_iso(),
            cwd=cfg.cwd or os.getcwd(),
        )
        self.writer.header(self.info)
        if cfg.dispatch_keys:
            self.writer.dispatch_keys(cfg.dispatch_keys)
        elif cfg.dispatch_keys_later is not None:
            cfg.dispatch_keys_later.add_done_callback(self._write_key_table)
        if not helper:
            self._warn(f"no python-gdb helper beside {cfg.python}; Python frames are read by pttrace's own reader")
        for note in cfg.notes:
            self._warn(note)

        env = dict(os.environ)
        env["SHELL"] = "/bin/sh"
        env.pop("DEBUGINFOD_URLS", None)  # never fetch anything over the network
        self.mi = MiConnection(self._gdb_argv(gdb, helper), cwd=cfg.cwd, env=env)
        mi = self.mi
        try:
            mi.command("-gdb-set mi-async on")
            mi.command("-gdb-set pagination off")
            mi.command("-gdb-set confirm off")
            mi.command("-gdb-set breakpoint pending on")
            mi.command("-gdb-set print thread-events off")
            # DWARF indexes of debug builds are reused across runs, in pttrace's own cache directory.
            cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pttrace" / "gdb-index"
            try:
                cache.mkdir(parents=True, exist_ok=True)
                mi.console(f"set index-cache directory {cache}", check=False)
                mi.console("set index-cache enabled on", check=False)
            except OSError:
                pass
            # gdb 13 cannot pass an argument containing a space without a shell (it splits on
            # whitespace), so the target starts through /bin/sh, with every argument escaped by gdb
            # itself (construct_inferior_arguments); SHELL is pinned to /bin/sh in gdb's environment.
            # Named breakpoints our symbol index resolves exactly are set by address: gdb then never
            # searches libtorch_cpu.so's 650k names again at each later library load (RESULTS.md).
            self._index_breakpoints, gdb_specs = self._resolve_by_index(cfg.breakpoints)
            self._gdb_specs = list(gdb_specs)
            self._set_debug_dirs()
            if not cfg.all_symbols:
                # Read symbols only for libraries we need (DESIGN.md section 2: libtorch_cpu.so alone
                # costs gdb ~4 s). Stop at each library load to decide; a stack that passes through a
                # library we skipped makes the agent ask for it, and the hit is recorded again.
                # With the CFI path, a heavy library that only address breakpoints need (or none) is
                # given to gdb as its unwind tables: no symbols, no deferral; our index names its frames.
                self._cfi = self._cfi_wanted()
                self._needed_libs = self._libraries_for_breakpoints(gdb_specs, with_addresses=not self._cfi)
                if self._needed_libs is None:
                    self._cfi = False
                if self._cfi:
                    self._prepare_cfi_copies()
                forced = self._cfi and bool(os.environ.get("PTTRACE_CFI_LIBS"))
                if self._needed_libs is not None and (forced or not self._heavy_libs <= self._needed_libs):
                    mi.command("-gdb-set auto-solib-add off")
                    mi.command("-gdb-set stop-on-solib-events 1")
                else:
                    # Every big library is needed (or which are is unknown): gdb reads each library's
                    # symbols as it loads, as plain gdb does, without a stop and a round trip per library.
                    self._needed_libs = None
            if cfg.pid is None:
                mi.command(f"-inferior-tty-set {mi_quote(self._open_pty())}")
            mi.console(f"python import sys; sys.path.insert(0, {AGENT_PACKAGE_PARENT!r}); import tracer.gdb.agent")
            cfg_path = Path(self._tmp.name) / "agent.json"
            cfg_path.write_text(json.dumps({
                "session": str(self.session_path.resolve()),
                "mode": cfg.mode,
                "max_hits": cfg.max_hits,
                "max_depth": cfg.max_depth,
                "breakpoints": [],
                "layers": cfg.layers,
                "address_breakpoints": cfg.address_breakpoints + self._index_breakpoints,
            }))
            if cfg.pid is not None:
                self._attach(cfg.pid)
            mi.console(f"pttrace-setup {cfg_path}")
            for spec in gdb_specs:
                self.add_breakpoint(spec, fatal=True)
            if self._index_breakpoints:
                self.mi.console("pttrace-dump", check=False)
        except (PermissionDenied, UsageError):
            self._abort_startup()
            raise
        except GdbCommandError as exc:
            self._abort_startup()
            raise TargetError(str(exc)) from None
        except GdbDied:
            self._abort_startup()
            raise GdbDied("gdb exited during start-up: " + " ".join(mi.stderr_tail[-3:])) from None
        self._started = True
        if cfg.live:
            t = threading.Thread(target=self._tail_session, name="session-tail", daemon=True)
            t.start()
            self._threads.append(t)
        return self.session_path

    # --- which libraries' symbols gdb reads ---------------------------------------------------
    # Libraries at least this big are skipped unless a breakpoint (or a recorded stack) needs them.
    HEAVY_LIBRARY = 100 * 1024 * 1024

    @staticmethod
    def _index_resolvable(spec: str) -> bool:
        """A plain function name (not FILE:LINE, ``*ADDR``, an option or a condition)."""
        return bool(spec) and not spec.startswith(("*", "-")) and ":" not in spec.replace("::", "") \
            and not any(ch.isspace() for ch in spec.split("(", 1)[0]) and " if " not in spec \
            and " thread " not in spec and " task " not in spec

    def _resolve_by_index(self, specs: list[str]) -> tuple[list[dict], list[str]]:
        """Split the ``--break`` specs: those our symbol index resolves exactly become address
        breakpoints ({label, library, offset, function[, plt]}), the rest stay gdb's (pending ones).

        Exactly means: gdb would find no other function for it in a library outside torch's. So the
        spec must resolve to at least one function in torch's libraries, none of them weak (inline and
        template code that a C++ extension may hold its own copy of), and either be qualified
        (``at::_ops::add_Tensor::call``) or name only local functions (``wrapper_CPU_sigmoid``, in
        an anonymous namespace). Like gdb, ``[clone .cold]`` parts are not broken on, and ``@plt``
        stubs are listed as locations but never stopped at. Anything else, and any error: gdb's way.
        """
        if self.config.all_symbols or os.environ.get("PTTRACE_BREAK_BY_NAME"):
            return [], list(specs)
        candidates = [s for s in specs if self._index_resolvable(s.strip())]
        if not candidates:
            return [], list(specs)
        try:
            from tracer.symbols import find_symbol, torch_libraries

            libs = torch_libraries(self.config.python)
        except Exception:
            return [], list(specs)
        resolved: list[dict] = []
        by_gdb: list[str] = []
        for spec in specs:
            if spec not in candidates:
                by_gdb.append(spec)
                continue
            try:
                matches = [m for m in find_symbol(spec.strip(), libs) if m.kind == "function"]
            except Exception:
                matches = []
            bodies = [m for m in matches if not m.plt and not m.cold]
            safe = bodies and all(m.binding != "weak" for m in matches if not m.plt) and (
                "::" in spec or all(m.binding == "local" for m in matches if not m.plt))
            if not safe:
                by_gdb.append(spec)
                continue
            for m in matches:
                if m.cold:
                    continue
                item = {"label": spec, "library": m.library, "offset": m.address, "function": m.name}
                if m.plt:
                    item["plt"] = True
                resolved.append(item)
        return resolved, by_gdb

    def _libraries_for_breakpoints(self, specs: list[str] | None = None,
                                   with_addresses: bool = True) -> set[str] | None:
        """Basenames of the heavy libraries that define a breakpoint's function; None: unknown, load all.
        ``with_addresses``: address breakpoints need their library's symbols too (not on the CFI path)."""
        try:
            from tracer.symbols import libraries_defining, torch_libraries
        except ImportError:
            return None
        try:
            libs = [lib for lib in torch_libraries(self.config.python)
                    if os.path.getsize(lib) >= self.HEAVY_LIBRARY]
        except Exception:
            return None
        self._heavy_libs = {os.path.basename(lib) for lib in libs}
        needed: set[str] = {os.path.basename(b["library"])
                            for b in self.config.address_breakpoints + self._index_breakpoints
                            if not b.get("plt") and with_addresses}
        for spec in (self.config.breakpoints if specs is None else specs):
            if ":" in spec.replace("::", "") or spec.startswith("*"):
                return None  # FILE:LINE or an address: we cannot tell which library
            try:
                needed.update(os.path.basename(lib) for lib in libraries_defining(spec, libs))
            except Exception:
                return None
        return needed

    def _wants_symbols(self, path: str) -> bool:
        needed = getattr(self, "_needed_libs", None)
        if needed is None:
            return True
        base = os.path.basename(path)
        if base in needed:
            return True
        try:
            skippable = os.path.getsize(path) >= self.HEAVY_LIBRARY or (self._cfi and self._forced_cfi(path))
        except OSError:
            return True
        if not skippable:
            return True
        if base not in self._heavy_libs and self._defines_a_breakpoint(path):
            # A library of the user's own (or one PTTRACE_CFI_LIBS names) that defines a breakpoint gdb
            # resolves by name: gdb needs its symbols. Only our index can tell before gdb reads it.
            needed.add(base)
            return True
        return False

    def _defines_a_breakpoint(self, path: str) -> bool:
        """Whether a breakpoint gdb resolves by name is (or may be) a function of this library."""
        try:
            from tracer.symbols import libraries_defining

            for spec in self._gdb_specs:
                if not self._index_resolvable(spec.strip()) or libraries_defining(spec.strip(), [path]):
                    return True
            return False
        except Exception:
            return True  # cannot tell: give gdb the symbols rather than miss the breakpoint

    def _load_symbols(self, paths: list[str]) -> None:
        for path in paths:
            if path in self._loaded_libs:
                continue
            self._loaded_libs.add(path)
            self._skipped_libs.discard(path)
            self.mi.console(f"sharedlibrary {_gdb_regex_literal(path)}", timeout=300, check=False)

    def _on_solib_event(self) -> None:
        new, self._new_libs = self._new_libs, []
        wanted = [p for p in new if self._wants_symbols(p)]
        self._skipped_libs.update(p for p in new if p not in wanted)
        self._load_symbols(wanted)
        if self._cfi:
            for path in new:
                if not self._wants_symbols(path):
                    self._load_cfi(path)

    # --- the CFI path: unwind tables for gdb, names from our index ------------------------------
    def _cfi_wanted(self) -> bool:
        return not (self.config.all_symbols or os.environ.get("PTTRACE_NO_CFI") or os.environ.get("PTTRACE_ALL_SYMBOLS"))

    def _set_debug_dirs(self) -> None:
        """$PTTRACE_DEBUG_DIRS (where our index finds separate debug files) for gdb too, after its own."""
        extra = [d for d in os.environ.get("PTTRACE_DEBUG_DIRS", "").split(os.pathsep) if d]
        if not extra:
            return
        res = self.mi.console("show debug-file-directory", check=False)
        m = re.search(r'"(.*)"', "".join(res.console))
        dirs = [d for d in (m.group(1).split(os.pathsep) if m else []) if d]
        dirs += [d for d in extra if d not in dirs]
        self.mi.console("set debug-file-directory " + os.pathsep.join(dirs), check=False)

    def _heavy_paths(self) -> list[str]:
        try:
            from tracer.symbols import torch_libraries

            return [lib for lib in torch_libraries(self.config.python)
                    if os.path.getsize(lib) >= self.HEAVY_LIBRARY or self._forced_cfi(lib)]
        except Exception:
            return []

    @staticmethod
    def _forced_cfi(path: str) -> bool:
        """$PTTRACE_CFI_LIBS: basenames (':'-separated) also given to gdb as unwind tables, whatever their size."""
        names = [n for n in os.environ.get("PTTRACE_CFI_LIBS", "").split(os.pathsep) if n]
        return os.path.basename(path) in names

    def _prepare_cfi_copies(self) -> None:
        """Write (or find in the cache) the copies of torch's heavy libraries while the target starts."""
        paths = self._heavy_paths()
        if paths:
            t = threading.Thread(target=lambda: [self._cfi_copy(p) for p in paths], name="cfi-copies", daemon=True)
            t.start()

    def _cfi_copy(self, path: str) -> str | None:
        real = os.path.realpath(path)
        with self._cfi_lock:
            if real not in self._cfi_copies:
                try:
                    from tracer.symbols.cfi import cfi_copy

                    self._cfi_copies[real] = cfi_copy(real)
                except Exception as exc:
                    self._cfi_copies[real] = None
                    self._warn(f"no unwind-table copy of {os.path.basename(path)} ({exc}); gdb reads its symbols")
            return self._cfi_copies[real]

    def _load_cfi(self, path: str) -> bool:
        """Give gdb the library's CFI-only copy; if that fails, its symbols as before (or, when no
        breakpoint is in it, nothing: the agent asks for them if a stack passes through it)."""
        copy = self._cfi_copy(path)
        if copy is not None:
            req = json.dumps({"library": path, "copy": copy})
            res = self.mi.console(f"pttrace-cfi-add {req}", timeout=60, check=False)
            if not res.error:
                self._cfi_libs.add(path)
                self._loaded_libs.add(path)
                return True
            self._warn(f"gdb refused the unwind-table copy of {os.path.basename(path)} "
                       f"({res.error.strip()}); it reads its symbols")
        wanted = {os.path.basename(b["library"]) for b in self.config.address_breakpoints + self._index_breakpoints
                  if not b.get("plt")}
        if os.path.basename(path) in wanted:
            self._load_symbols([path])
        return False

    def _leave_cfi(self, spec: str) -> None:
        """A breakpoint added later that gdb resolves itself: give gdb the symbols of the libraries it
        may be defined in that gdb has now only as unwind tables, or not at all (and of those loaded later)."""
        if not self._cfi and self._needed_libs is None:
            return  # gdb reads every library's symbols already
        self._gdb_specs.append(spec)
        candidates = sorted(set(self._heavy_paths()) | self._cfi_libs | self._skipped_libs)
        try:
            from tracer.symbols import libraries_defining

            if ":" in spec.replace("::", "") or spec.startswith("*") or not self._index_resolvable(spec.strip()):
                raise ValueError(spec)
            names = {os.path.basename(p) for p in libraries_defining(spec.strip(), candidates)}
        except Exception:
            names = None  # cannot tell: every library gets its symbols
        if names is None:
            self._cfi = False
            self._needed_libs = None
        elif self._needed_libs is not None:
            self._needed_libs |= names
        for path in sorted(self._cfi_libs):
            if names is None or os.path.basename(path) in names:
                self.mi.console(f"pttrace-cfi-drop {path}", check=False)
                self._cfi_libs.discard(path)
                self._loaded_libs.discard(path)
                self._load_symbols([path])
        self._load_symbols([p for p in sorted(self._skipped_libs)
                            if names is None or os.path.basename(p) in names])

    # --- fill: names and file:line from our index for what gdb left without ---------------------
    def _fill_frames(self, frames: list) -> None:
        entries = self._filler.fill(frames)
        if entries and self.writer is not None:
            try:
                self.writer.fill(entries)
            except PttraceError:
                pass

    def _scan_session(self, emit: bool) -> None:
        """Read the records appended since the last scan: fill the new hits' frames (appending fill
        records), and, for a live UI, turn them into events."""
        from tracer.model import Breakpoint, Hit

        with self._scan_lock:
            try:
                with open(self.session_path, "rb") as fh:
                    lines = self._scan_tail.lines(fh)
            except (OSError, TypeError):
                lines = []
            for raw in lines:
                if b'"offset"' not in raw and not emit:
                    continue
                try:
                    rec = records.decode(raw)
                except records.BadRecord:
                    continue
                kind = rec.get("type")
                if kind == "hit":
                    self._fill_frames(rec.get("frames") or [])
                    if emit:
                        self._emit("hit", Hit.from_dict(rec))
                elif not emit:
                    continue
                elif kind == "breakpoint":
                    self._emit("breakpoint", Breakpoint.from_dict(rec))
                elif kind == "warning":
                    self._emit("warning", rec.get("message"))

    def _tail_session(self) -> None:
        """Turn records appended by the agent into events, so a UI sees hits as they happen (their
        frames filled from our index first)."""
        while True:
            done = self._finished.is_set()
            self._scan_session(emit=True)
            if done:
                break
            time.sleep(0.05)

    def _attach(self, pid: int) -> None:
        res = self.mi.command(f"-target-attach {int(pid)}", timeout=120, check=False)
        if res.error:
            msg = res.error
            if "not permitted" in msg or "denied" in msg.lower():
                raise PermissionDenied(f"the kernel refused to let gdb attach to process {pid} ({msg.strip()}).",
                                       hint=PTRACE_HINT)
            raise TargetError(f"gdb could not attach to process {pid}: {msg.strip()}")
        self.target_pid = pid
        self.target_state = "stopped"
        self._wait_stopped(30.0)
        # The libraries were loaded before we came: read the symbols we want now.
        self._drain_events()
        self._on_solib_event()

    def _abort_startup(self) -> None:
        """Start-up failed before anything was recorded: no gdb and no empty session left behind."""
        if self.mi:
            self.mi.close()  # gdb detaches from an attached target as it exits
        if self.writer:
            self.writer.close()
            try:
                self.session_path.unlink()
            except OSError:
                pass
            self.writer = None

    def add_breakpoint(self, spec: str, fatal: bool = False) -> None:
        assert self.mi is not None
        if not spec.strip() or any(ch in spec for ch in "\r\n\0"):
            raise UsageError(f"{spec!r} is not a breakpoint location.")
        if self._started:
            self._leave_cfi(spec)  # gdb resolves this one by name: it needs the library's symbols
        res = self.mi.console(f"pttrace-break {spec}", check=False)
        if res.error:
            why = res.error.replace("Error occurred in Python: ", "").strip().rstrip(".")
            if fatal:
                raise UsageError(f"gdb rejects the breakpoint {spec!r}: {why}.")
            self._warn(f"breakpoint {spec!r} was refused by gdb: {why}")
        self.mi.console("pttrace-dump", check=False)

    # --- running --------------------------------------------------------------------------------
    def run(self) -> str:
        """Run the target to its end (or max-hits / timeout / stop()); returns the final status."""
        assert self.mi is not None
        mi = self.mi
        deadline = time.monotonic() + self.config.timeout if self.config.timeout else None
        try:
            if self._stop_requested:
                self.end_reason = self._stop_requested
                self._finish_target(interrupt=False)
                return self._close()
            if self.config.pid is None:
                mi.command("-exec-run")
            else:
                mi.command("-exec-continue")
            self.target_state = "running"
            self._emit("state", "running")
            while True:
                if self._stop_requested:
                    self.end_reason = self._stop_requested
                    self._finish_target(interrupt=True)
                    break
                if deadline and time.monotonic() > deadline:
                    self.end_reason = "timeout"
                    self._finish_target(interrupt=True)
                    break
                ev = mi.next_event(timeout=0.1)
                if ev is None:
                    continue
                if ev.kind == "gdb-exited":
                    self._gdb_gone(ev.payload)
                    break
                if ev.kind == "notify":
                    done = self._on_notify(ev.message, ev.payload or {})
                    if done:
                        break
        except GdbDied:
            self._gdb_gone(mi.exit_code(wait=2.0))
        return self._close()

    def _gdb_gone(self, rc: int | None) -> None:
        """gdb ended under us: killed by a signal (somebody cut the run short) or died on its own."""
        if isinstance(rc, int) and rc < 0:
            self.status = "interrupted"
            self.end_reason = f"gdb was killed by signal {-rc}"
            self._warn(f"gdb was killed by signal {-rc}; hits recorded before that are kept")
        else:
            self.status = "gdb-died"
            self.end_reason = "gdb-died"

    def _on_notify(self, message: str | None, payload: dict) -> bool:
        if message == "thread-group-started":
            try:
                self.target_pid = int(payload.get("pid"))
            except (TypeError, ValueError):
                pass
            return False
        if message == "stopped":
            return self._on_stopped(payload)
        if message == "running":
            self.target_state = "running"
            self._emit("state", "running")  # after a continue, step or finish from the controller
            return False
        if message == "library-loaded":
            path = payload.get("target-name") or payload.get("id")
            if path and payload.get("symbols-loaded") != "1":
                self._new_libs.append(path)
            return False
        if message in ("breakpoint-modified", "breakpoint-created"):
            self._emit("breakpoints", payload)
        return False

    def _on_stopped(self, payload: dict) -> bool:
        reason = payload.get("reason")
        self.target_state = "stopped"
        if reason in ("exited-normally", "exited"):
            code = payload.get("exit-code")
            self.exit_code = int(code, 8) if code else 0
            self.status = "completed"
            self.end_reason = "exited"
            self.target_state = "exited"
            return True
        if reason == "exited-signalled":
            self.status = "target-crashed"
            self.end_reason = f"killed by {payload.get('signal-name')}"
            self.target_state = "exited"
            return True
        if reason == "signal-received":
            sig = payload.get("signal-name") or "signal"
            if sig in ("SIGINT", "0") and self._stop_requested:
                return False
            if sig in ("SIGINT", "0") and self._interrupting:
                # Our own interrupt(), not the target's signal: stay stopped for the controller.
                self._interrupting = False
                self._emit("stopped", payload)
                return False
            if sig in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL"):
                self._select_thread(payload)
                self.mi.console(f"pttrace-record-stop {sig}", check=False)
                self.status = "target-crashed"
                self.end_reason = f"crashed with {sig}"
                self._emit("stopped", payload)
                self._finish_target(interrupt=False)
                return True
            # Other signals belong to the target: pass them on.
            self.mi.command("-exec-continue", check=False)
            return False
        if reason == "solib-event":
            self._on_solib_event()
            self.mi.command("-exec-continue", check=False)
            return False
        if reason == "breakpoint-hit":
            status = self._agent_status()
            if status.get("write_error"):
                self.write_error = status["write_error"]
                self.end_reason = "session file unwritable"
                self._finish_target(interrupt=False)
                return True
            if status.get("need_libs"):
                # The stack passed through libraries whose symbols we skipped: load them, record again.
                self._load_symbols(status["need_libs"])
                self.mi.console("pttrace-rerecord", timeout=60, check=False)
                status = self._agent_status()
                if not status.get("stop"):
                    self.mi.command("-exec-continue", check=False)
                    return False
            self._emit("stopped", payload)
            if self.config.max_hits and self._hits_so_far() >= self.config.max_hits:
                self.end_reason = "max-hits"
                self._finish_target(interrupt=False)
                return True
            if self.config.mode == "stop":
                return False  # the controller (TUI) decides what happens next
            self.mi.command("-exec-continue", check=False)
            return False
        if reason in ("end-stepping-range", "function-finished", "location-reached"):
            self._emit("stopped", payload)
            return False
        if reason is None and not self._stop_requested:
            # A finish or step out of a frame without debug info stops with no reason: still a stop.
            self._emit("stopped", payload)
        return False

    def _select_thread(self, payload: dict) -> None:
        tid = payload.get("thread-id")
        if tid:
            self.mi.command(f"-thread-select {tid}", check=False)

    def _agent_status(self) -> dict:
        try:
            res = self.mi.console("pttrace-status", timeout=10)
            return json.loads("".join(res.console))
        except Exception:
            return {}

    def _hits_so_far(self) -> int:
        return int(self._agent_status().get("hits", 0))

    def _finish_target(self, interrupt: bool) -> None:
        """End the target's part: kill a launched target, detach from an attached one."""
        mi = self.mi
        if mi is None or not mi.alive:
            return
        try:
            if interrupt and self.target_state == "running":
                mi.command("-exec-interrupt", timeout=10, check=False)
                self._wait_stopped(5.0)
            mi.console("pttrace-dump", timeout=20, check=False)
            if self.config.pid is None:
                mi.console("kill", timeout=20, check=False)
            else:
                mi.command("-target-detach", timeout=20, check=False)
                self.status = "detached"
        except (GdbDied, GdbCommandError):
            pass
        self.target_state = "exited" if self.config.pid is None else "detached"

    def _wait_stopped(self, timeout: float) -> bool:
        """Wait for the target to stop, still taking note of other events (library loads)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ev = self.mi.next_event(timeout=0.1)
            if ev is None:
                continue
            if ev.kind == "notify" and ev.message == "stopped":
                self.target_state = "stopped"
                return True
            if ev.kind == "gdb-exited":
                return False
            if ev.kind == "notify" and ev.message != "stopped":
                self._on_notify(ev.message, ev.payload or {})
        return False

    def _drain_events(self) -> None:
        while (ev := self.mi.next_event(timeout=0.05)) is not None:
            if ev.kind == "notify" and ev.message != "stopped":
                self._on_notify(ev.message, ev.payload or {})

    # --- interactive control (stop mode); safe to call from another thread ---------------------
    def set_mode(self, mode: str) -> None:
        self.config.mode = mode
        self.mi.console(f"pttrace-mode {mode}")

    def resume(self) -> None:
        self.target_state = "running"
        self.mi.command("-exec-continue", check=False)

    def step(self) -> None:
        self._symbols_for_stepping()
        self.mi.command("-exec-step", check=False)

    def next(self) -> None:
        self._symbols_for_stepping()
        self.mi.command("-exec-next", check=False)

    def _symbols_for_stepping(self) -> None:
        """gdb steps by function bounds, which come from symbols: a library given to it as unwind
        tables only gets its symbols before the first step (and libraries loaded later get theirs)."""
        if not self._cfi_libs and not self._cfi:
            return
        self._cfi = False
        for path in sorted(self._cfi_libs):
            self.mi.console(f"pttrace-cfi-drop {path}", check=False)
            self._cfi_libs.discard(path)
            self._loaded_libs.discard(path)
            self._load_symbols([path])

    def finish(self) -> None:
        self.mi.command("-exec-finish", check=False)

    def interrupt(self) -> None:
        self._interrupting = True  # the SIGINT stop that follows is ours, not the target's
        self.mi.command("-exec-interrupt", check=False)

    def delete_breakpoint(self, spec: str) -> None:
        self.mi.console(f"pttrace-delete {spec}", check=False)
        self.mi.console("pttrace-dump", check=False)

    def snapshot(self):
        """The call path of the stopped thread, as a Hit with seq 0."""
        from tracer.model import Frame, Hit, Thread

        res = self.mi.console("pttrace-snapshot", check=False)
        text = "".join(res.console).strip()
        try:
            data = json.loads(text.splitlines()[-1])
        except (ValueError, IndexError):
            return None
        frames = data.get("frames", [])
        try:
            self._fill_frames(frames)
        except Exception:
            pass
        return Hit(seq=0, breakpoint=None, thread=Thread.from_dict(data.get("thread")), time=time.time(),
                   frames=[Frame.from_dict(f) for f in frames], truncated=bool(data.get("truncated")))

    @property
    def finished(self) -> bool:
        """The run is over: session closed, launched target killed or attached one detached."""
        return self._finished.is_set()

    def request_stop(self, reason: str = "interrupted") -> None:
        """Thread-safe: ask the run loop to end (Ctrl-C, the TUI's quit)."""
        self._stop_requested = reason

    # --- shutdown -------------------------------------------------------------------------------
    def _close(self) -> str:
        mi = self.mi
        # After a detach gdb has forgotten the target's libraries: a dump now would file every
        # location under the executable. The one _finish_target wrote before detaching stands.
        if mi is not None and mi.alive and self.target_state != "detached":
            try:
                mi.console("pttrace-dump", timeout=20, check=False)
            except (GdbDied, GdbCommandError):
                pass
        if mi is not None:
            mi.close()
        if self.config.pid is None and self.target_pid and _alive(self.target_pid):
            # gdb went away without taking the launched target with it.
            try:
                os.kill(self.target_pid, signal.SIGKILL)
            except OSError:
                pass
        if self.status == "running":
            if self.config.pid is not None and self.end_reason != "exited":
                self.status = "detached"
            else:
                self.status = "completed" if self.end_reason in ("max-hits", "exited") else "interrupted"
        if self.end_reason in ("timeout", "interrupted", "sigint", "sigterm") and self.status == "completed":
            self.status = "interrupted"
        if self.writer:
            self._settle_key_table()
            try:
                # Names for the frames recorded by library and offset that no fill record has yet.
                self._scan_session(emit=self.config.live)
            except Exception:
                pass
            try:
                self._write_suggestions()
            except Exception:
                pass
        if self.status == "gdb-died" and mi is not None and mi.stderr_tail:
            self._warn("gdb died: " + " ".join(mi.stderr_tail[-3:]))
        if self.writer:
            try:
                self.writer.end(self.status, self.exit_code, reason=self.end_reason)
            except PttraceError as exc:
                self.write_error = self.write_error or exc.message
            self.writer.close()
        if self._pty_master is not None:
            try:
                os.close(self._pty_slave)
            except OSError:
                pass
        self._finished.set()
        for t in self._threads:
            if t.name == "session-tail":
                t.join(2)
        self._emit("finished", self.status)
        self._tmp.cleanup()
        return self.status

    def _write_key_table(self, fut) -> None:
        """The target torch's DispatchKeySet numbering, as soon as it is known (dispatch_keys_later)."""
        try:
            table = fut.result()
        except Exception:
            return
        with self._keys_lock:
            if self._keys_done or not table or self.writer is None:
                return
            self._keys_done = True
            try:
                self.writer.dispatch_keys(table)
            except PttraceError:
                pass

    def _settle_key_table(self) -> None:
        """Before the end record: a run shorter than torch's import waits for the rest of it."""
        fut = self.config.dispatch_keys_later
        if fut is None:
            return
        try:
            fut.result(timeout=60)
        except Exception:
            pass
        self._write_key_table(fut)
        with self._keys_lock:
            self._keys_done = True  # nothing after the end record

    def _write_suggestions(self) -> None:
        """For breakpoints that never resolved: say so in the session, with close names."""
        try:
            session = storage.load(self.session_path)
        except Exception:
            return
        for bp in session.breakpoints:
            if any(loc.address for loc in bp.locations):
                continue
            try:
                from tracer.symbols import suggest, torch_libraries

                bp.suggestions = suggest(bp.spec, torch_libraries(self.config.python), limit=5)
            except Exception:
                bp.suggestions = []
            bp.error = "never resolved: no loaded library defines a function of that name"
            self.writer.breakpoint(bp)

    def load_session(self) -> Session:
        assert self.session_path is not None
        return storage.load(self.session_path)


def _gdb_regex_literal(path: str) -> str:
    """A regex (for gdb's ``sharedlibrary``) matching exactly this path."""
    special = set("\\.[]*^$")  # POSIX basic regex: (){}+?| are literal unless escaped
    return "^" + "".join("\\" + ch if ch in special else ch for ch in path) + "$"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []
