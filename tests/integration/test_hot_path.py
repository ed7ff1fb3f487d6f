"""The agent's per-hit caches record what a full walk records: real gdb, real torch, real processes.

The first hit of a stack is walked in full; later hits reuse the start-up frames below the outermost
``PyEval_EvalCode``, cached native frames and their JSON, and cached Python frames; a hit whose
innermost frame has the pc and sp of one walked before, and whose every return address is still in
its stack slot, reuses that walk's native frames whole and reads only its Python frames (from the
thread's PyThreadState). These tests make the later hits differ from the first in the ways that could
fool a cache: other Python lines, other depths, other C callers, other threads, exec'd code, and a
``--max-depth`` cut that falls inside or outside the reused frames; the whole-stack reuse is compared,
record for record, with a run without it (``PTTRACE_NO_STACK_REUSE=1``).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_pttrace
from tracer.session import storage

ADD = "at::_ops::add_Tensor::call"
EVAL = "_PyEval_EvalFrameDefault"

SCRIPT = '''
import threading
import torch

a = torch.ones(2)


def deeper(n):
    if n == 0:
        return torch.add(a, a)  # LINE-DEEP
    return deeper(n - 1)


for i in range(6):
    if i % 2:
        torch.add(a, a)  # LINE-ODD
    else:
        torch.add(a, a)  # LINE-EVEN
    deeper(i)

t = threading.Thread(target=lambda: torch.add(a, a))  # LINE-THREAD
t.start()
t.join()
exec("torch.add(a, a)  # LINE-EXEC")
'''


def _hits(directory: Path) -> list[dict]:
    """The hits as loaded, with the names of ``fill`` records applied (libtorch_cpu.so's frames are
    named by pttrace's index, not by gdb: the CFI path), as dicts to compare record for record."""
    files = list(directory.glob("*.jsonl"))
    assert len(files) == 1, files
    return [hit.to_dict() for hit in storage.load(files[0]).hits]


def _python_sources(hit: dict) -> list[str]:
    return [f["source"] for f in hit["frames"] if f["kind"] == "python"]


def _run(tmp_path: Path, name: str, *extra: str) -> list[dict]:
    script = tmp_path / "adds.py"
    script.write_text(SCRIPT)
    out = tmp_path / name
    proc = run_pttrace("run", "--batch", "-q", "-b", ADD, *extra, "--session-dir", str(out), str(script))
    assert proc.returncode == 0, proc.stderr
    return _hits(out)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory) -> tuple[Path, list[dict]]:
    """The script traced once without a cut, and where it is: read by two tests (each run is a whole
    pttrace run of torch); a cut run traces the same file, since the recorded frames name it."""
    where = tmp_path_factory.mktemp("hot_path")
    return where, _run(where, "full")


def test_every_hit_has_its_own_lines_depths_and_thread(full_run):
    _, hits = full_run
    assert len(hits) == 6 * 2 + 2
    loop = hits[:12]
    for i in range(6):
        first, second = loop[2 * i], loop[2 * i + 1]
        assert first["frames"][-1]["function"].startswith(ADD)
        assert _python_sources(first)[-1].endswith("# LINE-ODD" if i % 2 else "# LINE-EVEN")
        deep = _python_sources(second)
        assert deep[-1].endswith("# LINE-DEEP")
        assert sum(1 for f in second["frames"] if f["kind"] == "python" and f["function"] == "deeper") == i + 1
        # Same start-up frames below the module's code at every hit of the main thread.
        assert first["frames"][:10] == loop[0]["frames"][:10]
    thread_hit, exec_hit = hits[12], hits[13]
    assert thread_hit["thread"]["id"] != loop[0]["thread"]["id"]
    assert _python_sources(thread_hit)[-1].endswith("# LINE-THREAD")
    assert not any(f["function"] == "Py_RunMain" for f in thread_hit["frames"])
    inner = [f for f in exec_hit["frames"] if f["kind"] == "python"]
    assert (inner[-1]["file"], inner[-1]["line"]) == ("<string>", 1)  # the exec'd code: no source file
    assert inner[-2]["source"].startswith("exec(")
    assert sum(1 for f in exec_hit["frames"] if f["function"] == "PyEval_EvalCode") == 2


def test_max_depth_cut_keeps_the_innermost_frames_of_the_full_walk(full_run):
    where, full = full_run
    for depth in ("12", "30"):
        cut = _run(where, f"cut{depth}", "--max-depth", depth)
        assert len(cut) == len(full)
        for whole, part in zip(full, cut):
            n = int(depth)
            if len(whole["frames"]) > n:
                assert part.get("truncated") is True
                assert part["frames"] == whole["frames"][-n:]
            else:
                assert not part.get("truncated")
                assert part["frames"] == whole["frames"]


def test_exec_d_code_is_not_mistaken_for_the_code_that_had_its_address(tmp_path):
    # GIVEN a script that compiles a new function six times, the previous one freed each time (the
    # next code object tends to take its address: the agent's per-address cache must notice)
    target = Path(__file__).resolve().parent.parent / "targets" / "exec_reuse.py"
    proc = run_pttrace("run", "--batch", "-q", "-b", "zlibCompileFlags", "--session-dir", str(tmp_path),
                       str(target))
    assert proc.returncode == 0, proc.stderr
    hits = _hits(tmp_path)
    # THEN each hit names its own function, at its own lines
    assert len(hits) == 6
    for i, hit in enumerate(hits):
        py = [f for f in hit["frames"] if f["kind"] == "python"]
        assert (py[-1]["function"], py[-1]["file"], py[-1]["line"]) == (f"fn_{i}", "<generated>", 2), py[-2:]
        assert (py[-2]["function"], py[-2]["line"]) == ("<module>", 5)


# Consecutive hits that differ in what could fool the whole-stack reuse (a cached walk reused while
# the innermost frame's pc and sp and every return address on the stack are unchanged; Python frames
# read from the thread's PyThreadState): other C callers (map, functools.reduce), a Python callback
# called from C (sorted's key: two eval frames), other lines and depths, exec'd code, other threads.
# torch's Python binding releases the GIL before it dispatches: every one of these hits stops a
# thread that does not hold the GIL (the PyThreadState is found by native_thread_id, not as the GIL
# holder's), and in the threaded part the other thread runs Python meanwhile.
REUSE_SCRIPT = '''
import functools
import threading
import torch

a = torch.ones(2)


def deeper(n):
    if n == 0:
        return torch.add(a, a)  # LINE-DEEP
    return deeper(n - 1)


for i in range(40):
    torch.add(a, a)  # LINE-HOT

for i in range(4):
    torch.add(a, a)  # LINE-DIRECT
    list(map(torch.add, [a], [a]))  # LINE-MAP
    functools.reduce(torch.add, [a, a, a])  # LINE-REDUCE
    sorted([a, a], key=lambda x: float(torch.add(x, x).sum()))  # LINE-SORTED
    deeper(i % 3)
    g = {"torch": torch, "a": a}
    exec(compile(f"def fn_{i}():\\n    return torch.add(a, a)\\n", "<generated>", "exec"), g)
    g[f"fn_{i}"]()

stop = False


def spin():
    while not stop:
        sum(range(100))


def worker(k):
    for _ in range(3):
        torch.add(a, a)  # LINE-WORKER
    list(map(torch.add, [a] * k, [a] * k))  # LINE-WORKER-MAP


spinner = threading.Thread(target=spin)
spinner.start()
for k in (1, 2):
    t = threading.Thread(target=worker, args=(k,))
    t.start()
    t.join()
stop = True
spinner.join()
torch.add(a, a)  # LINE-LAST
'''


def _run_reuse(tmp_path: Path, name: str, no_reuse: bool, *extra: str) -> tuple[list[dict], dict]:
    script = tmp_path / "reuse.py"
    script.write_text(REUSE_SCRIPT)
    out = tmp_path / name
    stats = tmp_path / f"{name}.stats.json"
    env = {"PTTRACE_STACK_REUSE_STATS": str(stats)}
    if no_reuse:
        env["PTTRACE_NO_STACK_REUSE"] = "1"
    proc = run_pttrace("run", "--batch", "-q", "-b", ADD, *extra, "--session-dir", str(out), str(script), env=env)
    assert proc.returncode == 0, proc.stderr
    hits = _hits(out)
    for hit in hits:
        hit.pop("time")
        hit["thread"].pop("lwp")  # another process: other LWPs
        hit["thread"].pop("pid", None)  # and another pid
        for carried in hit.get("values") or []:  # and other addresses: the tensors' are the process's own
            for arg in carried["args"]:
                for t in [arg.get("tensor")] + list(arg.get("tensors") or []):
                    if isinstance(t, dict):
                        t.pop("data_ptr", None)
                        t.pop("impl", None)
    return hits, json.loads(stats.read_text())


@pytest.fixture(scope="module")
def reuse_and_walk(tmp_path_factory) -> tuple[Path, list[dict], dict, list[dict], dict]:
    """The reuse script traced with the whole-stack reuse and without it (PTTRACE_NO_STACK_REUSE=1), and
    where: the walk without reuse is the oracle of both reuse tests (each run is a whole pttrace run)."""
    where = tmp_path_factory.mktemp("reuse")
    reused, stats = _run_reuse(where, "reuse", False)
    walked, plain = _run_reuse(where, "walk", True)
    return where, reused, stats, walked, plain


def _cut(hits: list[dict], depth: int) -> list[dict]:
    """What ``--max-depth`` keeps of whole hits: the innermost ``depth`` frames, marked truncated, and the
    values read in those frames (a value names its frame by index: counted from the cut)."""
    out = []
    for hit in hits:
        hit = dict(hit)
        dropped = len(hit["frames"]) - depth
        if dropped > 0:
            hit["frames"] = hit["frames"][dropped:]
            hit["truncated"] = True
            if "values" in hit:
                hit["values"] = [{**v, "frame": v["frame"] - dropped} for v in hit["values"] if v["frame"] >= dropped]
        out.append(hit)
    return out


def test_reused_stacks_record_what_a_full_walk_records(reuse_and_walk):
    # GIVEN the same script traced with the whole-stack reuse and without it (PTTRACE_NO_STACK_REUSE=1)
    _, reused, stats, walked, plain = reuse_and_walk
    # THEN every hit is the same, record for record
    assert len(reused) == 40 + 4 * 8 + 4 + 5 + 1
    assert len(walked) == len(reused)
    for i, (got, want) in enumerate(zip(reused, walked)):
        assert got == want, i
    # AND the reuse did happen: the hot loop's hits after its first came from the cached walk
    assert plain == {"reused": 0, "walked": 0, "rejected": 0}
    assert stats["reused"] >= 39, stats
    assert stats["reused"] + stats["walked"] == len(reused)
    # AND the hits are the ones the script makes
    marks = [_marker(h) for h in reused]
    assert marks[:40] == ["LINE-HOT"] * 40
    for i in range(4):
        assert marks[40 + 8 * i:48 + 8 * i] == ["LINE-DIRECT", "LINE-MAP", "LINE-REDUCE", "LINE-REDUCE", "LINE-SORTED",
                                                "LINE-SORTED", "LINE-DEEP", f"<generated>:fn_{i}"]
    assert marks[72:] == ["LINE-WORKER"] * 3 + ["LINE-WORKER-MAP"] + ["LINE-WORKER"] * 3 + ["LINE-WORKER-MAP"] * 2 + [
        "LINE-LAST"]
    sorted_hit = reused[44]
    assert not any(f["function"] == EVAL for f in sorted_hit["frames"])  # both eval frames read as Python
    assert [f["function"] for f in sorted_hit["frames"] if f["kind"] == "python"] == ["<module>", "<lambda>"]
    depths = [sum(1 for f in reused[46 + 8 * i]["frames"] if f["function"] == "deeper") for i in range(4)]
    assert depths == [1, 2, 3, 1]
    workers = reused[72:81]
    assert len({h["thread"]["id"] for h in workers[:4]}) == 1
    assert len({h["thread"]["id"] for h in workers}) == 2
    assert workers[0]["thread"]["id"] != reused[0]["thread"]["id"]


def _marker(hit: dict) -> str:
    inner = [f for f in hit["frames"] if f["kind"] == "python"][-1]
    if inner["source"] and "# " in inner["source"]:
        return inner["source"].rsplit("# ", 1)[1]
    return f"{inner['file']}:{inner['function']}"


def test_reuse_keeps_the_max_depth_cut(reuse_and_walk):
    # GIVEN a cut that falls inside the Python frames of the deeper stacks only
    where, _, _, walked, _ = reuse_and_walk
    reused, stats = _run_reuse(where, "reuse-cut27", False, "--max-depth", "27")
    # THEN the same hits as the full walk without reuse, each cut to its innermost 27 frames
    assert reused == _cut(walked, 27)
    assert any(h.get("truncated") for h in reused) and not all(h.get("truncated") for h in reused)
    assert stats["reused"] >= 39, stats


def test_a_hot_loop_is_recorded_hit_for_hit_as_the_target_counts_it(tmp_path):
    # GIVEN a loop of 3,000-3,499 torch.add calls that counts them itself (a tensor incremented by each)
    target = Path(__file__).resolve().parents[1] / "targets" / "counted_adds.py"
    # WHEN pttrace records every call of the op's entry point
    proc = run_pttrace("run", "--batch", "-q", "-b", ADD, "--session-dir", str(tmp_path), str(target))
    assert proc.returncode == 0, proc.stderr[-3000:]
    counted = int(next(line for line in proc.stdout.splitlines() if line.startswith("COUNTED ")).split()[1])
    assert 3000 <= counted < 3500
    # THEN it holds one hit for each call the target counted, numbered without a gap, each from the loop
    (path,) = tmp_path.glob("*.jsonl")
    s = storage.load(path)
    assert s.info.status == "completed" and s.info.warnings == []
    loop = [h for h in s.hits if [f for f in h.frames if f.kind == "python"][-1].source.endswith("# COUNTED")]
    assert len(loop) == counted, (len(loop), counted, len(s.hits))
    assert [h.seq for h in s.hits] == list(range(1, len(s.hits) + 1))
    assert s.breakpoint(ADD).hits == len(s.hits)
