"""Every status, count and warning a session shows is true (real gdb, real torch): a warning about Python
frames that are all there, a status that says a crash where the program exited 0."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGETS = ROOT / "tests" / "targets"


def record(tmp_path: Path, *args: str):
    sessions = tmp_path / "sessions"
    proc = subprocess.run([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), *args], cwd=tmp_path,
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
