"""Every status, count and warning a session shows is true (real gdb, real torch): a warning about Python
frames that are all there, a status that says a crash where the program exited 0."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT
from tests.support import run_child
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGETS = ROOT / "tests" / "targets"


def record(tmp_path: Path, *args: str):
    sessions = tmp_path / "sessions"
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), *args], cwd=tmp_path,
                     input=b"", capture_output=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode(errors="replace"), storage.load(next(sessions.glob("*.jsonl")))


def test_a_hit_under_a_generator_and_a_coroutine_gets_no_false_warning(tmp_path):
    # GIVEN torch.sigmoid called in a generator that an asyncio coroutine iterates (its first walk passes
    # through libraries gdb has no symbols of yet, ends early, and the hit is recorded again)
    out, session = record(tmp_path, "-b", "wrapper_CPU_sigmoid", str(TARGETS / "async_gen.py"))
    assert "DONE" in out
    # THEN its Python frames are every one py-bt would show, outermost first, and no warning says otherwise
    (hit,) = session.hits
    python = [f.function for f in hit.frames if f.kind == "python"]
    assert python[0] == "<module>" and python[-2:] == ["main", "gen"], python
    assert "Handle._run" in python and "Runner.run" in python
    assert not [w for w in session.info.warnings if "eval frames" in w], session.info.warnings
    assert session.info.status == "completed" and session.info.exit_code == 0


def test_a_child_ending_after_the_target_went_to_its_own_recorder_does_not_end_the_run(tmp_path):
    # GIVEN a target that hits once, forks a child, then executes another Python program (handed to a recorder
    # of its own) that hits once and exits 3, and the child, the last process this gdb holds, hits and ends
    # before that program's hit (one run for what test_a_target_that_executes_python_has_one_count_one_exit_
    # code_and_its_locations showed with a run of its own: a target that hits, then executes Python)
    # (its calls are libz's, no torch: the claim is about the processes and the run's end)
    out, session = record(tmp_path, "-b", "zlibCompileFlags", str(TARGETS / "fork_then_execv.py"),
                          str(tmp_path / "execd"))
    # THEN the run waits for the program's recorder: it runs to its end, its hit recorded (the child's end
    # ended the run, killing the program and its recorder, and the session said "completed": the fork
    # storm's lost hits after a rescue, issue 25)
    assert "SECOND DONE" in out, out
    assert len(session.hits) == 3, (len(session.hits), session.info.warnings)
    assert session.info.status == "completed" and session.info.exit_code == 3, session.info
    # AND the summary, show, sessions and the session agree: 3 hits, a resolved breakpoint, exit code 3
    assert "3 hit(s)" in out and "never resolved" not in out, out
    (bp,) = session.breakpoints
    assert bp.hits == 3 and bp.locations and not bp.pending
    listing = run_child([*PTTRACE, "sessions", "--session-dir", str(tmp_path / "sessions")],
                        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=120).stdout
    row = next(line for line in listing.splitlines() if "fork_then_execv" in line)
    assert row.split()[-2] == "3", row
    shown = run_child([*PTTRACE, "show", session.path], capture_output=True, text=True,
                      env={**os.environ, "COLUMNS": "250"}, timeout=120).stdout
    header = " ".join(shown.split("├")[0].split())  # the first line, however the terminal wrapped it
    assert "completed 3 hits" in header, header
