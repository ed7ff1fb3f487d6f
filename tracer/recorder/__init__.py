"""The recorder: launches (or attaches to) a Python under gdb, sets breakpoints, and records hits.

pttrace drives gdb over MI (start, breakpoints, run, interrupt, detach, stepping); the agent inside
gdb (tracer/gdb/agent/) records each hit straight into the session file. ``Recorder`` reports what
happens as typed events (``events.py``) to one listener: the TUI's live source, or nobody in batch mode.
"""
from tracer.recorder.config import TraceConfig
from tracer.recorder.inferiors import Inferior

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tracer.recorder.recorder import Recorder


def __getattr__(name: str):
    # The recorder's parts (~0.2 s of imports) load when it is asked for, not with TraceConfig: run_batch
    # starts gdb first (launch.StartedGdb), so that gdb's start and pttrace's imports overlap.
    if name == "Recorder":
        from tracer.recorder.recorder import Recorder

        return Recorder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Inferior", "Recorder", "TraceConfig"]
