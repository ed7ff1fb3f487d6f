"""``pttrace attach PID --break SYMBOL``: record hits in a running Python, then detach and leave it running."""
from __future__ import annotations

import argparse
import math
import os

from tracer.errors import PermissionDenied, TargetError, UsageError


def add_parser(sub) -> None:
    from tracer.commands.run import add_common_trace_options

    p = sub.add_parser("attach", help="attach to a running Python, record each breakpoint hit, detach",
                       description="Attach gdb to a running Python process, record the call path at each hit "
                                   "of the breakpoints, and detach on Ctrl-C, --max-hits, --duration or the "
                                   "end of the target. The target is never killed.")
    p.add_argument("pid", help="the process id of the running Python")
    add_common_trace_options(p)
    p.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="detach after this many seconds")
    p.add_argument("--force", action="store_true", help="attach even if the process does not look like Python")
    p.set_defaults(func=run)


def check_target(pid: int, force: bool = False) -> str:
    """Everything we can tell before gdb touches the process; returns its executable."""
    proc = f"/proc/{pid}"
    if not os.path.isdir(proc):
        raise TargetError(f"no process with PID {pid}.")
    try:
        with open(f"{proc}/status") as fh:
            status = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError:
        raise TargetError(f"no process with PID {pid}.") from None
    if status.get("State", "").strip().startswith("Z"):
        raise TargetError(f"process {pid} has already exited (it is a zombie).")
    if pid == os.getpid():
        raise UsageError("pttrace cannot attach to itself.")
    if _kernel_thread(pid):  # (with --force it reached gdb, and the TUI ended without a word: issue 31)
        raise TargetError(f"process {pid} ({_comm(pid)}) is a kernel thread: it runs no program to attach to.")
    tracer = int(status.get("TracerPid", "0").strip() or 0)
    if tracer:
        raise TargetError(f"process {pid} is already being traced by process {tracer} ({_comm(tracer)}); "
                          "detach that debugger first.")
    uid = int(status.get("Uid", "0").split()[0])
    if os.geteuid() != 0 and uid != os.geteuid():
        raise PermissionDenied(f"process {pid} belongs to another user (uid {uid}).",
                               hint="Run pttrace as that user, or as root.")
    scope = _ptrace_scope()
    if scope is not None and scope >= 1 and os.geteuid() != 0:
        if scope >= 3:
            raise PermissionDenied("ptrace is disabled on this machine (kernel.yama.ptrace_scope = 3).",
                                   hint="Only a reboot can lower it from 3.")
        raise PermissionDenied(
            f"the kernel does not let pttrace attach to process {pid} (kernel.yama.ptrace_scope = {scope}).",
            hint="Allow it with `sudo bash -c 'echo 0 > /proc/sys/kernel/yama/ptrace_scope'`, or run pttrace as root.",
        )
    try:
        exe = os.readlink(f"{proc}/exe")
    except OSError:
        exe = ""
    if not force and not _looks_like_python(pid, exe):
        raise UsageError(f"process {pid} ({os.path.basename(exe) or _comm(pid)}) does not look like a Python "
                         "process; use --force to attach anyway.")
    return exe


def target_python(pid: int) -> str | None:
    """The interpreter of the target's own environment: its ``sys.prefix``, the venv whose
    ``pyvenv.cfg`` sits beside or above the program it was started as. ``/proc/PID/exe`` names
    the base interpreter a venv links to, which has none of the venv's packages (no torch)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv0 = fh.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return None
    if not argv0:
        return None
    if "/" not in argv0:
        found = None
        for folder in _target_path(pid):
            if os.access(os.path.join(folder, argv0), os.X_OK):
                found = os.path.join(folder, argv0)
                break
        if found is None:
            return None
        argv0 = found
    elif not os.path.isabs(argv0):
        try:
            argv0 = os.path.join(os.readlink(f"/proc/{pid}/cwd"), argv0)
        except OSError:
            return None
    folder = os.path.dirname(os.path.abspath(argv0))
    for prefix in (folder, os.path.dirname(folder)):
        if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) and os.access(argv0, os.X_OK):
            return argv0
    return None


def _target_path(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
    except OSError:
        return []
    return [p for p in env.get(b"PATH", b"").decode(errors="replace").split(":") if p]


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


PF_KTHREAD = 0x00200000  # the kernel's flag for its own threads (include/linux/sched.h)


def _kernel_thread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            flags = int(fh.read().rsplit(")", 1)[1].split()[6])  # the 9th field, counted after the name
    except (OSError, ValueError, IndexError):
        return False
    return bool(flags & PF_KTHREAD)


def _ptrace_scope() -> int | None:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _looks_like_python(pid: int, exe: str) -> bool:
    if "python" in os.path.basename(exe):
        return True
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return any("libpython" in line for line in fh)
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    from tracer.commands import _signals

    _signals.hold()  # until the recording's own handlers (commands/_signals.py): a Ctrl-C ends it cleanly
    try:
        return _attach(args)
    finally:
        _signals.release()


def _attach(args: argparse.Namespace) -> int:
    from tracer.commands.run import close, settings_from, start_gdb, trace, trace_config

    try:
        pid = int(args.pid)
    except ValueError:
        raise UsageError(f"{args.pid!r} is not a process id.") from None
    if pid <= 0:
        raise UsageError(f"{args.pid!r} is not a process id.")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise UsageError("--duration must be a positive number of seconds.")
    settings = settings_from(args)
    exe = check_target(pid, force=args.force)
    # Without Python of its own (--force on another program) the target's torch is looked for with --python.
    own = exe if exe and os.path.exists(exe) and _looks_like_python(pid, exe) else None
    python = target_python(pid) or own or args.python
    early = start_gdb(args, python, None)
    try:
        config = trace_config(args, settings, python, pid=pid, timeout=args.duration)
    except BaseException:
        close(early)
        raise
    return trace(config, args, early)
