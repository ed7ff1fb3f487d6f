"""The CFI path: heavy libraries given to gdb as unwind tables only, their frames named by pttrace's index.

(a) a run on the CFI path records the same call paths, frame for frame, as a run forced onto the old
path (gdb reading libtorch_cpu.so's symbols, and every other library's: ``--all-symbols``); (b) a frame
gdb left without a name and file:line (the debug extension given to gdb as unwind tables only, its DWARF
in a separate file reachable only through $PTTRACE_DEBUG_DIRS) is named and placed from our index; (c) a
session cut off before its fill records (or its end) loads with library and offset, and with names as far
as fills were written.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HELLO, ROOT, run_pttrace
from tests.support import allowance, run_child
from tracer.session import records, storage

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

DEMO_SOURCE = ROOT / "scripts" / "debug_ext" / "pttrace_demo.cpp"
BREAKS = ["wrapper_CPU_sigmoid", "wrapper_CPU_sigmoid_backward", "at::_ops::sigmoid::call"]


def _record(tmp: Path, name: str, args: list[str], env: dict | None = None) -> Path:
    out = tmp / name
    proc = run_pttrace("run", "--batch", "--session-dir", str(out), *args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = out.glob("*.jsonl")
    return path


def _raw_hits(path: Path) -> list[dict]:
    """The hits as the agent wrote them (no fill applied)."""
    reader = records.Reader()
    hits = (reader.feed(json.loads(line)) for line in path.read_text().splitlines())
    return [r for r in hits if r is not None and r["type"] == "hit"]


def _path(hit) -> list[tuple]:
    return [(f.kind, f.function, f.short, f.layer, f.dispatch_key, f.library, f.file, f.line, f.keys)
            for f in hit.frames]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The CFI run (with its log: which libraries gdb read the symbols of) and one forced onto the old path
    with every library's symbols read as gdb alone reads them (``--all-symbols``: no CFI copy, nothing lazy),
    the reference of both the CFI and the lazy reading; paths to their sessions, and the log. (One reference
    run for both: ``PTTRACE_NO_CFI=1`` alone made a third whole run that proved no more.)"""
    tmp = tmp_path_factory.mktemp("cfi")
    log = tmp / "log.txt"
    args = [a for spec in BREAKS for a in ("--break", spec)] + [str(HELLO)]
    cfi = _record(tmp, "cfi", ["--log", str(log), *args])
    old = _record(tmp, "old", ["--all-symbols", *args])
    return cfi, old, log


def test_cfi_run_records_the_same_paths_as_the_old_path(two_runs):
    cfi_path, old_path, _ = two_runs
    cfi, old = storage.load(cfi_path), storage.load(old_path)
    assert cfi.info.status == old.info.status == "completed"
    assert [h.breakpoint for h in cfi.hits] == [h.breakpoint for h in old.hits]
    assert {h.breakpoint for h in cfi.hits} == set(BREAKS)
    for a, b in zip(cfi.hits, old.hits):
        assert _path(a) == _path(b)
    # ... and it was the CFI path: gdb had no names for libtorch_cpu.so, the fill records gave them.
    raw = _raw_hits(cfi_path)
    cpu = [f for h in raw for f in h["frames"] if (f.get("library") or "").endswith("/libtorch_cpu.so")]
    assert cpu and all(f["function"] is None and f["offset"] > 0 for f in cpu)
    assert any(r["type"] == "fill" for r in map(json.loads, cfi_path.read_text().splitlines()))
    old_cpu = [f for h in _raw_hits(old_path) for f in h["frames"]
               if (f.get("library") or "").endswith("/libtorch_cpu.so")]
    assert old_cpu and all(f["function"] for f in old_cpu)
    # The kernel's DispatchKeySet was read at its entry (the name our index resolved says it takes one).
    redispatch = [f for h in cfi.hits for f in h.frames if f.function and f.function.startswith(
        "at::_ops::sigmoid::redispatch(")]
    assert redispatch and all(f.keys for f in redispatch if f.keyset is not None)


def test_symbols_gdb_reads_only_when_a_stack_needs_them_record_what_gdb_reading_all_does(two_runs):
    """Re-runs read fewer symbols: libtorch_python.so (30 MB, no DWARF) is given to gdb as unwind tables
    and named by our index; a small library no stack passes through is never read; one a stack passes
    through is read when the agent asks. Every frame is still what gdb reading every library gives."""
    lazy, every, log = two_runs  # the CFI run (libraries read lazily), and the --all-symbols run
    a, b = storage.load(lazy), storage.load(every)
    assert [h.breakpoint for h in a.hits] == [h.breakpoint for h in b.hits] and a.hits
    for x, y in zip(a.hits, b.hits):
        assert _path(x) == _path(y)
    python = [f for h in _raw_hits(lazy) for f in h["frames"]
              if (f.get("library") or "").endswith("/libtorch_python.so")]
    assert python and all(f["function"] is None and f["offset"] > 0 for f in python)
    read = {Path(p).name for p in re.findall(r"gdb reads the symbols of (\S+)", log.read_text())}
    stack = {Path(f.library).name for h in a.hits for f in h.frames if f.library}
    assert "libc.so.6" in read and "libtorch_python.so" not in read
    # torch imports extension modules (_json, _socket, ...) that no recorded stack passes through
    code = "import sys, torch; print(*[getattr(m, '__file__', None) for m in list(sys.modules.values())])"
    out = run_child([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300).stdout
    unused = {Path(p).name for p in out.split() if p.endswith(".so") and "/lib-dynload/" in p} - stack
    assert unused and not unused & read, (unused & read)


def test_session_cut_off_keeps_library_and_offset_and_the_fills_written(two_runs, tmp_path):
    cfi_path, _, _ = two_runs
    lines = cfi_path.read_text().splitlines()
    kinds = [json.loads(line)["type"] for line in lines]
    # Cut before any fill record and the end (pttrace killed before it wrote them): the frames were
    # written by library and offset, and read back named from our index, as a whole session's are.
    first_fill = kinds.index("fill")
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(line for line, k in zip(lines[:first_fill], kinds) if k != "end") + "\n")
    session = storage.load(cut)
    full = storage.load(cfi_path)
    assert session.info.status == "interrupted"
    raw = [f for h in _raw_hits(cut) for f in h["frames"] if (f.get("library") or "").endswith("/libtorch_cpu.so")]
    assert raw and all(f["function"] is None and f["offset"] for f in raw)
    assert session.hits and [_path(h) for h in session.hits] == [_path(h) for h in full.hits[:len(session.hits)]]
    # Cut after the fills but before the end: interrupted, and named.
    cut.write_text("\n".join(line for line, k in zip(lines, kinds) if k != "end") + "\n")
    session = storage.load(cut)
    assert session.info.status == "interrupted"
    assert [_path(h) for h in session.hits] == [_path(h) for h in full.hits]
    # A damaged last line (the write cut in the middle) loses that line only.
    cut.write_text("\n".join(line for line, k in zip(lines, kinds) if k != "end") + '\n{"type":"fill","fra')
    assert [_path(h) for h in storage.load(cut).hits] == [_path(h) for h in full.hits]


@pytest.fixture(scope="module")
def split_ext(debug_ext, tmp_path_factory):
    """The debug extension with its DWARF moved to a build-id file in a directory of its own."""
    if shutil.which("objcopy") is None:
        pytest.skip("objcopy (binutils) is needed to split the debug info")
    tmp = tmp_path_factory.mktemp("split")
    lib = tmp / "lib" / debug_ext.name
    lib.parent.mkdir()
    shutil.copy(debug_ext, lib)
    from tracer.symbols.elffile import ElfFile

    build_id = ElfFile(str(lib)).build_id
    assert build_id
    dbg = tmp / "debug" / ".build-id" / build_id[:2] / (build_id[2:] + ".debug")
    dbg.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(lib), str(dbg)], check=True)
    subprocess.run(["objcopy", "--strip-debug", str(lib)], check=True)
    return lib, tmp / "debug"


def _kernel_frames(path: Path):
    session = storage.load(path)
    hits = [h for h in session.hits if any((f.function or "").startswith("pttrace_demo::scale_add_cpu")
                                           for f in h.frames)]
    assert hits, [f.function for h in session.hits for f in h.frames]
    return session, hits


def test_frames_gdb_left_unnamed_get_name_and_line_from_a_debug_file_only_we_read(split_ext, tmp_path):
    lib, debug_dir = split_ext
    env = {"PTTRACE_DEBUG_DIRS": str(debug_dir), "PTTRACE_CFI_LIBS": lib.name}
    path = _record(tmp_path, "s", ["--break", "at::_ops::empty_like::call", "--max-hits", "40",
                                   str(ROOT / "scripts" / "call_debug_ext.py"), str(lib)], env=env)
    session, hits = _kernel_frames(path)
    hit = hits[0]
    (kernel,) = [f for f in hit.frames if (f.function or "").startswith("pttrace_demo::scale_add_cpu")]
    assert kernel.function == "pttrace_demo::scale_add_cpu(at::Tensor const&, at::Tensor const&, double)"
    assert kernel.short == "pttrace_demo::scale_add_cpu"
    assert kernel.library == str(lib)
    text = DEMO_SOURCE.read_text().splitlines()
    empty_like = next(i for i, line in enumerate(text, 1) if "at::empty_like(" in line)
    assert (kernel.file, kernel.line) == (str(DEMO_SOURCE), empty_like)
    assert kernel.layer == "kernel"  # called by its boxing adapter, itself named from our index
    ours = [f for f in hit.frames if f.library == str(lib)]
    assert all(f.function and f.file for f in ours)
    # gdb itself had neither: the agent recorded library and offset, pttrace filled them in.
    raw = next(r for r in _raw_hits(path) if r["seq"] == hit.seq)
    raw_ours = [f for f in raw["frames"] if f.get("library") == str(lib)]
    assert raw_ours and all(f["function"] is None and f["file"] is None and f["offset"] for f in raw_ours)


def test_debug_dirs_reach_gdb_and_dwarf_frames_have_full_names(split_ext, tmp_path):
    lib, debug_dir = split_ext
    path = _record(tmp_path, "s", ["--break", "at::_ops::empty_like::call", "--max-hits", "40",
                                   str(ROOT / "scripts" / "call_debug_ext.py"), str(lib)],
                   env={"PTTRACE_DEBUG_DIRS": str(debug_dir)})
    _, hits = _kernel_frames(path)
    raw = next(r for r in _raw_hits(path) if r["seq"] == hits[0].seq)
    (kernel,) = [f for f in raw["frames"] if (f["function"] or "").startswith("pttrace_demo::scale_add_cpu")]
    # gdb found the separate debug file itself (debug-file-directory) and named the frame in full.
    assert kernel["file"] == str(DEMO_SOURCE) and kernel["line"]
    assert kernel["function"] == "pttrace_demo::scale_add_cpu(at::Tensor const&, at::Tensor const&, double)"


def test_a_breakpoint_added_later_by_name_gets_the_librarys_symbols(tmp_path):
    """The TUI's `b`: a name gdb resolves itself, in a library gdb had only unwind tables for."""
    import sys
    import threading

    from tracer.recorder import Recorder, TraceConfig
    from tracer.recorder.events import TargetStopped

    config = TraceConfig(breakpoints=("wrapper_CPU_sigmoid",), python=sys.executable, script=str(HELLO),
                         session_dir=tmp_path, mode="stop", forward_output=False)
    stops = []
    stopped = threading.Event()

    def listener(ev):
        if isinstance(ev, TargetStopped):
            stops.append(ev)
            stopped.set()

    engine = Recorder(config, listener)
    engine.start()
    runner = threading.Thread(target=engine.run, daemon=True)
    runner.start()
    try:
        assert stopped.wait(allowance(120)), "no stop at wrapper_CPU_sigmoid"
        assert engine.policy.cfi_libs, "libtorch_cpu.so was not given to gdb as unwind tables"
        snap = engine.control.snapshot()
        assert snap.frames[-1].short == "at::wrapper_CPU_sigmoid" and snap.frames[-1].layer == "kernel"
        engine.control.add_breakpoint("sigmoid_backward")  # gdb resolves it: our index does not, exactly
        # libtorch_cpu.so, which defines it, gets its symbols; libtorch_python.so (no DWARF) keeps its copy
        assert not [lib for lib in engine.policy.cfi_libs if lib.endswith("libtorch_cpu.so")]
        engine.control.set_mode("record")
        engine.control.resume()
        runner.join(allowance(180))
        assert not runner.is_alive(), "the run did not end after the resume"
    finally:
        if runner.is_alive():
            engine.request_stop()
            runner.join(30)
    session = engine.load_session()
    later = [h for h in session.hits if h.breakpoint == "sigmoid_backward"]
    assert later, [h.breakpoint for h in session.hits]
    assert "::sigmoid_backward(" in later[0].frames[-1].function
    (bp,) = [b for b in session.breakpoints if b.spec == "sigmoid_backward"]
    assert len(bp.locations) >= 6 and all(loc.function for loc in bp.locations)


def test_a_named_breakpoint_in_a_skipped_library_of_ones_own_is_not_missed(debug_ext, tmp_path):
    """A library pttrace gives gdb without its symbols (a big one, or one PTTRACE_CFI_LIBS names) that
    defines a --break name gdb must resolve itself (our index resolves only torch's): it gets its symbols."""
    path = _record(tmp_path, "s", ["--break", "pttrace_demo::scale_add_cpu",
                                   str(ROOT / "scripts" / "call_debug_ext.py"), str(debug_ext)],
                   env={"PTTRACE_CFI_LIBS": debug_ext.name})
    session = storage.load(path)
    assert len(session.hits) == 5, session.breakpoints  # scale_add 3 times, scale_add_twice's 2 calls
    kernel = session.hits[0].frames[-1]
    assert kernel.function.startswith("pttrace_demo::scale_add_cpu(") and kernel.file == str(DEMO_SOURCE)

