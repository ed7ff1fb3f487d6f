"""``pttrace run SCRIPT --break SYMBOL``: launch a Python under gdb and record every hit."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from tracer.errors import SessionError, UsageError


def add_common_trace_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--break", dest="breakpoints", action="append", default=[], metavar="SYMBOL",
                   help="a C/C++ function (or FILE:LINE) to break on; repeat for more")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="the Python interpreter to trace (default: the one running pttrace)")
    p.add_argument("--max-hits", type=int, default=0, metavar="N", help="stop after N recorded hits")
    p.add_argument("--max-depth", type=int, default=256, metavar="N",
                   help="record at most N frames per hit, innermost first (default 256)")
    p.add_argument("--session-dir", type=Path, default=Path(os.environ.get("PTTRACE_SESSION_DIR", "sessions")),
                   metavar="DIR", help="where sessions are written (default: sessions/)")
    p.add_argument("--batch", action="store_true", help="record headless and print a summary (no TUI)")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the session path at the end")
    p.add_argument("--stop", action="store_true",
                   help="open the TUI in stop mode: the target stops at the first hit, to step from there")
    from tracer.commands.ops import add_trace_options

    add_trace_options(p)  # --op NAME[.OVERLOAD], --variants, --no-backward, --layer LAYER


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="launch a Python script under gdb and record the call path at each breakpoint hit",
                       description="Launch `python SCRIPT ARGS...` under gdb, break on C/C++ symbols, and record "
                                   "the Python + native call path at every hit into a session file.")
    add_common_trace_options(p)
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="end the run after this many seconds (the session is saved)")
    p.add_argument("target", nargs="*", metavar="SCRIPT [ARGS]",
                   help="the Python script to run and its arguments (put them after `--` if they start with -)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tracer.engine import TraceConfig

    if args.max_hits < 0:
        raise UsageError("--max-hits must be 0 (no limit) or more.")
    if args.max_depth < 1:
        raise UsageError("--max-depth must be at least 1.")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds.")
    target = list(args.target) + list(getattr(args, "passthrough", []))
    if not target:
        raise UsageError("give the script to run, e.g. `pttrace run scripts/hello-world.py --break initModule`.")
    script, script_args = target[0], target[1:]
    config = TraceConfig(
        breakpoints=args.breakpoints,
        python=args.python,
        script=script,
        script_args=script_args,
        session_dir=args.session_dir,
        max_hits=args.max_hits,
        timeout=args.timeout,
        max_depth=args.max_depth,
    )
    from tracer.commands.ops import apply_trace_options

    apply_trace_options(config, args, quiet=args.quiet)
    return trace(config, args)


def trace(config, args: argparse.Namespace) -> int:
    """Shared by run and attach: the TUI on a terminal, otherwise headless with a summary."""
    interactive = not args.batch and sys.stdin.isatty() and sys.stdout.isatty()
    if args.stop:
        if not interactive:
            raise UsageError("--stop needs the TUI: run it in a terminal, without --batch "
                             "(headless runs record every hit and never stop).")
        config.mode = "stop"
    if interactive:
        try:
            from tracer.tui.app import run_live  # noqa: F401  (the TUI is optional until it exists)
        except ImportError:
            pass
        else:
            return run_live(config)
    return run_batch(config, quiet=args.quiet)


def run_batch(config, quiet: bool = False) -> int:
    from tracer.commands._summary import print_summary
    from tracer.engine import Engine

    engine = Engine(config)

    def on_signal(signum, frame):
        if engine.finished:
            raise KeyboardInterrupt  # session saved, target killed or detached: only the summary is left
        # Until then every Ctrl-C (or SIGTERM) just asks for a clean end: repeated ones while gdb
        # attaches or detaches must not cut that short and leave the target stopped.
        engine.request_stop("sigint" if signum == signal.SIGINT else "sigterm")

    # Installed before start-up: a Ctrl-C while attaching must still end in a clean detach.
    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    try:
        engine.start()
        engine.run()
        if engine.write_error:
            raise SessionError(f"could not write the session file {engine.session_path}: {engine.write_error}; "
                               "the run was stopped.")
        session = engine.load_session()
        print_summary(session, config, quiet=quiet)
        if not quiet and config.address_breakpoints:
            from tracer.commands.ops import print_op_hops

            print_op_hops(session)
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
    return 0
