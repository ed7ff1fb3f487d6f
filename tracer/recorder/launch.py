"""Starting gdb and the target: finding gdb, the interpreter's facts, gdb's command line and set-up,
the pseudo-terminal the launched target writes to, and attaching to a running process."""
from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tracer.errors import GdbNotFound, PermissionDenied, TargetError, UsageError
from tracer.gdb.mi import MiConnection
from tracer.recorder.agent_link import AgentLoading
from tracer.gdb.spawn import EarlyGdb, gdb_argv, python_gdb_helper, spawn_gdb, which
from tracer.settings import Settings, cache_dir

log = logging.getLogger("pttrace.recorder")

MIN_GDB = (12, 1)
PTRACE_HINT = (
    "Attaching needs the same user as the target (or root), and Yama's ptrace_scope must allow it: "
    "`sudo bash -c 'echo 0 > /proc/sys/kernel/yama/ptrace_scope'` (in a container, also --cap-add=SYS_PTRACE)."
)


def gdb_path(settings: Settings) -> str:
    found = which(settings.gdb)
    if not found:
        raise GdbNotFound(
            f"gdb is not installed (pttrace needs gdb 12.1 or newer; looked for {settings.gdb!r}).",
            hint="Install it with your package manager, e.g. `sudo apt-get install gdb`.",
        )
    return found


def gdb_version(path: str) -> str:
    # `gdb --version` costs ~0.1 s a run: remember its answer for this very gdb binary.
    try:
        st = os.stat(path)
        key = f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        key = None
    memo = cache_dir() / "gdb-version.json"
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
            except OSError as exc:
                log.debug("cannot remember gdb's version in %s: %s", memo, exc)
    m = re.search(r"(\d+)\.(\d+)", first)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_GDB:
        raise GdbNotFound(f"{path} is {first or 'not a gdb'}; pttrace needs gdb {MIN_GDB[0]}.{MIN_GDB[1]} or newer.")
    return first.strip()


def executable(python: str) -> str:
    """``--python`` as an executable path, or one sentence why not."""
    py = which(python) or python
    if not os.path.isfile(py) or not os.access(py, os.X_OK):
        raise UsageError(f"--python {python} is not an executable file.")
    return py


# ``--break FILE:LINE`` (gdb's linespec): a C++ name has no ``:`` right before its last digits.
_FILE_LINE = re.compile(r"^(?P<file>[^:]+(?<!:)):(?P<line>[-+]?\d+)$")


def check_file_line(spec: str, cwd: str | None) -> None:
    """A ``FILE:LINE`` breakpoint that cannot exist, refused before anything starts: a line below 1, a
    path that names no file, a line past the end of a file that is there. A bare file name that is not
    here may be one the DWARF of a library names (gdb looks it up there), so it is left to gdb."""
    m = _FILE_LINE.match(spec.strip())
    if not m:
        return
    name, line = m.group("file"), int(m.group("line"))
    if line < 1:
        raise UsageError(f"--break {spec}: line numbers start at 1.")
    path = Path(cwd or ".") / name
    if not path.exists():
        if os.sep in name:
            raise UsageError(f"--break {spec}: there is no file {name}.")
        return
    if not path.is_file():
        raise UsageError(f"--break {spec}: {name} is not a file.")
    try:
        with open(path, "rb") as fh:
            lines = sum(1 for _ in fh)
    except OSError as exc:
        raise UsageError(f"--break {spec}: {name} cannot be read ({exc.strerror}).") from None
    if line > lines:
        raise UsageError(f"--break {spec}: {name} has {lines} line(s).")


def validate(config) -> str:
    """Everything that can be refused before gdb starts: the interpreter as an executable path (its
    facts, describe_python, may still refuse it)."""
    if not config.breakpoints and not config.address_breakpoints and not config.library_ops:
        raise UsageError("give at least one breakpoint with --break SYMBOL.")
    for spec in config.breakpoints:
        check_file_line(spec, config.cwd)
    if config.pid is None and config.module is None and config.code is None:
        if not config.script:
            raise UsageError("give the script to run, e.g. `pttrace run scripts/hello-world.py --break initModule`.")
        script = Path(config.script)
        if not script.exists():
            raise UsageError(f"script not found: {config.script}.")
        if not script.is_file() or not os.access(script, os.R_OK):
            raise UsageError(f"script is not a readable file: {config.script}.")
    python = executable(config.python)
    if config.pid is None:
        check_program([python, *config.program()])
    return python


def describe_python(python: str) -> dict:
    """Version facts about the target interpreter and its torch, without importing torch. pttrace's own
    interpreter (the default ``--python``) answers in-process: a child interpreter for it cost ~0.03-0.04 s of
    CPU at every run (load 11)."""
    from tracer.symbols import same_interpreter, torch_here

    if same_interpreter(python, sys.executable):
        return torch_facts({"python": sys.version.split()[0], "executable": python, "torch": torch_here()})
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
    return torch_facts(facts)


def torch_facts(facts: dict) -> dict:
    """``facts`` with the version and git commit of the torch at ``facts["torch"]`` (its version.py)."""
    facts["torch_version"] = facts["torch_git_version"] = None
    if facts.get("torch"):
        version_py = Path(facts["torch"]).parent / "version.py"
        try:
            text = version_py.read_text()
        except OSError:
            return facts
        m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
        g = re.search(r"^git_version\s*=\s*['\"]([^'\"]+)", text, re.M)
        facts["torch_version"] = m.group(1) if m else None
        facts["torch_git_version"] = g.group(1) if g else None
    return facts


# gdb 13 passes the target's arguments intact only through /bin/sh (it escapes each one itself; without
# a shell it splits its own escaped string on whitespace). Arguments of these characters need no
# escaping, so they go without any shell (`startup-with-shell off`); others go through it, as one
# `sh -c` string, which the kernel caps at MAX_ARG_STRLEN.
_PLAIN = re.compile(r"[A-Za-z0-9_./=,:+@%^-]+")
SHELL_STRING_MAX = 131072 - 64
DRAIN_LIMIT = 2.0  # s: the most a run's end waits for its last output when a survivor keeps the terminal


def needs_shell(program: list[str]) -> bool:
    return not all(_PLAIN.fullmatch(arg) for arg in program)


def check_program(program: list[str]) -> None:
    """Refuse, before anything starts, a command line gdb cannot hand to the target intact."""
    if needs_shell(program):
        # gdb's escaping: a backslash before each special character, a line break as '\n'.
        size = sum(1 + sum(3 if ch in "\n\r" else 1 if ch.isalnum() else 2 for ch in arg) for arg in program)
        if size > SHELL_STRING_MAX:
            raise UsageError(f"the script's arguments are too long for gdb to pass on ({size:,} bytes once quoted for "
                             f"its start-up shell; at most {SHELL_STRING_MAX:,} when an argument holds spaces or "
                             "shell characters): pass them in a file instead.")
        return
    size = sum(len(os.fsencode(arg)) + 1 + 8 for arg in program)
    env = sum(len(k) + len(v) + 2 + 8 for k, v in os.environ.items())
    limit = os.sysconf("SC_ARG_MAX") - env - 4096
    if size > limit:
        raise UsageError(f"the script's arguments are too long for the kernel ({size:,} bytes; at most {limit:,} "
                         "here with this environment): pass them in a file instead.")


@dataclass
class StartedGdb:
    """gdb started for a recording, the agent imported as it starts: ``start`` takes the gdb ``run``/``attach``
    started first (spawn.EarlyGdb), or makes it, before pttrace imports the recorder's parts, so that the two
    overlap."""

    python: str  # the interpreter, as an executable path (validate)
    gdb_version: str
    helper: str | None  # the interpreter's python-gdb helper gdb auto-loads
    mi: MiConnection
    agent: AgentLoading

    @classmethod
    def start(cls, cfg, prompt: bool = True, early: EarlyGdb | None = None) -> "StartedGdb":
        """Refuses bad input (``validate``), closing ``early``'s gdb then. ``prompt``: the run has a gdb prompt (the
        TUI's ``:``), where the interpreter's helper gives ``py-bt``; a headless run has none, and its gdb does not
        load the helper: pttrace reads Python frames itself (tracer/pyruntime), and compiling the helper's 71 KB
        of Python was ~0.06-0.08 s of gdb's start (load 3), which the target's start waits for."""
        try:
            python = validate(cfg)
            gdb = gdb_path(cfg.settings)
            gversion = gdb_version(gdb)
        except BaseException:
            if early is not None:
                early.close()
            raise
        helper = python_gdb_helper(python)
        program = [python, *cfg.program()] if cfg.pid is None else None
        argv = gdb_argv(gdb, helper if prompt else None, program)
        if early is not None and early.argv != argv:  # not the gdb this run asks for (never seen; kept honest)
            log.debug("the gdb started first was for %s; starting %s", early.argv, argv)
            early.close()
            early = None
        log.debug("%s %s", "started" if early is not None else "starting", " ".join(argv))
        mi = early.connect() if early is not None else spawn_gdb(argv, cfg.cwd)
        return cls(python, gversion, helper, mi, AgentLoading(mi))


def set_up_gdb(mi: MiConnection, settings: Settings) -> MiConnection:
    """Our debug directories after gdb's own (the rest of gdb's set-up is on its command line, gdb_argv)."""
    if settings.debug_dirs:
        res = mi.console("show debug-file-directory", check=False)
        m = re.search(r'"(.*)"', "".join(res.console))
        dirs = [d for d in (m.group(1).split(os.pathsep) if m else []) if d]
        dirs += [d for d in settings.debug_dirs if d not in dirs]
        mi.console("set debug-file-directory " + os.pathsep.join(dirs), check=False)
    return mi


def attach(mi: MiConnection, pid: int) -> None:
    """gdb attaches to ``pid``; a refusal becomes one sentence (with the ptrace hint when it is one)."""
    res = mi.command(f"-target-attach {int(pid)}", timeout=120, check=False)
    if res.error:
        msg = res.error
        if "not permitted" in msg or "denied" in msg.lower():
            raise PermissionDenied(f"the kernel refused to let gdb attach to process {pid} ({msg.strip()}).",
                                   hint=PTRACE_HINT)
        raise TargetError(f"gdb could not attach to process {pid}: {msg.strip()}")


class AgentDir:
    """A directory of the run's own for the agent's configuration file, made as tempfile.mkdtemp makes one (a name
    no one has, mode 0700, under $TMPDIR, else /tmp, /var/tmp or here) without importing tempfile: with shutil and
    random it was ~5 ms of the start-up the target waits for."""

    def __init__(self) -> None:
        last: OSError | None = None
        for base in (os.environ.get("TMPDIR"), "/tmp", "/var/tmp", os.getcwd()):
            if not base:
                continue
            for _ in range(100):
                path = os.path.join(base, f"pttrace-{os.urandom(6).hex()}")
                try:
                    os.mkdir(path, 0o700)
                except FileExistsError:
                    continue
                except OSError as exc:  # not writable, not there: the next place
                    last = exc
                    break
                self.path = Path(path)
                # Removed by cleanup(), else when the recorder is dropped or pttrace exits (a refused start-up
                # never reaches cleanup), as tempfile.TemporaryDirectory does.
                self._remove = weakref.finalize(self, _remove_dir, path)
                return
        raise last or FileExistsError("no directory for the agent's configuration could be made")

    def cleanup(self) -> None:
        """The directory and what the run wrote into it, gone."""
        self._remove()


def _remove_dir(path: str) -> None:
    try:
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)
    except OSError as exc:
        log.debug("cannot remove %s: %s", path, exc)


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def our_stdin() -> int | None:
    """pttrace's stdin as a file descriptor, None when there is none to give (a test harness's)."""
    try:
        return sys.stdin.fileno() if sys.stdin is not None else None
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError and a ValueError
        return None


def same_file(fd_a: int, fd_b: int) -> bool:
    """Two descriptors open on one file (``2>&1``, or both on one terminal): what is written to them keeps
    its order only if it goes through one stream."""
    try:
        a, b = os.fstat(fd_a), os.fstat(fd_b)
    except OSError:
        return True
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _raw_pty() -> tuple[int, int, str]:
    import termios
    import tty

    master, slave = os.openpty()
    try:
        tty.setraw(slave)
    except termios.error as exc:
        log.debug("the target's terminal stays cooked: %s", exc)
    return master, slave, os.ttyname(slave)


def shell_redirect_args(args: list[str], stderr_tty: str) -> str | None:
    """gdb's ``set args`` for a target run through ``/bin/sh`` whose stderr is ``stderr_tty``: each
    argument quoted for the shell; None when one holds a line break (a CLI command is one line) or bytes
    that are not UTF-8 (MI is text: gdb gets such a name intact only on its command line)."""
    import shlex

    if any("\n" in a or "\r" in a or "\0" in a for a in args):
        return None
    try:
        for a in args:
            a.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return " ".join([*(shlex.quote(a) for a in args), f"2>{shlex.quote(stderr_tty)}"])


class TargetTerminal:
    """The pseudo-terminal a launched target reads and writes, and with ``separate_stderr`` a second one
    for its stderr (still a terminal: a target that asks isatty(2) gets the answer it gets alone);
    a thread each copies what the target writes to our stdout or stderr (when ``forward``) and to
    ``on_output`` (the text and ``stdout`` or ``stderr``), another what ``stdin`` holds into it."""

    def __init__(self, forward: bool, on_output: Callable[[str, str], None], stdin: int | None = None,
                 separate_stderr: bool = False):
        self.master, self.slave, self.name = _raw_pty()
        self.err_name: str | None = None
        self._err_slave: int | None = None
        self.input = None
        if stdin is not None:
            from tracer.recorder.target_input import InputForwarder

            self.input = InputForwarder(stdin, self.master, self.slave)
        self._forward = forward
        self._on_output = on_output
        self._pumps: list[threading.Thread] = []
        self.thread = self._start_pump(self.master, "stdout", "target-output")
        if separate_stderr:
            err_master, self._err_slave, self.err_name = _raw_pty()
            self._start_pump(err_master, "stderr", "target-stderr")

    def _start_pump(self, master: int, stream: str, name: str) -> threading.Thread:
        thread = threading.Thread(target=self._pump, args=(master, stream), name=name, daemon=True)
        self._pumps.append(thread)
        thread.start()
        return thread

    def _pump(self, master: int, stream: str) -> None:
        ours = sys.stdout if stream == "stdout" else sys.stderr
        forward = self._forward
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break  # the slave side closed: the target and gdb are gone
            if not data:
                break
            text = data.decode("utf-8", errors="replace")
            if forward:
                try:
                    ours.write(text)
                    ours.flush()
                except (OSError, ValueError, AttributeError):
                    forward = False  # our stream went away: keep draining the terminal
            self._on_output(text, stream)

    def close(self) -> None:
        if self.input is not None:
            self.input.close()
        for fd in (self.slave, self._err_slave):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        self._drain()

    def _drain(self, limit: float = DRAIN_LIMIT) -> None:
        """Wait until what the target wrote last has been handed on, so that the run's end is told after
        its output: on a loaded machine the recorder's end came before the pump had read the last line
        (the TUI never showed it; pttrace could exit with it unprinted: the pump is a daemon thread). A
        pump ends at the terminal's hang-up, once every process holding it is gone, after the text the
        kernel still holds for it (not always readable yet when the last process ends: a kernel worker
        hands the terminal's buffer over). A process that outlives the run and keeps the terminal open
        is waited for no longer than ``limit``."""
        deadline = time.monotonic() + limit
        for thread in self._pumps:
            thread.join(max(0.0, deadline - time.monotonic()))
