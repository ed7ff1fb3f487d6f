"""The recorder: launches (or attaches to) a Python under gdb, sets breakpoints, and records hits.

pttrace drives gdb over MI (start, breakpoints, run, interrupt, detach, stepping); the agent inside
gdb (tracer/gdb/agent/) records each hit straight into the session file. ``Recorder`` reports what
happens as typed events (``events.py``) to one listener: the TUI's live source, or nobody in batch mode.
"""
from tracer.recorder.config import TraceConfig
from tracer.recorder.inferiors import Inferior
from tracer.recorder.recorder import Recorder

__all__ = ["Inferior", "Recorder", "TraceConfig"]
