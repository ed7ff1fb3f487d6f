"""How the app ends: q asks before killing a launched target (an attached one is detached and runs on),
Textual's own quit goes the same way, a signal ends the run without asking, and however the app ends the
run ends too."""
from __future__ import annotations

from textual import work

from tracer.tui.app_base import AppBase
from tracer.tui.screens import ConfirmQuit


class QuitActions(AppBase):
    async def action_quit(self) -> None:
        """Textual's own quit (ctrl+q, the palette) goes the same way as q: it must ask too."""
        self.action_quit_app()

    def action_quit_app(self) -> None:
        if self._quitting:
            return
        if not self.source.live or self.state.finished:
            self.exit(0)
            return
        if self.source.attached:
            self._begin_quit(f"detaching from pid {self.state.pid}")
            return
        pid = f" (pid {self.state.pid})" if self.state.pid else ""

        def answered(yes: bool | None) -> None:
            if yes:
                self._begin_quit("killing the target")

        self.push_screen(ConfirmQuit(f"Quit and kill the target{pid}? The session file keeps what was "
                                     "recorded."), answered)

    def _begin_quit(self, doing: str) -> None:
        self._quitting = True
        self.state.gdb = f"busy: {doing}"
        self.notify(f"{doing}…", timeout=10)
        self._redraw_status()
        self.refresh_bindings()
        self._stop_worker()

    @work(thread=True, group="quit", exit_on_error=False)
    def _stop_worker(self) -> None:
        try:
            self.source.stop("quit")
        finally:
            self.call_from_thread(self.exit, 0)

    def on_unmount(self) -> None:
        # However the app ends (even by a crash), the run must end too: the worker running it is
        # waited for when the event loop closes.
        self.source.request_stop("quit")

    def request_shutdown(self) -> None:
        """SIGTERM and friends: end the run without asking, keep what was recorded."""
        if self.source.live and not self.state.finished:
            if not self._quitting:
                self._begin_quit("stopping")
        else:
            self.exit(0)
