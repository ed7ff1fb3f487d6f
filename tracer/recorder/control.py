"""Interactive control of a recording (the TUI's stop mode): mode, continue, step, interrupt, and
breakpoints added or deleted while the target runs. Each call blocks for gdb's answer only, never for
the target; the caller serialises them (one control command at a time)."""
from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING

from tracer.errors import UsageError
from tracer.recorder.prompt import Answer, GdbPrompt, Place, classify, needs_symbols
from tracer.session.model import Frame, Hit, RecordError, Thread, objects

if TYPE_CHECKING:
    from tracer.recorder.recorder import Recorder


class Controller:
    def __init__(self, recorder: "Recorder"):
        self._rec = recorder

    @property
    def target_state(self) -> str:
        return self._rec.target_state

    def set_mode(self, mode: str) -> None:
        self._rec.agent.set_mode(mode)
        self._rec.mode = mode

    def _every_process(self, run: bool) -> None:
        """Whether resuming lets every followed process run (continue) or only the stopped one (step,
        next, finish: as in gdb without schedule-multiple; else another process's hit would end the
        step, in the wrong process)."""
        if self._rec.config.follow_children:
            self._rec.mi.command(f"-gdb-set schedule-multiple {'on' if run else 'off'}", check=False)

    def resume(self) -> None:
        self._rec.main.state = "running"
        self._every_process(True)
        self._rec.mi.command("-exec-continue", check=False)

    # Each returns what gdb said as it went ("Single stepping until exit from function X, which has
    # no line number information.", "Run till exit from #0 ..."): its console text before ^running.
    def _run_alone(self, command: str) -> str:
        self._every_process(False)
        return "".join(self._rec.mi.command(command, check=False).console).strip()

    def step(self) -> str:
        self._rec.policy.for_stepping()
        return self._run_alone("-exec-step")

    def next(self) -> str:
        self._rec.policy.for_stepping()
        return self._run_alone("-exec-next")

    def finish(self) -> str:
        return self._run_alone("-exec-finish")

    def gdb_line(self, line: str, place: Place) -> tuple[Answer, str]:
        """A line typed at the TUI's prompt, run by gdb in ``place``; with what it is to the run
        (``prompt.classify``: plain, resuming, continuing). A refused line raises ``UsageError``."""
        kind = classify(line).name
        if kind == "refused":
            raise UsageError(classify(line).why + ".")
        before = None
        if kind == "resuming":
            def before():
                self._rec.policy.for_stepping()
                self._every_process(False)
        elif kind == "continuing":
            def before():
                self._rec.main.state = "running"
                self._every_process(True)
        prompt = GdbPrompt(self._rec.mi)
        answer = prompt.run(line, place, before=before)
        policy = self._rec.policy
        gaps = sorted(os.path.basename(p) for p in policy.cfi_libs)
        if kind == "plain" and gaps and needs_symbols(answer.error):
            # gdb has torch's big libraries as unwind tables only (start-up and memory): a function it
            # cannot find may be in one of them. Their symbols once, then the line again.
            policy.for_stepping()
            answer = prompt.run(line, place)
            answer = dataclasses.replace(answer, text=f"(pttrace gave gdb the symbols of {', '.join(gaps)}, which "
                                                      f"it had as unwind tables only)\n{answer.text}".rstrip("\n"))
        return answer, kind

    def gdb_complete(self, text: str) -> list[str]:
        return GdbPrompt(self._rec.mi).complete(text)

    def interrupt(self) -> None:
        self._rec.interrupting = True  # the SIGINT stop that follows is ours, not the target's
        self._rec.mi.command("-exec-interrupt", check=False)

    def add_breakpoint(self, spec: str, fatal: bool = False) -> None:
        """``fatal``: a refusal is the user's mistake at start-up (one sentence, exit 2), not a warning."""
        if not spec.strip() or any(ch in spec for ch in "\r\n\0"):
            raise UsageError(f"{spec!r} is not a breakpoint location.")
        rec = self._rec
        if rec.started:
            rec.policy.for_breakpoint(spec)  # gdb resolves this one by name: it needs the library's symbols
        refused = rec.agent.add_breakpoint(spec)
        if refused:
            if fatal:
                raise UsageError(f"gdb rejects the breakpoint {spec!r}: {refused}.")
            rec.warn(f"breakpoint {spec!r} was refused by gdb: {refused}")
        rec.agent.dump_breakpoints()

    def delete_breakpoint(self, spec: str) -> None:
        self._rec.agent.delete_breakpoint(spec)
        self._rec.agent.dump_breakpoints()

    def enable_breakpoint(self, spec: str, on: bool) -> None:
        """Turn a breakpoint off (kept, never stopped at) or on again; the dump tells the readers."""
        refused = self._rec.agent.enable_breakpoint(spec, on)
        if refused:
            raise UsageError(f"{refused}.")
        self._rec.agent.dump_breakpoints()

    def snapshot(self) -> Hit | None:
        """The call path of the stopped thread, as a Hit with seq 0 (None while the target runs)."""
        if self._rec.main.state == "stopped":
            self._rec.policy.load_waiting()  # stopped anywhere (an interrupt): unwound with every library
        data = self._rec.agent.snapshot()
        if data is None:
            return None
        try:
            frames = [Frame.from_dict(f) for f in objects("frames", data.get("frames") or [])]
            hit = Hit(seq=0, breakpoint=None, thread=Thread.from_dict(data.get("thread")), time=time.time(),
                      frames=frames, truncated=bool(data.get("truncated")))
        except RecordError:
            return None
        self._rec.tailer.fill(hit.frames)
        return hit
