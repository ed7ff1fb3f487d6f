"""gdb's memory cache over the whole address space while the target loads its libraries, taken away at the first
hit (tracer/gdb/agent/memcache.py): set on pttrace's gdb command line, off before any hit reads memory."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT, run_pttrace
from tests.support import allowance
from tracer.gdb.spawn import GDB_SETTINGS, agent_import
from tracer.session import storage

pytestmark = [pytest.mark.gdb]


def test_the_agent_takes_the_region_and_the_line_size_away():
    # GIVEN gdb started with pttrace's settings and its agent
    iex = [a for s in GDB_SETTINGS for a in ("-iex", s)]
    off = "python from tracer.gdb.agent.memcache import MEMORY_CACHE; MEMORY_CACHE.off(); MEMORY_CACHE.off()"
    out = subprocess.run([shutil.which("gdb") or "gdb", "-nx", "-batch", *iex, "-ex", agent_import(),
                          "-ex", "info mem", "-ex", "show dcache line-size", "-ex", off,
                          "-ex", "info mem", "-ex", "show dcache line-size"],
                         cwd=ROOT, capture_output=True, text=True, timeout=allowance(60)).stdout
    before, after = out.split("Dcache line size is", 1)[0], out.rsplit("Dcache line size is", 2)[1:]
    # THEN all memory is one cached region in page-sized lines (its end, 0, is the address space's end: shown for
    # the architecture of the moment, 32 bits before gdb has a file), and after off() (twice: once is enough) none
    assert re.search(r"0x0+ +0x10+ +rw cache", before), out
    assert "4096" in after[0], out
    assert "There are no memory regions defined" in after[0] and "64" in after[1], out


def test_library_loads_go_through_it_and_every_hit_reads_without_it(tmp_path):
    # GIVEN a target that loads torch (library stops) and then calls the kernel twice
    log = tmp_path / "log.txt"
    proc = run_pttrace("run", "--batch", "-q", "--session-dir", str(tmp_path / "s"), "--log", str(log), "-v",
                       "--break", "wrapper_CPU_sigmoid", "--eval", '$_gdb_setting("dcache line-size")',
                       "-c", "import torch; torch.sigmoid(torch.ones(2)); torch.sigmoid(torch.ones(3))")
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = log.read_text()
    # THEN gdb stopped at library loads with the cache on and took it away once, after them
    stops = [m.start() for m in re.finditer("stop for the libraries", text)]
    assert len(stops) >= 2, text[-3000:]
    assert text.count("memory cache off") == 1, text[-3000:]
    assert max(stops) < text.index("memory cache off")
    # AND each hit was read without it (gdb's own line size at the first hit already), its call path whole
    [path] = (tmp_path / "s").glob("*.jsonl")
    session = storage.load(path)
    assert len(session.hits) == 2
    assert [v.text for seq in sorted(session.evals) for v in session.evals[seq]] == ["64", "64"]
    for hit in session.hits:
        assert "wrapper_CPU_sigmoid" in hit.innermost.function
        assert [f.file for f in hit.frames if f.kind == "python"] == ["<string>"]
