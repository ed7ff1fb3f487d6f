"""Output to a pipe or a file is as wide as its lines (as git's is), never wrapped or cut at 80 columns,
and a long list of breakpoint locations is summarised with a count."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console

from tests.support import run_child
from tracer.commands._summary import SHOWN_LOCATIONS, _print_breakpoint
from tracer.session import storage
from tracer.session.model import Breakpoint, Location

ROOT = Path(__file__).resolve().parents[2]
FORWARD = ROOT / "sessions" / "example-sigmoid-forward.jsonl"
ADAPTER = "wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>::call"


def piped(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = run_child([sys.executable, "-m", "tracer", *args], cwd=ROOT, env=env, capture_output=True,
                     text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_show_into_a_pipe_keeps_each_frame_on_one_whole_line():
    out = piped("show", str(FORWARD))
    lines = out.splitlines()
    assert any(ADAPTER in line and "CPU" in line for line in lines), out
    assert max(len(line) for line in lines) > 80  # it would have been cut at 80 before
    assert not any(line.rstrip().endswith("…") for line in lines)


def test_sessions_into_a_pipe_does_not_fold_commands_or_names():
    out = piped("sessions", "--session-dir", "sessions")
    row = next(line for line in out.splitlines() if line.startswith("example-sigmoid-forward"))
    assert "python3 scripts/hello-world.py" in row and "wrapper_CPU_sigmoid" in row, row


def test_a_breakpoint_with_dozens_of_locations_lists_a_few_and_counts_the_rest(tmp_path):
    session = storage.load(FORWARD)
    locs = [Location(function=f"at::native::fn{i}(at::Tensor const&)", library="/x/libtorch_cpu.so", address=0x1000 + i)
            for i in range(35)]
    console = Console(file=open(tmp_path / "out.txt", "w"), width=200)
    _print_breakpoint(console, Breakpoint(spec="op:sigmoid", locations=locs, hits=0, pending=False), session)
    console.file.close()
    text = (tmp_path / "out.txt").read_text()
    assert "fn0(" in text and f"fn{SHOWN_LOCATIONS - 1}(" in text and f"fn{SHOWN_LOCATIONS}(" not in text
    assert f"and {35 - SHOWN_LOCATIONS} more locations" in text
