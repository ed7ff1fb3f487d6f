"""What ``pttrace run`` launches and what the target gets, on real gdb, real torch, real processes:
``-m MODULE``, ``-c CODE``, a console script of the environment, the target's stdin in ``--batch``,
a breakpoint name found again in a library loaded later, and a warning for a child not followed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT, gdb_pids
from tests.support import run_child
from tracer.session import storage

pytestmark = pytest.mark.gdb

KERNEL = "wrapper_CPU_sigmoid"  # local to libtorch_cpu.so: our index resolves it by address
# What a target whose claim is how it is launched and fed calls instead of importing torch (2.5 s of CPU at
# load 8): libz's zlibCompileFlags, which nothing else calls.
PLAIN = "zlibCompileFlags"
CALL = 'ctypes.CDLL("libz.so.1").zlibCompileFlags()'


def record(tmp_path: Path, *args: str, stdin: bytes | None = None, timeout: float = 300):
    """``pttrace run --batch`` in ``tmp_path``; (process, the one session written)."""
    sessions = tmp_path / "sessions"
    before = gdb_pids()
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), *args], cwd=tmp_path,
                     input=stdin if stdin is not None else b"", capture_output=True, timeout=timeout,
                     env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert gdb_pids() <= before, "a gdb was left running"
    files = sorted(sessions.glob("*.jsonl"))
    assert len(files) == 1, (proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))
    return proc, storage.load(files[0])


def innermost(hit) -> str:
    return hit.frames[-1].function or ""


def test_run_m_module_runs_it_as_python_m_with_its_arguments(tmp_path):
    (tmp_path / "sigmoid_mod.py").write_text(f"import ctypes, sys\nprint('ARGV', sys.argv[1:])\n{CALL}\n")
    proc, session = record(tmp_path, "--break", PLAIN, "-m", "sigmoid_mod", "--max-hits", "7", "x")
    assert proc.returncode == 0, proc.stderr
    # Everything after -m MODULE is the module's, as python has it: --max-hits 7 is not pttrace's.
    assert b"ARGV ['--max-hits', '7', 'x']" in proc.stdout
    assert session.info.argv[1:] == ["-m", "sigmoid_mod", "--max-hits", "7", "x"]
    assert [innermost(h) for h in session.hits] == [PLAIN]


def test_run_c_code_with_arguments_ends_at_max_hits_with_its_breakpoints_written_once_and_no_target_left(tmp_path):
    """``-c CODE`` and its arguments reach the target as python has them; the run ends at --max-hits: the
    breakpoints are written while the target is still there, with their locations in libtorch_cpu.so, and
    not again after gdb killed it (that dump repeated the same records); the target is ended by gdb's own
    exit, not a `kill` waited for first: once pttrace has returned, the target is gone, and its process
    record says it was killed. (One run of torch under gdb for what three runs showed: -c with arguments,
    the breakpoints written once, no target left.)"""
    import json

    from tracer.recorder.guard import alive

    code = "import sys, torch; print('ARGV', sys.argv, flush=True); x = torch.ones(2); [torch.sigmoid(x) for _ in iter(int, 1)]"
    proc, session = record(tmp_path, "--break", KERNEL, "--max-hits", "2", "-c", code, "a", "b")
    assert proc.returncode == 0, proc.stderr
    assert b"ARGV ['-c', 'a', 'b']" in proc.stdout
    assert session.info.argv[1:] == ["-c", code, "a", "b"]
    assert session.info.status == "completed"
    assert [KERNEL in innermost(h) for h in session.hits] == [True, True]
    (path,) = (tmp_path / "sessions").glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    last_hit = max(i for i, r in enumerate(records) if r.get("type") == "hit")
    after = [r for r in records[last_hit:] if r.get("type") == "breakpoint"]
    assert len(after) == 1, after
    (loc,) = after[0]["locations"]
    assert loc["library"].endswith("libtorch_cpu.so") and KERNEL in loc["function"]
    (bp,) = session.breakpoints
    assert bp.locations[0].address == loc["address"] and not bp.pending
    (target,) = session.processes
    assert target.signal == "SIGKILL" and target.ended
    assert not alive(target.pid), f"the target {target.pid} outlived pttrace"


def test_a_script_named_like_an_option_runs_as_a_script_after_a_double_dash(tmp_path):
    # python would read `-x.py` as its option -x (and exit 2, which pttrace passed on as a completed run)
    (tmp_path / "-x.py").write_text(f"import ctypes, sys\nprint('ARGV', sys.argv)\n{CALL}\n")
    proc, session = record(tmp_path, "--break", PLAIN, "--", "-x.py", "a")
    assert proc.returncode == 0, proc.stderr
    assert b"ARGV ['-x.py', 'a']" in proc.stdout
    assert session.info.status == "completed" and session.info.exit_code == 0
    assert [innermost(h) for h in session.hits] == [PLAIN]


def test_a_missing_module_is_one_sentence_before_gdb_starts(tmp_path):
    proc = run_child([*PTTRACE, "run", "--batch", "--break", KERNEL, "-m", "no_such_module_xyz"], cwd=tmp_path,
                     capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[0].endswith("has no module named 'no_such_module_xyz'.")


def test_a_console_script_of_the_environment_is_run_by_name(tmp_path):
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.is_file():
        pytest.skip("no torchrun beside this Python")
    proc, session = record(tmp_path, "--break", "initModule", "--max-hits", "1", "torchrun", "--help")
    assert proc.returncode == 0, proc.stderr
    assert session.info.argv[1:] == [str(torchrun), "--help"]
    assert len(session.hits) == 1 and "initModule" in innermost(session.hits[0])


def test_the_target_reads_pttraces_stdin_in_batch(tmp_path):
    (tmp_path / "reader.py").write_text(
        f"import ctypes, sys\ndata = sys.stdin.read()\nprint('GOT', repr(data))\n{CALL}\nprint('EOF seen')\n")
    text = b"hello world\nsecond line without newline at the end"
    proc, session = record(tmp_path, "--break", PLAIN, "reader.py", stdin=text, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"GOT {text.decode()!r}".encode() in proc.stdout.replace(b"\r\n", b"\n")
    assert b"EOF seen" in proc.stdout
    assert len(session.hits) == 1 and session.info.status == "completed"


@pytest.fixture(scope="module")
def twin_library(tmp_path_factory) -> Path:
    """A library of one's own with a function named like one inside torch (wrapper_CPU_sigmoid)."""
    out = tmp_path_factory.mktemp("twin")
    source = out / "twin.c"
    source.write_text(f"int {KERNEL}(int x) {{ return 2 * x + 1; }}\n")
    lib = out / "libtwin.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-g", "-O0", "-o", str(lib), str(source)], check=True)
    return lib


def test_a_name_is_found_again_in_a_library_loaded_later(tmp_path, twin_library):
    # gdb's `break wrapper_CPU_sigmoid` breaks in both; pttrace resolved the name in torch at start-up
    # and used to miss the library loaded at run time.
    (tmp_path / "twin.py").write_text(
        "import ctypes, sys, torch\ntorch.sigmoid(torch.ones(3))\n"
        f"print('TWIN', ctypes.CDLL(sys.argv[1]).{KERNEL}(20))\n")
    proc, session = record(tmp_path, "--break", KERNEL, "twin.py", str(twin_library))
    assert proc.returncode == 0, proc.stderr
    assert b"TWIN 41" in proc.stdout
    libraries = [os.path.basename(h.frames[-1].library or "") for h in session.hits]
    assert libraries == ["libtorch_cpu.so", "libtwin.so"], [(h.frames[-1].function, h.frames[-1].library)
                                                            for h in session.hits]


NOT_FOLLOWED = (
    "import os, subprocess, sys, torch\nfrom torch.utils.data import DataLoader, Dataset\n"
    "class Items(Dataset):\n    def __len__(self):\n        return 4\n"
    "    def __getitem__(self, i):\n        return torch.tensor([i])\n"
    "if __name__ == '__main__':\n"
    "    pid = os.fork()\n    if pid == 0:\n        torch.sigmoid(torch.ones(2))\n        os._exit(0)\n"
    "    os.waitpid(pid, 0)\n    print('CHILD', pid, flush=True)\n"
    "    print('BATCHES', len(list(DataLoader(Items(), batch_size=2, num_workers=2))), flush=True)\n"
    "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n")


def test_with_no_follow_a_forked_child_dataloader_workers_and_a_subprocess_are_each_named_as_not_followed(tmp_path):
    # --no-follow-children keeps what pttrace did before it followed children: the session says which it missed.
    # One run for the three kinds of child (each kind was a whole run of torch under gdb of its own).
    (tmp_path / "children.py").write_text(NOT_FOLLOWED)
    proc, session = record(tmp_path, "--no-follow", "--break", KERNEL, "children.py")  # the short spelling
    assert proc.returncode == 0, proc.stderr
    assert b"BATCHES 2" in proc.stdout
    child = int(proc.stdout.split(b"CHILD ")[1].split()[0])
    # the os.fork child's sigmoid is not recorded (the parent calls none), and the warning names the child
    assert session.hits == []
    assert any(f"child process {child}" in w and "not followed" in w for w in session.info.warnings), \
        session.info.warnings
    children = {w.split("child process ")[1].split()[0] for w in session.info.warnings if "was not followed" in w}
    assert len(children - {str(child)}) >= 3, session.info.warnings  # two workers and the subprocess


def test_no_follow_is_the_short_spelling_of_no_follow_children():
    from tracer.cli import build_parser

    for flag in ("--no-follow-children", "--no-follow"):
        assert build_parser().parse_args(["run", flag, "x.py"]).follow_children is False, flag
    assert build_parser().parse_args(["run", "x.py"]).follow_children is True
