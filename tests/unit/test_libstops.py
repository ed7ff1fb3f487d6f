"""The rules gdb applies at each library load (tracer/gdb/agent/libstops.py): which loads stop the target
for pttrace. Over real shared libraries built here (cc, strip, objcopy), with and without a symbol table,
with a separate debug file found by build-id or by ``.gnu_debuglink``."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tracer.gdb.agent.libstops import LoadedLibraries, Rules, may_name
from tracer.recorder.resolve import name_needles

pytestmark = pytest.mark.skipif(not (shutil.which("cc") and shutil.which("strip") and shutil.which("objcopy")),
                                reason="needs cc, strip and objcopy")

SOURCE = """
namespace ptns { int pt_needle_fn(int x) { return x + 1; } }
extern "C" int pt_plain_c(int x) { return x * 2; }
static int pt_local_fn(int x) { return x - 1; }  // in .symtab only: a stripped library has it in its debug file
extern "C" int pt_uses_local(int x) { return pt_local_fn(x); }
"""


def build(tmp_path: Path, name: str, *, strip: bool = False, debuglink: bool = False, build_id_dir: Path | None = None):
    src = tmp_path / "lib.cc"
    src.write_text(SOURCE)
    lib = tmp_path / name
    subprocess.run(["cc", "-x", "c++", "-shared", "-fPIC", "-O0", "-Wl,--build-id", "-o", str(lib), str(src)],
                   check=True)
    if debuglink or build_id_dir:
        debug = tmp_path / (name + ".debug")
        subprocess.run(["objcopy", "--only-keep-debug", str(lib), str(debug)], check=True)
        if build_id_dir:
            bid = build_id(lib)
            where = build_id_dir / ".build-id" / bid[:2]
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy(debug, where / (bid[2:] + ".debug"))
            debug.unlink()
    if strip:
        subprocess.run(["strip", "--strip-all", str(lib)], check=True)
    if debuglink:
        subprocess.run(["objcopy", f"--add-gnu-debuglink={tmp_path / (name + '.debug')}", str(lib)], check=True,
                       cwd=tmp_path)
    return lib


def build_id(lib: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(lib)], capture_output=True, text=True, check=True).stdout
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if "Build ID" in line)


def groups(*specs: str) -> list[list[bytes]]:
    out = []
    for spec in specs:
        needles = name_needles(spec)
        assert needles is not None, spec
        out.append([n.encode() for n in needles])
    return out


def test_a_library_holding_the_names_strings_may_define_it_one_without_them_does_not(tmp_path):
    lib = build(tmp_path, "libplain.so")
    assert may_name(str(lib), groups("pt_needle_fn"))
    assert may_name(str(lib), groups("ptns::pt_needle_fn"))
    assert may_name(str(lib), groups("pt_plain_c"))
    assert not may_name(str(lib), groups("wrapper_CPU_sigmoid"))
    assert not may_name(str(lib), groups("other::pt_needle_fn"))  # every component must be there
    assert may_name(str(lib), groups("wrapper_CPU_sigmoid", "pt_plain_c"))  # any one of the names


def test_a_stripped_library_is_decided_by_its_dynamic_symbols_when_no_debug_file_is_there(tmp_path):
    lib = build(tmp_path, "libstripped.so", strip=True)
    assert "symtab" not in subprocess.run(["readelf", "-S", str(lib)], capture_output=True, text=True).stdout
    assert may_name(str(lib), groups("pt_plain_c"))  # exported: in .dynsym, which pttrace's index reads
    assert not may_name(str(lib), groups("wrapper_CPU_sigmoid"))


def test_a_stripped_library_with_a_debug_file_found_by_its_debuglink_is_decided_by_that_files_names(tmp_path):
    lib = build(tmp_path, "liblinked.so", strip=True, debuglink=True)
    assert may_name(str(lib), groups("pt_local_fn"))  # only in the debug file's .symtab, which pttrace's index reads
    assert not may_name(str(lib), groups("wrapper_CPU_sigmoid"))  # in neither file: no stop for it


def test_a_stripped_library_with_a_debug_file_found_by_build_id_is_decided_by_that_files_names(tmp_path):
    debug_dir = tmp_path / "debug"
    lib = build(tmp_path, "libbyid.so", strip=True, build_id_dir=debug_dir)
    assert not may_name(str(lib), groups("pt_local_fn"))  # that directory is not looked in
    assert may_name(str(lib), groups("pt_local_fn"), [str(debug_dir)])
    assert not may_name(str(lib), groups("wrapper_CPU_sigmoid"), [str(debug_dir)])


def test_what_cannot_be_read_may(tmp_path):
    assert may_name(str(tmp_path / "missing.so"), groups("pt_plain_c"))
    text = tmp_path / "not-elf.so"
    text.write_text("hello")
    assert may_name(str(text), groups("pt_plain_c"))
    short = tmp_path / "short.so"
    short.write_bytes(b"\x7fELF\x02\x01" + b"\0" * 20)
    assert may_name(str(short), groups("pt_plain_c"))


def test_rules_stop_for_the_libraries_pttrace_acts_on_at_once(tmp_path):
    lib = build(tmp_path, "libplain.so")
    size = os.path.getsize(lib)
    rules = Rules.from_json({"names": [name_needles("wrapper_CPU_sigmoid")]})
    assert not rules.must_stop(str(lib))
    assert Rules.from_json({"always": True}).must_stop(str(lib))
    assert Rules.from_json({"paths": [os.path.realpath(lib)]}).must_stop(str(lib))
    assert Rules.from_json({"bases": ["libplain.so"]}).must_stop(str(lib))
    assert Rules.from_json({"prefixes": ["libpl"]}).must_stop(str(lib))
    assert Rules.from_json({"big": size}).must_stop(str(lib))
    assert not Rules.from_json({"big": size + 1}).must_stop(str(lib))
    assert Rules.from_json({"any_name": True}).must_stop(str(lib))
    assert Rules.from_json({"names": [name_needles("pt_needle_fn")]}).must_stop(str(lib))
    assert Rules.from_json({}).must_stop(str(tmp_path / "gone.so"))  # cannot be looked at: pttrace decides
    link = tmp_path / "libalias.so"
    link.symlink_to(lib)
    assert Rules.from_json({"paths": [os.path.realpath(lib)]}).must_stop(str(link))


def test_the_new_libraries_are_those_the_dynamic_linker_added_since_the_last_look():
    memory: dict[int, bytes] = {}

    def node(at: int, name_at: int, name: bytes, nxt: int) -> None:
        memory[at] = struct.pack("<QQQQ", 0, name_at, 0, nxt)
        memory[name_at] = name + b"\0"

    def read(address: int, size: int) -> bytes:
        for start, data in memory.items():
            if start <= address < start + len(data):
                return data[address - start:address - start + size].ljust(size, b"\0")
        raise ValueError("unmapped")

    r_debug = 0x1000
    memory[r_debug] = struct.pack("<QQ", 1, 0x2000)
    node(0x2000, 0x9000, b"", 0x3000)  # the executable: no name
    node(0x3000, 0x9100, b"/lib/libc.so.6", 0)
    seen = LoadedLibraries()
    assert seen.new(r_debug, read) == ["/lib/libc.so.6"]
    assert seen.new(r_debug, read) == []
    node(0x3000, 0x9100, b"/lib/libc.so.6", 0x4000)
    node(0x4000, 0x9200, b"/x/libnew.so", 0)
    assert seen.new(r_debug, read) == ["/x/libnew.so"]
    node(0x3000, 0x9100, b"/lib/libc.so.6", 0x5000)  # libnew unloaded, another loaded elsewhere
    node(0x5000, 0x9300, b"/x/libother.so", 0)
    assert seen.new(r_debug, read) == ["/x/libother.so"]


def test_r_debug_is_found_where_the_dynamic_linker_exports_it():
    """The executable's DT_DEBUG (read from this very process's memory) names the dynamic linker's own
    ``_r_debug``, as ld.so's symbol lookup (ctypes) finds it; and the list read from there starts with this
    interpreter's libraries."""
    import ctypes

    from tracer.gdb.agent.libstops import r_debug_address

    def read(address: int, size: int) -> bytes:
        with open("/proc/self/mem", "rb") as fh:
            fh.seek(address)
            return fh.read(size)

    exported = ctypes.addressof(ctypes.c_int.in_dll(ctypes.CDLL(None), "_r_debug"))
    assert r_debug_address(os.getpid(), read) == exported
    names = LoadedLibraries().new(exported, read)
    assert any("libc.so" in n for n in names) and any("_ctypes" in n for n in names)


def test_r_debug_is_not_guessed_for_a_process_that_is_not_there():
    from tracer.gdb.agent.libstops import r_debug_address

    assert r_debug_address(2 ** 22 + 12345, lambda a, s: b"") is None


def test_what_a_run_read_of_each_library_answers_the_next_run_alike(tmp_path):
    """NameScans keeps may_name's reading of each file across runs (a JSON file): the next run answers as the
    fresh scan did without reading the library again (a file changed behind the same size and time keeps its
    old answer: the key is real path, size and time); a library rebuilt is read again; a separate debug file
    that appears later is still found (it is looked for at each answer, never kept)."""
    from tracer.gdb.agent.libstops import NameScans

    cache = tmp_path / "cache" / "scans.json"
    debug_dir = tmp_path / "debug"
    plain = build(tmp_path, "libplain.so")
    stripped = build(tmp_path, "libbyid.so", strip=True, build_id_dir=debug_dir)
    wanted, other = groups("ptns::pt_needle_fn"), groups("wrapper_CPU_sigmoid")
    first = NameScans(str(cache))
    answers = [(lib, g, may_name(str(lib), g)) for lib in (plain, stripped) for g in (wanted, other)]
    assert [a for _, _, a in answers] == [True, False, True, False]
    for lib, g, fresh in answers:
        assert may_name(str(lib), g, (), first) == fresh
    first.save()
    assert cache.exists()

    st = os.stat(plain)
    data = plain.read_bytes()
    plain.write_bytes(data.replace(b"pt_needle_fn", b"xx_needle_fn"))
    os.utime(plain, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not may_name(str(plain), wanted)  # read now: the strings are gone
    later = NameScans(str(cache))
    assert may_name(str(plain), wanted, (), later)  # the run before's reading: the file was not read again
    assert not later._changed
    # its debug file is looked for now, and read: a name only there, one in neither
    assert may_name(str(stripped), groups("pt_local_fn"), [str(debug_dir)], later)
    assert not may_name(str(stripped), other, [str(debug_dir)], later)
    os.utime(plain, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # rebuilt, as far as its time tells
    assert not may_name(str(plain), wanted, (), later)
    assert later._changed
