"""gdb reads the interpreter's units every Python stack passes through while the target runs and loads no
library (tracer/gdb/agent/prefetch.py), not in the first hit's stop; the hit's call path is the same."""
from __future__ import annotations

import re

import pytest

from tests.conftest import run_pttrace
from tests.support import allowance
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
