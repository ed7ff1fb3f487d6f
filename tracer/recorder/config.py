"""What one recording is asked to do: built by the ``run``/``attach`` command, then never changed."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracer.settings import Settings


@dataclass(frozen=True)
class TraceConfig:
    """What one recording is asked to do: built by ``run`` or ``attach``, then never changed."""

    breakpoints: tuple[str, ...]
    """``--break`` specs: function names (resolved by our index where it can, else by gdb), FILE:LINE, *ADDR."""

    python: str = sys.executable
    """The interpreter to launch (or the attached process's executable)."""

    script: str | None = None
    """The script a run launches; None when attaching, or with ``module`` or ``code``."""

    script_args: tuple[str, ...] = ()
    """The arguments of the script, module or code."""

    module: str | None = None
    """``pttrace run -m MODULE``: the module a run launches as ``python -m`` does."""

    code: str | None = None
    """``pttrace run -c CODE``: the code a run launches as ``python -c`` does."""

    forward_input: bool = True
    """Give the launched target pttrace's stdin (batch mode); the TUI keeps its keyboard."""

    pid: int | None = None
    """The process to attach to; None for a run."""

    session_dir: Path = Path("sessions")
    max_hits: int = 0
    """End the run after this many recorded hits (0: no limit)."""

    timeout: float | None = None
    """End the run (``--timeout``) or detach (``--duration``) after this many seconds."""

    max_depth: int = 256
    mode: str = "record"
    """The mode the run starts in: "record" records and continues, "stop" stops at each hit."""

    follow_children: bool = True
    """Follow the target's child processes; ``--no-follow-children``: gdb lets them go, with a warning."""

    forward_output: bool = True
    """Copy the launched target's terminal output to pttrace's stdout (batch mode)."""

    cwd: str | None = None
    live: bool = False
    """Send ``HitRecorded`` events as hits are written (for the TUI)."""

    layers: tuple[str, ...] = ()
    """Record only hits whose innermost frame is in one of these layers."""
    evals: tuple[str, ...] = ()
    """``--eval EXPR``: gdb expressions evaluated at every recorded hit, in the frame stopped in."""

    address_breakpoints: tuple[dict, ...] = ()
    """Breakpoints our symbol index resolved (``--op``): {label, library, offset, function[, plt]}."""

    library_ops: tuple[str, ...] = ()
    """``--op ns::name``: operators of a TORCH_LIBRARY of one's own, looked for in every library loaded."""

    follow: dict | None = None
    """``--follow``: {roots: {struct: label}, known: [struct], trigger: item, python, libraries, pythonpath}
    (``tracer.recorder.follow``)."""

    dispatch_keys: dict | None = None
    """The target torch's DispatchKeySet numbering (``tracer.dispatch.ops.key_table``), written into the session
    so that the raw key sets the agent records can be decoded when it is read."""

    dispatch_keys_later: Any = None
    """Or the same table still being computed (a concurrent.futures.Future: asking the target's torch
    takes ~1.3 s the first time): written into the session when it comes, before the end at the latest."""

    values_layout_later: Any = None
    """Where the target torch keeps a tensor's fields (a Future of ``commands.ops._values_layout``'s dict:
    the layout's JSON and the autograd Nodes' vtables), handed to the agent to read argument values."""

    dispatch_tables_later: Any = None
    """``--op``: its operators' dispatch tables as the target's torch reports them (a Future of
    ``{struct: {op, rows}}``), written into the session before its end for the decision at each hop."""

    notes: tuple[str, ...] = ()
    """What the command found before gdb starts that the session must say (--op: what it does not follow)."""

    settings: Settings = field(default_factory=Settings.from_environment)

    def start_background(self) -> None:
        """Start the work of the ``*_later`` Futures (commands/ops.py ``_in_background``), once gdb is spawned."""
        for later in (self.values_layout_later, self.dispatch_keys_later, self.dispatch_tables_later):
            start = getattr(later, "start", None)
            if start is not None:
                start()

    def program(self) -> list[str]:
        """What follows the interpreter on the launched target's command line."""
        if self.module is not None:
            return ["-m", self.module, *self.script_args]
        if self.code is not None:
            return ["-c", self.code, *self.script_args]
        if self.script is not None and self.script.startswith("-"):  # -x.py: python's `--` keeps it a file
            return ["--", self.script, *self.script_args]
        return [self.script or "", *self.script_args]

    @property
    def target_label(self) -> str:
        """A short name for the launched target."""
        if self.module is not None:
            return f"-m {self.module}"
        if self.code is not None:
            return "-c CODE"
        return self.script or ""
