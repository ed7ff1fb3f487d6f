"""gdb reads the interpreter's units every Python stack passes through while the target runs and loads no
library (tracer/gdb/agent/prefetch.py), not in the first hit's stop; the hit's call path is the same."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from tests.conftest import PTTRACE, ROOT, run_pttrace
from tests.support import allowance, stop_process
from tracer.session import storage

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

# The target waits, after importing torch, until the agent's log says the last unit was read (or its deadline
# passes), then calls the kernel: the quiet time the agent waits for is there, whatever the machine's load.
TARGET = r"""
import sys, time
import torch

log, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    with open(log, encoding="utf-8", errors="replace") as fh:
        if "unit of Py_BytesMain in libpython" in fh.read():
            break
    time.sleep(0.05)
torch.sigmoid(torch.ones(2))
"""
UNITS = {"_PyEval_EvalFrameDefault", "_PyObject_MakeTpCall", "cfunction_call", "method_vectorcall", "slot_tp_call",
         "_PyRun_SimpleFileObject", "Py_BytesMain"}


def test_the_interpreters_units_are_read_before_the_first_hit(tmp_path):
    script, log = tmp_path / "wait_then_sigmoid.py", tmp_path / "log.txt"
    script.write_text(TARGET)
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path / "s"), "--max-hits", "1", "--log", str(log),
                       "--break", "wrapper_CPU_sigmoid", "--", str(script), str(log), str(allowance(60)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = log.read_text()
    read = re.findall(r"prefetched the unit of (\S+) in (\S+):", text)
    assert UNITS <= {name for name, library in read if library.startswith("libpython")}, read
    assert any(library.startswith("libc.so") for _, library in read), read
    assert len(read) == len(set(read))  # each unit once
    last = max(text.index(f"prefetched the unit of {name} in libpython") for name in UNITS)
    assert last < text.index("reason='breakpoint-hit'")  # all read before the hit, while the target ran
    # The hit's path is whole: the script's line, torch's Python frames, the kernel named by pttrace's index.
    (path,) = (tmp_path / "s").glob("*.jsonl")
    (hit,) = storage.load(path).hits
    python = [f for f in hit.frames if f.kind == "python"]
    assert python[0].file == str(script) and python[0].source == "torch.sigmoid(torch.ones(2))"
    assert hit.innermost.function and "wrapper_CPU_sigmoid" in hit.innermost.function
    interpreter = [f for f in hit.frames if f.kind == "native" and "libpython" in (f.library or "")]
    assert interpreter and all(f.function and f.file and f.line for f in interpreter)  # named by gdb, with file:line


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _python_threads_sigblk(gdb: int) -> dict[int, int]:
    """SigBlk of each thread of gdb that Python started: named as gdb's main thread (its workers are "gdb
    worker"), another thread id."""
    masks = {}
    for tid in os.listdir(f"/proc/{gdb}/task"):
        try:
            with open(f"/proc/{gdb}/task/{tid}/comm") as fh:
                name = fh.read().strip()
            with open(f"/proc/{gdb}/task/{tid}/status") as fh:
                blk = next(line.split()[1] for line in fh if line.startswith("SigBlk:"))
        except (OSError, StopIteration):
            continue
        if name == "gdb" and int(tid) != gdb:
            masks[int(tid)] = int(blk, 16)
    return masks


def test_the_prefetch_thread_in_gdb_blocks_sigchld(tmp_path):
    # GIVEN a run whose target waits, after importing torch, until the prefetch has read its units
    script, log = tmp_path / "wait_then_sigmoid.py", tmp_path / "log.txt"
    script.write_text(TARGET)
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-q", "--session-dir", str(tmp_path / "s"), "--max-hits", "1",
                          "--log", str(log), "--break", "wrapper_CPU_sigmoid", "--", str(script), str(log),
                          str(allowance(60))], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict[int, int] = {}
    try:
        # WHEN gdb's threads are looked at while the run goes on
        while p.poll() is None:
            for child in _children(p.pid):
                try:
                    with open(f"/proc/{child}/comm") as fh:
                        if fh.read().strip() == "gdb":
                            seen.update(_python_threads_sigblk(child))
                except OSError:
                    pass
            time.sleep(0.02)
        out, err = p.communicate(timeout=allowance(60))
    finally:
        stop_process(p)
    assert p.returncode == 0, err[-3000:]
    # THEN the thread Python started in gdb blocks SIGCHLD: gdb 13's native target waits for it in its own
    # thread, and one taken by another thread left gdb waiting for ever ("did not answer -exec-run")
    assert seen, "no thread of the agent's seen in gdb while the units were read"
    sigchld = 1 << (signal.SIGCHLD - 1)
    assert all(mask & sigchld for mask in seen.values()), {tid: hex(m) for tid, m in seen.items()}
