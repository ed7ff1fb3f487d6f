"""TorchScript's interpreter layout for the agent (tracer/scripted/interp_layout.py): the cached one of this
torch build, or, the first time, the file a probe will write, which the agent picks up once it is there.

The probe (g++ over torch's headers, ~2 min on 2 cores, then cached by build-id) starts only once a run
needs it: when the first call path through the interpreter's loop is named (the tailer, tailer.py, names
every new path once; the agent has no names in libtorch_cpu, only its unwind tables). A run that never
touches TorchScript starts no g++; one that does reads no TorchScript until the layout is written, and its
session says so (the agent's ``torchscript`` record, ts_status.py), with what to do."""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import fields
from pathlib import Path
from typing import Callable

from tracer.scripted import interp_layout

log = logging.getLogger("pttrace.recorder")

WHEN = "g++ over its headers, ~2 min once per build, then cached by build-id"
NOT_READY = ("the TorchScript interpreter's layout for this torch build was still being established by a probe an "
             f"earlier pttrace run started ({WHEN}) when this run started")
NOT_CACHED = ("the TorchScript interpreter's layout for this torch build was not cached when the run started: "
              f"pttrace starts establishing it at the first hit through the interpreter ({WHEN})")


class TsLayout:
    """What the agent is handed (``config``), and the probe started at most once, when ``needed()``."""

    def __init__(self, torch_libs: list[str], cache_dir: Path | None, warn: Callable[[str], None]):
        self.config, self._probe = _config(torch_libs, cache_dir)
        self._warn = warn
        self._lock = threading.Lock()
        self.started: Path | None = None

    @property
    def wanted(self) -> bool:
        """True while a first hit through the interpreter would start the probe."""
        return self._probe is not None and self.started is None

    def needed(self) -> None:
        """The first call path through the interpreter: establish the layout now (a lock file keeps it to
        one probe per build, across runs)."""
        with self._lock:
            if self._probe is None or self.started is not None:
                return
            lib, include, cache_dir = self._probe
            self._probe = None
            self.started = interp_layout.start_establishing(lib, include, cache_dir)
        log.debug("TorchScript layout: establishing into %s", self.started)
        if self.started is None:
            self._warn("the TorchScript interpreter's layout could not be established: no process could be "
                       "started for it; hits through the interpreter show no scripted function, line or graph node")


def agent_config(torch_libs: list[str], cache_dir: Path | None) -> dict:
    """{layout} when cached, {file, why} while it is not, {why} without libtorch_cpu or a cache."""
    return _config(torch_libs, cache_dir)[0]


def _config(torch_libs: list[str], cache_dir: Path | None) -> tuple[dict, tuple[str, str, Path] | None]:
    lib = next((p for p in torch_libs if os.path.basename(p) == "libtorch_cpu.so"), None)
    if lib is None:
        return {"why": "libtorch_cpu.so is not among torch's libraries"}, None
    try:
        layout = interp_layout.cached(lib, cache_dir)
        path = interp_layout.cache_path(lib, cache_dir)
    except OSError as exc:
        return {"why": f"libtorch_cpu.so cannot be read ({exc.strerror})"}, None
    if layout is not None:
        # Its fields as they are (numbers, and lists and dicts of them): asdict's deep copy of the ~2,700 symbol
        # names and ranges was ~10 ms of every run's start-up, before the target may start.
        return {"layout": {f.name: getattr(layout, f.name) for f in fields(layout)}}, None
    if cache_dir is None:
        return {"why": "pttrace has no cache directory to establish the interpreter's layout in"}, None
    if path is None:
        return {"why": "the interpreter's layout cannot be established: libtorch_cpu.so has no build-id"}, None
    include = os.path.join(os.path.dirname(os.path.dirname(lib)), "include")
    if interp_layout.being_established(path):
        return {"file": str(path), "why": NOT_READY}, None
    return {"file": str(path), "why": NOT_CACHED}, (lib, include, cache_dir)
