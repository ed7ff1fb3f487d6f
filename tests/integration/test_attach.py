"""``pttrace attach`` on a real Python that imports torch: records, detaches, and the target runs on."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, gdb_pids, run_pttrace
from tests.support import allowance, fifo_line, run_child, stop_process, wait_for
from tracer.session import storage

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "heartbeat.py"


class Target:
    """A heartbeat target started through a fifo handshake; its stdout lines are collected."""

    def __init__(self, tmp_path: Path, *extra: str, script: Path = TARGET):
        self.fifo = tmp_path / "ready.fifo"
        self.stop_file = tmp_path / "stop"
        os.mkfifo(self.fifo)
        self.proc = subprocess.Popen([sys.executable, str(script), str(self.fifo), str(self.stop_file), *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:  # the target says "ready" once it has imported torch
            assert fifo_line(self.fifo, self.proc).startswith("ready")
        except BaseException:
            stop_process(self.proc)
            raise
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def heartbeats(self) -> int:
        return sum(1 for line in self.lines if line.startswith("heartbeat"))

    def wait_for_heartbeats(self, more_than: int, timeout: float = 30) -> bool:
        end = time.monotonic() + allowance(timeout)
        while time.monotonic() < end:
            if self.heartbeats() > more_than:
                return True
            time.sleep(0.05)
        return False

    def finish(self) -> int:
        self.stop_file.touch()
        try:
            return self.proc.wait(allowance(30))
        finally:
            stop_process(self.proc)


def test_attach_records_detaches_and_target_runs_on(tmp_path):
    # The target calls torch in a named thread of its own (one attach for both claims: each is a whole run
    # under gdb; a main thread's hits while attached are test_faults', test_processes' and the interpreter
    # matrix's in test_python_frames_gdb)
    target = Target(tmp_path, "--thread")
    before = gdb_pids()
    try:
        proc = run_pttrace("attach", str(target.proc.pid), "--batch", "-b", "THPVariable_tensor", "--max-hits", "3",
                           "--session-dir", str(tmp_path / "s"))
        assert proc.returncode == 0, proc.stderr
        session = storage.load(next((tmp_path / "s").glob("*.jsonl")))
        assert session.info.mode == "attach"
        assert session.info.pid == target.proc.pid
        assert any("heartbeat.py" in a for a in session.info.argv)
        assert session.info.status == "detached"
        assert len(session.hits) == 3
        # The locations are the ones gdb resolved while attached, not a re-read after the detach.
        bp = next(b for b in session.breakpoints if b.spec == "THPVariable_tensor")
        assert bp.locations and all(loc.library.endswith("libtorch_python.so") for loc in bp.locations), \
            [(loc.function, loc.library) for loc in bp.locations]
        hit = session.hits[0]
        assert "THPVariable_tensor" in hit.innermost.function
        py = [f for f in hit.frames if f.kind == "python"]
        # The innermost Python frame: heartbeat.py's work() on the line calling torch.tensor.
        assert py and py[-1].file.endswith("heartbeat.py") and py[-1].function == "work", [f.function for f in py]
        assert py[-1].source == "t = torch.tensor([n])"
        # Each hit is in the named thread, not the main one
        assert hit.thread.id is not None and hit.thread.id != 1
        assert hit.thread.lwp and hit.thread.lwp != target.proc.pid
        assert hit.thread.name
        # The target is alive, not stopped, and keeps beating after the detach.
        seen = target.heartbeats()
        assert target.wait_for_heartbeats(seen + 2), "no heartbeat after detach"
        assert gdb_pids() <= before, "a gdb was left behind"
    finally:
        code = target.finish()
    assert code == 0
    assert "bye" in target.lines


def test_target_exit_while_attached_is_completed(tmp_path):
    # (a target without torch, its hits in libz: the claim is about its end; gdb attached to one with torch
    # read torch's libraries first)
    target = Target(tmp_path, script=TARGET.with_name("plain_heartbeat.py"))
    result = {}

    def attach():
        result["proc"] = run_pttrace("attach", str(target.proc.pid), "--batch", "-b", "zlibCompileFlags",
                                     "--session-dir", str(tmp_path / "s"))

    th = threading.Thread(target=attach)
    th.start()
    # Wait until hits are being recorded, then let the target end by itself.

    def recording():
        assert th.is_alive(), f"pttrace ended before its first hit: {getattr(result.get('proc'), 'stderr', None)}"
        files = list((tmp_path / "s").glob("*.jsonl")) if (tmp_path / "s").exists() else []
        return bool(files) and '"type":"hit"' in files[0].read_text()

    try:
        wait_for(recording, 60, "the attached target's first hit in the session", step=0.1)
    finally:
        target.stop_file.touch()
        th.join(allowance(120))
    assert not th.is_alive(), "pttrace did not end after its target did"
    assert result["proc"].returncode == 0, result["proc"].stderr
    session = storage.load(next((tmp_path / "s").glob("*.jsonl")))
    assert session.info.status == "completed"
    assert session.info.exit_code == 0
    assert session.hits


@pytest.mark.parametrize("case", ["dead", "not-python", "garbage"])
def test_attach_bad_targets_one_sentence_exit_2(tmp_path, case):
    if case == "dead":
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        pid = str(p.pid)
        expected = "no process"
    elif case == "not-python":
        p = subprocess.Popen(["sleep", "30"])
        pid = str(p.pid)
        expected = "does not look like a Python"
    else:
        p = None
        pid = "12ab"
        expected = "is not a process id"
    try:
        proc = run_pttrace("attach", pid, "--batch", "-b", "THPVariable_tensor", "--session-dir", str(tmp_path))
    finally:
        stop_process(p)
    assert proc.returncode == 2
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to switch to another user")
def test_attach_to_another_users_process_is_permission_denied(tmp_path):
    target = Target(tmp_path, script=TARGET.with_name("plain_heartbeat.py"))  # a Python of root's, torch or not
    sessions = tmp_path / "s"
    sessions.mkdir()
    sessions.chmod(0o777)
    try:
        # pttrace runs as nobody; the target belongs to root.
        proc = run_child(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          sys.executable, "-m", "tracer", "attach", str(target.proc.pid), "--batch",
                          "-b", "THPVariable_tensor", "--session-dir", str(sessions)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"})
        assert proc.returncode == 2, proc.stderr
        assert "belongs to another user" in proc.stderr
        assert "Run pttrace as that user, or as root." in proc.stderr
        assert "Traceback" not in proc.stderr
        assert target.wait_for_heartbeats(target.heartbeats() + 1)
    finally:
        assert target.finish() == 0
