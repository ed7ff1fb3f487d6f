"""Profile pttrace's per-hit cost *inside gdb* (sourced by gdb, not run by Python directly).

    PROFILE_MODE=sections|cprofile|plain PROFILE_OUT=/tmp/prof.txt \
      gdb -nx -batch -x bench/profile_hit.py --args .venv/bin/python bench/hot_add.py

It imports the real agent (tracer/gdb/agent.py), sets it up on a scratch session file, puts a
``TraceBreakpoint`` on ``$PROFILE_BREAK`` (default ``at::_ops::add_Tensor::call``) and runs the
target to its end. Then:

- ``plain``: nothing added (the reference for the overhead of the other two modes);
- ``sections``: each hit is split into timed parts: gdb unwinding the whole stack (``older()``
  only, which fills gdb's frame cache), what ``call_path()`` adds on top (names, frame types,
  Python frames, the per-pc caches), building the record + ``json.dumps``, ``os.write``; plus the
  whole of ``stop()``. Splitting costs a second walk of the (cached) frame chain: the parts add up
  to a bit more than a plain hit;
- ``cprofile``: cProfile around every ``stop()`` call, top functions by own time.

The report goes to ``$PROFILE_OUT`` (default: printed).
"""
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
import time

import gdb  # type: ignore[import-not-found]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__ if "__file__" in globals() else "bench/x")))
sys.path.insert(0, os.environ.get("PTTRACE_ROOT", ROOT))

from tracer.gdb import agent  # noqa: E402

MODE = os.environ.get("PROFILE_MODE", "sections")
OUT = os.environ.get("PROFILE_OUT")
SPEC = os.environ.get("PROFILE_BREAK", "at::_ops::add_Tensor::call")

gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set breakpoint pending on")
gdb.execute("set print thread-events off")

tmp = tempfile.mkdtemp(prefix="pttrace-prof-")
cfg = os.path.join(tmp, "agent.json")
with open(cfg, "w") as fh:
    json.dump({"session": os.path.join(tmp, "s.jsonl"), "mode": "record", "max_hits": 0, "max_depth": 256,
               "breakpoints": []}, fh)
gdb.execute(f"pttrace-setup {cfg}")

times: dict = {"stop": [], "unwind": [], "unwind_outer": [], "native_frames": [], "call_path_extra": [], "encode": [], "write": [], "frames": []}
profiler = cProfile.Profile() if MODE == "cprofile" else None

_orig_stop = agent.TraceBreakpoint.stop
_orig_call_path = agent.call_path
_orig_write = agent._write


def _unwind_only() -> float:
    """Walk the whole stack with older() only; returns the seconds spent unwinding past the
    outermost ``PyEval_EvalCode`` frame (the interpreter's start-up frames, the same at every hit)."""
    n = 0
    f = gdb.newest_frame()
    steps = []
    while f is not None and n < 256:
        n += 1
        t = time.perf_counter()
        older = f.older()
        steps.append((time.perf_counter() - t, f))
        f = older
    cut = None
    for i, (_, fr) in enumerate(steps):
        try:
            if fr.name() == "PyEval_EvalCode":
                cut = i
        except gdb.error:
            pass
    times["native_frames"].append(n)
    return sum(dt for dt, _ in steps[cut:]) if cut is not None else 0.0


def _timed_call_path():
    t0 = time.perf_counter()
    outer = _unwind_only()
    t1 = time.perf_counter()
    times["unwind_outer"].append(outer)
    out = _orig_call_path()
    t2 = time.perf_counter()
    times["unwind"].append(t1 - t0)
    times["call_path_extra"].append(t2 - t1)
    times["frames"].append(len(out[0]))
    return out


def _timed_write(record):
    t0 = time.perf_counter()
    data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogateescape")
    t1 = time.perf_counter()
    if agent.STATE.session_fd >= 0:
        os.write(agent.STATE.session_fd, data)
    t2 = time.perf_counter()
    times["encode"].append(t1 - t0)
    times["write"].append(t2 - t1)


def _stop(self):
    t0 = time.perf_counter()
    if profiler is not None:
        profiler.enable()
        try:
            return _orig_stop(self)
        finally:
            profiler.disable()
            times["stop"].append(time.perf_counter() - t0)
    try:
        return _orig_stop(self)
    finally:
        times["stop"].append(time.perf_counter() - t0)


if MODE == "sections":
    agent.call_path = _timed_call_path
    agent._write = _timed_write
if MODE in ("sections", "cprofile", "plain"):
    agent.TraceBreakpoint.stop = _stop

gdb.execute(f"pttrace-break {SPEC}")


def _ms(values) -> str:
    if not values:
        return "-"
    s = sorted(values)
    return f"{1000 * s[len(s) // 2]:.3f}"


def _report(_event=None) -> None:
    lines = [f"mode={MODE} break={SPEC} hits={agent.STATE.hits} stop() calls={len(times['stop'])}"]
    if times["stop"]:
        total = sum(times["stop"])
        lines.append(f"stop(): median {_ms(times['stop'])} ms, mean {1000 * total / len(times['stop']):.3f} ms")
    if MODE == "sections" and times["unwind"]:
        lines.append(f"frames per hit (median): {sorted(times['frames'])[len(times['frames']) // 2]} recorded, "
                     f"{sorted(times['native_frames'])[len(times['native_frames']) // 2]} gdb frames unwound")
        for key in ("unwind", "unwind_outer", "call_path_extra", "encode", "write"):
            lines.append(f"  {key:16s} median {_ms(times[key])} ms, total {sum(times[key]):.3f} s")
    if profiler is not None:
        buf = io.StringIO()
        st = pstats.Stats(profiler, stream=buf)
        st.sort_stats("tottime").print_stats(25)
        st.sort_stats("cumulative").print_stats(25)
        lines.append(buf.getvalue())
    text = "\n".join(lines) + "\n"
    if OUT:
        with open(OUT, "w") as fh:
            fh.write(text)
    else:
        gdb.write(text)


gdb.events.exited.connect(_report)
gdb.execute("run")
