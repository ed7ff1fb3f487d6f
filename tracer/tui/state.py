"""What the TUI knows about the run, folded from source events. Plain Python, no Textual.

The app applies each batch of events here, then redraws only the parts that changed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from tracer.session.helpers import fold_warnings
from tracer.session.hit_table import HitTable
from tracer.session.model import Breakpoint, Frame, Hit, Process, RecordError, SessionInfo


@dataclass
class TraceState:
    live: bool = False
    info: SessionInfo | None = None
    breakpoints: dict[str, Breakpoint] = field(default_factory=dict)
    hits: HitTable = field(default_factory=HitTable)
    """Every hit, a few numbers each (the frames are the sites'): a long live run stays small."""
    counts: dict[str, int] = field(default_factory=dict)
    processes: dict[int, Process] = field(default_factory=dict)
    """Every process of the run as the session's records tell, in the order they started."""
    target: str = "starting"
    """starting, running, stopped, exited, detached; "recorded" for a saved session."""
    pid: int | None = None
    gdb: str = "starting"
    """starting, ready, busy: ACTION, exited; "none" for a saved session."""
    mode: str = "record"
    status: str | None = None
    """The session's final status, once the source has finished."""
    first_frames: dict[str, Frame] = field(default_factory=dict)
    """The innermost frame of each breakpoint's first hit: where it resolved, as seen."""
    gdb_view: dict[str, Breakpoint] = field(default_factory=dict)
    """gdb's own view of each breakpoint, for those the recorder has not described yet."""
    last_stop: dict | None = None
    removed: set[str] = field(default_factory=set)
    """Specs removed during the run: gdb's late news of them is ignored."""
    stop_reason: str | None = None
    """Why the target stopped last, in gdb's words (``describe_stop``); None while it runs."""
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    selected_thread: str | None = None
    """gdb's thread the user picked in the thread list (``t``): s/n/f step it; None: the one that stopped."""
    evals: dict = field(default_factory=dict)
    graphs: dict = field(default_factory=dict)  # TorchScript: graph id -> TsGraph (shown at interpreter frames)
    """``--eval``: hit seq -> the values evaluated at that hit."""
    waiting_input: bool = False
    """The running target is blocked reading its standard input (read from /proc while it runs)."""

    @property
    def finished(self) -> bool:
        return self.status is not None or self.error is not None

    @property
    def loading(self) -> bool:
        """A saved session whose first hits are shown while the rest of its file is read."""
        return not self.live and not self.finished and getattr(self.info, "status", None) == "loading"

    @property
    def can_control(self) -> bool:
        return self.live and not self.finished and self.gdb != "starting"

    def hits_of(self, spec: str) -> int:
        return self.counts.get(spec, 0)

    def apply(self, kind: str, data: object) -> set[str]:
        """Fold one event in; returns the names of the parts to redraw."""
        if kind == "session":
            self.info = data if isinstance(data, SessionInfo) else None
            if self.live and self.gdb == "starting":
                self.gdb = "ready"
            return {"status", "title"}
        if kind in ("breakpoint", "breakpoint-gdb") and not isinstance(data, Breakpoint):
            return set()
        if kind == "breakpoint" and isinstance(data, Breakpoint):
            bp = data
            if bp.removed:
                self.forget_breakpoint(bp.spec)
            else:
                self.removed.discard(bp.spec)  # added again
                self.breakpoints[bp.spec] = _merged(bp, self.gdb_view.get(bp.spec))
            return {"breakpoints"}
        if kind == "breakpoint-gdb" and isinstance(data, Breakpoint):
            bp = data
            if bp.spec in self.removed:
                return set()  # gdb's late news of a breakpoint removed since
            self.gdb_view[bp.spec] = bp
            if bp.spec in self.breakpoints:
                self.breakpoints[bp.spec] = _merged(self.breakpoints[bp.spec], bp)
                return {"breakpoints"}
            return set()
        if kind == "all-hits":  # a saved session read to its end: its table replaces the first screen's
            self.hits, self.counts, self.first_frames = HitTable(), {}, {}
            kind = "hits"
        if kind == "hits" and isinstance(data, HitTable):  # a saved session's: taken as it is, counted by site
            return self._take_table(data)
        if kind in ("hit", "hits"):
            return self._take_hits([data] if isinstance(data, Hit) else list(data) if isinstance(data, (list, tuple))
                                   else [])
        if kind == "state":
            if isinstance(data, str) and data != "starting":
                self.target = data
                if data != "stopped":
                    self.stop_reason = None
                    self.selected_thread = None  # picked for that stop: the status line named it running
            return {"status", "bindings"}
        if kind == "stopped":
            self.selected_thread = None  # a new stop: gdb selects the thread that stopped
            self.target = "stopped"
            self.last_stop = data if isinstance(data, dict) else {}
            self.stop_reason = short_stop(self.last_stop)
            return {"status", "bindings", "stop"}
        if kind == "process":
            if isinstance(data, Process):
                self.processes[data.pid] = data
                return {"processes"}
            if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
                return set()
            try:
                self.processes.setdefault(data["pid"], Process(data["pid"])).merge(data)
            except RecordError:
                return set()
            return {"processes"}
        if kind == "evals":
            if not isinstance(data, dict):
                return set()
            self.evals.update(data)
            return {"evals"}
        if kind == "graphs":
            if not isinstance(data, dict):
                return set()
            self.graphs.update(data)
            return {"graphs"}
        if kind == "pid":
            self.pid = data if isinstance(data, int) else None
            return {"status"}
        if kind == "warning":
            self.warnings = fold_warnings([*self.warnings, str(data)])
            return {"warnings"}
        if kind == "warnings":
            if not isinstance(data, list):
                return set()
            self.warnings = fold_warnings([*self.warnings, *map(str, data)])
            return {"warnings"}
        if kind == "failed":
            self.error = getattr(data, "message", None) or str(data)
            self.gdb = "exited"
            return {"status", "bindings", "failed"}
        if kind == "finished":
            self.status = str(data)
            if self.live:
                self.gdb = "exited"
                self.target = "detached" if self.status == "detached" else "exited"
            else:
                self.target = "recorded"
                self.gdb = "none"
            return {"status", "bindings", "finished"}
        return set()

    def _take_table(self, data: HitTable) -> set[str]:
        if len(self.hits):
            self.hits.extend(data)
        else:
            self.hits = data
        counts = data.site_counts()
        firsts = data.first_rows(counts)
        for site_index in sorted(counts, key=firsts.__getitem__):
            site = data.sites[site_index]
            if site.breakpoint is not None:
                self.counts[site.breakpoint] = self.counts.get(site.breakpoint, 0) + counts[site_index]
                if site.breakpoint not in self.first_frames and site.frames:
                    self.first_frames[site.breakpoint] = site.frames[-1]
        return {"hits", "breakpoints", "status"} if len(data) else set()

    def _take_hits(self, new: list[Hit]) -> set[str]:
        for hit in new:
            self.hits.append(hit)
            if hit.breakpoint is not None:
                self.counts[hit.breakpoint] = self.counts.get(hit.breakpoint, 0) + 1
                if hit.breakpoint not in self.first_frames and hit.frames:
                    self.first_frames[hit.breakpoint] = hit.frames[-1]
        return {"hits", "breakpoints", "status"} if new else set()

    def forget_breakpoint(self, spec: str) -> None:
        self.breakpoints.pop(spec, None)
        self.gdb_view.pop(spec, None)
        self.removed.add(spec)


def _merged(recorded: Breakpoint, gdb: Breakpoint | None) -> Breakpoint:
    """The recorder's breakpoint, with gdb's locations while the recorder has none to tell."""
    if gdb is None or any(loc.address for loc in recorded.locations) or not gdb.locations:
        return recorded
    merged = Breakpoint(**{**recorded.__dict__})
    merged.locations = list(gdb.locations)
    merged.pending = False
    merged.enabled = gdb.enabled
    return merged


def _where(frame: dict) -> str:
    func = frame.get("func") or "??"
    if func == "??":  # gdb was given no symbols for this library (pttrace names its frames itself)
        func = f"{frame.get('addr', '?')} in ?? ()"
    if frame.get("file") and frame.get("line"):
        return f"{func} at {frame['file']}:{frame['line']}"
    if frame.get("from"):
        return f"{func} from {os.path.basename(frame['from'])}"
    return func


def describe_stop(payload: dict) -> str:
    """A stop as gdb's console tells it (``Breakpoint 1, f () at x.c:3``), from MI's ``*stopped``."""
    reason = payload.get("reason")
    frame = payload.get("frame") if isinstance(payload.get("frame"), dict) else {}
    where = _where(frame) if frame else ""
    if reason == "breakpoint-hit":
        return f"Breakpoint {payload.get('bkptno') or '?'}, {where}"
    if reason == "signal-received":
        name = payload.get("signal-name") or "a signal"
        meaning = payload.get("signal-meaning")
        return f"Program received signal {name}{', ' + meaning if meaning else ''}. {where}".strip()
    if reason == "function-finished":
        text = f"Run till exit; now in {where}" if where else "Run till exit"
        if payload.get("return-value") is not None:
            text += f". Value returned is {payload.get('gdb-result-var', '$')} = {payload['return-value']}"
        return text
    if reason == "end-stepping-range":
        return f"Stepped to {where}" if where else "Stepped"
    if reason == "location-reached":
        return f"Reached {where}" if where else "Reached the location"
    return f"Stopped in {where}" if where else "Stopped"


def short_stop(payload: dict) -> str:
    """The status line's few words for a stop."""
    reason = payload.get("reason")
    if reason == "breakpoint-hit":
        return f"breakpoint {payload.get('bkptno') or '?'}"
    if reason == "signal-received":
        return payload.get("signal-name") or "signal"
    return {"function-finished": "finish", "end-stepping-range": "step", "location-reached": "location"}.get(
        reason or "", "stopped")
