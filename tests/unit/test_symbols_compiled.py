"""The symbol index and the DWARF reader on small libraries compiled here (gcc, objcopy, strip), in
every shape the issue names: DWARF 4 and 5, -O0 and -O2 (inlined frames), zlib/zstd/.zdebug
compressed sections, separate debug files by .gnu_debuglink and by build-id, stripped, truncated.

Line answers are compared with binutils' ``addr2line -f -C -i`` at every byte of the code.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tracer import symbols
from tracer.errors import SymbolError
from tracer.symbols.elf_index import LibraryIndex

pytestmark = pytest.mark.skipif(not all(shutil.which(t) for t in ("g++", "objcopy", "strip", "addr2line", "objdump")),
                                reason="needs g++ and binutils")

SOURCE = r"""
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace outer {
namespace cpu {
int initModule(int x) { return x + 1; }
}  // namespace cpu
namespace mtia {
int initModule(int x) { return x + 2; }
}  // namespace mtia

struct Widget {
  int value;
  int get() const;
  template <typename T>
  T twice(T v) const { return v + v + value; }
};

int Widget::get() const { return value; }

static inline __attribute__((always_inline)) int helper(int v) { return v * 7 + std::rand(); }

int uses_helper(int v) {  // uses_helper: decl
  return helper(v) + 1;
}

static inline __attribute__((always_inline)) int square(int v) { return v * v; }

int starts_inlined(int v) { return square(v) + 1; }  // its first instruction is square's

int rarely(int v) {
  if (v == 42) {
    throw std::runtime_error("forty-two: " + std::to_string(v));  // gcc moves this to rarely.cold
  }
  if (v < 0) {
    std::puts("negative");
  }
  return v * 3;
}

int widget_twice(int v) {
  Widget w{v};
  return w.twice<int>(v) + static_cast<int>(w.twice<long>(v)) + w.get();
}

int counter = 0;

}  // namespace outer

extern "C" int initModule(int x) { return x * 3 + outer::counter; }
extern "C" int other_initModule(int x) { return x * 5; }
"""


def run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> dict[str, Path]:
    """One source, many builds. Keys name the shape; values are library paths."""
    d = tmp_path_factory.mktemp("compiled")
    src = d / "demo.cpp"
    src.write_text(SOURCE)
    out: dict[str, Path] = {}

    def cxx(name: str, *flags: str) -> Path:
        path = d / f"lib{name}.so"
        run("g++", "-shared", "-fPIC", *flags, "-o", str(path), str(src))
        out[name] = path
        return path

    v5 = cxx("v5_O2", "-g", "-O2")
    cxx("v4_O0", "-gdwarf-4", "-O0")
    for kind in ("zlib", "zstd", "zlib-gnu"):
        path = d / f"lib{kind}.so"
        run("objcopy", f"--compress-debug-sections={kind}", str(v5), str(path))
        out[kind] = path
    # .gnu_debuglink: the debug file beside the stripped library.
    linked_dir = d / "linked"
    linked_dir.mkdir()
    run("objcopy", "--only-keep-debug", str(v5), str(linked_dir / "libdemo.so.debug"))
    run("objcopy", "--strip-debug", f"--add-gnu-debuglink={linked_dir / 'libdemo.so.debug'}", str(v5),
        str(linked_dir / "libdemo.so"))
    out["debuglink"] = linked_dir / "libdemo.so"
    # build-id: the debug file in <root>/.build-id/xx/yyyy.debug, nothing in the library points at it.
    build_id = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", str(v5))).group(1)
    root = d / "debugroot"
    (root / ".build-id" / build_id[:2]).mkdir(parents=True)
    run("objcopy", "--only-keep-debug", str(v5), str(root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"))
    run("strip", "--strip-debug", "-o", str(d / "libbuildid.so"), str(v5))
    out["buildid"] = d / "libbuildid.so"
    out["debugroot"] = root
    run("strip", "--strip-all", "-o", str(d / "libstripped.so"), str(v5))
    out["stripped"] = d / "libstripped.so"
    return out


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch, libs):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PTTRACE_DEBUG_DIRS", raising=False)
    LibraryIndex._open.clear()
    symbols._readers.clear()
    yield
    LibraryIndex._open.clear()
    symbols._readers.clear()


def source_line(text: str) -> int:
    return next(i for i, line in enumerate(SOURCE.splitlines(), 1) if text in line)


# -- names ------------------------------------------------------------------------------------------
def test_initmodule_finds_every_definition_like_gdb(libs):
    found = {m.name for m in symbols.find_symbol("initModule", [str(libs["v5_O2"])])}
    assert found == {"initModule", "outer::cpu::initModule(int)", "outer::mtia::initModule(int)"}
    assert [m.name for m in symbols.find_symbol("::initModule", [str(libs["v5_O2"])])] == ["initModule"]
    assert [m.name for m in symbols.find_symbol("cpu::initModule", [str(libs["v5_O2"])])] == \
        ["outer::cpu::initModule(int)"]
    assert [m.name for m in symbols.find_symbol("_ZN5outer4mtia10initModuleEi", [str(libs["v5_O2"])])] == \
        ["outer::mtia::initModule(int)"]


def test_addresses_sizes_and_bindings_agree_with_nm(libs):
    lib = str(libs["v5_O2"])
    nm = {}
    for line in run("nm", "-S", "-C", "--defined-only", lib).splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4:
            nm[parts[3]] = (int(parts[0], 16), int(parts[1], 16), parts[2])
    for m in symbols.find_symbol("initModule", [lib]) + symbols.find_symbol("get", [lib]):
        address, size, letter = nm[m.name]
        assert (m.address, m.size) == (address, size)
        assert m.binding == ("global" if letter.isupper() else "local")


def test_cold_parts_and_plt_stubs_are_labelled(libs):
    lib = str(libs["v5_O2"])
    rarely = symbols.find_symbol("rarely", [lib])
    assert {m.cold for m in rarely} == {False, True}
    cold = next(m for m in rarely if m.cold)
    assert cold.name == "outer::rarely(int) [clone .cold]"
    puts = symbols.find_symbol("puts", [lib])
    assert len(puts) == 1 and puts[0].plt and puts[0].kind == "function"
    objdump = run("objdump", "-d", "-j", ".plt", "-j", ".plt.sec", lib)
    stub = int(re.search(r"^([0-9a-f]+) <puts@plt>:", objdump, re.M).group(1), 16)
    assert puts[0].address == stub
    assert symbols.libraries_defining("puts", [lib]) == []
    assert symbols.libraries_defining("rarely", [lib]) == [lib]
    sym, offset = symbols.symbol_at(lib, stub + 4)
    assert sym.plt and sym.mangled == "puts" and offset == 4


def test_objects_are_found_and_marked_as_such(libs):
    (counter,) = symbols.find_symbol("counter", [str(libs["v5_O2"])])
    assert counter.kind == "object" and counter.name == "outer::counter"
    assert symbols.libraries_defining("counter", [str(libs["v5_O2"])]) == []


def test_symbol_at_names_the_enclosing_function(libs):
    lib = str(libs["v5_O2"])
    (uses,) = symbols.find_symbol("uses_helper", [lib])
    sym, offset = symbols.symbol_at(lib, uses.address + 3)
    assert sym.name == "outer::uses_helper(int)" and offset == 3


def test_suggest_offers_close_names(libs):
    assert "outer::uses_helper" in symbols.suggest("uses_helpr", [str(libs["v5_O2"])])
    assert symbols.suggest("initModul", [str(libs["v5_O2"])])[0] in {"initModule", "outer::cpu::initModule",
                                                                      "outer::mtia::initModule"}


def test_a_stripped_library_still_answers_for_exported_names(libs):
    lib = str(libs["stripped"])
    assert LibraryIndex.open(lib).stripped
    assert [m.name for m in symbols.find_symbol("uses_helper", [lib])] == ["outer::uses_helper(int)"]
    assert symbols.line_for_address(lib, symbols.find_symbol("uses_helper", [lib])[0].address) is None


def test_corrupt_cache_files_are_rebuilt_not_believed(libs, tmp_path):
    lib = str(libs["v5_O2"])
    first = sorted((m.name, m.address) for m in symbols.find_symbol("initModule", [lib]))
    for path in (tmp_path / "cache" / "pttrace" / "index").iterdir():
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x5A
        path.write_bytes(bytes(raw))
    LibraryIndex._open.clear()
    assert sorted((m.name, m.address) for m in symbols.find_symbol("initModule", [lib])) == first


@pytest.mark.parametrize("shape", ["missing", "not-elf", "empty", "truncated", "directory"])
def test_bad_libraries_are_one_sentence_errors(libs, tmp_path, shape):
    path = tmp_path / "libbad.so"
    if shape == "not-elf":
        path.write_text("#!/bin/sh\necho not a library\n")
    elif shape == "empty":
        path.write_bytes(b"")
    elif shape == "truncated":
        path.write_bytes(libs["v5_O2"].read_bytes()[:5000])
    elif shape == "directory":
        path.mkdir()
    with pytest.raises(SymbolError) as err:
        symbols.find_symbol("initModule", [str(path)])
    message = err.value.message
    assert str(path) in message and "\n" not in message
    expected = {"missing": "no such file", "not-elf": "not an ELF file", "empty": "not an ELF file",
                "truncated": "truncated", "directory": "not a regular file"}[shape]
    assert expected in message


# -- lines ----------------------------------------------------------------------------------------
def code_addresses(lib: Path) -> list[int]:
    """Every byte of every function of the library's .text."""
    addrs = []
    for line in run("nm", "-S", "--defined-only", str(lib)).splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW" and int(parts[1], 16):
            start, size = int(parts[0], 16), int(parts[1], 16)
            addrs.extend(range(start, start + size))
    return sorted(set(addrs))


def addr2line(lib: Path, addresses: list[int]) -> dict[int, list[str]]:
    out = run("addr2line", "-f", "-C", "-i", "-a", "-e", str(lib), *(hex(a) for a in addresses))
    blocks: dict[int, list[str]] = {}
    current = None
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]{16}", line):
            current = int(line, 16)
            blocks[current] = []
        else:
            blocks[current].append(line)
    return blocks


def assert_agrees_with_addr2line(lib: Path, reference: Path) -> int:
    addresses = code_addresses(reference)
    ours = symbols.lines_for_addresses(str(lib), addresses)
    theirs = addr2line(reference, addresses)
    bad = []
    for a in addresses:
        mine = ours[a].addr2line_lines() if ours[a] else ["??", "??:0"]
        if mine != theirs[a]:
            # addr2line -i in one batch reuses names it learnt for earlier addresses: ask it alone.
            if mine != addr2line(reference, [a])[a]:
                bad.append((hex(a), mine, theirs[a]))
    assert not bad, bad[:5]
    return len(addresses)


@pytest.mark.parametrize("shape", ["v5_O2", "v4_O0", "zlib", "zstd", "zlib-gnu", "debuglink", "buildid"])
def test_lines_agree_with_addr2line_at_every_code_byte(libs, shape, monkeypatch):
    if shape == "buildid":
        monkeypatch.setenv("PTTRACE_DEBUG_DIRS", str(libs["debugroot"]))
    reference = libs["v4_O0"] if shape == "v4_O0" else libs["v5_O2"]
    count = assert_agrees_with_addr2line(libs[shape], reference)
    assert count > 300


def test_separate_debug_files_are_found(libs, monkeypatch):
    assert symbols.line_info_source(str(libs["debuglink"])).endswith("libdemo.so.debug")
    assert symbols.line_info_source(str(libs["buildid"])) is None  # no link, and not in a searched root
    assert symbols.line_info_source(str(libs["v5_O2"])) == str(libs["v5_O2"])
    monkeypatch.setenv("PTTRACE_DEBUG_DIRS", str(libs["debugroot"]))
    symbols._readers.clear()
    assert "/.build-id/" in symbols.line_info_source(str(libs["buildid"]))
    assert "/.build-id/" in symbols.line_info_source(str(libs["stripped"]))  # same build-id


@pytest.mark.parametrize("shape", ["debuglink", "buildid"])
def test_a_stripped_library_reads_the_symbol_table_of_its_debug_file(libs, shape, monkeypatch, tmp_path):
    # Distro debug packages keep the whole .symtab in the separate file: local functions, cold parts.
    if shape == "buildid":
        lib = tmp_path / "libdemo.so"
        run("strip", "--strip-all", "-o", str(lib), str(libs["v5_O2"]))
        monkeypatch.setenv("PTTRACE_DEBUG_DIRS", str(libs["debugroot"]))
    else:
        lib = tmp_path / "linked" / "libdemo.so"
        shutil.copytree(libs["debuglink"].parent, lib.parent)
        run("strip", "--strip-all", str(lib))  # keeps .gnu_debuglink
    index = LibraryIndex.open(str(lib))
    assert not index.stripped and index.symtab_elsewhere
    assert {m.name for m in symbols.find_symbol("rarely", [str(lib)])} == \
        {"outer::rarely(int)", "outer::rarely(int) [clone .cold]"}
    cold = next(m for m in symbols.find_symbol("rarely", [str(lib)]) if m.cold)
    assert cold.binding == "local" and cold.file.endswith("demo.cpp")
    sym, offset = symbols.symbol_at(str(lib), cold.address + 1)
    assert sym.name == cold.name and offset == 1
    assert symbols.libraries_defining("rarely", [str(lib)]) == [str(lib)]


def test_a_debug_file_installed_later_is_not_hidden_by_the_cache(libs, monkeypatch, tmp_path):
    lib = tmp_path / "libdemo.so"
    run("strip", "--strip-all", "-o", str(lib), str(libs["v5_O2"]))
    assert {m.cold for m in symbols.find_symbol("rarely", [str(lib)])} == {False}  # exported name only
    monkeypatch.setenv("PTTRACE_DEBUG_DIRS", str(libs["debugroot"]))  # "apt install libdemo-dbgsym"
    LibraryIndex._open.clear()
    symbols._readers.clear()
    assert {m.cold for m in symbols.find_symbol("rarely", [str(lib)])} == {False, True}


def test_a_debuglink_with_the_wrong_crc_is_not_believed(libs, tmp_path):
    d = tmp_path / "badlink"
    d.mkdir()
    shutil.copy(libs["debuglink"], d / "libdemo.so")
    (d / "libdemo.so.debug").write_bytes(libs["v4_O0"].read_bytes())  # right name, other content
    assert symbols.line_info_source(str(d / "libdemo.so")) is None


def test_inlined_code_reports_the_chain(libs):
    lib = str(libs["v5_O2"])
    (uses,) = symbols.find_symbol("uses_helper", [lib])
    chains = [symbols.line_for_address(lib, a) for a in range(uses.address, uses.address + uses.size)]
    inlined = [c for c in chains if c is not None and c.inlined]
    assert inlined, "helper() is always_inline: some bytes of uses_helper are helper's"
    top = inlined[0]
    # helper is static: no linkage name. addr2line prints the enclosing symbol's name for it; we keep
    # DWARF's name apart from that, and agree with addr2line's text all the same.
    assert top.function == "helper"
    assert top.addr2line_lines()[0] == "outer::uses_helper(int)"
    assert top.line == source_line("static inline __attribute__((always_inline)) int helper")
    assert top.inlined[-1].function == "outer::uses_helper(int)"
    assert top.inlined[-1].line == source_line("return helper(v) + 1;")
    assert top.inlined[-1].decl_line == source_line("int uses_helper(int v) {")
    assert top.decl_line == source_line("static inline __attribute__((always_inline)) int helper")


def test_a_function_that_starts_in_inlined_code_says_so(libs, capsys):
    from tracer.cli import main

    lib = libs["v5_O2"]
    (m,) = symbols.find_symbol("starts_inlined", [str(lib)])
    assert (m.inlined, m.line) == ("square", source_line("int square(int v)"))
    assert m.call_line == source_line("int starts_inlined(int v)") == m.decl_line
    theirs = addr2line(lib, [m.address])[m.address]
    assert theirs[1::2] == [f"{m.file}:{m.line}", f"{m.call_file}:{m.call_line}"]
    assert main(["where", "starts_inlined", "--lib", str(lib)]) == 0
    out = capsys.readouterr().out
    assert f"code at   {m.file}:{m.line}  (in square, inlined here" in out
    assert f"calls it  {m.call_file}:{m.call_line}" in out
    assert f"declared  {m.decl_file}:{m.decl_line}" in out


def test_functions_report_code_line_and_declaration_line(libs):
    lib = str(libs["v4_O0"])
    (get,) = symbols.find_symbol("outer::Widget::get", [lib])
    assert get.file.endswith("demo.cpp") and get.decl_file.endswith("demo.cpp")
    # Declared in the class body, defined below it: DWARF's declaration is the definition's line.
    assert get.decl_line == source_line("int Widget::get() const { return value; }")
    assert get.line == source_line("int Widget::get() const { return value; }")
    (uses,) = symbols.find_symbol("uses_helper", [lib])
    assert uses.decl_line == source_line("int uses_helper(int v) {")


def test_no_dwarf_means_none_quickly(libs):
    lib = str(libs["stripped"])
    assert symbols.line_info_source(lib) is None
    assert symbols.lines_for_addresses(lib, [0x1000, 0x1010]) == {0x1000: None, 0x1010: None}


@pytest.mark.parametrize("shape", ["v5_O2", "v4_O0"])
def test_skipping_type_bodies_loses_no_function(libs, shape):
    from tracer.symbols.dwarf import DwarfReader
    from tracer.symbols.elffile import ElfFile

    reader = DwarfReader(ElfFile(str(libs[shape])), str(libs[shape]))
    for offset in reader.unit_offsets():
        assert reader.decode(offset, skip_types=True)[1].to_payload() == \
            reader.decode(offset, skip_types=False)[1].to_payload()
