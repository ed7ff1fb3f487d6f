"""Control of the target from the keys: step, next, finish, continue, interrupt, the mode, and adding,
removing and turning off breakpoints. Every gdb call runs in a worker and comes back as a message; a
failure becomes a toast. Which keys apply now (``check_action``) follows the target's state."""
from __future__ import annotations

from typing import Callable

from textual import on, work

from tracer.errors import PttraceError
from tracer.session.model import Hit
from tracer.tui.app_base import AppBase
from tracer.tui.messages import BreakpointRemovalRequested, BreakpointToggleRequested, ControlFinished
from tracer.tui.screens import AddBreakpoint
from tracer.tui.sources import CONTROL_ACTIONS
from tracer.tui.widgets.breakpoints import BreakpointsTable

_LIVE_ACTIONS = {"toggle_mode", "resume", "control", "interrupt", "add_breakpoint"}


class ControlActions(AppBase):
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "type_input":  # a launched target's stdin: hidden for a recorded session or an attach
            return bool(self.source.live and not self.source.attached and not self.state.finished)
        if action not in _LIVE_ACTIONS:
            return True
        if not self.source.live or self.state.finished:
            return False
        if action == "toggle_mode" and not self._quitting and not self.state.error:
            return True  # even while gdb starts: the run then begins in the chosen mode
        if not self.state.can_control or self._quitting:
            return None
        if action in ("resume", "control"):
            # One at a time: a second f while gdb still finishes would run a second finish after it.
            busy = self.state.gdb.startswith("busy")
            return True if self.state.target == "stopped" and not busy else None
        if action == "interrupt":
            return True if self.state.target == "running" else None
        return True

    def action_help_quit(self) -> None:
        """Ctrl-C: what gdb users expect of it, interrupting the running target; quitting is q."""
        if self.check_action("interrupt", ()) is True:
            self.action_interrupt()
        elif self.source.live and not self.state.finished and self.state.target == "running":
            self.notify("gdb is busy; try again in a moment (q quits)", timeout=3)
        else:
            self.notify("the target is not running: nothing to interrupt (q quits)", timeout=3)

    def _control(self, label: str, call: Callable[[], object]) -> None:
        if self.state.gdb != "starting":  # a mode chosen while gdb starts is only noted, gdb is not asked
            self.state.gdb = f"busy: {label}"
        self._redraw_status()
        self._control_worker(label, call)

    @work(thread=True, group="control", exit_on_error=False)
    def _control_worker(self, label: str, call: Callable[[], object]) -> None:
        try:
            result = call()
        except PttraceError as exc:
            self.post_message(ControlFinished(label, False, exc.message))
            return
        except Exception as exc:
            self.post_message(ControlFinished(label, False, f"{label} failed: {type(exc).__name__}: {exc}"))
            return
        self.post_message(ControlFinished(label, True, hit=result if isinstance(result, Hit) else None))

    def on_control_finished(self, message: ControlFinished) -> None:
        # gdb's news of what the command did (a step's running, then its stop) was sent before its answer,
        # but the inbox is drawn at most a few times a second: taken in first, its running would say that
        # the stop the answer shows is over (seen at load 9 after n, the target stopped there)
        self._drain()
        if not self.state.finished and not self._quitting and self.state.gdb.startswith("busy"):
            self.state.gdb = "ready"
        if not message.ok:
            self.notify(message.message, title=message.action, severity="error", timeout=8)
        else:
            self._after_control(message)
        self._redraw_status()
        self.refresh_bindings()

    def _after_control(self, message: ControlFinished) -> None:
        action = message.action
        if action.startswith("mode "):
            self.state.mode = action.split()[1]
            note = ("stop mode: the target stops at the next hit" if self.state.mode == "stop"
                    else "record mode: hits are recorded and the target goes on")
            if self.state.mode == "record" and self.state.target == "stopped":
                note += " (it is stopped now: c continues)"
            self.notify(note, timeout=4)
        elif action.startswith("add "):
            self.query_one(BreakpointsTable).reveal(action[4:])
            self.notify(f"breakpoint {action[4:]} added", timeout=4)
        elif action.startswith(("on ", "off ")):
            word, _, spec = action.partition(" ")
            self.notify(f"breakpoint {spec} is {word}" + (": the target no longer stops there" if word == "off"
                                                          else ""), timeout=4)
        elif action.startswith("remove "):
            self.state.forget_breakpoint(action[7:])
            self.query_one(BreakpointsTable).update_from(self.state)
            self.notify(f"breakpoint {action[7:]} removed", timeout=4)
        if message.hit is not None and action == "continue":
            # c let one gdb's processes go while another gdb's still stand at a stop (a child that executed
            # Python has a gdb of its own): the keys steer that one now (sources.Steering)
            hit = message.hit
            self.show_stop(hit, action, f"pid {hit.thread.pid} is still stopped · thread {hit.thread.id}")
            self.notify(f"pid {hit.thread.pid} is still stopped: s, n, f, c and : act on it now", timeout=6)
        elif message.hit is not None and action == "interrupt" and str(message.hit.thread.id) != str(
                (self.state.last_stop or {}).get("thread-id")):
            # gdb stopped a thread with no Python code; the main thread, which has some, is shown and selected
            # (sources.LiveSource.interrupt, steering.python_thread)
            hit, stopped = message.hit, (self.state.last_stop or {}).get("thread-id")
            self.state.selected_thread = str(hit.thread.id)
            self.show_stop(hit, action, f"where interrupt stopped · main thread {hit.thread.id} (gdb stopped "
                                        f"thread {stopped}: no Python code there) · not a recorded hit")
        elif message.hit is not None:
            self.show_stop(message.hit, action)
        elif action in CONTROL_ACTIONS or action == "interrupt":
            self.notify(f"{action}: the target did not stop again", severity="warning", timeout=5)

    def action_toggle_mode(self) -> None:
        mode = "record" if self.state.mode == "stop" else "stop"
        self._control(f"mode {mode}", lambda: self.source.set_mode(mode))

    def action_resume(self) -> None:
        self._control("continue", self.source.resume)

    def action_control(self, action: str) -> None:
        self._control(action, lambda: self.source.step(action))

    def action_interrupt(self) -> None:
        self._control("interrupt", self.source.interrupt)

    def action_add_breakpoint(self) -> None:
        def added(spec: str | None) -> None:
            if spec:
                self._control(f"add {spec}", lambda: self.source.add_breakpoint(spec))

        self.push_screen(AddBreakpoint(self.source.complete, self.source.check_breakpoint), added)

    @on(BreakpointRemovalRequested)
    def _remove_breakpoint(self, message: BreakpointRemovalRequested) -> None:
        if not self.source.live:
            self.notify("a recorded session: breakpoints cannot change", severity="warning", timeout=4)
            return
        if not self.state.can_control:
            self.notify("the run has ended", severity="warning", timeout=4)
            return
        spec = message.spec
        self._control(f"remove {spec}", lambda: self.source.delete_breakpoint(spec))

    @on(BreakpointToggleRequested)
    def _toggle_breakpoint(self, message: BreakpointToggleRequested) -> None:
        spec, on = message.spec, message.on
        self._control(f"{'on' if on else 'off'} {spec}", lambda: self.source.enable_breakpoint(spec, on))
