"""The agent's gdb commands (``pttrace-*``, tracer/gdb/agent/commands.py), as calls with typed answers.

Everything the recorder asks of the agent goes through here, so a failure is one named exception,
``AgentError`` (or ``GdbDied`` when gdb itself is gone), never an empty answer taken for "nothing
to report".
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tracer.session import records
from tracer.errors import PttraceError
from tracer.gdb.mi import GdbCommandError, MiConnection, MiResult
from tracer.gdb.spawn import agent_import



class AgentError(PttraceError):
    """The agent inside gdb did not answer, or answered something we cannot read."""


@dataclass(frozen=True)
class AgentStatus:
    """The agent's ``pttrace-status``: its hits and mode, and what it waits for pttrace to do."""

    hits: int
    mode: str
    need_libs: tuple[str, ...] = ()
    """Libraries a deferred hit's stack passed through without symbols: load them, then ``rerecord``."""
    need_launcher: bool = False
    """A deferred hit is a parallel worker's: ``rerecord`` reads its launching thread, then records it."""
    need_ops: tuple[dict, ...] = ()
    """Operators ``--follow`` met for the first time ({root, op}): break on their functions, then ``followed``."""
    stop: bool = False
    """The agent wants the target to stay stopped (stop mode, or the last of ``max_hits``)."""
    write_error: str | None = None
    stack_reuse: dict = field(default_factory=dict)
    need_process: int | None = None
    """A child's first hit waits until gdb has its libraries' symbols (gdb's inferior number)."""
    exec_request: dict | None = None
    """A followed process stopped at ``execve``: {inferior, pid, program}."""
    entries: dict = field(default_factory=dict)
    """gdb's number of each internal breakpoint where a fork child first stops -> its named breakpoint's."""


class AgentLoading:
    """The agent gdb imports as it starts (its command line's ``-ex``, spawn.gdb_argv): gdb does it (~0.1 s of its
    CPU) while pttrace does its own start-up, not after. ``wait`` raises what ``AgentLink.load`` raises: the
    import's error when it failed."""

    def __init__(self, mi: MiConnection):
        self._mi = mi

    def wait(self) -> None:
        AgentLink(self._mi).load()


class AgentLink:
    def __init__(self, mi: MiConnection):
        self.mi = mi
        self.stepovers = False  # a presented hit's thread is watched for a step over gdb may lose (agent/stepovers.py)

    def _ask(self, command: str, timeout: float = 30.0) -> MiResult:
        try:
            return self.mi.console(command, timeout=timeout, check=False)
        except GdbCommandError as exc:  # a timeout; GdbDied (gdb is gone) goes to the caller as it is
            raise AgentError(f"`{command.split()[0]}` got no answer: {exc.message}") from exc

    def load(self) -> None:
        """Import the agent into gdb's Python (it defines the ``pttrace-*`` commands), or check that it is there."""
        self.mi.console(agent_import())

    def setup(self, config_path: Path) -> None:
        self.mi.console(f"pttrace-setup {config_path}")

    def status(self) -> AgentStatus:
        res = self._ask("pttrace-status", timeout=10)
        text = "".join(res.console).strip()
        try:
            data = json.loads(text.splitlines()[-1])
            status = AgentStatus(hits=int(data["hits"]), mode=str(data.get("mode")),
                                 need_libs=tuple(data.get("need_libs") or ()), stop=bool(data.get("stop")),
                                 need_launcher=bool(data.get("need_launcher")),
                                 need_ops=tuple(d for d in data.get("need_ops") or () if isinstance(d, dict)),
                                 write_error=data.get("write_error"), stack_reuse=data.get("stack_reuse") or {},
                                 need_process=data.get("need_process"), exec_request=data.get("exec"),
                                 entries={str(k): str(v) for k, v in (data.get("entries") or {}).items()})
            self.stepovers = self.stepovers or bool(data.get("stepovers"))
            return status
        except (ValueError, IndexError, KeyError, TypeError):
            raise AgentError(f"the agent's status is unreadable: {(res.error or text)[:200]!r}") from None

    def before_resume(self) -> None:
        """Before gdb resumes the target after a hit it presented: the agent checks whether gdb cancelled that
        hit's step over (another process's stop came first), so that the trap it runs into next is not
        recorded as a second hit (agent/stepovers.py). Nothing is asked while no such hit is watched."""
        if not self.stepovers:
            return
        text = "".join(self._ask("pttrace-stepovers", timeout=10).console).strip()
        self.stepovers = text != "0"

    def add_breakpoint(self, spec: str) -> str | None:
        """gdb's reason for refusing the breakpoint, or None."""
        res = self._ask(f"pttrace-break {spec}")
        if res.error:
            return res.error.replace("Error occurred in Python: ", "").strip().rstrip(".")
        return None

    def break_address(self, items: list[dict]) -> None:
        """More breakpoints our index resolved ({label, library, offset, function[, plt]})."""
        res = self._ask("pttrace-break-address " + json.dumps(items), timeout=60)
        if res.error:
            raise AgentError(f"the agent refused breakpoints by address: {res.error.strip()}")

    def child_entries(self) -> None:
        """Gdb read symbols: the breakpoints it resolves by name get entries for fork children at their new
        locations (agent/breakpoints.py, add_child_entries)."""
        self._ask("pttrace-child-entries")

    def delete_breakpoint(self, spec: str) -> None:
        self._ask(f"pttrace-delete {spec}")

    def enable_breakpoint(self, spec: str, on: bool) -> str | None:
        """Turn a breakpoint on or off; the agent's reason for refusing (no such breakpoint), or None."""
        res = self._ask(f"pttrace-{'enable' if on else 'disable'} {spec}")
        if res.error:
            return res.error.replace("Error occurred in Python: ", "").strip().rstrip(".")
        return None

    def dump_breakpoints(self, timeout: float = 30.0) -> None:
        """Append the breakpoints with their resolved locations to the session."""
        self._ask("pttrace-dump", timeout=timeout)

    def set_mode(self, mode: str) -> None:
        res = self._ask(f"pttrace-mode {mode}")
        if res.error:
            raise AgentError(f"the agent refused mode {mode!r}: {res.error}")

    def record_stop(self, signal: str | None) -> None:
        self._ask(f"pttrace-record-stop {signal}")

    def rerecord(self) -> None:
        self._ask("pttrace-rerecord", timeout=60)

    def followed(self) -> None:
        """The operators of ``need_ops`` are broken on (or said why not)."""
        self._ask("pttrace-followed")

    def snapshot(self) -> dict | None:
        """The selected thread's call path ({thread, frames, truncated}), or None when it cannot be read
        (the target is running)."""
        res = self._ask("pttrace-snapshot")
        try:  # names from the target: decoded like a session's records, control characters spelled out
            data = records.decode_json("".join(res.console).strip().splitlines()[-1].encode("utf-8", "surrogateescape"))
        except (records.BadRecord, IndexError):
            return None
        return data if isinstance(data, dict) else None

    def cfi_add(self, library: str, copy: str) -> str | None:
        """Give gdb the library's CFI-only copy; gdb's reason for refusing it, or None."""
        res = self._ask("pttrace-cfi-add " + json.dumps({"library": library, "copy": copy}), timeout=60)
        return res.error.strip() if res.error else None

    def library_stops(self, rules_json: str) -> None:
        """The library loads gdb stops the target at (the agent's libstops.Rules; its catchpoint the first time)."""
        res = self._ask(f"pttrace-library-stops {rules_json}")
        if res.error:
            raise AgentError(f"the agent could not take the rules for library loads: {res.error}")

    def warm(self) -> None:
        """The agent does what its import left to first use (it runs while the target starts)."""
        self._ask("pttrace-warm")

    def process_ready(self, inferior: int) -> None:
        self._ask(f"pttrace-process-ready {int(inferior)}")

    def exec_seen(self) -> None:
        self._ask("pttrace-exec-seen")

    def quiet(self, on: bool) -> None:
        """Every breakpoint off but execve's (a process goes through its exec alone), or on again."""
        res = self._ask(f"pttrace-quiet {'on' if on else 'off'}")
        if res.error:
            raise AgentError(f"the agent could not turn its breakpoints {'off' if on else 'on'}: {res.error}")

    def ptrace(self, request: str) -> object:
        """Raw ptrace by gdb's own tracer thread, for a stop gdb lost (watchdog.py): its JSON answer."""
        res = self._ask(f"pttrace-ptrace {request}", timeout=10)
        try:
            return json.loads("".join(res.console).strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AgentError(f"the agent's ptrace answer is unreadable: {(res.error or '')[:200]!r}") from None

    def cfi_drop(self, library: str) -> None:
        self._ask(f"pttrace-cfi-drop {library}")
