"""Which gdb the TUI's keys steer when a child that executed Python stands at a stop in a gdb of its own
(tracer/tui/steering.py), and what that child's recorder tells the main listener (events.from_child)."""
from __future__ import annotations

from tracer.recorder.events import (HitRecorded, RecorderFinished, TargetOutput, TargetStateChanged, TargetStopped,
                                    from_child)
from tracer.tui.steering import MAIN, Steering


def test_a_childs_stop_and_state_reach_the_tui_marked_as_its():
    stop = from_child(41, TargetStopped("breakpoint-hit", thread_id="1", breakpoint="1"))
    assert isinstance(stop, TargetStopped) and (stop.child, stop.process, stop.thread_id) == (41, 41, "1")
    assert from_child(41, TargetStateChanged("running")) == TargetStateChanged("running", child=41)
    assert from_child(41, RecorderFinished("completed")) == TargetStateChanged("finished", child=41)
    assert from_child(41, TargetOutput("x")) is None  # its target's output is its own recorder's business


def test_the_gdb_that_stopped_last_is_steered_and_only_its_state_is_shown():
    steer = Steering()
    assert steer.child is MAIN and steer.state(MAIN, "running")
    # GIVEN the child stopped in its gdb while the main gdb's parent runs on (waiting for it)
    steer.stopped(41, {"reason": "breakpoint-hit"})
    assert steer.child == 41
    # THEN the main gdb's news that its processes run does not make the TUI say the target runs
    assert not steer.state(MAIN, "running")
    # AND the child's does, once it is continued
    assert steer.state(41, "running")
    assert steer.ran_on() is None  # nothing else is stopped


def test_continuing_one_gdb_turns_the_keys_to_another_still_stopped():
    steer = Steering()
    steer.stopped(MAIN, {"reason": "breakpoint-hit", "pid": 10})
    steer.stopped(41, {"reason": "breakpoint-hit", "pid": 41})
    assert steer.child == 41
    # WHEN the child is continued THEN the main gdb's stop is steered again, and the child's late news of
    # running is not shown
    assert steer.ran_on() == (MAIN, {"reason": "breakpoint-hit", "pid": 10})
    assert steer.child is MAIN and not steer.state(41, "running")
    assert steer.ran_on() is None


def test_a_childs_recorder_that_ended_leaves_the_main_gdb_steered():
    steer = Steering()
    steer.stopped(41, {})
    assert steer.state(41, "running")
    assert not steer.state(41, "finished")
    assert steer.child is MAIN and steer.state(MAIN, "running")


def test_a_hit_of_a_child_still_carries_its_pid():
    from tracer.session.model import Hit, Thread

    hit = Hit(seq=1, breakpoint="f", thread=Thread(id=1), time=0.0, frames=[])
    assert from_child(41, HitRecorded(hit)) == HitRecorded(hit, child=41)


def test_a_step_gdb_refuses_is_said_not_shown_as_a_stop():
    # GIVEN a gdb that refuses -exec-step (a DataLoader worker whose library symbols it could not use)
    import pytest

    from tracer.gdb.mi import GdbCommandError, MiResult
    from tracer.recorder.control import Controller
    from tracer.recorder.agent_link import AgentLink
    from tracer.recorder.inferiors import Inferior

    class Mi:
        def __init__(self):
            self.sent = []

        def command(self, text, timeout=30.0, check=True):
            self.sent.append(text)
            if text == "-exec-step":
                return MiResult(1, "error", {"msg": "Cannot find bounds of current function"})
            return MiResult(1, "running" if text.startswith("-exec") else "done", {}, ["Run till exit\n"])

    class Policy:
        def for_stepping(self):
            pass

    mi = Mi()
    # the agent has no presented hit to check before a resume (agent/stepovers.py): it asks gdb nothing
    control = Controller(mi, AgentLink(mi), Policy(), Inferior("i1", pid=1), "stop", True,  # type: ignore[arg-type]
                         lambda frames: None, lambda text: None)
    # WHEN s is pressed THEN gdb's reason is raised (the TUI shows it), nothing claims a stop
    with pytest.raises(GdbCommandError, match="gdb: Cannot find bounds of current function"):
        control.step()
    # AND a finish gdb runs tells what gdb said
    assert control.finish() == "Run till exit"
    assert mi.sent[-1] == "-exec-finish"


def test_breakpoints_changed_during_the_run_reach_every_childs_recorder(tmp_path):
    # GIVEN the recorders of two children that executed Python, one started before the changes, one after
    import os

    from tracer.recorder.children import Execd, ExecChildren
    from tracer.recorder.config import TraceConfig

    class Control:
        def __init__(self):
            self.calls = []

        def add_breakpoint(self, spec):
            self.calls.append(("add", spec))

        def delete_breakpoint(self, spec):
            self.calls.append(("remove", spec))

        def enable_breakpoint(self, spec, on):
            self.calls.append(("on" if on else "off", spec))

        def set_mode(self, mode):
            self.calls.append(("mode", mode))

    class Sub:
        def __init__(self, cfg):
            self.cfg, self.control, self.end_reason = cfg, Control(), None

        def start(self):
            return tmp_path / "child.jsonl"

        def run(self):
            return "completed"

        def request_stop(self, reason="interrupted"):
            pass

    class Writer:
        def write(self, record):
            pass

    made: list[Sub] = []

    def make(cfg, listener):
        made.append(Sub(cfg))
        return made[-1]

    config = TraceConfig(breakpoints=("wrapper_CPU_sigmoid", "initModule"), python="python", session_dir=tmp_path)
    warned: list[str] = []
    children = ExecChildren(config, "python", tmp_path / "s.jsonl", Writer(), make, lambda ev: None,  # type: ignore[arg-type]
                            warned.append)

    def follow(pid):
        children.hand_over(Execd(pid, ["python", "x.py"], "python"))
        for t in list(children._threads):
            t.join(10)
            assert not t.is_alive()

    me = os.getpid()  # a held child is let go with SIGCONT: harmless to this process
    follow(me)
    # WHEN the user adds one, removes one and turns one off, and the mode changes
    children.breakpoint_changed("THPVariable_ones", "add")
    children.breakpoint_changed("initModule", "remove")
    children.breakpoint_changed("wrapper_CPU_sigmoid", "off")
    children.set_mode("stop")
    # THEN the running child's recorder makes each change
    assert made[0].control.calls == [("add", "THPVariable_ones"), ("remove", "initModule"),
                                     ("off", "wrapper_CPU_sigmoid"), ("mode", "stop")]
    # AND a child that starts later starts with them: its breakpoints, its mode, the one turned off
    follow(me)
    assert made[1].cfg.breakpoints == ("THPVariable_ones", "wrapper_CPU_sigmoid") and made[1].cfg.mode == "stop"
    assert made[1].control.calls == [("off", "wrapper_CPU_sigmoid")]
    assert not warned


class _Engine:
    """gdb's threads and each thread's call path, as the live source's engine gives them."""

    def __init__(self, rows, paths):
        self.rows, self.paths, self.selected = rows, paths, None

    def threads(self):
        return self.rows

    def select_thread(self, thread_id):
        self.selected = thread_id
        return self.paths.get(thread_id)


def _stop(thread_id: int, lwp: int, python: bool):
    from tracer.session.model import Frame, Hit, Thread

    frames = [Frame(function="pthread_cond_wait", kind="native")]
    if python:
        frames.append(Frame(function="<module>", kind="python"))
    return Hit(seq=0, breakpoint=None, thread=Thread(id=thread_id, name="python", lwp=lwp, pid=100), time=0.0,
               frames=frames)


def test_an_interrupt_in_a_thread_without_python_shows_the_main_thread_or_says_it_cannot():
    from tracer.recorder.prompt import ThreadRow
    from tracer.tui.steering import python_thread

    rows = [ThreadRow("1", 100, "python", "stopped", ""), ThreadRow("2", 101, "python", "stopped", "")]
    worker, main = _stop(2, 101, python=False), _stop(1, 100, python=True)
    # gdb stopped a thread with Python frames: shown as it is, nothing said
    engine = _Engine(rows, {"1": main})
    assert python_thread(engine, main) == (main, None) and engine.selected is None
    # gdb stopped a pool thread: the main thread is selected and shown, and the note names gdb's thread
    hit, note = python_thread(engine, worker)
    assert hit is main and engine.selected == "1", note
    assert note.startswith("the interrupt stopped thread 2 (python, LWP 101), which runs no Python code; shown:")
    # the main thread runs no Python either: gdb's own thread stays selected and shown, and that is said
    engine = _Engine(rows, {"1": _stop(1, 100, python=False), "2": worker})
    hit, note = python_thread(engine, worker)
    assert hit is worker and engine.selected == "2" and "neither it nor the main thread" in note, note
