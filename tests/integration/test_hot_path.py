"""The agent's per-hit caches record what a full walk records: real gdb, real torch, real processes.

The first hit of a stack is walked in full; later hits reuse the start-up frames below the outermost
``PyEval_EvalCode``, cached native frames and their JSON, and cached Python frames. These tests make
the later hits differ from the first in the ways that could fool a cache: other Python lines, other
depths, other threads, and a ``--max-depth`` cut that falls inside or outside the reused frames.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pttrace
from tracer import storage

ADD = "at::_ops::add_Tensor::call"

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
    """The hit records as written, with the names of ``fill`` records applied (libtorch_cpu.so's
    frames are named by pttrace's index, not by gdb: the CFI path)."""
    files = list(directory.glob("*.jsonl"))
    assert len(files) == 1, files
    out = []
    fills = {}
    for line in files[0].read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == "hit":
            out.append(rec)
        elif rec.get("type") == "fill":
            fills.update(((lib, off, caller), values) for lib, off, caller, values in rec["frames"])
    for rec in out:
        frames = rec["frames"]
        for i, f in enumerate(frames):
            key = storage.fill_key(f, i == len(frames) - 1)
            if key in fills:
                storage.fill_frame(f, fills[key])
    return out


def _python_sources(hit: dict) -> list[str]:
    return [f["source"] for f in hit["frames"] if f["kind"] == "python"]


def _run(tmp_path: Path, name: str, *extra: str) -> list[dict]:
    script = tmp_path / "adds.py"
    script.write_text(SCRIPT)
    out = tmp_path / name
    proc = run_pttrace("run", "--batch", "-q", "-b", ADD, *extra, "--session-dir", str(out), str(script))
    assert proc.returncode == 0, proc.stderr
    return _hits(out)


def test_every_hit_has_its_own_lines_depths_and_thread(tmp_path):
    hits = _run(tmp_path, "full")
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


def test_max_depth_cut_keeps_the_innermost_frames_of_the_full_walk(tmp_path):
    full = _run(tmp_path, "full")
    for depth in ("12", "30"):
        cut = _run(tmp_path, f"cut{depth}", "--max-depth", depth)
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
    proc = run_pttrace("run", "--batch", "-q", "-b", "THPVariable_tensor", "--session-dir", str(tmp_path),
                       str(target))
    assert proc.returncode == 0, proc.stderr
    hits = _hits(tmp_path)
    # THEN each hit names its own function, at its own lines
    assert len(hits) == 6
    for i, hit in enumerate(hits):
        py = [f for f in hit["frames"] if f["kind"] == "python"]
        assert (py[-1]["function"], py[-1]["file"], py[-1]["line"]) == (f"fn_{i}", "<generated>", 2), py[-2:]
        assert (py[-2]["function"], py[-2]["line"]) == ("<module>", 5)
