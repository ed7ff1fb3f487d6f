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
- ``cprofile``: cProfile around every ``stop()`` call, top functions by own time;
- ``floor-bare`` / ``floor-newest`` / ``floor-walk``: the agent's ``stop()`` replaced by one that
  records nothing and returns False at once / after ``gdb.newest_frame()`` / after unwinding the
  whole stack with ``older()``: what gdb itself costs a hit, before any recording.

``PROFILE_PATCH=unwinders,json,suffix`` tries candidate agent changes from outside: ``unwinders`` skips
gdb's per-frame walk over every objfile looking for Python frame unwinders while none is
registered; ``json`` encodes each cached native frame once and reuses the text; ``suffix`` unwinds
the frames older than the outermost ``PyEval_EvalCode`` once per (thread, pc, sp) of that frame.
The session file must stay the same: compare ``PROFILE_KEEP=DIR`` copies of it.
All three are now part of the agent (commit fcad96b, with a stack check on the reused frames, Python
frames read in one memory read and cached per instruction); the patches here replay the original
experiments and only mean something against the agent before that commit: point ``PTTRACE_ROOT`` at
a checkout of fcad96b^ (``git archive fcad96b^ tracer | tar -x -C DIR``).

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

times: dict = {"stop": [], "stop_cpu": [], "unwind": [], "unwind_outer": [], "native_frames": [], "call_path_extra": [], "encode": [], "write": [], "frames": []}
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
    if "json" in PATCHES:
        _patched_write(record)
        t1 = t2 = time.perf_counter()
    else:
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogateescape")
        t1 = time.perf_counter()
        if agent.STATE.session_fd >= 0:
            os.write(agent.STATE.session_fd, data)
        t2 = time.perf_counter()
    times["encode"].append(t1 - t0)
    times["write"].append(t2 - t1)


def _stop(self):
    t0 = time.perf_counter()
    c0 = time.thread_time()
    if profiler is not None:
        profiler.enable()
        try:
            return _orig_stop(self)
        finally:
            profiler.disable()
            times["stop"].append(time.perf_counter() - t0)
            times["stop_cpu"].append(time.thread_time() - c0)
    try:
        return _orig_stop(self)
    finally:
        times["stop"].append(time.perf_counter() - t0)
        times["stop_cpu"].append(time.thread_time() - c0)


# --- experiments: candidate agent changes, applied from outside (PROFILE_PATCH=unwinders,json) ---
PATCHES = {p.strip() for p in os.environ.get("PROFILE_PATCH", "").split(",") if p.strip()}


def _patch_unwinders() -> None:
    """gdb calls gdb._execute_unwinders for every frame it unwinds; it walks every objfile looking
    for Python unwinders (there are none here). Skip that walk while no unwinder is registered."""
    orig = gdb._execute_unwinders
    state = {"objfiles": None}

    def _invalidate(*_args):
        state["objfiles"] = None

    def fast(pending_frame):
        objs = state["objfiles"]
        if objs is None:
            objs = state["objfiles"] = [o for o in gdb.objfiles() if o.frame_unwinders]
        if not objs and not gdb.frame_unwinders and not gdb.current_progspace().frame_unwinders:
            return None
        return orig(pending_frame)

    gdb.events.new_objfile.connect(_invalidate)
    gdb.events.clear_objfiles.connect(_invalidate)
    try:
        gdb.events.free_objfile.connect(_invalidate)
    except AttributeError:
        pass
    import gdb.unwinder as _unw
    _orig_register = _unw.register_unwinder

    def register(locus, unwinder, replace=False):
        _invalidate()
        return _orig_register(locus, unwinder, replace)

    _unw.register_unwinder = register
    gdb._execute_unwinders = fast


_frame_json: dict = {}


def _patched_write(record: dict) -> None:
    """Encode each cached native frame once: a hot breakpoint repeats the same frames every hit."""
    if agent.STATE.session_fd < 0:
        return
    parts = []
    for f in record["frames"]:
        key = id(f)
        hit = _frame_json.get(key)
        if hit is not None and hit[0] is f:
            parts.append(hit[1])
            continue
        text = json.dumps(f, ensure_ascii=False, separators=(",", ":"))
        if f.get("kind") == "native":
            _frame_json[key] = (f, text)
        parts.append(text)
    head = {k: v for k, v in record.items() if k != "frames"}
    line = json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + ',"frames":[' + ",".join(parts) + "]}\n"
    os.write(agent.STATE.session_fd, line.encode("utf-8", "surrogateescape"))


ANCHOR = "PyEval_EvalCode"
_suffix_cache: dict = {}


def _suffix_call_path():
    """agent.call_path, but the frames older than the outermost ``PyEval_EvalCode`` (the interpreter's
    start-up: run_mod, Py_RunMain, main, _start...) are unwound once per (thread, pc, sp) of that
    frame and reused: the same C activation has the same callers. Experiment only."""
    py = agent._check_python()
    frames: list = []
    try:
        f = gdb.newest_frame()
    except gdb.error:
        return frames, False
    try:
        tnum = gdb.selected_thread().num
    except Exception:
        tnum = None
    last_pc = None
    inline_index = 0
    truncated = False
    while f is not None:
        if len(frames) >= agent.STATE.max_depth:
            truncated = True
            break
        pc = f.pc()
        inline_index = inline_index + 1 if pc == last_pc else 0
        last_pc = pc
        native = agent._native(f, inline_index)
        if py and native["function"] == agent.EVAL_FRAME and not native.get("inlined"):
            frames.extend(agent._python_frames(f) or [native])
        else:
            frames.append(native)
        if native["function"] == ANCHOR:
            key = (tnum, pc, int(f.read_register("rsp")))
            cached = _suffix_cache.get(key)
            if cached is not None:
                frames.extend(cached)
                break
            start = len(frames)
            f = f.older()
            while f is not None:
                pc = f.pc()
                inline_index = inline_index + 1 if pc == last_pc else 0
                last_pc = pc
                frames.append(agent._native(f, inline_index))
                f = f.older()
            _suffix_cache[key] = frames[start:]
            break
        f = f.older()
    frames.reverse()
    return frames, truncated


if "suffix" in PATCHES:
    _orig_call_path = _suffix_call_path
    agent.call_path = _suffix_call_path
if "unwinders" in PATCHES:
    _patch_unwinders()
if "json" in PATCHES:
    agent._write = _patched_write

if MODE == "sections":
    agent.call_path = _timed_call_path
    agent._write = _timed_write
    if hasattr(agent, "_write_hit"):  # hits have their own writer since fcad96b
        agent._write_hit = _timed_write

# --- floors: what a hit costs before the agent records anything -------------------------------
def _floor_bare(self):
    return False


def _floor_newest(self):
    gdb.newest_frame().pc()
    return False


def _floor_walk(self):
    f = gdb.newest_frame()
    while f is not None:
        f.pc()
        f = f.older()
    return False


FLOORS = {"floor-bare": _floor_bare, "floor-newest": _floor_newest, "floor-walk": _floor_walk}
if MODE in FLOORS:
    _orig_stop = FLOORS[MODE]
if MODE in ("sections", "cprofile", "plain", *FLOORS):
    agent.TraceBreakpoint.stop = _stop

gdb.execute(f"pttrace-break {SPEC}")


def _ms(values) -> str:
    if not values:
        return "-"
    s = sorted(values)
    return f"{1000 * s[len(s) // 2]:.3f}"


def _report(_event=None) -> None:
    lines = [f"mode={MODE} patches={','.join(sorted(PATCHES)) or '-'} break={SPEC} hits={agent.STATE.hits} "
             f"stop() calls={len(times['stop'])}"]
    if times["stop"]:
        total = sum(times["stop"])
        lines.append(f"stop(): median {_ms(times['stop'])} ms, mean {1000 * total / len(times['stop']):.3f} ms; "
                     f"CPU mean {1000 * sum(times['stop_cpu']) / len(times['stop_cpu']):.3f} ms")
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
    keep = os.environ.get("PROFILE_KEEP")
    if keep:
        import shutil
        os.makedirs(keep, exist_ok=True)
        shutil.copy(os.path.join(tmp, "s.jsonl"), os.path.join(keep, f"{MODE}-{'-'.join(sorted(PATCHES)) or 'none'}.jsonl"))
    if OUT:
        with open(OUT, "w") as fh:
            fh.write(text)
    else:
        gdb.write(text)
    import shutil as _shutil

    if agent.STATE.session_fd >= 0:
        os.close(agent.STATE.session_fd)
        agent.STATE.session_fd = -1
    _shutil.rmtree(tmp, ignore_errors=True)


gdb.events.exited.connect(_report)
gdb.execute("run")
