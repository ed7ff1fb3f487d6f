"""Child processes followed by ``pttrace run`` (real gdb, real torch, real processes): DataLoader workers,
an ``os.fork`` child, multiprocessing's fork and spawn start methods, a subprocess; every hit names its
process, the session lists every process with its end, and nothing is left running.

One recording serves most assertions (module-scoped): a program that does all of it in turn."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT, alive, gdb_pids
from tests.support import (LIBFFI, Lines, allowance, assert_only_unnamed, run_child, stop_process,
                           unnamed_frames_in, wait_for)
from tracer.session import storage

pytestmark = pytest.mark.gdb

# torch only in the main process and what it forks: the spawned child (which imports this module again) and
# the subprocess call libz's zlibCompileFlags through ctypes, a new interpreter's first hit after Py_BytesMain
# without importing torch (2.5 s of CPU at load 8 each, and their recorders' gdb reading torch's libraries).
FAMILY = '''\
import ctypes, multiprocessing, os, subprocess, sys


def child_work(n):
    ctypes.CDLL("libz.so.1").zlibCompileFlags()


if __name__ == "__main__":
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.tensor([i])

    loader = DataLoader(Items(), batch_size=1, num_workers=2)
    print("BATCHES", len(list(loader)), flush=True)
    pid = os.fork()
    if pid == 0:
        torch.tensor([10])
        os._exit(3)
    os.waitpid(pid, 0)
    print("FORKED", pid, flush=True)
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import os"])
    _, status = os.waitpid(pid, 0)
    print("FORKEXEC", pid, os.waitstatus_to_exitcode(status), flush=True)
    pid = os.fork()
    if pid == 0:  # by file descriptor: libc's fexecve, the kernel's execveat
        os.execve(os.open(sys.executable, os.O_RDONLY), [sys.executable, "-c", "import os"], dict(os.environ))
    _, status = os.waitpid(pid, 0)
    print("FDEXEC", pid, os.waitstatus_to_exitcode(status), flush=True)
    p = multiprocessing.get_context("fork").Process(target=child_work, args=(20,))
    p.start()
    p.join()
    print("MPFORK", p.pid, p.exitcode, flush=True)
    p = multiprocessing.get_context("spawn").Process(target=child_work, args=(30,))
    p.start()
    p.join()
    print("SPAWN", p.pid, p.exitcode, flush=True)
    sub = subprocess.Popen([sys.executable, "-c", "import ctypes; ctypes.CDLL('libz.so.1').zlibCompileFlags()"])
    print("SUBPROCESS", sub.pid, sub.wait(), flush=True)
    subprocess.run(["sleep", "0.3"], check=True)
    print("DONE", os.getpid(), flush=True)
'''


def record(tmp_path: Path, *args: str, timeout: float = 300):
    sessions = tmp_path / "sessions"
    before = gdb_pids()
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), *args], cwd=tmp_path,
                     input=b"", capture_output=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert gdb_pids() <= before, "a gdb was left running"
    files = sorted(sessions.glob("*.jsonl"))
    assert len(files) == 1, (proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))
    return proc, storage.load(files[0])


def printed(proc, tag: str) -> list[int]:
    for line in proc.stdout.decode(errors="replace").splitlines():
        if line.startswith(tag + " "):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"{tag} not printed: {proc.stdout!r} {proc.stderr!r}")


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("family")
    (tmp / "family.py").write_text(FAMILY)
    # _dl_start: the dynamic loader's first function, microseconds after an exec; Py_BytesMain: libpython's first.
    proc, session = record(tmp, "--break", "THPVariable_tensor", "--break", "zlibCompileFlags", "--break", "_dl_start",
                           "--break", "Py_BytesMain", "family.py")
    return proc, session


def test_every_dataloader_hit_is_recorded_with_its_worker(family):
    proc, session = family
    assert proc.returncode == 0, proc.stderr
    assert printed(proc, "BATCHES") == [4]
    roles = {}
    for hit in session.hits:
        p = session.process(hit.thread.pid)
        assert p is not None, hit.thread
        if p.role and p.role.startswith("DataLoader worker"):
            roles.setdefault(p.role, []).append(hit)
            assert any(f.function == "Items.__getitem__" for f in hit.frames if f.kind == "python")
    assert sorted(roles) == ["DataLoader worker 0", "DataLoader worker 1"], [p.to_dict() for p in session.processes]
    assert sum(len(v) for v in roles.values()) == 4
    main = session.processes[0]
    for role in roles:
        worker = next(p for p in session.processes if p.role == role)
        assert worker.ppid == main.pid and worker.worker == int(role.split()[-1])
        assert worker.state == "exited" and worker.exit_code == 0 and worker.ended


def test_an_os_fork_child_and_a_multiprocessing_fork_child_are_followed(family):
    proc, session = family
    forked = printed(proc, "FORKED")[0]
    mp_pid, mp_code = printed(proc, "MPFORK")
    main = session.processes[0]
    child = session.process(forked)
    assert child is not None and child.ppid == main.pid and child.exit_code == 3, child
    assert [h for h in session.hits if h.thread.pid == forked], "the fork child's hit is missing"
    mp_child = session.process(mp_pid)
    assert mp_child is not None and mp_child.exit_code == mp_code == 0
    assert [h for h in session.hits if h.thread.pid == mp_pid], "the multiprocessing fork child's hit is missing"


def test_the_main_process_hits_and_the_header_lists_every_process(family):
    proc, session = family
    main = session.processes[0]
    assert main.pid == printed(proc, "DONE")[0] and main.exit_code == 0 and main.ppid
    assert main.argv[-1] == "family.py"
    assert session.info.status == "completed" and session.info.exit_code == 0
    for p in session.processes:
        assert p.started and p.ended, p


def test_a_spawned_child_and_a_python_subprocess_are_traced_from_their_first_instruction(family):
    proc, session = family
    for tag in ("SPAWN", "SUBPROCESS", "FORKEXEC", "FDEXEC"):
        pid, code = printed(proc, tag)
        assert code == 0
        child = session.process(pid)
        assert child is not None and child.session and not child.attached_late, \
            [p.to_dict() for p in session.processes]
        assert child.ppid == session.processes[0].pid and child.exit_code == 0
        hits = [h for h in session.hits if h.thread.pid == pid]
        assert hits, f"{tag}: no hit recorded in process {pid}"
        # Held at its exec, before the dynamic loader ran: the loader's start and the interpreter's are recorded.
        assert [h.breakpoint for h in hits][:2] == ["_dl_start", "Py_BytesMain"], [h.breakpoint for h in hits]
        python = [f for h in hits for f in h.frames if f.kind == "python"]
        if tag in ("FORKEXEC", "FDEXEC"):  # os.fork children that run os.execv(e): taken from their execve(at)
            assert child.argv[1:] == ["-c", "import os"] and len(hits) == 2
        elif tag == "SPAWN":  # child_work(30) in family.py
            assert any(f.function == "child_work" for f in python), [f.function for f in python]
        else:  # python -c CODE: its frame is <string>
            assert any(f.file == "<string>" for f in python), [(f.function, f.file) for f in python]
        assert not [w for w in session.info.warnings if re.search(rf"\b{pid}\b", w)], session.info.warnings
    told = [lib for lib in map(unnamed_frames_in, session.info.warnings) if lib is not None]
    assert told == [LIBFFI], session.info.warnings  # the ctypes calls' libffi frames, said once
    # Hits are numbered once over the whole recording.
    seqs = [h.seq for h in session.hits]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_a_child_that_executes_another_program_than_python_is_a_warning(family):
    proc, session = family
    # One line per program that is not Python, with its count and pids (not one warning per process)
    sleeps = [p.pid for p in session.processes if (p.detached or "").endswith("/sleep")]
    assert sleeps, session.processes
    assert any(w.startswith("sleep: 1 process executed it, not Python: not traced") and str(sleeps[0]) in w
               for w in session.info.warnings), session.info.warnings


def test_no_target_process_is_left_running(family):
    proc, session = family
    for p in session.processes:
        assert not alive(p.pid), p


ATTACHED_TEMPLATE = '''\
import os, sys, time
{setup}
ready, go, stop = sys.argv[1:4]
open(ready + ".tmp", "w").write(str(os.getpid()))
os.rename(ready + ".tmp", ready)
while not os.path.exists(go):
    {parent_call}
    time.sleep(0.05)
pid = os.fork()
if pid == 0:
    while not os.path.exists(stop):
        {child_call}
        time.sleep(0.05)
    os._exit(7)
print("CHILD", pid, flush=True)
while not os.path.exists(stop):
    time.sleep(0.05)
_, status = os.waitpid(pid, 0)
print("CHILD-EXIT", os.waitstatus_to_exitcode(status), flush=True)
'''
ATTACHED_FAMILY = ATTACHED_TEMPLATE.format(setup="import torch", parent_call="torch.tensor([0])", child_call="torch.tensor([1])")
# The same family stopping in libz's zlibCompileFlags (through ctypes), a name gdb resolves itself: gdb takes
# its breakpoints out of a fork child and puts back only those it can place in the child's program space,
# which a name cannot be before pttrace reads the child's symbols (before: the child's hits were lost).
ATTACHED_LIBZ_FAMILY = ATTACHED_TEMPLATE.format(setup='import ctypes\ncall = ctypes.CDLL("libz.so.1").zlibCompileFlags',
                                     parent_call="call()", child_call="call()")


@pytest.mark.parametrize("script_text,stop", [(ATTACHED_FAMILY, "THPVariable_tensor"),
                                              (ATTACHED_LIBZ_FAMILY, "zlibCompileFlags")], ids=["torch", "libz"])
def test_attach_follows_a_child_started_after_it_and_leaves_both_running(tmp_path, script_text, stop):
    script, ready, go, stop_file = tmp_path / "parent.py", tmp_path / "ready", tmp_path / "go", tmp_path / "stop"
    script.write_text(script_text)
    target = subprocess.Popen([sys.executable, str(script), str(ready), str(go), str(stop_file)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    before = gdb_pids()
    sessions = tmp_path / "sessions"
    tracer = None
    try:
        wait_for(ready.exists, 120, "the parent's ready file")
        tracer = subprocess.Popen([*PTTRACE, "attach", str(target.pid), "--batch", "--break", stop,
                                   "--session-dir", str(sessions)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        # The parent's own hits say gdb is attached: then it forks its worker.
        _wait_for_a_hit(tracer, sessions)
        go.touch()
        lines = Lines(target.stdout, "the forking parent")
        child_pid = int(lines.next(60).split()[1])

        def childs_hit():
            """a hit of the child in the session being written (so pttrace followed it)"""
            assert tracer.poll() is None, f"pttrace ended ({tracer.returncode}) before the child's hit"
            return any(h.thread.pid == child_pid for h in storage.load(next(sessions.glob("*.jsonl"))).hits)

        # Ctrl-C once the child has a hit (not a fixed --duration): pttrace detaches from both and ends.
        wait_for(childs_hit, 120, "the child's first hit in the session", step=0.2)
        tracer.send_signal(signal.SIGINT)
        out, err = tracer.communicate(timeout=allowance(180))
        assert tracer.returncode == 130, err  # 128 + SIGINT: ended by the signal, as asked
        assert gdb_pids() <= before, "a gdb was left running"
        session = storage.load(next(sessions.glob("*.jsonl")))
        assert session.info.status == "detached"
        child = session.process(child_pid)
        assert child is not None and child.ppid == target.pid and child.state == "detached", \
            [p.to_dict() for p in session.processes]
        assert [h for h in session.hits if h.thread.pid == child_pid], "the child's hits are missing"
        assert [h for h in session.hits if h.thread.pid == target.pid]
        # pttrace never kills what it attached to: both run on, and end as they mean to.
        assert alive(target.pid) and alive(child_pid)
        stop_file.touch()
        assert lines.next(60).split() == [b"CHILD-EXIT", b"7"]
        assert target.wait(allowance(60)) == 0
    finally:
        stop_file.touch()
        for proc in (tracer, target):
            stop_process(proc)


def test_a_run_ended_early_kills_every_child_it_followed(tmp_path):
    # --max-hits ends the run while both DataLoader workers still run: they go with the target, as gdb's
    # `kill inferiors` would take them, and the session says how each ended.
    (tmp_path / "loader.py").write_text((ROOT / "bench" / "workers_target.py").read_text())
    proc, session = record(tmp_path, "--max-hits", "3", "--break", "THPVariable_tensor", "loader.py", "100000")
    assert proc.returncode == 0, proc.stderr
    assert len(session.hits) == 3
    assert len(session.processes) >= 3, [p.to_dict() for p in session.processes]
    for p in session.processes:
        assert not alive(p.pid), p
        assert p.ended and p.state == "exited", p


def test_summary_show_and_markdown_group_hits_by_process(family, tmp_path, capsys):
    from tracer.cli import main

    proc, session = family
    workers = [p for p in session.processes if (p.role or "").startswith("DataLoader worker")]
    summary = proc.stdout.decode(errors="replace")
    assert "processes: " in summary and all(f"pid {w.pid} ({w.role})" in summary for w in workers), summary
    assert main(["show", session.path]) == 0
    shown = capsys.readouterr().out
    for w in workers:
        assert f"pid {w.pid} ({w.role})" in shown and "exit code 0" in shown
    out = tmp_path / "notes.md"
    assert main(["export", session.path, "-o", str(out)]) == 0
    md = out.read_text()
    assert "## Processes" in md
    rows = [line for line in md.splitlines() if line.startswith("| pid ")]
    # a row per process, but the helper program (sleep), which the warnings count instead
    helpers = [p for p in session.processes if (p.detached or "").endswith("/sleep")]
    assert len(helpers) == 1 and len(rows) == len(session.processes) - 1, rows
    assert not any(f"pid {helpers[0].pid} " in r for r in rows), rows
    assert any("DataLoader worker 0" in r and "exit code 0" in r and "| 2 |" in r for r in rows), rows
    assert "processes pid " in md or "process pid " in md


def test_speedscope_export_has_one_profile_per_process_and_thread(family, tmp_path):
    """speedscope's schema, and the hits themselves: each DataLoader worker and child a profile of its own."""
    import json

    from tests.unit.test_export_speedscope import check_against_hits
    from tracer.cli import main

    _, session = family
    out = tmp_path / "family.speedscope.json"
    assert main(["export", session.path, "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    check_against_hits(doc, session)
    pids = {h.thread.pid for h in session.hits}
    assert len(pids) >= 3 and len(doc["profiles"]) >= len(pids)
    for w in (p for p in session.processes if (p.role or "").startswith("DataLoader worker")):
        assert any(f"pid {w.pid}" in prof["name"] for prof in doc["profiles"]), [p["name"] for p in doc["profiles"]]


TRAIN = '''\
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
sys.stdout.write(f"RANK {dist.get_rank()} SUM {int(t.item())}\\n")  # one write: torchrun's python -u
dist.destroy_process_group()
'''


def test_torchrun_records_every_ranks_hits_labelled_by_rank(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    proc, session = record(tmp_path, "--break", "THPVariable_tensor", "-m", "torch.distributed.run",
                           "--standalone", "--nproc-per-node", "2", "train.py")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode(errors="replace")
    assert "RANK 0 SUM 1" in out and "RANK 1 SUM 1" in out, out
    ranks = {p.rank: p for p in session.processes if p.rank is not None}
    assert sorted(ranks) == [0, 1] and all(p.role == f"rank {r}" for r, p in ranks.items()), \
        [p.to_dict() for p in session.processes]
    for rank, p in ranks.items():
        hits = [h for h in session.hits if h.thread.pid == p.pid]
        assert hits and any("dist.get_rank()" in (f.source or "") for f in hits[0].frames), (rank, hits)
        assert p.exit_code == 0 and not alive(p.pid)
    assert "rank 0" in out and "rank 1" in out  # the summary groups by rank


# The attached parent below stops in libz's zlibCompileFlags, not in torch: the claim is about its child
# (importing torch took 2.5 s of CPU at load 8).
STOP = "zlibCompileFlags"

HELD_PARENT = '''\
import ctypes, os, subprocess, sys, time
call = ctypes.CDLL("libz.so.1").zlibCompileFlags
ready, go, marker = sys.argv[1:4]
open(ready, "w").write(str(os.getpid()))
while not os.path.exists(go):
    call()
    time.sleep(0.05)
subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('ran')", marker], check=True)
'''


def test_a_child_held_at_its_exec_runs_on_when_pttrace_is_killed_meanwhile(tmp_path):
    # Attached to a parent that starts a Python subprocess: the child waits, stopped, while its recorder
    # starts (its session file is the first sign of that). pttrace killed then, the keeper continues it
    # and it does its work; the parent, detached by its gdb, waits for it and ends.
    ready, go, marker = tmp_path / "ready", tmp_path / "go", tmp_path / "ran"
    (tmp_path / "parent.py").write_text(HELD_PARENT)
    target = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(ready), str(go), str(marker)])
    sessions = tmp_path / "sessions"
    before = gdb_pids()
    tracer = None
    try:
        wait_for(ready.exists, 60, "the parent's ready file")
        tracer = subprocess.Popen([*PTTRACE, "attach", str(target.pid), "--batch", "--break", "Py_BytesMain",
                                   "--break", STOP, "--session-dir", str(sessions)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        # The parent's own hits say gdb is attached: then it starts its child.
        _wait_for_a_hit(tracer, sessions)
        go.touch()

        def child_held():
            assert tracer.poll() is None, "pttrace ended before the child was held"
            return list(sessions.glob("*.children/*.jsonl"))

        wait_for(child_held, 120, "the held child's session file", step=0.01)
        assert not marker.exists(), "the child ran before its recorder attached"
        tracer.send_signal(signal.SIGKILL)
        tracer.wait(allowance(30))
        assert target.wait(allowance(60)) == 0, "the parent did not end"
        assert marker.read_text() == "ran", "the held child was left stopped"
        wait_for(lambda: gdb_pids() <= before, 30, "the child's gdb to end", why=lambda: gdb_pids() - before)
    finally:
        for proc in (tracer, target):
            stop_process(proc)


def test_a_target_that_executes_python_itself_is_traced_on_and_the_run_ends_with_it(tmp_path):
    # The target process itself runs os.execv: handed over like a child, and the run ends when it does
    # (before: pttrace waited for ever on a gdb with nothing left to debug).
    (tmp_path / "again.py").write_text(
        "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'print(\"AGAIN\", flush=True)'])\n")
    proc, session = record(tmp_path, "--break", "Py_BytesMain", "again.py", timeout=120)
    assert proc.returncode == 0 and b"AGAIN" in proc.stdout, proc.stderr
    main = session.processes[0]
    assert main.argv[-1] == 'print("AGAIN", flush=True)' and main.exit_code == 0 and main.session
    assert [h.breakpoint for h in session.hits if h.thread.pid == main.pid] == ["Py_BytesMain"] * 2
    assert session.info.status == "completed" and not session.info.warnings, session.info.warnings
    assert not alive(main.pid)


RAW_EXEC = '''\
import ctypes, os, sys, torch


def raw_exec(argv):
    """execve(2) by its system call number: libc's execve, fexecve and execveat never see it."""
    args = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
    env = [f"{k}={v}".encode() for k, v in os.environ.items()]
    envp = (ctypes.c_char_p * (len(env) + 1))(*env, None)
    ctypes.CDLL(None).syscall(59, argv[0].encode(), args, envp)
    os._exit(99)


torch.tensor([1])
for argv in (["/bin/sleep", "0.2"], [sys.executable, "-c", "import os; print('CHILD', os.getpid(), flush=True)"]):
    pid = os.fork()
    if pid == 0:
        raw_exec(argv)
    _, status = os.waitpid(pid, 0)
    print("RAW", pid, os.waitstatus_to_exitcode(status), flush=True)
torch.tensor([2])
'''


def test_a_process_that_executes_by_a_raw_system_call_is_let_go_or_handed_over_and_the_run_ends(tmp_path):
    # libc's execve never sees it, so it is no hold: gdb 13 fails to put THPVariable_tensor's breakpoint
    # (set by address) into the new program, drops the exec's stop, and the run used to wait for ever
    # (--timeout makes that a fast failure). Now the sleep is let go, the Python child handed over.
    (tmp_path / "raw.py").write_text(RAW_EXEC)
    proc, session = record(tmp_path, "--timeout", "30", "--break", "THPVariable_tensor", "--break", "Py_BytesMain",
                           "raw.py", timeout=90)
    assert proc.returncode == 0 and session.info.status == "completed", (session.info.status, proc.stderr[-2000:])
    lines = proc.stdout.decode(errors="replace").splitlines()
    raws = [[int(x) for x in line.split()[1:]] for line in lines if line.startswith("RAW ")]
    assert [code for _, code in raws] == [0, 0], lines
    (sleep_pid, _), (python_pid, _) = raws
    assert printed(proc, "CHILD") == [python_pid]
    warnings = session.info.warnings
    assert any(str(sleep_pid) in w and "not Python" in w and "raw system call" in w for w in warnings), warnings
    assert any(str(python_pid) in w and "recorder of its own" in w for w in warnings), warnings
    main = session.processes[0]
    assert [h.breakpoint for h in session.hits if h.thread.pid == main.pid] == \
        ["Py_BytesMain", "THPVariable_tensor", "THPVariable_tensor"]
    # Handed over at the new program's first instruction: its recorder saw it start.
    assert [h.breakpoint for h in session.hits if h.thread.pid == python_pid] == ["Py_BytesMain"]
    for pid in (main.pid, sleep_pid, python_pid):
        assert not alive(pid), f"process {pid} was left behind"


def _wait_for_a_hit(tracer, sessions, timeout: float = 120) -> None:
    """Until the session in ``sessions`` holds a hit (gdb is attached and recording); fails when
    ``tracer`` ends first or after ``allowance(timeout)``."""

    def recording():
        assert tracer.poll() is None, f"pttrace ended ({tracer.returncode}) before its first hit"
        files = list(sessions.glob("*.jsonl"))
        return bool(files) and b'"type":"hit"' in files[0].read_bytes()

    wait_for(recording, timeout, "the attached parent's first hit in the session", step=0.05)


# A gdb that selects the target's own process (inferior 1) just before each pttrace-rerecord, as gdb itself
# may leave another inferior selected when a fork child's first hit waits for its symbols (seen under load
# 11-16: the child's hit was read in an ended DataLoader worker's inferior, without a pid, and lost).
RESELECTING_GDB = """#!%s
import os, subprocess, sys
if "--version" in sys.argv:
    os.execvp("gdb", ["gdb", *sys.argv[1:]])
gdb = subprocess.Popen(["gdb", *sys.argv[1:]], stdin=subprocess.PIPE)
for line in sys.stdin.buffer:
    if b'console "pttrace-rerecord"' in line:
        line = line.replace(b'"pttrace-rerecord"',
                            b'"python gdb.execute(\\'inferior 1\\', to_string=True); gdb.execute(\\'pttrace-rerecord\\')"')
        with open(os.environ["RESELECT_MARK"], "a") as fh:
            fh.write("x")
    gdb.stdin.write(line)
    gdb.stdin.flush()
gdb.stdin.close()
sys.exit(gdb.wait())
"""

FORK_CHILD = """\
import os, torch
torch.tensor([1])
pid = os.fork()
if pid == 0:
    torch.tensor([10])
    os._exit(3)
os.waitpid(pid, 0)
print("FORKED", pid, flush=True)
"""


def test_a_fork_childs_first_hit_is_its_own_whatever_inferior_gdb_has_selected(tmp_path):
    gdb = tmp_path / "gdb"
    gdb.write_text(RESELECTING_GDB % sys.executable)
    gdb.chmod(0o755)
    mark = tmp_path / "reselected"
    (tmp_path / "fork_child.py").write_text(FORK_CHILD)
    sessions = tmp_path / "sessions"
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), "--break", "THPVariable_tensor",
                      "fork_child.py"], cwd=tmp_path, input=b"", capture_output=True, timeout=300,
                     env={**os.environ, "PYTHONPATH": str(ROOT), "PTTRACE_GDB": str(gdb), "RESELECT_MARK": str(mark)})
    assert proc.returncode == 0, proc.stderr
    assert mark.exists(), "pttrace never asked for pttrace-rerecord: the child's first hit did not wait"
    session = storage.load(next(sessions.glob("*.jsonl")))
    forked = printed(proc, "FORKED")[0]
    main = session.processes[0]
    assert [h.thread.pid for h in session.hits] == [main.pid, forked], [h.thread for h in session.hits]
    assert session.process(forked) is not None and session.process(forked).exit_code == 3




def test_a_fork_child_stops_at_a_breakpoint_gdb_resolves_by_name(tmp_path):
    # libz's zlibCompileFlags, called through ctypes, is gdb's to resolve (not in torch's libraries): the
    # child's two calls are recorded as the parent's one is (before: gdb never stopped the child there).
    proc, session = record(tmp_path, "--break", "zlibCompileFlags", str(ROOT / "tests" / "targets" / "fork_libz.py"),
                           timeout=120)
    assert proc.returncode == 0, proc.stderr
    forked = printed(proc, "FORKED")[0]
    main = session.processes[0]
    assert [h.thread.pid for h in session.hits] == [main.pid, forked, forked], [h.thread for h in session.hits]
    assert all(h.breakpoint == "zlibCompileFlags" for h in session.hits)
    assert session.process(forked) is not None and session.process(forked).exit_code == 3
    assert session.info.status == "completed", session.info.warnings
    assert_only_unnamed(session.info.warnings, LIBFFI)  # the ctypes call's libffi frames, said once


def _gdb_bt_at(function: str, argv: list[str]) -> list[tuple[str, int | None]]:
    """Plain gdb's ``bt`` at ``function`` of a fresh ``argv``: (function or ``??``, pc of a caller frame)."""
    out = run_child(["gdb", "-nx", "--batch",
                     "-ex", "starti",  # the process's first instruction: ld.so's entry, _start
                     "-ex", f"break {function}", "-ex", "continue", "-ex", "bt", "--args", *argv],
                    capture_output=True, timeout=120).stdout.decode(errors="replace")
    frames = []
    for m in re.finditer(r"^#\d+\s+(?:0x([0-9a-f]+) in )?(\S+) \(", out, re.M):
        frames.append((m.group(2), int(m.group(1), 16) if m.group(1) else None))
    assert frames and frames[0][0] == function, out
    return frames


def test_a_child_held_at_the_loaders_entry_has_no_caller_beyond_it(tmp_path):
    # GIVEN a child started from its first instruction (held at ld.so's entry), stopped in the loader's code
    # that its entry code calls: _dl_start (from _start), _dl_init (from _dl_start_user)
    (tmp_path / "sub.py").write_text("import subprocess, sys\n"
                                     "print('SUB', subprocess.run([sys.executable, '-c', 'pass']).returncode)\n")
    proc, session = record(tmp_path, "--break", "_dl_start", "--break", "_dl_init", "sub.py", timeout=120)
    assert proc.returncode == 0, proc.stderr
    child = next(p.pid for p in session.processes if p.argv and p.argv[-2:] == ["-c", "pass"])
    for function, caller in (("_dl_start", "_start"), ("_dl_init", "_dl_start_user")):
        [hit] = [h for h in session.hits if h.breakpoint == function and h.thread.pid == child]
        recorded = [f.function for f in reversed(hit.frames)]  # innermost first, as gdb's bt
        # WHEN plain gdb stops the same program at the same place
        gdb_frames = _gdb_bt_at(function, [sys.executable, "-c", "pass"])
        # THEN pttrace's path is gdb's bt down to the loader's entry code and no further: gdb goes on past it
        # (ld.so's entry code has no CFI) into the words the kernel put on the stack, argc (3) first
        cut = [pc for _, pc in gdb_frames].index(3)
        assert [name for name, _ in gdb_frames[cut:]] == ["??"] * len(gdb_frames[cut:]), gdb_frames
        assert recorded == [name for name, _ in gdb_frames[:cut]] == [function, caller], \
            (function, [(f.function, f.library) for f in hit.frames])
        assert all("ld-linux" in (f.library or "") for f in hit.frames), [(f.function, f.library) for f in hit.frames]
