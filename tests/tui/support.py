"""TUI test helpers: the fixture session's path, a fake live source, and a runner for pilot coroutines.

Pilot tests are plain functions that run their coroutine with ``asyncio.run`` (no async plugin
needed); ``run_pilot`` gives each a deadline so a stuck app fails the test instead of hanging it.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from textual import events
from textual.keys import _character_to_key

from tests.support import allowance, fifo_line, stop_process  # allowance: also the TUI tests' limits
from tracer.session.model import Breakpoint, Hit, Location, Session, SessionInfo, Thread
from tracer.tui.sources import EventSource, NotStopped, SourceEvent

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "tui_session.jsonl"


def run_pilot(coro, timeout: float = 30.0):
    async def guarded():
        return await asyncio.wait_for(coro, allowance(timeout))

    return asyncio.run(guarded())


async def wait_until(pilot, predicate, timeout: float = 5.0, step: float = 0.05, why=None) -> None:
    """Let the app run until ``predicate()`` holds; fail with the predicate's docstring (and ``why()``,
    what the test tells of the state it was in) otherwise. The deadline stretches with the load.

    A predicate that reads what is not there yet (``app.call_path.hit.seq`` before the call path has shown
    a hit: an AttributeError on None, at load 16) is not yet true: the timeout names what it raised."""
    loop = asyncio.get_running_loop()
    timeout = allowance(timeout)
    end = loop.time() + timeout
    settle = loop.time() + step
    while True:
        try:
            # The predicate is read every POLL (the app's handlers run on this loop while the test sleeps); the
            # screen settles (pilot.pause: pending messages handled, layout refreshed) every ``step`` and before
            # a true predicate is taken, so the caller sees it true on a settled screen. A pause of ``step``
            # between reads left ~step/2 of idle wall time after each condition came true (~0.1 s a wait).
            if predicate():
                await pilot.pause()
                if predicate():
                    return
            raised = ""
        except (AttributeError, IndexError, KeyError) as exc:
            raised = f"; it raised {exc!r}"
        if loop.time() > end:
            state = f"; {why()}" if why is not None else ""
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {predicate.__doc__ or predicate}"
                                 f"{raised}{state}")
        if loop.time() >= settle:
            await pilot.pause()
            settle = loop.time() + step
        else:
            await asyncio.sleep(min(POLL, step))


POLL = 0.02  # s: how often wait_until reads its predicate between the screen's settles


async def type_line(pilot, text: str) -> None:
    """Type ``text`` as a terminal hands a quick typist's keys to the app: each character a key event, queued in
    order, then one wait for the app to take them in. (pilot.press waits for the app to go idle after each key,
    >= 40 ms a key: ~2 s for one of the seeds' lines, ~10 s of the prompt test's wall time.)"""
    app = pilot.app
    for ch in text:
        event = events.Key(_character_to_key(ch), ch)  # " " is the key "space", "(" "left_parenthesis"
        event.set_sender(app)
        app.post_message(event)
    await pilot.pause()


class FakeSource(EventSource):
    """A live source without gdb: the test pushes events, control calls are recorded and answered.

    ``step()``/``interrupt()`` answer with ``stop_hit`` (a copy of a fixture hit whose innermost
    frame was cut, as after ``finish``).

    Tests with it check the UI's own logic only. What it stands in for is checked on a real gdb too:
    stop mode, s/n/f (against plain gdb in test_steps_vs_gdb.py), interrupt, continue
    and the refusal of a step while running (test_live_gdb.py's attach test), completion, a refused
    name, adding, removing and turning off a breakpoint (test_terminal_faults.py).
    """

    live = True
    label = "fake.py"

    def __init__(self, info: SessionInfo, breakpoints: list[Breakpoint], stop_hit: Hit | None = None,
                 attached: bool = False):
        self.info = info
        self.breakpoints = breakpoints
        self.stop_hit = stop_hit
        self.attached = attached
        self.calls: list[tuple] = []
        self.events: "queue.Queue[SourceEvent | None]" = queue.Queue()
        self.target = "running"
        self.stopped = threading.Event()
        self._emit = None

    def push(self, kind: str, data=None) -> None:
        self.events.put(SourceEvent(kind, data))

    def run(self, emit) -> None:
        self._emit = emit
        emit(SourceEvent("session", self.info))
        emit(SourceEvent("pid", 4242))
        for bp in self.breakpoints:
            emit(SourceEvent("breakpoint", bp))
        emit(SourceEvent("state", "running"))
        while True:
            ev = self.events.get()
            if ev is None:
                break
            if ev.kind in ("state", "stopped"):
                self.target = "stopped" if ev.kind == "stopped" else ev.data
            emit(ev)
            if ev.kind in ("finished", "failed"):
                break
        self.stopped.set()

    def request_stop(self, reason: str = "quit") -> None:
        if not self.stopped.is_set():
            self.calls.append(("stop", reason))
            self.push("finished", "interrupted")

    def stop(self, reason: str = "quit", timeout: float = 20.0) -> None:
        self.request_stop(reason)
        self.stopped.wait(timeout)

    def complete(self, text: str, limit: int = 12) -> list[str]:
        self.calls.append(("complete", text))
        names = ["at::(anonymous namespace)::wrapper_CPU_sigmoid", "at::_ops::sigmoid::call",
                 "torch::autograd::THPVariable_sigmoid"]
        return [n for n in names if text.lower() in n.lower()][:limit]

    def check_breakpoint(self, spec: str):
        from tracer.tui.sources import Refusal

        self.calls.append(("check", spec))
        if "nonexistent" in spec:
            return Refusal(f"no library loaded in the target defines {spec}", ["at::_ops::sigmoid::call"])
        return None

    def set_mode(self, mode: str) -> None:
        self.calls.append(("mode", mode))

    def resume(self) -> None:
        self.calls.append(("resume",))
        self.push("state", "running")

    def interrupt(self):
        self.calls.append(("interrupt",))
        self.push("stopped", {"reason": "signal-received", "signal-name": "SIGINT"})
        return self.stop_hit

    def step(self, action: str):
        self.calls.append((action,))
        if self.target != "stopped":
            raise NotStopped(f"cannot {action}: the target is running (interrupt it first).")
        self.push("stopped", {"reason": "function-finished"})
        return self.stop_hit

    def add_breakpoint(self, spec: str) -> None:
        self.calls.append(("add", spec))
        self.push("breakpoint", Breakpoint(spec=spec, pending=True))

    def delete_breakpoint(self, spec: str) -> None:
        self.calls.append(("delete", spec))


def fake_from(session: Session) -> FakeSource:
    """A fake live run of the fixture's program: one resolved breakpoint, no hits yet."""
    info = copy.deepcopy(session.info)
    info.status = "running"
    bps = [Breakpoint(spec="wrapper_CPU_sigmoid", number=1, pending=False, locations=[
        Location(function="at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)",
                 library="/opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
                 address=0x7FFFE35EEC40)])]
    sigmoid = next(h for h in session.hits if h.breakpoint == "wrapper_CPU_sigmoid")
    after_finish = copy.deepcopy(sigmoid)
    after_finish.seq = 0
    after_finish.breakpoint = None
    after_finish.frames = after_finish.frames[:-1]
    return FakeSource(info, bps, stop_hit=after_finish)


def numbered_hits(template: Hit, start: int, count: int) -> list[Hit]:
    """``count`` copies of a real hit with consecutive sequence numbers (frames shared, read-only)."""
    return [Hit(seq=start + i, breakpoint=template.breakpoint, thread=Thread(1, "python3"), time=float(i),
                frames=template.frames) for i in range(count)]


RECORDED_ROOT = "/work/main/"
RECORDED_PACKAGES = "/work/main/.venv/lib/python3.11/site-packages/"


def relocated(session: Session) -> Session:
    """The fixture session as if recorded in this checkout with this interpreter's torch.

    The recording names files under /work/main; on another machine the source pane would add a
    "shown from" note, which is right for users but makes screenshots depend on the checkout path.
    """
    import importlib.util

    spec = importlib.util.find_spec("torch")
    packages = str(Path(spec.origin).parent.parent) + "/" if spec and spec.origin else RECORDED_PACKAGES
    root = str(ROOT) + "/"
    session = copy.deepcopy(session)

    def move(path: str | None) -> str | None:
        if path and path.startswith(RECORDED_PACKAGES):
            return packages + path[len(RECORDED_PACKAGES):]
        if path and path.startswith(RECORDED_ROOT):
            return root + path[len(RECORDED_ROOT):]
        return path

    session.info.cwd = str(ROOT)
    for hit in session.hits:
        for frame in hit.frames:
            frame.file = move(frame.file)
    return session


@contextlib.contextmanager
def attach_target(tmp_path: Path, script: Path, env: dict | None = None):
    """A Python running ``script FIFO STOP_FILE`` (heartbeat.py's protocol), yielded once it wrote "ready" to the
    fifo; at the end its stop file is made, it gets the time to end on its own, then it is stopped: a failed
    test leaves no process behind."""
    fifo, stop_file = tmp_path / "ready.fifo", tmp_path / "stop"
    os.mkfifo(fifo)
    target = subprocess.Popen([sys.executable, str(script), str(fifo), str(stop_file)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=None if env is None else {**os.environ, **env})
    try:
        assert fifo_line(fifo, target).startswith("ready")
        yield target
    finally:
        stop_file.touch()
        try:
            target.wait(allowance(30))
        except subprocess.TimeoutExpired:  # still held by the source of a failed test: not this test's error
            pass
        stop_process(target)
