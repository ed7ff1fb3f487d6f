"""TorchScript's interpreter layout for the agent (tracer/scripted/interp_layout.py): the cached one of this
torch build, or, the first time, a probe started in a process of its own (~2 min: g++ over torch's
headers) whose file the agent picks up once it is written. A run never waits for it: one that does not
touch TorchScript loses nothing, and one that does before it is ready says so (the agent's record)."""
from __future__ import annotations

import logging
import os
from dataclasses import asdict
from pathlib import Path

from tracer.scripted import interp_layout

log = logging.getLogger("pttrace.recorder")

NOT_READY = ("the TorchScript interpreter's layout for this torch build was being established (g++ over its "
             "headers, ~2 min once per build, cached by build-id) when the run started")


def agent_config(torch_libs: list[str], cache_dir: Path | None) -> dict:
    """{layout} when cached, {file, why} while a probe establishes it, {why} without libtorch_cpu."""
    lib = next((p for p in torch_libs if os.path.basename(p) == "libtorch_cpu.so"), None)
    if lib is None:
        return {"why": "libtorch_cpu.so is not among torch's libraries"}
    try:
        layout = interp_layout.cached(lib, cache_dir)
    except OSError as exc:
        return {"why": f"libtorch_cpu.so cannot be read ({exc.strerror})"}
    if layout is not None:
        return {"layout": asdict(layout)}
    if cache_dir is None:
        return {"why": "pttrace has no cache directory to establish the interpreter's layout in"}
    include = os.path.join(os.path.dirname(os.path.dirname(lib)), "include")
    path = interp_layout.start_establishing(lib, include, cache_dir)
    log.debug("TorchScript layout: establishing into %s", path)
    if path is None:
        return {"why": "the interpreter's layout could not be established (no build-id, or no process started)"}
    return {"file": str(path), "why": NOT_READY}
