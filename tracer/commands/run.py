"""``pttrace run SCRIPT --break SYMBOL``: launch a Python under gdb and record every hit."""
from __future__ import annotations

import argparse
import math
import signal
import sys

from tracer.errors import SessionError, UsageError


def add_common_trace_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--break", dest="breakpoints", action="append", default=[], metavar="SYMBOL",
                   help="a C/C++ function (or FILE:LINE) to break on; repeat for more")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="the Python interpreter to trace (default: the one running pttrace)")
    p.add_argument("--max-hits", type=int, default=0, metavar="N", help="stop after N recorded hits")
    p.add_argument("--max-depth", type=int, default=256, metavar="N",
                   help="record at most N frames per hit, innermost first (default 256)")
    # Paths stay strings until the settings are built (settings_from): pathlib is not imported before gdb starts.
    p.add_argument("--session-dir", default=None, metavar="DIR",
                   help="where sessions are written (default: $PTTRACE_SESSION_DIR, else sessions/)")
    p.add_argument("--batch", action="store_true", help="record headless and print a summary (no TUI)")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the session path at the end")
    p.add_argument("--stop", action="store_true",
                   help="open the TUI in stop mode: the target stops at the first hit, to step from there")
    p.add_argument("--eval", dest="evals", action="append", default=[], metavar="EXPR",
                   help="a gdb expression evaluated at every hit in the frame stopped in ($rdi, *self, "
                        "x.size()); its text is recorded with the hit; repeat for more")
    p.add_argument("--no-follow-children", "--no-follow", dest="follow_children", action="store_false",
                   help="do not follow child processes (forks, DataLoader workers): they run untraced, with a "
                        "warning")
    from tracer.commands.ops import add_trace_options

    add_trace_options(p)  # --op NAME[.OVERLOAD], --variants, --no-backward, --layer LAYER
    g = p.add_argument_group("gdb and symbols (each also has a PTTRACE_* variable, see the README)")
    g.add_argument("--gdb", default=None, metavar="PATH", help="the gdb to run (default: gdb on PATH, $PTTRACE_GDB)")
    g.add_argument("--all-symbols", action="store_const", const=True, default=None,
                   help="let gdb read every library's symbols, as plain gdb does (slow with libtorch)")
    g.add_argument("--no-cfi", dest="cfi", action="store_const", const=False, default=None,
                   help="give gdb the symbols of the libraries a breakpoint needs, no unwind-table copies")
    g.add_argument("--cfi-lib", dest="cfi_libs", action="append", default=None, metavar="NAME",
                   help="also give gdb this library (a basename) as unwind tables only, whatever its size")
    g.add_argument("--break-by-name", action="store_const", const=True, default=None,
                   help="let gdb resolve every --break by name (none set by address from pttrace's index)")
    g.add_argument("--debug-dir", dest="debug_dirs", action="append", default=None, metavar="DIR",
                   help="a root of separate debug files, searched before /usr/lib/debug; repeat for more")
    from tracer.commands._sources import add_source_dir

    add_source_dir(g)  # for the TUI's source pane
    g.add_argument("--verbose", "-v", action="store_const", const=True, default=None,
                   help="log what pttrace asks gdb and why the target stops, on stderr")
    g.add_argument("--log", dest="log_file", default=None, metavar="FILE",
                   help="write that log to FILE (whether or not --verbose is given)")


def settings_from(args: argparse.Namespace):
    """The settings of this run: the environment's, the flags over them; installed for every module."""
    from pathlib import Path

    from tracer import settings
    from tracer.commands._sources import checked_source_dir
    from tracer.logs import configure_logging

    s = settings.Settings.from_environment(
        gdb=args.gdb, session_dir=None if args.session_dir is None else Path(args.session_dir),
        all_symbols=args.all_symbols, cfi=args.cfi,
        cfi_libs=tuple(args.cfi_libs) if args.cfi_libs else None, break_by_name=args.break_by_name,
        debug_dirs=tuple(args.debug_dirs) if args.debug_dirs else None,
        source_dir=checked_source_dir(args), verbose=args.verbose,
        log_file=None if args.log_file is None else Path(args.log_file))
    settings.install(s)
    configure_logging(s.verbose, s.log_file)
    return s


# Options of `run` that take a value: what split_argv must step over to find -m / -c (filled by add_parser).
_VALUE_OPTIONS: set[str] = set()
# Every option of `run`: one of them after -m MODULE / -c CODE is the target's, which a user may not expect.
_OPTIONS: set[str] = set()


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="launch a Python script under gdb and record the call path at each breakpoint hit",
                       description="Launch `python SCRIPT ARGS...` (or `python -m MODULE ARGS...`, `python -c CODE "
                                   "ARGS...`, or a console script of the interpreter's environment such as "
                                   "torchrun) under gdb, break on C/C++ symbols, and record the Python + native "
                                   "call path at every hit into a session file.")
    add_common_trace_options(p)
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="end the run after this many seconds (the session is saved)")
    p.add_argument("-m", dest="module", default=None, metavar="MODULE",
                   help="run a module as `python -m MODULE` does; everything after it is the module's arguments")
    p.add_argument("-c", dest="code", default=None, metavar="CODE",
                   help="run code as `python -c CODE` does; everything after it is the code's arguments")
    p.add_argument("target", nargs="*", metavar="SCRIPT [ARGS]",
                   help="the Python script to run and its arguments (put them after `--` if they start with -), "
                        "or a console script of the interpreter's environment (torchrun, pytest) and its "
                        "arguments, all of them its own")
    p.set_defaults(func=run)
    # argparse keeps its actions private; this is the one place that reads them.
    _VALUE_OPTIONS.update(opt for action in p._actions for opt in action.option_strings if action.nargs != 0)
    _OPTIONS.update(opt for action in p._actions for opt in action.option_strings)


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """``pttrace run`` read as python reads its command line: after ``-m MODULE`` or ``-c CODE``,
    everything is the target's. (what pttrace parses, the target's arguments)."""
    from tracer.commands._target import split_run_argv

    return split_run_argv(argv, _VALUE_OPTIONS, sys.executable)


def run(args: argparse.Namespace) -> int:
    from tracer.commands import _signals

    _signals.hold()  # until the recording's own handlers: a Ctrl-C now must not raise inside an import
    try:
        return _run(args)
    finally:
        _signals.release()


def _run(args: argparse.Namespace) -> int:
    if args.max_hits < 0:
        raise UsageError("--max-hits must be 0 (no limit) or more.")
    if args.max_depth < 1:
        raise UsageError("--max-depth must be at least 1.")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise UsageError("--timeout must be a positive number of seconds.")
    from tracer.commands._target import check_module, interpreter_first, target_from

    # `pttrace run python3 hello-world.py`, typed as after gdb's --args: that interpreter is the one traced
    given = list(args.target) + list(getattr(args, "passthrough", []))
    rest, args.python = interpreter_first(given, args.python, args.python != sys.executable)
    if (args.module is not None or args.code is not None) and args.target and rest is given:
        raise UsageError("-m MODULE and -c CODE come before any script (a script's own arguments that start "
                         "with - go after `--`).")
    target = target_from(rest, args.module, args.code, args.python)
    mine = [a for a in target.args if a.split("=", 1)[0] in _OPTIONS]
    if target.kind != "script" and mine and not args.breakpoints and not getattr(args, "ops", None):
        flag = "-m MODULE" if target.kind == "module" else "-c CODE"
        raise UsageError(f"{mine[0]} after {flag} is the target's argument, as everything after {flag} is (as "
                         f"with python {flag}): put pttrace's options before {flag.split()[0]}.")
    early = start_gdb(args, args.python, target.argv())
    try:
        if target.kind == "module":
            check_module(args.python, target.value)
        config = trace_config(args, settings_from(args), args.python, timeout=args.timeout,
                              script=target.value if target.kind == "script" else None,
                              module=target.value if target.kind == "module" else None,
                              code=target.value if target.kind == "code" else None, script_args=target.args)
    except BaseException:
        close(early)
        raise
    return trace(config, args, early)


def start_gdb(args: argparse.Namespace, python: str, program: list[str] | None):
    """gdb started before anything else is done (tracer/gdb/spawn.py): it starts, and imports the agent,
    while pttrace builds the configuration and imports the recorder (~0.05 s sooner than after them). None when
    gdb or the interpreter is missing: the checks say so later, in their usual order."""
    from tracer.gdb.spawn import EarlyGdb

    return EarlyGdb.start(args.gdb, python, program, prompt=interactive(args))


def close(early) -> None:
    """The gdb started first closed: the input was refused before the recording took it."""
    if early is not None:
        early.close()


def trace_config(args: argparse.Namespace, settings, python: str, pid: int | None = None,
                 timeout: float | None = None, **target):
    """The ``TraceConfig`` of run (``target``: the script, module or code and its arguments) or attach
    (``pid``): what the options common to both give, checked in this order."""
    from tracer.commands.ops import trace_options
    from tracer.recorder import TraceConfig

    return TraceConfig(breakpoints=tuple(args.breakpoints), python=python, pid=pid, **target,
                       session_dir=settings.session_dir, max_hits=args.max_hits, timeout=timeout,
                       max_depth=args.max_depth, mode=trace_mode(args), settings=settings,
                       follow_children=args.follow_children, evals=checked_evals(args.evals),
                       **trace_options(args, python, pid, quiet=args.quiet))


def checked_evals(evals: list[str]) -> tuple[str, ...]:
    """``--eval`` expressions as given; an empty one or one with a line break is bad input."""
    for expr in evals:
        if not expr.strip() or any(ch in expr for ch in "\r\n\0"):
            raise UsageError(f"--eval {expr!r} is not a gdb expression (empty, or with a line break).")
    return tuple(e.strip() for e in evals)


def trace_mode(args: argparse.Namespace) -> str:
    """"stop" with ``--stop`` (which needs the TUI), else "record"."""
    if not args.stop:
        return "record"
    if not interactive(args):
        raise UsageError("--stop needs the TUI: run it in a terminal, without --batch "
                         "(headless runs record every hit and never stop).")
    return "stop"


def interactive(args: argparse.Namespace) -> bool:
    return not args.batch and sys.stdin.isatty() and sys.stdout.isatty()


def trace(config, args: argparse.Namespace, early=None) -> int:
    """Shared by run and attach: the TUI on a terminal, otherwise headless with a summary. ``early``: the gdb
    started first (start_gdb), or None."""
    if interactive(args):
        from tracer.commands import _signals

        try:
            from tracer.tui.app import run_live
        except BaseException:
            close(early)
            raise
        held = _signals.take()
        if held is not None:  # a Ctrl-C or SIGTERM while pttrace started
            return interrupted_at_start(held, lambda: close(early))
        _signals.release()  # the TUI handles them from here (Ctrl-C is a key there)
        return run_live(config, early)
    return run_batch(config, quiet=args.quiet, early=early)


# Signals that end a recording cleanly (the session closed, a launched target killed, an attached one
# detached), and the reason the session's end record gives.
SIGNAL_REASONS: dict[int, str] = {signal.SIGINT: "sigint", signal.SIGTERM: "sigterm", signal.SIGHUP: "sighup"}


def interrupted_at_start(signum: int, close_gdb) -> int:
    """A signal that came while pttrace started (before the target ran, before any session file): gdb closed,
    one sentence, the signal's exit code."""
    close_gdb()
    print(f"pttrace: interrupted ({signal.Signals(signum).name}) while starting: nothing was recorded.",
          file=sys.stderr)
    return 128 + signum


def run_batch(config, quiet: bool = False, early=None) -> int:
    try:
        from tracer.recorder.launch import StartedGdb
    except BaseException:
        close(early)
        raise

    # gdb starts, and takes the agent in, while the recorder's parts import; no prompt, so no python-gdb helper
    started = StartedGdb.start(config, prompt=False, early=early)
    config.start_background()  # the torch facts asked while gdb starts and the recorder's parts import
    from tracer.recorder import Recorder
    from tracer.recorder.shutdown import exit_code

    engine = Recorder(config, started=started)

    def on_signal(signum, frame):
        if engine.finished:
            raise KeyboardInterrupt  # session saved, target killed or detached: only the summary is left
        # Until then every Ctrl-C (or SIGTERM) just asks for a clean end: repeated ones while gdb
        # attaches or detaches must not cut that short and leave the target stopped.
        engine.request_stop(SIGNAL_REASONS[signum])

    # Installed before start-up: a Ctrl-C while attaching must still end in a clean detach. One that came
    # while pttrace started (commands/_signals.py held it) ends the recording now, before the target runs.
    from tracer.commands import _signals

    old = _signals.install(on_signal, SIGNAL_REASONS)
    try:
        held = _signals.take()
        if held is not None:
            return interrupted_at_start(held, started.mi.close)
        engine.start()
        engine.run()
        if engine.write_error:
            raise SessionError(f"could not write the session file {engine.session_path}: {engine.write_error}; "
                               "the run was stopped.")
        if engine.end_reason != "sighup" and quiet:  # the path is all it prints: no million hits read for it
            print(engine.session_path)
        elif engine.end_reason != "sighup":  # after a hang-up there is no terminal to print to
            from tracer.commands._summary import print_summary  # rich: ~0.2 s to import, not before the run

            session = engine.load_session()
            print_summary(session, config, quiet=quiet)
            if not quiet and config.address_breakpoints:
                from tracer.commands.ops import print_op_hops

                print_op_hops(session)
    finally:
        for signum, handler in old.items():
            # After a signal ended the run, more of the same (a user pressing Ctrl-C again while
            # the detach finishes) have nothing left to stop: they must not kill pttrace before
            # it returns its exit code.
            ended_by_signal = engine.end_reason == SIGNAL_REASONS.get(signum)
            signal.signal(signum, signal.SIG_IGN if ended_by_signal else handler)
    return exit_code(engine.end_reason, engine.gdb_lost)
