"""What the recorder does with gdb's MI events while the target runs: a process started, libraries
loaded (symbols to read, names to break on again), each stop (read by stops.py) acted on, gdb's news of
a child it let go, gdb gone."""
from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import replace
from typing import Callable

from tracer.gdb.mi import MiConnection
from tracer.recorder import guard
from tracer.recorder.agent_link import AgentError, AgentLink
from tracer.recorder.children import ExecChildren
from tracer.recorder.config import TraceConfig
from tracer.recorder.control import Controller
from tracer.recorder.ending import Ending
from tracer.recorder.events import GdbBreakpointChanged, RecorderEvent, TargetStateChanged, TargetStopped
from tracer.recorder.exec_hold import ExecHold
from tracer.recorder.follow import Follower
from tracer.recorder.later_libraries import LaterLibraries
from tracer.recorder.libraries import LibraryPolicy
from tracer.recorder.outcome import Outcome
from tracer.recorder.processes import ProcessTable
from tracer.recorder.stops import Stop, StopKind, read_stop
from tracer.recorder.user_stop import UserStops

log = logging.getLogger("pttrace.recorder")
# gdb 13 with the default detach-on-fork: "[Detaching after fork from child process 1234]".
_DETACHED_CHILD = re.compile(r"Detaching after (v?fork) from child process (\d+)")
# gdb's news of an exec, before its exec stop: "process 1234 is executing new program: /usr/bin/sleep".
_NEW_PROGRAM = re.compile(r"process (\d+) is executing new program: (.+)")


class Reactions:
    """Acts on gdb's events: sends gdb the commands they call for (through the agent, the symbol policy, the
    process table), ends the target through ``ending``, and says how the recording ended in ``outcome``."""

    def __init__(self, mi: MiConnection, agent: AgentLink, policy: LibraryPolicy, later: LaterLibraries,
                 follower: Follower | None, processes: ProcessTable, children: ExecChildren, controller: Controller,
                 ending: Ending, outcome: Outcome, config: TraceConfig, ending_asked: Callable[[], bool],
                 emit: Callable[[RecorderEvent], None], warn: Callable[[str], None]):
        self._mi = mi
        self._agent = agent
        self._policy = policy
        self._later = later
        self._follower = follower
        self._processes = processes
        self._children = children
        self._controller = controller
        self._ending = ending
        self._outcome = outcome
        self._follow_children = config.follow_children
        self._max_hits = config.max_hits
        self._ending_asked = ending_asked
        self._emit = emit
        self._gdb_seen: tuple[str, int] | None = None  # gdb's state and CPU at vanished()'s last look
        self._warn = warn
        self.exec_news: tuple[int, str] | None = None  # an exec gdb announced whose stop has not come yet
        self.user_stops = UserStops(self.resume, warn,
                                    lambda pid: sum(1 for i in processes.live() if i.pid not in (None, pid)),
                                    self._signal_sender)

    def resume(self) -> None:
        """gdb continues the run; the processes count as running from its ``^running`` on, not from the
        ``*running`` that follows it. An end asked for in between (a SIGHUP) found them "stopped", sent no
        interrupt, and the breakpoint dump and the end record were written while the target ran into its next
        hit, whose record the agent wrote after the end (test_hangup's [record] case, 2 suites in 3)."""
        self._agent.before_resume()
        res = self._mi.command("-exec-continue", check=False)
        if res.message == "running":
            for inferior in self._processes.live():
                inferior.state = "running"

    def _signal_sender(self) -> int | None:
        """Who sent the signal of the stop gdb reports now (its siginfo's si_pid); None if gdb cannot say."""
        res = self._mi.command("-data-evaluate-expression $_siginfo._sifields._kill.si_pid", check=False)
        value = (res.payload or {}).get("value")
        return int(value) if isinstance(value, str) and value.isdigit() else None

    def _hold(self) -> ExecHold:
        return ExecHold(self._mi, self._agent, self._processes, self._children, self, self._follow_children,
                        self._warn)

    def exec_stopped(self) -> None:
        self.exec_news = None

    def console(self, text: object) -> None:
        """gdb's own messages while the target runs: a child process it let go is a warning."""
        news = _NEW_PROGRAM.search(text) if isinstance(text, str) else None
        if news:
            self.exec_news = (int(news.group(1)), news.group(2).strip())
        m = _DETACHED_CHILD.search(text) if isinstance(text, str) else None
        if m and self._follow_children:
            self._children.not_followed(int(m.group(2)))
        elif m:
            self._warn(f"child process {m.group(2)} (a {m.group(1)} of the target) was not followed: its "
                           "hits are not recorded (pttrace follows one process; DataLoader workers, "
                           "multiprocessing and subprocesses run untraced)")

    def log(self, text: object) -> None:
        """gdb's error messages while the target runs. An exec libc's execve did not see (a raw system call)
        comes with every breakpoint on: gdb 13 fails to put those set by address into the new program
        ("Cannot insert breakpoint") and drops the exec's stop; the process is let go from here."""
        if self.exec_news and isinstance(text, str) and text.startswith("Cannot insert breakpoint"):
            pid, program = self.exec_news
            self.exec_news = None
            self._hold().lost_exec(pid, program)

    def gdb_gone(self, rc: int | None) -> None:
        """gdb ended under us: killed by a signal (somebody cut the run short) or died on its own."""
        self._outcome.gdb_lost = True
        if isinstance(rc, int) and rc < 0:
            self._outcome.end("interrupted", f"gdb was killed by signal {-rc}")
            self._warn(f"gdb was killed by signal {-rc}; hits recorded before that are kept")
        else:
            self._outcome.end("gdb-died", "gdb-died")

    def notify(self, message: str | None, payload: dict) -> bool:
        """React to one MI notification; True when the recording is over."""
        processes = self._processes
        if message == "thread-group-started":
            try:
                processes.started(payload.get("id") or "i1", int(payload["pid"]))
            except (KeyError, TypeError, ValueError):
                log.debug("thread-group-started without a pid: %r", payload)
            return False
        if message == "thread-created" and payload.get("id") and payload.get("group-id"):
            processes.thread_groups[str(payload["id"])] = str(payload["group-id"])
            return False
        if message == "thread-exited":
            processes.thread_exited(payload.get("group-id"))
            return False
        if message == "thread-group-exited":
            code = payload.get("exit-code")
            try:
                processes.exited(payload.get("id") or "i1", int(code, 8) if code else None)
            except ValueError:
                processes.exited(payload.get("id") or "i1")
            return False
        if message == "stopped":
            for inferior in processes.inferiors.values():
                if inferior.state not in ("exited", "detached"):
                    inferior.state = "stopped"  # all-stop mode: every inferior stops
            stop = read_stop(payload, ending=self._ending_asked(), interrupting=self._controller.interrupting)
            log.debug("stop: %s", stop)
            return self.stop(stop)
        if message == "running":
            for inferior in processes.live():  # schedule-multiple: every process runs
                inferior.state = "running"
            self.user_stops.resumed()
            self._emit(TargetStateChanged("running"))  # after a continue, step or finish from the controller
            return False
        if message == "library-loaded":
            path = payload.get("target-name") or payload.get("id")
            if path and payload.get("symbols-loaded") != "1":
                self._policy.library_loaded(path)
            if path:
                self._later.loaded(path)
            return False
        if message in ("breakpoint-modified", "breakpoint-created"):
            self._emit(GdbBreakpointChanged(payload))
        return False

    def stopped(self, stop: Stop) -> None:
        self._emit(TargetStopped(stop.reason, stop.thread_id, stop.signal, stop.breakpoint, stop.frame,
                                 stop.returned, self._processes.pid_of_thread(stop.thread_id)))

    def stop(self, stop: Stop) -> bool:
        """Act on one stop; True when the recording is over."""
        mi = self._mi
        kind = stop.kind
        if kind in (StopKind.EXITED, StopKind.KILLED):
            return self.exit(stop)
        if kind is StopKind.INTERRUPTED:
            self._controller.interrupt_arrived()
            self.stopped(stop)
        elif kind is StopKind.CRASHED:
            if stop.thread_id:
                mi.command(f"-thread-select {stop.thread_id}", check=False)
            self._policy.load_waiting()  # gdb unwinds the crash's stack with every library's symbols
            self._agent.record_stop(stop.signal)
            self._outcome.end("target-crashed", f"crashed with {stop.signal}")
            self.stopped(stop)
            self._ending.finish_target()
            return True
        elif kind is StopKind.SIGNAL:
            if self.user_stops.keep(self._processes.pid_of_thread(stop.thread_id), stop.signal):
                self.stopped(stop)  # a stop signal: stopped until a SIGCONT (user_stop.py)
            else:
                self.resume()  # the target's own signal: pass it on
        elif kind is StopKind.LIBRARIES:
            self._policy.decide_new()
            self.break_in_later_libraries()
            self.resume()
        elif kind is StopKind.BREAKPOINT:
            return self.breakpoint(stop)
        elif kind is StopKind.VFORKED:
            self._hold().from_vfork()
            self.continue_live()
        elif kind is StopKind.EXECD:
            program = self.exec_news[1] if self.exec_news else None
            self.exec_news = None
            self._hold().at_exec({"thread-id": stop.thread_id, "new-exec": program})
            self.continue_live()
        elif kind is StopKind.STEPPED:
            self.stopped(stop)
        return False

    def exit(self, stop: Stop) -> bool:
        """A process ended. The recording ends with the last one; until then the others run on."""
        processes = self._processes
        # gdb's =thread-group-exited came first and said which one (and its exit code); the stop adds the
        # signal of a process killed by one.
        inferior = processes.get(stop.group) if stop.group else processes.last_exited
        if inferior is not None:
            if stop.kind is StopKind.EXITED:
                processes.exited(inferior.group, stop.exit_code)
            else:
                processes.exited(inferior.group, signal=stop.signal)
        if self.continue_live():
            return False
        if processes.main.state == "detached" and not self._children.idle():
            # The target itself went to a recorder of its own (an exec, a fork storm's rescue) while this
            # gdb still held some of its children: the last of them ending is not the end of the run, which
            # ends with that recorder (handed_over_all). Ending here killed the handed-over target and its
            # recorder (measured: 1 fork-storm run in 3 lost the hits after the rescue).
            return False
        if processes.main.signal:
            self._outcome.end("target-crashed", f"killed by {processes.main.signal}")
        else:
            self._outcome.end("completed", "exited")
        return True

    def vanished(self) -> bool:
        """True (and the recording ended) when every process gdb follows is gone although gdb never said
        so: gdb 13 can lose the end of a many-threaded process killed by SIGKILL while it stops its
        threads, and the exits of children under a fork storm, and would then wait for ever. The status
        says what is known: the target's own end when gdb reported it, a crash only when it did not."""
        processes = self._processes
        live = [i for i in processes.live() if i.pid is not None]
        if not live and processes.main.state == "exited":
            # Every process has ended, the target too, each read from its zombie when gdb said its last
            # thread ended (ProcessTable.thread_exited), and gdb reported no stop for the last of them.
            if not self._gdb_idle():
                return False
            main = processes.main
            unreported = [i for i in processes.inferiors.values() if i.state == "exited" and not i.end_reported]
            if unreported:
                self._warn("; ".join(f"process {i.pid} ended (" + (f"exit code {i.exit_code}" if i.signal is None
                                                                    else f"killed by {i.signal}")
                                     + ", read from /proc) without gdb reporting it" for i in unreported)
                           + "; the recording was ended there and every hit before it is kept")
            if main.signal:
                self._outcome.end("target-crashed", f"killed by {main.signal}")
            else:
                self._outcome.end("completed", "exited")
            return True
        if not live or any(guard.process_state(pid) not in (None, "Z", "X") for pid in (i.pid for i in live)
                           if pid is not None):
            self._gdb_seen = None
            return False
        if not self._gdb_idle():
            return False  # gdb is at work, or waits for a CPU on a busy machine: it tells the end itself
        for inferior in live:
            end = guard.zombie_end(inferior.pid) if inferior.pid is not None else None
            processes.exited(inferior.group, *(end or (None, None)), by_gdb=False)
        pids = ", ".join(str(i.pid) for i in live)
        if processes.main in live and (processes.main.exit_code is not None or processes.main.signal):
            # Its zombie still says how it ended (gdb has not reaped it): that end, not a guess.
            main = processes.main
            how = f"exit code {main.exit_code}" if main.signal is None else f"killed by {main.signal}"
            self._warn(f"process {pids} ended ({how}, read from /proc) without gdb reporting it; the recording "
                       "was ended there and every hit before it is kept")
            if main.signal:
                self._outcome.end("target-crashed", f"killed by {main.signal}")
            else:
                self._outcome.end("completed", "exited")
            return True
        if processes.main.state == "detached" and not self._children.idle():
            # The target itself went to a recorder of its own (an exec, a fork storm's rescue): the run
            # ends with that recorder (handed_over_all), not with the last process this gdb held.
            self._warn(_children_ended_unreported(live))
            return False
        if processes.main in live:
            self._warn(f"process {pids} ended (killed, it seems) without gdb reporting it; the recording was "
                       "ended there and every hit before it is kept")
            self._outcome.end("target-crashed", "gone without a word from gdb")
        else:
            self._warn(_children_ended_unreported(live))
            if processes.main.signal:
                self._outcome.end("target-crashed", f"killed by {processes.main.signal}")
            else:
                self._outcome.end("completed", "exited")
        return True

    def _gdb_idle(self) -> bool:
        """gdb sleeps and has used no CPU since the last look (a second or more before): it is not about to
        report an end. At load 14 gdb once took over 2 s to report a normal exit, and the run was called a
        crash with its exit code lost (test_processes); a gdb that runs or waits for a CPU is in state R."""
        seen = guard.state_and_cpu(self._mi.proc.pid)
        last, self._gdb_seen = self._gdb_seen, seen
        return seen is not None and seen[0] == "S" and seen == last

    def handed_over_all(self) -> bool:
        """True (and the recording ended) when the target itself executed Python, was handed over to a
        recorder of its own (children.py), and every such recorder has ended: nothing is left to wait for."""
        processes = self._processes
        if processes.main.state != "detached" or processes.live() or not self._children.idle():
            return False
        if self._outcome.status == "running":
            self._outcome.end("completed", "exited")
        return True

    def continue_live(self) -> bool:
        """Let the processes still followed go on (one of them selected: gdb continues the selected one's
        inferior, and with schedule-multiple every other); False when there is none."""
        live = self._processes.live()
        if not live:
            return False
        if self._mi.stop_waiting():
            # Another process stopped meanwhile (a fork child's first hit right after two DataLoader workers'
            # exits, at load 15): a continue now would let it run past that hit, whose stop is read after,
            # with the child gone (2 runs in 5 lost the child's hit). That stop is acted on first.
            log.debug("continue skipped: a stop is waiting")
            return True
        self._processes.select(self._mi, live[0])
        self.resume()
        return True

    def breakpoint(self, stop: Stop) -> bool:
        """gdb stopped at a hit the agent did not let go on: symbols it needs, the end of the
        run (max-hits, an unwritable session), or stop mode."""
        agent, policy, mi = self._agent, self._policy, self._mi
        try:
            status = agent.status()
            if status.exec_request:
                self._hold().from_execve(status.exec_request)
                self.continue_live()
                return False
            if (status.need_process is not None or status.need_libs or status.need_launcher) and stop.thread_id:
                # The work below runs in gdb's selected thread, which must be the one that stopped: gdb can
                # leave another process's inferior selected, one that ended meanwhile (seen once in CI: a fork
                # child's first hit set up and read in an ended DataLoader worker's inferior, its hit written
                # without a thread or a frame).
                mi.command(f"-thread-select {stop.thread_id}", check=False)
            if status.need_process is not None and not status.write_error:
                # A child's first hit: its libraries get their symbols as its parent's have them.
                self._processes.set_up_child(mi, agent, policy, status.need_process)
                agent.rerecord()
                status = agent.status()
            if status.need_ops and self._follower is not None:
                # --follow met an operator for the first time: break on its functions, then go on.
                items = self._follower.items(status.need_ops)
                if items:
                    policy.breakpoints_added(items)
                    agent.break_address(items)
                agent.followed()
                if not (status.need_libs or status.need_launcher or status.stop or status.write_error):
                    self.resume()
                    return False
            if (status.need_libs or status.need_launcher) and not status.write_error:
                # The stack passed through libraries whose symbols we skipped: load them, record again
                # (gdb unwinds further with them, maybe into more such libraries: the agent asks again,
                # never twice for one). Or it is a parallel worker's: the agent reads the launching
                # thread, then records it.
                while (status.need_libs or status.need_launcher) and not status.write_error:
                    if status.need_libs:
                        policy.load_for_stack(status.need_libs)
                    agent.rerecord()
                    status = agent.status()
                if not status.stop:
                    self.resume()
                    return False
        except AgentError as exc:
            self._warn(f"the agent inside gdb did not answer ({exc.message}); the run was ended so that no "
                       "limit is missed")
            self._outcome.end_reason = "agent-failed"
            self._ending.finish_target()
            return True
        if status.write_error:
            self._outcome.write_error = status.write_error
            self._outcome.end_reason = "session file unwritable"
            self._ending.finish_target()
            return True
        if stop.breakpoint in status.entries:  # a fork child's first stop, at its named breakpoint's entry
            stop = replace(stop, breakpoint=status.entries[stop.breakpoint])
        self.stopped(stop)
        if self._max_hits and status.hits >= self._max_hits:
            self._outcome.end_reason = "max-hits"
            self._ending.finish_target()
            return True
        if self._controller.mode == "stop":
            return False  # the controller (TUI) decides what happens next
        self.resume()
        return False

    def break_in_later_libraries(self) -> None:
        """The names set by address, found again in the libraries loaded since the last stop."""
        items = self._later.breakpoints()
        if items:
            self._policy.breakpoints_added(items)
            try:
                self._agent.break_address(items)
            except AgentError as exc:
                self._warn(f"{exc.message}; --break {items[0]['label']} is not broken on in "
                         f"{os.path.basename(items[0]['library'])}")

    def wait_stopped(self, timeout: float) -> bool:
        """Wait for the target to stop, still taking note of other events (library loads)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ev = self._mi.next_event(timeout=0.1)
            if ev is None:
                continue
            if ev.kind == "notify" and ev.message == "stopped":
                for inferior in self._processes.live():
                    inferior.state = "stopped"
                return True
            if ev.kind == "gdb-exited":
                return False
            if ev.kind == "notify":
                self.notify(ev.message, ev.payload or {})
        return False

    def drain(self) -> None:
        """The notifications gdb sent meanwhile, acted on (a stop excepted)."""
        while (ev := self._mi.next_event(timeout=0.05)) is not None:
            if ev.kind == "notify" and ev.message != "stopped":
                self.notify(ev.message, ev.payload or {})


def _children_ended_unreported(ended: list) -> str:
    """What is known of children whose end gdb never reported: each end read from its zombie, or unknown
    (no zombie left to read)."""
    known = [i for i in ended if i.exit_code is not None or i.signal]
    unknown = [i for i in ended if i not in known]
    said = [f"process {i.pid} (a child of the target) ended without gdb reporting it ("
            + (f"exit code {i.exit_code}" if i.signal is None else f"killed by {i.signal}") + ", read from /proc)"
            for i in known]
    if unknown:
        said.append(f"process {', '.join(str(i.pid) for i in unknown)} (a child of the target) ended without gdb "
                    "reporting it: its exit status is not known")
    return "; ".join(said) + "; every hit before its end is kept"
