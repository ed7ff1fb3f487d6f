"""A recording's start-up: the session file opened, gdb set up (breakpoints resolved, the symbol policy, the
target's terminal, the agent loaded and configured), the target attached to; and, when start-up fails,
no gdb and no empty session left behind."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tracer.session import storage
from tracer.gdb.mi import mi_quote
from tracer.session.model import SessionInfo
from tracer.recorder import launch, resolve, shutdown
from tracer.recorder.agent_link import AgentLink
from tracer.recorder.events import TargetOutput
from tracer.recorder.follow import Follower
from tracer.recorder.compiled_ops import CompiledOps, op_names
from tracer.recorder.later_libraries import LaterLibraries
from tracer.recorder.libraries import LibraryPolicy
from tracer.recorder.processes import FOLLOW_CATCHES, FOLLOW_SETTINGS
from tracer.recorder.tailer import SessionTailer

if TYPE_CHECKING:
    from tracer.recorder.recorder import Recorder

log = logging.getLogger("pttrace.recorder")


def open_session(rec: Recorder, facts: dict, gdb_version: str) -> None:
    """The session file with its header; the key table and the tailer that write to it."""
    cfg = rec.config
    sid = storage.new_session_id()
    rec.session_path = Path(cfg.session_dir) / (sid + storage.SUFFIX)
    rec.writer = storage.SessionWriter(rec.session_path)
    argv = [rec.python, *cfg.program()] if cfg.pid is None else launch.cmdline(cfg.pid)
    rec.info = SessionInfo(
        id=sid, mode="run" if cfg.pid is None else "attach", argv=argv, pid=cfg.pid,
        python=facts.get("python"), torch_version=facts.get("torch_version"),
        torch_git_version=facts.get("torch_git_version"), gdb_version=gdb_version,
        started=storage.now_iso(), cwd=cfg.cwd or os.getcwd(),
    )
    rec.writer.header(rec.info)
    rec.keys = shutdown.KeyTable(rec.writer, cfg.dispatch_keys, cfg.dispatch_keys_later)
    rec.tailer = SessionTailer(rec.session_path, rec.writer, rec.emit, rec.warn)


def torch_libraries(python: str) -> list[str]:
    from tracer.symbols import torch_libraries as libraries

    try:
        return libraries(python)
    except resolve.IndexFailure as exc:  # no torch: gdb reads every library, as plain gdb does
        log.debug("no torch libraries for %s: %s", python, exc)
        return []


def set_up_gdb(rec: Recorder, agent_dir: Path) -> None:
    """Everything gdb needs before the target runs; ``agent_dir`` holds the agent's configuration."""
    cfg, mi, settings = rec.config, rec.mi, rec.settings
    rec.agent = AgentLink(mi)
    rec.torch_libs = torch_libraries(rec.python)
    specs = list(cfg.breakpoints)
    if settings.all_symbols or settings.break_by_name:
        resolution = resolve.Resolution(by_gdb=specs)
    else:
        resolution = resolve.resolve_by_index(specs, rec.torch_libs)
    for message in resolution.warnings:
        rec.warn(message)
    address_breakpoints = list(cfg.address_breakpoints) + resolution.by_address
    rec.follower = Follower(cfg.follow, address_breakpoints, rec.warn) if cfg.follow else None
    rec.policy = LibraryPolicy(mi, rec.agent, settings, rec.torch_libs, rec.warn)
    rec.policy.plan(resolution.by_gdb, address_breakpoints)
    compiled = CompiledOps(op_names(cfg.address_breakpoints), rec.warn, cfg.cwd)
    rec.later = LaterLibraries([b["label"] for b in resolution.by_address], rec.torch_libs, rec.warn,
                               cfg.library_ops, compiled)
    rec.later.found_ops.update(b["label"].removeprefix("op:") for b in cfg.address_breakpoints)
    if rec.later.active and not rec.policy.deferring:
        # A name set by address is looked for again in every library loaded later: at a stop.
        mi.command("-gdb-set stop-on-solib-events 1")
    if cfg.follow_children:
        for setting in FOLLOW_SETTINGS:
            mi.command(f"-gdb-set {setting}")
    if cfg.pid is None:
        if not launch.needs_shell([rec.python, *cfg.program()]):
            mi.command("-gdb-set startup-with-shell off")  # no shell between gdb and the target
        rec.terminal = launch.TargetTerminal(cfg.forward_output, lambda text: rec.emit(TargetOutput(text)),
                                             launch.our_stdin() if cfg.forward_input else None)
        mi.command(f"-inferior-tty-set {mi_quote(rec.terminal.name)}")
    rec.agent.load()
    values = _values_layout(rec, cfg)
    agent_config = agent_dir / "agent.json"
    agent_config.write_text(json.dumps({
        "session": str(rec.session_path.resolve()),
        "mode": rec.mode,
        "max_hits": cfg.max_hits,
        "max_depth": cfg.max_depth,
        "breakpoints": [],
        "layers": list(cfg.layers),
        "address_breakpoints": address_breakpoints,
        "follow": {k: cfg.follow[k] for k in ("roots", "known", "trigger", "entries")} if cfg.follow else None,
        "stack_reuse": settings.stack_reuse,
        "stack_reuse_stats": settings.stack_reuse_stats,
        "log": str(settings.log_file.resolve()) if settings.log_file else None,
        "follow_children": cfg.follow_children,
        "values": values,
    }))
    if cfg.pid is not None:
        attach(rec, cfg.pid)
    rec.agent.setup(agent_config)
    for spec in resolution.by_gdb:
        rec.control.add_breakpoint(spec, fatal=True)
    if resolution.by_address:
        rec.agent.dump_breakpoints()
    if cfg.follow_children:
        # After the user's breakpoints: gdb numbers catchpoints with them, and theirs come first.
        for catch in FOLLOW_CATCHES:
            mi.console(catch)


def attach(rec: Recorder, pid: int) -> None:
    launch.attach(rec.mi, pid)
    if rec.main.state == "starting":
        rec.processes.started(rec.main.group, pid)
    rec.main.pid = pid
    rec.main.state = "stopped"
    rec.reactions.wait_stopped(30.0)
    # The libraries were loaded before we came: read the symbols we want now.
    rec.reactions.drain()
    rec.policy.decide_new()
    rec.reactions.break_in_later_libraries()


def abort(rec: Recorder) -> None:
    """Start-up failed before anything was recorded: no gdb and no empty session left behind."""
    if rec.mi:
        rec.mi.close()  # gdb detaches from an attached target as it exits
    if rec.terminal:
        rec.terminal.close()
    if rec.writer:
        rec.writer.close()
        try:
            rec.session_path.unlink()
        except OSError as exc:
            log.debug("cannot remove %s: %s", rec.session_path, exc)
        rec.writer = None


def _values_layout(rec, cfg) -> dict:
    """The layout the agent reads argument values with (``cfg.values_layout_later``), or why there is none:
    a warning in the session then, every view shows it."""
    fut = cfg.values_layout_later
    if fut is None:
        return {"why": "no torch layout was established for this run"}
    try:
        return fut.result(timeout=120)
    except Exception as exc:  # LayoutUnknown (its reason), or the probe's own failure
        why = getattr(exc, "message", None) or str(exc) or exc.__class__.__name__
        rec.writer.warning(f"tensor and Scalar arguments are not read: {why}")
        return {"why": why}
