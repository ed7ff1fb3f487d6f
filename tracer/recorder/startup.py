"""A recording's start-up: the session file opened, gdb set up (breakpoints resolved, the symbol policy, the
target's terminal, the agent loaded and configured), the target attached to; and, when start-up fails,
no gdb left behind: no session either when the input was refused, the session with an end record that
says why otherwise."""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from tracer.errors import PttraceError
from tracer.gdb.mi import MiConnection, mi_quote
from tracer.recorder import launch, resolve, shutdown, torchscript
from tracer.recorder.agent_link import AgentLink, AgentLoading
from tracer.recorder.config import TraceConfig
from tracer.recorder.control import Controller
from tracer.recorder.ending import SessionFiles
from tracer.recorder.events import RecorderEvent, TargetOutput
from tracer.recorder.follow import Follower
from tracer.recorder.compiled_ops import CompiledOps, op_names
from tracer.recorder.later_libraries import LaterLibraries
from tracer.recorder.library_stops import LibraryStops
from tracer.recorder.libraries import LibraryPolicy
from tracer.recorder.processes import FOLLOW_CATCHES, FOLLOW_SETTINGS, ProcessTable
from tracer.recorder.reactions import Reactions
from tracer.recorder.tailer import SessionTailer
from tracer.session import storage
from tracer.recorder.stack_libraries import StackLibraries
from tracer.settings import cache_dir
from tracer.session.model import Breakpoint, SessionInfo

log = logging.getLogger("pttrace.recorder")


def open_session(cfg: TraceConfig, python: str, facts: dict, gdb_version: str,
                 emit: Callable[[RecorderEvent], None], warn: Callable[[str], None]) -> tuple[SessionInfo, SessionFiles]:
    """The session file with its header; the key table and the tailer that write to it."""
    sid = storage.new_session_id()
    path = Path(cfg.session_dir) / (sid + storage.SUFFIX)
    writer = storage.SessionWriter(path)
    argv = [python, *cfg.program()] if cfg.pid is None else launch.cmdline(cfg.pid)
    info = SessionInfo(
        id=sid, mode="run" if cfg.pid is None else "attach", argv=argv, pid=cfg.pid,
        python=facts.get("python"), torch_version=facts.get("torch_version"),
        torch_git_version=facts.get("torch_git_version"), gdb_version=gdb_version,
        started=storage.now_iso(), cwd=cfg.cwd or os.getcwd(),
    )
    writer.header(info)
    keys = shutdown.KeyTable(writer, cfg.dispatch_keys, cfg.dispatch_keys_later)
    return info, SessionFiles(path, writer, keys, SessionTailer(path, writer, emit, warn))


@dataclass
class GdbParts:
    """What start-up made in gdb for the recording's other parts: the agent, the symbol policy, the names
    looked for in later libraries, --follow's follower, the target's terminal, and the breakpoints to set."""

    agent: AgentLink
    policy: LibraryPolicy
    later: LaterLibraries
    follower: Follower | None
    terminal: launch.TargetTerminal | None
    torch_libs: list[str]
    by_gdb: list[str]  # breakpoints gdb resolves by name
    by_address: bool  # some were resolved from our index: the agent breaks on them by address
    agent_config: Path
    stops: LibraryStops  # the library loads gdb stops at
    # the first call path through TorchScript's interpreter starts its layout's probe (torchscript.py)
    interpreter_seen: Callable[[], None] | None = None


def torch_libraries(python: str) -> list[str]:
    from tracer.symbols import torch_libraries as libraries

    try:
        return libraries(python)
    except resolve.IndexFailure as exc:  # no torch: gdb reads every library, as plain gdb does
        log.debug("no torch libraries for %s: %s", python, exc)
        return []


def prepare_gdb(mi: MiConnection, cfg: TraceConfig, python: str, session_path: Path, agent_dir: Path,
                emit: Callable[[RecorderEvent], None], warn: Callable[[str], None],
                agent_loading: AgentLoading | None = None) -> GdbParts:
    """Everything gdb needs before the target is attached to or run; ``agent_dir`` holds the agent's
    configuration. A terminal made for the target is closed again if this fails."""
    settings = cfg.settings
    agent = AgentLink(mi)
    torch_libs = torch_libraries(python)
    specs = list(cfg.breakpoints)
    if settings.all_symbols or settings.break_by_name:
        resolution = resolve.Resolution(by_gdb=specs)
    else:
        program = os.path.realpath(python if cfg.pid is None else f"/proc/{cfg.pid}/exe")
        resolution = resolve.resolve_by_index(specs, torch_libs, program)
    for message in resolution.warnings:
        warn(message)
    address_breakpoints = list(cfg.address_breakpoints) + resolution.by_address
    follower = Follower(cfg.follow, address_breakpoints, warn) if cfg.follow else None
    policy = LibraryPolicy(mi, agent, settings, torch_libs, warn)
    if cfg.pid is None:
        policy.remembered = StackLibraries([os.path.realpath(python), str(cfg.cwd or ""), cfg.script or "",
                                            cfg.module or "", cfg.code or "", *cfg.script_args, "--break", *specs])
    policy.plan(resolution.by_gdb, address_breakpoints)
    compiled = CompiledOps(op_names(cfg.address_breakpoints), warn, cfg.cwd)
    later = LaterLibraries([b["label"] for b in resolution.by_address], torch_libs, warn, cfg.library_ops,
                           compiled)
    later.found_ops.update(b["label"].removeprefix("op:") for b in cfg.address_breakpoints)
    if cfg.follow_children:
        for setting in FOLLOW_SETTINGS:
            mi.command(f"-gdb-set {setting}")
    terminal = None
    try:
        if cfg.pid is None:
            terminal = target_terminal(mi, cfg, python, emit)
        if agent_loading is not None:
            agent_loading.wait()  # imported since gdb started (launch.StartedGdb)
        else:
            agent.load()
        values = _values_layout(cfg, warn)
        ts_layout = torchscript.TsLayout(torch_libs, cache_dir(), warn)
        agent_config = agent_dir / "agent.json"
        agent_config.write_text(json.dumps({
            "session": str(session_path.resolve()),
            "mode": cfg.mode,
            "max_hits": cfg.max_hits,
            "max_depth": cfg.max_depth,
            "breakpoints": [],
            "layers": list(cfg.layers),
            "evals": list(cfg.evals),
            "address_breakpoints": address_breakpoints,
            "follow": {k: cfg.follow[k] for k in ("roots", "known", "trigger", "entries")} if cfg.follow else None,
            "stack_reuse": settings.stack_reuse,
            "repeat": settings.repeat,
            "arguments": settings.arguments,
            "stack_reuse_stats": settings.stack_reuse_stats,
            "log": str(settings.log_file.resolve()) if settings.log_file else None,
            "follow_children": cfg.follow_children,
            "values": values,
            "torchscript": ts_layout.config,
        }))
    except BaseException:
        if terminal is not None:
            terminal.close()
        raise
    return GdbParts(agent, policy, later, follower, terminal, torch_libs, resolution.by_gdb,
                    bool(resolution.by_address), agent_config, LibraryStops(agent, policy, later),
                    ts_layout.needed if ts_layout.wanted else None)


def target_terminal(mi: MiConnection, cfg: TraceConfig, python: str,
                    emit: Callable[[RecorderEvent], None]) -> launch.TargetTerminal:
    """The launched target's terminal. Its stderr goes to a second one when pttrace's stdout and stderr
    are two files (``2>err``, ``2>/dev/null``) or the TUI shows it apart, through gdb's start-up shell
    (``2>TTY`` after the arguments: gdb's fork gives the target one terminal for all three)."""
    program = [python, *cfg.program()]
    separate = not cfg.forward_output or not launch.same_file(1, 2)
    args = launch.shell_redirect_args(program[1:], "/dev/null") if separate else None
    if args is None and not launch.needs_shell(program):
        mi.command("-gdb-set startup-with-shell off")  # no shell between gdb and the target
    terminal = launch.TargetTerminal(cfg.forward_output, lambda text, stream: emit(TargetOutput(text, stream)),
                                     launch.our_stdin() if cfg.forward_input else None,
                                     separate_stderr=args is not None)
    try:
        if terminal.err_name is not None:
            mi.console("set args " + str(launch.shell_redirect_args(program[1:], terminal.err_name)))
        mi.command(f"-inferior-tty-set {mi_quote(terminal.name)}")
    except BaseException:
        terminal.close()
        raise
    return terminal


def arm(mi: MiConnection, parts: GdbParts, cfg: TraceConfig, controller: Controller, reactions: Reactions,
        processes: ProcessTable) -> None:
    """The target attached to (``attach``), the agent set up, the breakpoints set."""
    if cfg.pid is not None:
        attach(mi, cfg.pid, processes, reactions, parts.policy)
    parts.agent.setup(parts.agent_config)
    for spec in parts.by_gdb:
        controller.add_breakpoint(spec, at_start=True)
    if parts.by_address:
        parts.agent.dump_breakpoints()
    if cfg.follow_children:
        # After the user's breakpoints: gdb numbers catchpoints with them, and theirs come first.
        for catch in FOLLOW_CATCHES:
            mi.console(catch)
    # Last: its catchpoint is numbered after the user's breakpoints. A name set by address is looked for
    # again in every library loaded later, and the symbol policy decides at loads (library_stops.py).
    parts.stops.sync()
    parts.policy.rules_changed = parts.stops.sync


def attach(mi: MiConnection, pid: int, processes: ProcessTable, reactions: Reactions, policy: LibraryPolicy) -> None:
    launch.attach(mi, pid)
    main = processes.main
    if main.state == "starting":
        processes.started(main.group, pid)
    main.pid = pid
    main.state = "stopped"
    reactions.wait_stopped(30.0)
    # The libraries were loaded before we came: read the symbols we want now.
    reactions.drain()
    policy.decide_new()
    reactions.break_in_later_libraries()


def abort(mi: MiConnection | None, terminal: launch.TargetTerminal | None, files: SessionFiles | None) -> None:
    """Start-up refused (bad input, before anything was recorded): no gdb and no empty session left behind."""
    if mi:
        mi.close()  # gdb detaches from an attached target as it exits
    if terminal:
        terminal.close()
    if files:
        files.writer.close()
        try:
            files.path.unlink()
        except OSError as exc:
            log.debug("cannot remove %s: %s", files.path, exc)


def give_up(mi: MiConnection | None, terminal: launch.TargetTerminal | None, files: SessionFiles | None,
            reason: str, specs: Sequence[str] = ()) -> None:
    """Start-up failed with the session file open (gdb died, a fault): no gdb left behind, and the file
    kept, with the reason as a warning (every view shows it) and an end record ("failed") that gives it.
    Without that end the file read as a recording cut off while it ran, with nothing to say why. Each
    breakpoint asked for (``specs``) is listed as not set, so the session still says what was asked: a
    breakpoint gdb had already resolved keeps its locations (the reader keeps them over a later record
    without any)."""
    if mi:
        mi.close()  # gdb detaches from an attached target, kills a launched one, as it exits
    if terminal:
        terminal.close()
    if files is None:
        return
    files.tailer.stop()
    try:
        files.writer.warning(f"the recording did not start: {reason}")
        for spec in specs:
            files.writer.breakpoint(Breakpoint(spec, error="the recording did not start"))
        files.writer.end("failed", None, reason=reason)
    except PttraceError as exc:  # a full disk: the file stays as far as it was written
        log.warning("cannot end the session %s: %s", files.path, exc.message)
    files.writer.close()


def gdb_died_at_start(mi: MiConnection | None) -> str:
    """One sentence for gdb's end during start-up: its exit status and the last thing it said."""
    code = mi.exit_code(wait=2.0) if mi else None
    how = "" if code is None else f" (killed by signal {-code})" if code < 0 else f" (exit status {code})"
    said = " ".join(line.strip() for line in (mi.stderr_tail[-3:] if mi else []) if line.strip())
    return f"gdb exited during start-up{how}" + (f"; it said: {said.rstrip('.')}." if said else ".")


def _values_layout(cfg: TraceConfig, warn: Callable[[str], None]) -> dict:
    """The layout the agent reads argument values with (``cfg.values_layout_later``), or why there is none:
    a warning in the session then, every view shows it."""
    fut = cfg.values_layout_later
    if fut is None:
        return {"why": "no torch layout was established for this run"}
    try:
        return fut.result(timeout=120)
    except Exception as exc:  # LayoutUnknown (its reason), or the probe's own failure
        why = getattr(exc, "message", None) or str(exc) or exc.__class__.__name__
        warn(f"tensor and Scalar arguments are not read: {why}")
        return {"why": why}
