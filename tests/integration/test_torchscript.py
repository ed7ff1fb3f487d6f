"""TorchScript under pttrace: what is recorded where a hit passes through the interpreter, checked
against the program (tests/targets/jit_script.py). pttrace does not read the scripted function, line
and node from the interpreter's memory yet: the session says so, and the interpreter's frame says so."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import PTTRACE, ROOT, gdb_pids
from tracer.export import paths as P
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGET = ROOT / "tests" / "targets" / "jit_script.py"
SOURCE = TARGET.read_text().splitlines()


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SOURCE, 1) if text in line)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jit")
    before = gdb_pids()
    proc = subprocess.run([*PTTRACE, "run", "--batch", "--session-dir", str(tmp), "-b", "wrapper_CPU_sigmoid",
                           str(TARGET)], capture_output=True, text=True, timeout=600, cwd=tmp,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert gdb_pids() <= before, "a gdb was left running"
    files = sorted(tmp.glob("*.jsonl"))
    assert proc.returncode == 0 and len(files) == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc, storage.load(files[0])


def user_line(hit) -> int | None:
    """The innermost line of the program on the hit's path."""
    return next((f.line for f in reversed(hit.frames)
                 if f.kind == "python" and f.file and f.file.endswith("jit_script.py")), None)


def test_sigmoid_runs_where_the_program_says(recording):
    _, session = recording
    # outer(x, 3) calls inner at i = 0 and i = 2 (the if's even branch); traced(x) runs sigmoid once;
    # torch.jit.trace runs plain in Python (plain's line) and checks the trace by running it (trace's line)
    lines = sorted(user_line(h) for h in session.hits)
    outer_line, traced_line = line_of("z = outer(x, 3)"), line_of("w = traced(x)")
    assert lines.count(outer_line) == 2 and lines.count(traced_line) == 1, lines
    tracing = {line_of("return torch.sigmoid(x + 1.0)"), line_of("traced = torch.jit.trace(")}
    assert set(lines) - {outer_line, traced_line} == tracing, lines


def test_interpreter_frames_are_torchscript_and_say_what_is_not_read(recording):
    proc, session = recording
    through = [h for h in session.hits if user_line(h) in (line_of("z = outer(x, 3)"), line_of("w = traced(x)"))]
    for hit in through:
        loops = [f for f in hit.frames if P.is_interpreter_loop(f.function)]
        assert loops and all(f.layer == "torchscript" for f in loops)
        assert P.frame_note(loops[0]) == "TorchScript: its function, line and graph node are not read"
        assert hit.frames[-1].function.endswith("wrapper_CPU_sigmoid(at::Tensor const&)") or \
            "wrapper_CPU_sigmoid" in hit.frames[-1].function
    assert any("hits passed through TorchScript's interpreter" in w for w in session.info.warnings)
    assert "TorchScript's interpreter" in proc.stdout  # the summary's warnings
