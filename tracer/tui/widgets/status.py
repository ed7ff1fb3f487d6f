"""The status line: target state, pid, hits, gdb state, mode, session file."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tracer.tui.state import TraceState

_TARGET_STYLE = {"running": "bold green", "stopped": "bold yellow", "starting": "cyan",
                 "exited": "grey62", "detached": "grey62", "recorded": "cyan"}


class StatusLine(Static):
    """Labelled parts (``target running  │  pid 42``) when the width holds them, else the bare
    values: the session's name must stay on screen at 80 columns."""

    def render_state(self, state: TraceState, session_name: str | None) -> None:
        self._last = (state, session_name)
        parts: list[tuple[str, str, str]] = []
        target = state.target
        if state.status and state.live:
            target = f"{target} ({state.status})"
        elif state.status:
            target = f"recorded, {state.status}"
        elif state.loading:
            target = "recorded"
        if state.target == "stopped" and state.stop_reason and not state.status:
            target = f"stopped: {state.stop_reason}"
        style = _TARGET_STYLE.get(state.target, "bold")
        if state.waiting_input and state.target == "running" and not state.status:
            target, style = "waiting for input: press > to type a line", "bold black on yellow"
        parts.append(("target", target, style))
        stop = (state.last_stop or {}) if state.target == "stopped" and not state.status else {}
        pid = stop.get("pid") or state.pid  # several processes: the one that stopped
        if pid:
            parts.append(("pid", str(pid), "bold"))
        thread = state.selected_thread or stop.get("thread-id")
        if thread:
            parts.append(("gdb thread", str(thread) + (" (picked)" if state.selected_thread else ""), "bold"))
        if state.loading:
            parts.append(("loading", f"loading {len(state.hits):,}+ hits…", "bold yellow"))
        else:
            parts.append(("hits", f"{len(state.hits):,}", "bold"))
        if state.live:
            parts.append(("gdb", state.gdb, "bold red" if state.error else ("yellow" if state.gdb.startswith("busy")
                                                                            else "bold")))
            parts.append(("mode", state.mode, "bold magenta" if state.mode == "stop" else "bold"))
        if session_name:
            parts.append(("session", session_name, ""))
        if state.error:
            parts.append(("error", state.error, "bold red"))
        width = self.size.width - 2 if self.size.width else 200
        labelled = sum(len(label) + 1 + len(value) for label, value, _ in parts) + 5 * (len(parts) - 1)
        t = Text(no_wrap=True, overflow="ellipsis")
        for label, value, style in parts:
            if t:
                t.append("  │  " if labelled <= width else " · ", style="grey42")
            if (labelled <= width or label in ("pid", "gdb")) and label != "loading":  # its value says it
                t.append(f"{label} ", style="grey62")
            elif label == "gdb thread":  # a bare number would read as anything
                t.append("thread ", style="grey62")
            if label == "hits" and labelled > width:
                value += " hit" if value == "1" else " hits"
            t.append(value, style=style)
        self.update(t)

    def on_resize(self) -> None:
        last = getattr(self, "_last", None)
        if last is not None:
            self.render_state(*last)
