"""The status line: target state, pid, hits, gdb state, mode, session file."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tracer.tui.state import TraceState

_TARGET_STYLE = {"running": "bold green", "stopped": "bold yellow", "starting": "cyan",
                 "exited": "grey62", "detached": "grey62", "recorded": "cyan"}


class StatusLine(Static):
    def render_state(self, state: TraceState, session_name: str | None) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")

        def part(label: str, value: str, style: str = "bold") -> None:
            if t:
                t.append("  │  ", style="grey42")
            t.append(f"{label} ", style="grey62")
            t.append(value, style=style)

        target = state.target
        if state.status and state.live:
            target = f"{target} ({state.status})"
        elif state.status:
            target = f"recorded, {state.status}"
        part("target", target, _TARGET_STYLE.get(state.target, "bold"))
        part("pid", str(state.pid) if state.pid else "–")
        part("hits", f"{len(state.hits):,}")
        if state.live:
            part("gdb", state.gdb, "bold red" if state.error else ("yellow" if state.gdb.startswith("busy")
                                                                    else "bold"))
            part("mode", state.mode, "bold magenta" if state.mode == "stop" else "bold")
        if session_name:
            part("session", session_name, "")
        if state.error:
            part("error", state.error, "bold red")
        self.update(t)
