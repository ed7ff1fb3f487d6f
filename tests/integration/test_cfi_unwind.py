"""The agent's unwinder of the CFI-only libraries (tracer/gdb/agent/cfi_unwind.py) against gdb's own DWARF
unwinder, at real stops of a real run: at each hit, a probe sourced into pttrace's gdb walks the whole stack
twice, with the agent's unwinder and with it off (gdb then reads libtorch_cpu.so's and libtorch_python.so's
tables itself), and writes every frame's pc, gdb's frame id and the registers a caller gets back. They must
be the same, frame for frame, on the main thread and on another Python thread."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import run_pttrace

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

OP = "at::_ops::add_Tensor::call"
TARGET = """
import threading
import torch

def work(n):
    a = torch.ones(3)
    for _ in range(n):
        torch.add(a, a)

work(2)
t = threading.Thread(target=work, args=(2,))
t.start()
t.join()
"""

PROBE = r'''
import json, sys, gdb
OUT = __OUT__
REGS = ("rip", "rsp", "rbx", "rbp", "r12", "r13", "r14", "r15")
done = []

def walk():
    frames, f = [], gdb.newest_frame()
    while f is not None and len(frames) < 64:
        f.select()
        frames.append({"pc": f.pc(), "id": gdb.execute("maint print frame-id", to_string=True).split(":", 1)[1].strip(),
                       "regs": [int(f.read_register(r)) & 0xFFFFFFFFFFFFFFFF for r in REGS]})
        f = f.older()
    return frames

def patch(_ev=None):
    mod = sys.modules.get("tracer.gdb.agent.breakpoints")
    if mod is None or done:
        return
    done.append(True)
    cfi = sys.modules["tracer.gdb.agent.cfi_unwind"].CFI
    orig = mod.TraceBreakpoint.stop

    def stop(self):
        thread = gdb.selected_thread().num
        cfi.on = True
        gdb.invalidate_cached_frames()
        claimed = cfi.claimed
        ours = walk()
        claimed = cfi.claimed - claimed
        cfi.on = False
        gdb.invalidate_cached_frames()
        gdbs = walk()
        cfi.on = True
        gdb.invalidate_cached_frames()
        with open(OUT, "a") as fh:
            fh.write(json.dumps({"thread": thread, "claimed": claimed, "ours": ours, "gdb": gdbs}) + "\n")
        return orig(self)

    mod.TraceBreakpoint.stop = stop

gdb.events.new_objfile.connect(patch)
'''


def test_the_agents_unwinder_gives_gdbs_frames_ids_and_registers(tmp_path):
    out = tmp_path / "walks.jsonl"
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.replace("__OUT__", repr(str(out))))
    wrapper = tmp_path / "gdb"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("gdb")} -iex "source {probe}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    proc = run_pttrace("run", "--batch", "-q", "--break", OP, "--session-dir", str(tmp_path / "s"), str(script),
                       env=dict(os.environ, PTTRACE_GDB=str(wrapper)), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    walks = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(walks) == 4  # every hit, two on each thread
    assert len({w["thread"] for w in walks}) == 2
    for w in walks:
        assert w["claimed"] >= 2, w["claimed"]  # at least libtorch_cpu's frame #0 and libtorch_python's caller
        assert len(w["ours"]) >= 10
        assert w["ours"] == w["gdb"]
