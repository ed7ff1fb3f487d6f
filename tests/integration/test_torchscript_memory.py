"""TorchScript's running function, line and graph node read from the interpreter's memory
(tracer/scripted/interp_frames.py with the layout interp_layout.py establishes from the wheel), in real
gdb on the real torch wheel, against tests/targets/jit_script.py's own lines. gdb's symbols only place
the breakpoint: the reader uses none of them (the TLS address is computed from the thread pointer)."""
from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT, gdb_pids
from tests.support import run_child
from tracer import settings
from tracer.scripted import interp_layout as IL
from tracer.symbols import find_symbol

pytestmark = pytest.mark.gdb

TARGET = ROOT / "tests" / "targets" / "jit_script.py"
SOURCE = TARGET.read_text().splitlines()
TORCH = Path(sysconfig.get_paths()["purelib"]) / "torch"


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SOURCE, 1) if text in line)


SIGMOID, RELU = "wrapper_CPU_sigmoid", "at::native::relu"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> list[dict]:
    """One gdb run of the target with both breakpoints (gdb loading libtorch's symbols is the cost). The
    layout comes from pttrace's own cache, established once per torch build (test_interp_layout.py
    tests establishing it)."""
    layout = IL.establish(str(TORCH / "lib" / "libtorch_cpu.so"), str(TORCH / "include"), settings.cache_dir())
    assert not layout.problems, layout.problems
    path = tmp_path_factory.mktemp("ts_memory") / "layout.json"
    path.write_text(json.dumps(IL.asdict(layout)))
    # Address breakpoints, offsets in libtorch_cpu.so from its symbol table: gdb reads no library's symbols
    # (libtorch_cpu's were most of this run's CPU). The reader needs none: it reads memory.
    lib = str(TORCH / "lib" / "libtorch_cpu.so")
    offsets = {name: _entry(name, lib) for name in (SIGMOID, RELU)}
    before = gdb_pids()
    proc = run_child(["gdb", "-nx", "-batch", "-x", str(ROOT / "tests" / "integration" / "ts_memory_gdb.py"),
                      "--args", sys.executable, str(TARGET)], capture_output=True, text=True, timeout=900,
                     env={**os.environ, "PTT_ROOT": str(ROOT), "PTT_LAYOUT": str(path),
                          "PTT_BREAK": json.dumps(offsets)})
    assert gdb_pids() <= before, "a gdb was left running"
    out = [json.loads(line[8:]) for line in proc.stdout.splitlines() if line.startswith("PTT-HIT ")]
    assert out and all("error" not in h for h in out), (out, proc.stderr[-2000:])
    return out


def _entry(name: str, lib: str) -> int:
    """The offset of the one function ``name`` names in ``lib`` (not its .cold part, not a PLT stub)."""
    (found,) = {m.address for m in find_symbol(name, [lib], lines=False) if not m.plt and not m.cold}
    return found


def hits(recorded: list[dict], symbol: str) -> list[dict]:
    found = [h for h in recorded if h["break"] == symbol]
    assert found, (symbol, recorded)
    return found


def test_sigmoid_in_an_inlined_callee_in_a_loop_and_an_if_and_in_a_traced_function(recorded):
    inside = [h for h in hits(recorded, SIGMOID) if h["state"]]
    scripted = [h["levels"] for h in inside if h["levels"][0]["function"] == "outer"]
    traced = [h["levels"] for h in inside if h["levels"][0]["function"] == "plain"]
    # outer(x, 3) calls inner at i = 0 and i = 2; torch.jit.trace's check runs the traced graph of plain
    # (twice on torch 2.13.0), then w = traced(x) runs it again
    assert len(scripted) == 2 and len(traced) >= 2, inside
    path = str(TARGET)
    for levels in scripted:
        assert len(levels) == 1 and levels[0]["node"] == "aten::sigmoid" and levels[0]["why"] is None
        assert levels[0]["places"] == [["outer", path, line_of("y = inner(y)")],
                                       ["inner", path, line_of("return torch.sigmoid(x) * 2.0")]]
    for levels in traced:
        assert levels[0]["node"] == "aten::sigmoid"
        assert levels[0]["places"][-1][1:] == [path, line_of("return torch.sigmoid(x + 1.0)")]


def test_relu_in_the_loops_else_branch(recorded):
    inside = [h for h in hits(recorded, RELU) if h["state"]]
    assert inside
    for h in inside:
        (level,) = h["levels"]
        assert level["node"] == "aten::relu" and level["function"] == "outer"
        assert level["places"] == [["outer", str(TARGET), line_of("y = torch.relu(y + 1.0)")]]
