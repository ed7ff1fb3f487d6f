"""Interactive control of a recording (the TUI's stop mode): mode, continue, step, interrupt, and
breakpoints added or deleted while the target runs. Each call blocks for gdb's answer only, never for
the target; the caller serialises them (one control command at a time)."""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable

from tracer.errors import UsageError
from tracer.gdb.mi import GdbCommandError, MiConnection
from tracer.recorder.agent_link import AgentLink
from tracer.recorder.inferiors import Inferior
from tracer.recorder.libraries import LibraryPolicy
from tracer.session.model import Frame, Hit, RecordError, Thread, objects

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tracer.recorder.prompt import Answer, Place

# tracer.recorder.prompt (the TUI's gdb prompt: five dataclasses and three patterns) is imported when a line is
# typed, not with the recorder: its import was ~3% of pttrace's work before the target may start.


class Controller:
    """Owns what the user steers: the mode (record or stop) and the interrupt it asked for, which the
    reactions read (``mode``, ``interrupting``, ``interrupt_arrived``)."""

    def __init__(self, mi: MiConnection, agent: AgentLink, policy: LibraryPolicy, main: Inferior, mode: str,
                 follow_children: bool, fill: Callable[[list[Frame]], None], warn: Callable[[str], None],
                 on_mode: Callable[[str], None] = lambda mode: None,
                 on_breakpoint: Callable[[str, str], None] = lambda spec, change: None):
        self._mi = mi
        self._agent = agent
        self._policy = policy
        self._main = main
        self._follow_children = follow_children
        self._fill = fill
        self._warn = warn
        self.mode = mode
        self._on_mode = on_mode  # the recorders of children that executed Python follow the mode
        self._on_breakpoint = on_breakpoint  # and the breakpoints changed during the run (spec, change)
        self.interrupting = False  # interrupt(): the SIGINT stop that follows is ours, not the target's

    @property
    def target_state(self) -> str:
        return self._main.state

    def set_mode(self, mode: str) -> None:
        self._agent.set_mode(mode)
        self.mode = mode
        self._on_mode(mode)

    def interrupt_arrived(self) -> None:
        """The stop of our interrupt came."""
        self.interrupting = False

    def _every_process(self, run: bool) -> None:
        """Whether resuming lets every followed process run (continue) or only the stopped one (step,
        next, finish: as in gdb without schedule-multiple; else another process's hit would end the
        step, in the wrong process)."""
        if self._follow_children:
            self._mi.command(f"-gdb-set schedule-multiple {'on' if run else 'off'}", check=False)

    def resume(self) -> None:
        self._main.state = "running"
        self._every_process(True)
        self._agent.before_resume()
        self._mi.command("-exec-continue", check=False)

    # Each returns what gdb said as it went ("Single stepping until exit from function X, which has
    # no line number information.", "Run till exit from #0 ..."): its console text before ^running.
    def _run_alone(self, command: str) -> str:
        self._every_process(False)
        self._agent.before_resume()
        res = self._mi.command(command, check=False)
        if res.error:  # the target did not move: said, not shown as a stop where it already stood
            raise GdbCommandError(f"gdb: {res.error}")
        return "".join(res.console).strip()

    def step(self) -> str:
        self._policy.for_stepping()
        return self._run_alone("-exec-step")

    def next(self) -> str:
        self._policy.for_stepping()
        return self._run_alone("-exec-next")

    def finish(self) -> str:
        return self._run_alone("-exec-finish")

    def gdb_line(self, line: str, place: Place, say: Callable[[str], None] | None = None) -> tuple[Answer, str]:
        """A line typed at the TUI's prompt, run by gdb in ``place``; with what it is to the run
        (``prompt.classify``: plain, resuming, continuing). A refused line raises ``UsageError``. ``say``
        shows a note at once, before gdb runs the line again (what a call prints in the target comes
        while it runs, before gdb's answer)."""
        from tracer.recorder.prompt import GdbPrompt, as_gdb_line, classify, needs_symbols

        kind = classify(line).name
        if kind == "refused":
            raise UsageError(classify(line).why + ".")
        before = None
        if kind == "resuming":
            def before():
                self._policy.for_stepping()
                self._every_process(False)
                self._agent.before_resume()
        elif kind == "continuing":
            def before():
                self._main.state = "running"
                self._every_process(True)
                self._agent.before_resume()
        prompt = GdbPrompt(self._mi)
        line = as_gdb_line(line)
        answer = prompt.run(line, place, before=before)
        policy = self._policy
        gaps = sorted(os.path.basename(p) for p in policy.cfi_libs)
        if kind == "plain" and gaps and needs_symbols(answer.error):
            # gdb has torch's big libraries as unwind tables only (start-up and memory): a function it
            # cannot find may be in one of them. Their symbols once, then the line again.
            policy.for_stepping()
            note = f"(pttrace gave gdb the symbols of {', '.join(gaps)}, which it had as unwind tables only)"
            if say is not None:
                say(note)
            answer = prompt.run(line, place)
            if say is None:
                answer = dataclasses.replace(answer, text=f"{note}\n{answer.text}".rstrip("\n"))
        return answer, kind

    def threads(self):
        """Every thread of the stopped processes (``prompt.ThreadRow``), gdb's selected one marked."""
        from tracer.recorder.prompt import GdbPrompt

        return GdbPrompt(self._mi).threads()

    def select_thread(self, thread_id: str) -> Hit | None:
        """Make gdb's thread ``thread_id`` the one s/n/f step and the prompt looks at; its call path."""
        if not str(thread_id).isdigit():
            raise UsageError(f"{thread_id!r} is not a thread number.")
        res = self._mi.command(f"-thread-select {thread_id}", check=False)
        if res.error:
            raise UsageError(f"gdb cannot select thread {thread_id}: {res.error}")
        return self.snapshot()

    def gdb_complete(self, text: str) -> list[str]:
        from tracer.recorder.prompt import GdbPrompt

        return GdbPrompt(self._mi).complete(text)

    def interrupt(self) -> None:
        self.interrupting = True
        self._mi.command("-exec-interrupt", check=False)

    def add_breakpoint(self, spec: str, at_start: bool = False) -> None:
        """``at_start``: one of the command's own breakpoints, whose libraries the symbol policy planned for,
        and whose refusal is the user's mistake (one sentence, exit 2), not a warning."""
        if not spec.strip() or any(ch in spec for ch in "\r\n\0"):
            raise UsageError(f"{spec!r} is not a breakpoint location.")
        if not at_start:
            self._policy.for_breakpoint(spec)  # gdb resolves this one by name: it needs the library's symbols
        refused = self._agent.add_breakpoint(spec)
        if refused:
            if at_start:
                raise UsageError(f"gdb rejects the breakpoint {spec!r}: {refused}.")
            self._warn(f"breakpoint {spec!r} was refused by gdb: {refused}")
        self._agent.dump_breakpoints()
        if not at_start and not refused:
            self._on_breakpoint(spec, "add")

    def delete_breakpoint(self, spec: str) -> None:
        self._agent.delete_breakpoint(spec)
        self._agent.dump_breakpoints()
        self._on_breakpoint(spec, "remove")

    def enable_breakpoint(self, spec: str, on: bool) -> None:
        """Turn a breakpoint off (kept, never stopped at) or on again; the dump tells the readers."""
        refused = self._agent.enable_breakpoint(spec, on)
        if refused:
            raise UsageError(f"{refused}.")
        self._agent.dump_breakpoints()
        self._on_breakpoint(spec, "on" if on else "off")

    def snapshot(self) -> Hit | None:
        """The call path of the stopped thread, as a Hit with seq 0 (None while the target runs)."""
        if self._main.state == "stopped":
            self._policy.load_waiting()  # stopped anywhere (an interrupt): unwound with every library
        data = self._agent.snapshot()
        if data is None:
            return None
        try:
            frames = [Frame.from_dict(f) for f in objects("frames", data.get("frames") or [])]
            hit = Hit(seq=0, breakpoint=None, thread=Thread.from_dict(data.get("thread")), time=time.time(),
                      frames=frames, truncated=bool(data.get("truncated")))
        except RecordError:
            return None
        self._fill(hit.frames)
        return hit
