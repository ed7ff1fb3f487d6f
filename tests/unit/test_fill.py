"""Fill records: frames recorded by library and offset get the names pttrace's index gives them."""
from __future__ import annotations

import json
import subprocess

from tracer.session import storage
from tracer.session.fill import FrameFiller
from tracer.session.model import Frame, Hit, SessionInfo, Thread


def _frame(library, offset, function=None, file=None):
    return Frame(kind="native", function=function, library=library, address=0x7000 + offset, file=file,
                 layer="runtime", offset=offset)


def _session(path, frames, fills=(), end=True):
    w = storage.SessionWriter(path)
    w.header(SessionInfo(id="s1", mode="run", argv=["python"], started="2026-11-22T05:00:00+00:00"))
    w.write({"type": "hit", **Hit(seq=1, breakpoint="b", thread=Thread(1, "python", 42), time=1.0,
                                  frames=frames).to_dict()})
    for entries in fills:
        w.fill(entries)
    if end:
        w.end("completed", 0)
    w.close()


def test_fills_apply_by_library_offset_and_caller(tmp_path):
    p = tmp_path / "s.jsonl"
    caller = {"function": "at::_ops::sigmoid::call(at::Tensor const&)", "short": "at::_ops::sigmoid::call",
              "layer": "dispatcher", "dispatch_key": None}
    inner = {"function": "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)",
             "short": "at::wrapper_CPU_sigmoid", "layer": "kernel", "dispatch_key": "CPU", "file": "k.cpp", "line": 7}
    _session(p, [_frame("/l.so", 0x10), _frame("/l.so", 0x20)],
             fills=[[["/l.so", 0x10, True, caller]], [["/l.so", 0x20, False, inner], ["/l.so", 0x20, True, caller]]])
    (hit,) = storage.load(p).hits
    a, b = hit.frames
    assert (a.function, a.layer, a.file) == (caller["function"], "dispatcher", None)
    assert (b.function, b.short, b.layer, b.dispatch_key, b.file, b.line) == (
        inner["function"], "at::wrapper_CPU_sigmoid", "kernel", "CPU", "k.cpp", 7)
    assert b.to_dict()["offset"] == 0x20


def test_a_session_without_fills_keeps_library_and_offset(tmp_path):
    p = tmp_path / "s.jsonl"
    _session(p, [_frame("/l.so", 0x10), _frame("/l.so", 0x20)], end=False)
    s = storage.load(p)
    assert s.info.status == "interrupted"
    assert [(f.library, f.offset, f.function) for f in s.hits[0].frames] == [("/l.so", 0x10, None),
                                                                           ("/l.so", 0x20, None)]


def test_gdb_names_are_kept_and_only_missing_lines_filled(tmp_path):
    p = tmp_path / "s.jsonl"
    _session(p, [_frame("/l.so", 0x10, function="gdb_name()")],
             fills=[[["/l.so", 0x10, False, {"function": "other()", "short": "other", "layer": "kernel",
                                             "dispatch_key": None, "file": "f.cpp", "line": 3}]]])
    (f,) = storage.load(p).hits[0].frames
    assert (f.function, f.layer, f.file, f.line) == ("gdb_name()", "runtime", "f.cpp", 3)


def compile_shared(src, lib) -> None:
    """``cc -shared`` (setup.sh installs the compiler): a failed build fails the test, with cc's words."""
    proc = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, f"cc could not build {lib.name}: {proc.stderr[-2000:]}"


def test_filler_names_from_the_index_and_looks_callers_up_at_pc_minus_one(tmp_path):
    src = tmp_path / "lib.c"
    src.write_text("int first(int x) { return x + 1; }\nint second(int x) { return first(x) * 2; }\n")
    lib = tmp_path / "libdemo.so"
    compile_shared(src, lib)
    from tracer.symbols import find_symbol

    (second,) = [m for m in find_symbol("second", [str(lib)]) if not m.plt]
    (first,) = [m for m in find_symbol("first", [str(lib)]) if not m.plt]
    end_of_first = first.address + first.size  # a return address just past the end of a function
    frames = [_frame(str(lib), end_of_first), _frame(str(lib), second.address)]
    entries = FrameFiller().fill(frames)
    assert frames[0].function == "first" and frames[0].short == "first"  # looked up at pc - 1
    assert frames[1].function == "second"
    assert [e[:3] for e in entries] == [[str(lib), end_of_first, True], [str(lib), second.address, False]]
    json.dumps(entries)


def test_cfi_copy_holds_only_the_unwind_tables(tmp_path, monkeypatch):
    src = tmp_path / "lib.c"
    src.write_text("int f(int x) { return x + 1; }\n")
    lib = tmp_path / "libdemo.so"
    compile_shared(src, lib)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from tracer.symbols.cfi import cfi_copy

    copy = cfi_copy(str(lib))
    assert copy.startswith(str(tmp_path / "cache" / "pttrace" / "cfi"))
    assert cfi_copy(str(lib)) == copy  # cached
    from tracer.symbols.elffile import ElfFile

    names = {s.name for s in ElfFile(copy).section_list}
    assert {".eh_frame", ".text"} <= names and not names & {".symtab", ".dynsym", ".strtab", ".debug_info"}
    assert next(s for s in ElfFile(copy).section_list if s.name == ".text").type == 8  # NOBITS


def test_a_library_the_index_cannot_read_is_named_not_hidden(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    bad = tmp_path / "libbroken.so"
    bad.write_bytes(b"\x7fELF" + b"\0" * 12)  # an ELF header cut short
    frames = [_frame(str(bad), 0x40)]
    filler = FrameFiller()
    assert filler.fill(frames) == []
    assert frames[0].function is None and frames[0].offset == 0x40  # kept as recorded
    assert str(bad) in filler.unreadable and filler.unreadable[str(bad)]


def test_fill_key_only_for_native_frames_missing_a_name_or_place():
    assert _frame("l", 5).fill_key(True) == ("l", 5, False)
    assert _frame("l", 5).fill_key(False) == ("l", 5, True)  # a caller: looked up at offset - 1
    assert _frame("l", 5, function="f", file="a.c").fill_key(True) is None
    assert Frame(kind="python", offset=5).fill_key(False) is None
    assert Frame(kind="native", library="l").fill_key(True) is None  # named by gdb: no offset recorded


# A pc in inlined code (gdb given the library as unwind tables only shows one frame): the fill names the
# function the code belongs to at its call site, and lists the inlined functions, innermost last.
OUTER = {"function": "big::kernel(int)", "short": "big::kernel", "layer": "runtime", "dispatch_key": None,
         "file": "k.cpp", "line": 56,
         "inlined": [{"function": "std::for_each<It, F>(It, It, F)", "short": "std::for_each<…>", "layer": "runtime",
                      "dispatch_key": None, "file": "stl_algo.h", "line": 3787},
                     {"function": "std::function<void ()>::operator()() const",
                      "short": "std::function<…>::operator()",
                      "layer": "runtime", "dispatch_key": None, "file": "std_function.h", "line": 591}]}
LEAF = {"function": "leaf()", "short": "leaf", "layer": "runtime", "dispatch_key": None, "file": "l.cpp", "line": 3}


def _interned(path, paths, fills):
    """A schema-2 session: ``paths`` are lists of frames; one Frame object in two paths is one frame record."""
    from tracer.session import records

    interner = records.Interner()
    w = storage.SessionWriter(path)
    w.header(SessionInfo(id="s1", mode="run", argv=["python"], started="2026-11-22T05:00:00+00:00"))
    for seq, frames in enumerate(paths, 1):
        data = interner.encode_hit(seq, "b", {"id": 1, "name": "python", "lwp": 42}, float(seq),
                                   [f.to_dict() for f in frames])
        with open(path, "ab") as fh:
            fh.write(data)
    w.fill(fills)
    w.end("completed", 0)
    w.close()


def _shape(frames):
    return [(f.function, f.file, f.line, f.inlined, f.offset) for f in frames]


def test_a_frame_in_inlined_code_is_followed_by_the_inlined_functions_frames(tmp_path):
    p = tmp_path / "s.jsonl"
    kernel = _frame("/l.so", 0x20)
    _interned(p, [[_frame("/l.so", 0x10), kernel, _frame("/l.so", 0x30)], [kernel, _frame("/l.so", 0x40)]],
              [["/l.so", 0x10, True, {"function": "entry()", "file": "e.cpp", "line": 1}],
               ["/l.so", 0x20, True, OUTER], ["/l.so", 0x30, False, LEAF], ["/l.so", 0x40, False, LEAF]])
    first, second = storage.load(p).hits
    inlined = [("std::for_each<It, F>(It, It, F)", "stl_algo.h", 3787, True, 0x20),
               ("std::function<void ()>::operator()() const", "std_function.h", 591, True, 0x20)]
    assert _shape(first.frames) == [("entry()", "e.cpp", 1, False, 0x10),
                                    ("big::kernel(int)", "k.cpp", 56, False, 0x20), *inlined,
                                    ("leaf()", "l.cpp", 3, False, 0x30)]
    # The kernel's frame is shared by both paths (one frame record): the second path is expanded too.
    assert _shape(second.frames) == [("big::kernel(int)", "k.cpp", 56, False, 0x20), *inlined,
                                     ("leaf()", "l.cpp", 3, False, 0x40)]
    assert first.frames[2].short == "std::for_each<…>" and first.frames[2].library == "/l.so"
    assert first.frames[2].address == first.frames[1].address


def test_the_innermost_frame_in_inlined_code_and_filling_twice(tmp_path):
    from tracer.session.model import fill_path

    fills = {("/l.so", 0x20, False): OUTER, ("/l.so", 0x10, True): LEAF}
    frames = [_frame("/l.so", 0x10), _frame("/l.so", 0x20)]
    fill_path(frames, fills.get)
    assert [(f.function, f.inlined) for f in frames] == [("leaf()", False), ("big::kernel(int)", False),
                                                         ("std::for_each<It, F>(It, It, F)", True),
                                                         ("std::function<void ()>::operator()() const", True)]
    before = _shape(frames)
    fill_path(frames, fills.get)  # the innermost is still the kernel (the frames after it are inlined in it)
    assert _shape(frames) == before


def test_a_fill_with_malformed_inlined_frames_is_skipped_and_said(tmp_path):
    p = tmp_path / "s.jsonl"
    _session(p, [_frame("/l.so", 0x20)], fills=[[["/l.so", 0x20, False, dict(OUTER, inlined=[{"line": "3"}])]]])
    s = storage.load(p)
    assert s.hits[0].frames[0].function is None  # the record is not used
    assert any("damaged" in w and "inlined frame" in w for w in s.info.warnings), s.info.warnings
