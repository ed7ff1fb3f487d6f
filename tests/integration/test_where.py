"""``pttrace where`` on the real torch wheel (release: symbols, no DWARF) and on the debug extension
built with -g -O0 (DWARF 5), with file:line compared against binutils' addr2line."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import run_child
from tracer import symbols
from tracer.cli import main
from tracer.commands.where import RELEASE_NOTE
from tracer.errors import UsageError
from tracer.symbols import cache
from tracer.symbols.elf_index import LibraryIndex

ROOT = Path(__file__).resolve().parents[2]
PTTRACE_BIN = Path(sys.executable).with_name("pttrace")
# This test run's own cache (this module's tests get one of their own, isolated_cache): for the commands
# whose claims are not about the cache (an export from an empty one builds torch's header index: 6 s of CPU).
SHARED_XDG = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    """One cache for the module: the first test pays for the cold index, later ones read it."""
    return tmp_path_factory.mktemp("xdg")


@pytest.fixture(autouse=True)
def isolated_cache(cache_dir, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_dir))
    monkeypatch.delenv("PTTRACE_DEBUG_DIRS", raising=False)
    LibraryIndex._open.clear()
    symbols._readers.clear()


@pytest.fixture(scope="module")
def torch_libs() -> list[str]:
    libs = symbols.torch_libraries(sys.executable)
    if not any(lib.endswith("libtorch_cpu.so") for lib in libs):
        pytest.skip("torch is not installed in this interpreter")
    return libs


def by_name(libs: list[str], name: str) -> str:
    return next(lib for lib in libs if os.path.basename(lib).startswith(name))


# -- the release wheel ----------------------------------------------------------------------------
def test_initmodule_lists_every_definition_and_the_stub(torch_libs, capsys):
    assert main(["where", "initModule"]) == 0
    out = capsys.readouterr().out
    # Seven functions, each with its cold part, and _C's stub: cold parts are not counted as definitions.
    assert re.match(r"initModule: 7 definitions, 7 cold parts and 1 plt stub in 2 of \d+ libraries\n", out)
    for name in ("torch::cpu::initModule(_object*)", "torch::mtia::initModule(_object*)",
                 "torch::accelerator::initModule(_object*)", "libtorch_python.so"):
        assert name in out
    assert re.search(r"^  initModule  0x[0-9a-f]+  \d+ bytes  global function$", out, re.M)
    assert "[clone .cold]" in out and "cold part" in out
    assert re.search(r"_C\.cpython.*\n  initModule  0x[0-9a-f]+  16 bytes  plt stub", out)
    assert out.count(RELEASE_NOTE) == 1


def test_json_lists_definitions_and_stubs_apart(torch_libs, capsys):
    assert main(["where", "at::_ops::empty_memory_format::call", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    defs = [m for m in data["matches"] if not m["plt"]]
    stubs = [m for m in data["matches"] if m["plt"]]
    main_def = next(m for m in defs if not m["cold"])
    assert main_def["library"].endswith("libtorch_cpu.so") and main_def["kind"] == "function"
    assert main_def["name"].startswith("at::_ops::empty_memory_format::call(")
    assert main_def["mangled"].startswith("_ZN2at4_ops19empty_memory_format4call")
    assert main_def["file"] is None and main_def["line"] is None
    assert any(s["library"].endswith("libtorch_python.so") for s in stubs)
    nm = subprocess.run(["nm", "-S", main_def["library"]], capture_output=True, text=True).stdout
    row = next(line for line in nm.splitlines() if line.endswith(" " + main_def["mangled"]))
    assert int(row.split()[0], 16) == main_def["address"] and int(row.split()[1], 16) == main_def["size"]


def test_misspelled_name_suggests_close_ones_and_exits_1(torch_libs, capsys):
    assert main(["where", "THPVariable_tensr"]) == 1
    out = capsys.readouterr().out
    assert "no function or variable of that name" in out
    assert "torch::autograd::THPVariable_tensor" in out
    assert symbols.suggest("THPVariable_tensr", torch_libs)[0] == "torch::autograd::THPVariable_tensor"


def test_libraries_defining_is_what_gdb_must_load(torch_libs):
    assert [os.path.basename(x) for x in symbols.libraries_defining("initModule", torch_libs)] == \
        ["libtorch_python.so"]
    assert [os.path.basename(x) for x in symbols.libraries_defining("wrapper_CPU_sigmoid", torch_libs)] == \
        ["libtorch_cpu.so"]
    assert symbols.libraries_defining("no_such_function_anywhere", torch_libs) == []


def test_the_query_is_remembered_on_disk(torch_libs):
    symbols.libraries_defining("THPVariable_tensor", torch_libs)
    index = LibraryIndex.open(by_name(torch_libs, "libtorch_python"))
    assert "THPVariable_tensor" in cache.read(index.key, "memo")


def test_torch_libraries_are_found_without_importing_torch(torch_libs):
    names = {os.path.basename(x) for x in torch_libs}
    assert {"libtorch_cpu.so", "libtorch_python.so", "libc10.so"} <= names
    assert any(n.startswith("_C.") for n in names)
    with pytest.raises(UsageError):
        symbols.torch_libraries("/no/such/python")


def test_the_installed_command_runs(torch_libs, cache_dir):
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_dir))
    proc = run_child([str(PTTRACE_BIN), "where", "initModule"], capture_output=True, text=True,
                     timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "torch::cpu::initModule(_object*)" in proc.stdout



def test_a_warm_where_imports_only_what_it_uses(torch_libs, cache_dir):
    """The answer comes from the cache (the answer kept whole): no rich, no DWARF reader, no sources, no typing (5-10 ms
    of a warm `where` whose target is 0.1 s), no shutil (argparse's width), no hashlib (OpenSSL), no
    difflib (suggestions), and no setuptools import hook (scripts/setup.sh installs the checkout as a
    path), read from the process's own import log."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_dir))
    argv = [sys.executable, "-X", "importtime", "-m", "tracer", "where", "initModule"]
    run_child(argv, capture_output=True, timeout=120, env=env, check=True)  # the index is cached
    proc = run_child(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "tracer.symbols.answers" in imported  # the log is read right
    # The answer was kept by the first run: no library's index is opened (elf_index and its dataclasses),
    # and no Path is made (pathlib with urllib.parse and ipaddress).
    unused = {"typing", "rich", "textual", "elftools", "json", "subprocess", "tracer.sources",
              "tracer.symbols.dwarf", "tracer.session.model", "shutil", "hashlib", "difflib",
              "tracer.symbols.elf_index", "pathlib"}
    assert not imported & unused, sorted(imported & unused)
    hooks = [m for m in imported if m.startswith("__editable__")]
    assert not hooks, f"{hooks}: the venv predates scripts/setup.sh's editable_mode=compat; run scripts/setup.sh"

def test_a_kept_answer_is_the_answer_and_opens_no_index(torch_libs, capsys):
    """The second `where` of a name is printed from the answer kept by the first (symbols/answers.py),
    the same text and JSON, without opening any library's index."""
    outputs = []
    for _ in range(2):
        LibraryIndex._open.clear()
        assert main(["where", "THPVariable_tensor"]) == 0
        assert main(["where", "THPVariable_tensor", "--json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and "torch::autograd::THPVariable_tensor" in outputs[0]
    assert not LibraryIndex._open  # the kept answer was printed


def test_a_kept_answer_follows_its_library_and_its_debug_file(debug_ext, tmp_path, monkeypatch, capsys):
    """A kept answer is reused only while its files are unchanged: the library rewritten, or its separate
    debug file appearing where one is looked for (by build-id, under $PTTRACE_DEBUG_DIRS), gives the new
    answer at once."""
    lib, debug_dir = tmp_path / "libdemo.so", tmp_path / "debug"
    monkeypatch.setenv("PTTRACE_DEBUG_DIRS", str(debug_dir))
    subprocess.run(["objcopy", "--strip-debug", str(debug_ext), str(lib)], check=True)
    query = ["where", "pttrace_demo::scale_add_cpu", "--lib", str(lib)]
    for _ in range(2):  # the second from the kept answer
        assert main(query) == 0
        assert RELEASE_NOTE in capsys.readouterr().out
    build_id = symbols.ElfFile(str(lib)).build_id
    target = debug_dir / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    target.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(debug_ext), str(target)], check=True)
    symbols._readers.clear()  # a new process, as each `pttrace where` is
    assert main(query) == 0
    out = capsys.readouterr().out
    assert RELEASE_NOTE not in out and re.search(r"code at   \S+:\d+", out)
    assert f"(DWARF from {os.path.realpath(target)})" in out
    subprocess.run(["strip", "--strip-all", "-o", str(lib), str(debug_ext)], check=True)  # rewritten in place
    monkeypatch.delenv("PTTRACE_DEBUG_DIRS")
    LibraryIndex._open.clear()
    symbols._readers.clear()
    assert main(query) == 0
    assert "(stripped: exported symbols only)" in capsys.readouterr().out


# -- bad input ------------------------------------------------------------------------------------
@pytest.fixture
def bad_library(request, tmp_path, debug_ext) -> tuple[Path, str]:
    shape = request.param
    path = tmp_path / "libbad.so"
    if shape == "not-elf":
        path = ROOT / "scripts" / "hello-world.py"
    elif shape == "truncated":
        path.write_bytes(debug_ext.read_bytes()[:100_000])
    elif shape == "stripped":
        subprocess.run(["strip", "--strip-all", "-o", str(path), str(debug_ext)], check=True)
    return path, shape


@pytest.mark.parametrize("bad_library", ["missing", "not-elf", "truncated", "stripped"], indirect=True)
def test_bad_libraries_exit_2_with_one_sentence(bad_library, capsys):
    path, shape = bad_library
    # scale_add_one is local to the library: a stripped copy no longer knows it.
    assert main(["where", "scale_add_one", "--lib", str(path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pttrace: ") and str(path) in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert {"missing": "no such file", "not-elf": "not an ELF file", "truncated": "truncated",
            "stripped": "stripped"}[shape] in lines[0]


def test_a_stripped_library_without_debug_file_says_so_once(debug_ext, tmp_path, capsys):
    from tracer.commands.where import STRIPPED_NOTE

    lib = tmp_path / "libstripped.so"
    subprocess.run(["strip", "--strip-all", "-o", str(lib), str(debug_ext)], check=True)
    assert main(["where", "pttrace_demo::scale_add_cpu", "--lib", str(lib)]) == 0  # exported: still found
    out = capsys.readouterr().out
    assert "(stripped: exported symbols only)" in out
    assert out.count(STRIPPED_NOTE) == 1 and RELEASE_NOTE not in out
    assert main(["where", "0x1", "--lib", str(lib)]) == 1
    assert capsys.readouterr().out.count(STRIPPED_NOTE) == 1


def test_an_address_needs_one_library(capsys):
    assert main(["where", "0x1234"]) == 2
    assert "--lib" in capsys.readouterr().err


# -- a system library and its debug package -----------------------------------------------------------
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def test_a_stripped_system_library_is_read_through_usr_lib_debug_build_id(capsys):
    """libc.so.6 is stripped; libc6-dbg puts its .symtab and DWARF under /usr/lib/debug/.build-id."""
    if not os.path.exists(LIBC):
        pytest.skip("no x86-64 Debian libc here")
    index = LibraryIndex.open(LIBC)
    if not index.symtab_elsewhere:
        pytest.skip("libc6-dbg is not installed")
    assert index.symtab_from.startswith("/usr/lib/debug/.build-id/")
    # _int_malloc is local: only the debug file's symbol table knows it.
    assert main(["where", "_int_malloc", "--lib", LIBC]) == 0
    out = capsys.readouterr().out
    assert f"(symbols and DWARF from {index.symtab_from})" in out and "stripped" not in out
    assert main(["where", "_int_malloc", "--lib", LIBC, "--json"]) == 0
    (m,) = json.loads(capsys.readouterr().out)["matches"]
    theirs = addr2line(Path(LIBC), [m["address"]])[m["address"]]
    mine = [f"{m['file']}:{m['line']}"] + ([f"{m['call_file']}:{m['call_line']}"] if m["inlined"] else [])
    assert [x.split(" (discriminator")[0] for x in theirs[1::2]][: len(mine)] == mine
    assert main(["where", hex(m["address"] + 16), "--lib", LIBC]) == 0
    assert capsys.readouterr().out.startswith(f"{m['address'] + 16:#x} in libc.so.6: _int_malloc+0x10")


# -- the debug extension ----------------------------------------------------------------------------
def addr2line(lib: Path, addresses: list[int]) -> dict[int, list[str]]:
    out = subprocess.run(["addr2line", "-f", "-C", "-i", "-a", "-e", str(lib), *map(hex, addresses)],
                         capture_output=True, text=True, check=True).stdout
    blocks: dict[int, list[str]] = {}
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]{16}", line):
            current = blocks[int(line, 16)] = []
        else:
            current.append(line)
    return blocks


def function_ranges(lib: Path) -> list[tuple[int, int]]:
    nm = subprocess.run(["nm", "-S", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    out = []
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW" and int(parts[1], 16):
            out.append((int(parts[0], 16), int(parts[1], 16)))
    return sorted(set(out))


def primary_file_quirk(ours: list[str], theirs: list[str]) -> bool:
    """binutils 2.40 reads DWARF 5's initial file register as file 0 (the unit's source) where the
    standard (and gdb, readelf) say file 1. Same function and line, only that file differs."""
    return (len(ours) == len(theirs) == 2 and ours[0] == theirs[0]
            and ours[1].rsplit(":", 1)[1] == theirs[1].rsplit(":", 1)[1]
            and theirs[1].startswith(str(ROOT / "scripts" / "debug_ext" / "pttrace_demo.cpp")))


def test_debug_ext_lines_agree_with_addr2line(debug_ext):
    ranges = function_ranges(debug_ext)
    addresses = sorted({a for start, size in ranges for a in (start, start + size // 2, start + size - 1)})
    assert len(addresses) > 3000
    ours = symbols.lines_for_addresses(str(debug_ext), addresses)
    theirs = addr2line(debug_ext, addresses)
    quirks = []
    for a in addresses:
        mine = ours[a].addr2line_lines() if ours[a] else ["??", "??:0"]
        if mine == theirs[a]:
            continue
        alone = addr2line(debug_ext, [a])[a]  # addr2line reuses names across a batch
        if mine == alone:
            continue
        assert primary_file_quirk(mine, alone), (hex(a), mine, alone)
        quirks.append(a)
    assert len(quirks) < len(addresses) // 100
    if quirks and shutil.which("gdb"):
        # gdb agrees with us where addr2line differs.
        a = quirks[0]
        gdb = run_child(["gdb", "-batch", "-nx", "-ex", f"info line *{a:#x}", str(debug_ext)],
                        capture_output=True, text=True, timeout=60).stdout
        assert f'of "{ours[a].file}"' in gdb, gdb


def test_kernel_and_boxing_templates_have_code_and_declaration_lines(debug_ext, capsys):
    source = ROOT / "scripts" / "debug_ext" / "pttrace_demo.cpp"
    text = source.read_text().splitlines()
    (kernel,) = symbols.find_symbol("pttrace_demo::scale_add_cpu", [str(debug_ext)])
    defined_at = next(i for i, line in enumerate(text, 1) if line.startswith("at::Tensor scale_add_cpu("))
    assert (kernel.file, kernel.line) == (str(source), defined_at)
    assert (kernel.decl_file, kernel.decl_line) == (str(source), defined_at)
    boxed = symbols.find_symbol("c10::impl::make_boxed_from_unboxed_functor::call", [str(debug_ext)])
    assert boxed and all(m.file.endswith("ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h")
                         for m in boxed)
    assert main(["where", "scale_add_cpu", "--lib", str(debug_ext)]) == 0
    out = capsys.readouterr().out
    assert f"code at   {source}:{defined_at}" in out and f"declared  {source}:{defined_at}" in out
    assert RELEASE_NOTE not in out


def test_where_an_address_names_function_and_line(debug_ext, capsys):
    (kernel,) = symbols.find_symbol("pttrace_demo::scale_add_cpu", [str(debug_ext)])
    address = kernel.address + kernel.size // 2
    assert main(["where", hex(address), "--lib", str(debug_ext), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["symbol"]["name"] == kernel.name and data["offset"] == kernel.size // 2
    lines = addr2line(debug_ext, [address])[address]
    assert [data["source"]["function"], f"{data['source']['file']}:{data['source']['line']}"] == \
        [lines[0], lines[1].split(" (discriminator")[0]]


def test_mangled_names_are_those_addr2line_prints_without_demangling(debug_ext):
    ranges = function_ranges(debug_ext)
    addresses = sorted({a for start, size in ranges for a in (start, start + size // 2)})
    ours = symbols.lines_for_addresses(str(debug_ext), addresses)
    out = subprocess.run(["addr2line", "-f", "-i", "-a", "-e", str(debug_ext), *map(hex, addresses)],
                         capture_output=True, text=True, check=True).stdout
    theirs: dict[int, list[str]] = {}
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]{16}", line):
            current = theirs[int(line, 16)] = []
        else:
            current.append(line)
    named = [a for a in addresses if ours[a] is not None and ours[a].mangled is not None]
    assert len(named) > len(addresses) * 0.99
    for a in named:
        assert ours[a].mangled == theirs[a][0], hex(a)
        for k, step in enumerate(ours[a].inlined):
            if step.mangled is not None:
                assert step.mangled == theirs[a][2 * (k + 1)], (hex(a), k)
    assert any(step.mangled for a in named for step in ours[a].inlined)


def test_where_mangled_prints_the_names_gdb_break_and_nm_take(debug_ext, capsys):
    boxed = symbols.find_symbol("c10::impl::make_boxed_from_unboxed_functor::call", [str(debug_ext)])
    nm = subprocess.run(["nm", "--defined-only", str(debug_ext)], capture_output=True, text=True).stdout
    listed = {(int(line.split()[0], 16), line.split()[2]) for line in nm.splitlines() if len(line.split()) == 3}
    assert main(["where", "c10::impl::make_boxed_from_unboxed_functor::call", "--lib", str(debug_ext),
                 "--mangled"]) == 0
    out = capsys.readouterr().out
    for m in boxed:
        assert (m.address, m.mangled) in listed
        assert f"  {m.mangled}  ({m.name})  {m.address:#x}" in out
    assert main(["where", hex(boxed[0].address + 4), "--lib", str(debug_ext), "--mangled"]) == 0
    assert capsys.readouterr().out.startswith(f"{boxed[0].address + 4:#x} in {debug_ext.name}: {boxed[0].mangled}"
                                              f"+0x4  ({boxed[0].name})")


def test_skipping_type_bodies_loses_no_function_of_the_debug_ext(debug_ext):
    # The extension has classes local to functions (std::string's _M_construct::_Guard), whose
    # member functions' code DIEs live inside the class: those must still be found.
    from tracer.symbols.dwarf import DwarfReader
    from tracer.symbols.elffile import ElfFile

    reader = DwarfReader(ElfFile(str(debug_ext)), str(debug_ext))
    for offset in reader.unit_offsets():
        assert reader.decode(offset, skip_types=True)[1].to_payload() == \
            reader.decode(offset, skip_types=False)[1].to_payload()


# -- the recorder on the debug extension ------------------------------------------------------------
DEMO_SOURCE = ROOT / "scripts" / "debug_ext" / "pttrace_demo.cpp"
BOXING_HEADERS = ("ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h",
                  "ATen/core/boxing/impl/WrapFunctionIntoRuntimeFunctor.h")


@pytest.fixture(scope="module")
def debug_ext_recording(debug_ext, tmp_path_factory):
    """``pttrace run --batch --break pttrace_demo::scale_add_cpu scripts/call_debug_ext.py``."""
    from tests.conftest import run_pttrace
    from tracer.session import storage

    session_dir = tmp_path_factory.mktemp("debug-ext-sessions")
    proc = run_pttrace("run", "--batch", "--session-dir", str(session_dir), "--break",
                       "pttrace_demo::scale_add_cpu", str(ROOT / "scripts" / "call_debug_ext.py"), str(debug_ext))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = session_dir.glob("*.jsonl")
    return storage.load(path)


def load_base(kernel, library: Path) -> int:
    """Where the library was mapped: the page-aligned base that puts the kernel's recorded pc inside
    the kernel as our index knows it (st_value, size); the kernel is smaller than a page."""
    (m,) = symbols.find_symbol("pttrace_demo::scale_add_cpu", [str(library)])
    assert m.size < 0x1000
    lo, hi = kernel.address - m.address - m.size + 1, kernel.address - m.address  # base in [lo, hi]
    (base,) = range((lo + 0xFFF) & ~0xFFF, hi + 1, 0x1000)
    return base


@pytest.mark.gdb
@pytest.mark.slow
def test_run_records_dwarf_lines_for_the_kernel_and_boxing_templates_below_callboxed(debug_ext,
                                                                                    debug_ext_recording):
    session = debug_ext_recording
    assert session.info.status == "completed"
    # scale_add three times, then scale_add_twice's two calls through the dispatcher.
    assert len(session.hits) == 5
    frames = session.hits[0].frames
    names = [f.function or "" for f in frames]
    boxed = next(i for i, n in enumerate(names) if n.startswith("c10::Dispatcher::callBoxed("))
    assert frames[boxed].library.endswith("/libtorch_cpu.so") and frames[boxed].file is None  # release wheel
    assert any(n.startswith("torch::jit::invokeOperatorFromPython(") for n in names[:boxed])
    ours = [f for f in frames[boxed + 1:] if f.library == str(debug_ext)]
    assert ours and ours[-1] is frames[-1], "the extension's frames are the innermost ones"

    kernel = frames[-1]
    assert kernel.function.startswith("pttrace_demo::scale_add_cpu")
    # Its name says nothing of a kernel; the boxing adapter calling it does (and the adapters are dispatcher).
    assert kernel.layer == "kernel"
    assert frames[-2].function.startswith("c10::impl::detail::WrapFunctionIntoRuntimeFunctor_")
    assert frames[-2].layer == "dispatcher"
    text = DEMO_SOURCE.read_text().splitlines()
    signature = next(i for i, line in enumerate(text, 1) if line.startswith("at::Tensor scale_add_cpu("))
    # A breakpoint on a function stops after its prologue: at the first line of its body.
    assert (kernel.file, kernel.line) == (str(DEMO_SOURCE), signature + 1)

    templates = [f for f in ours[:-1]]
    assert any("make_boxed_from_unboxed_functor<" in f.function for f in templates)
    assert any("wrap_kernel_functor_unboxed_<" in f.function for f in templates)
    for f in templates:
        assert f.file and f.file.endswith(BOXING_HEADERS) and "/torch/include/" in f.file, (f.function, f.file)
        assert f.line

    # Every line gdb recorded is what binutils and our own DWARF reader say at that pc (a caller's
    # line is looked up at its return address - 1, inside the call instruction).
    base = load_base(kernel, debug_ext)
    pcs = [f.address - base - (0 if f is kernel else 1) for f in ours]
    reference = addr2line(debug_ext, pcs)
    mine = symbols.lines_for_addresses(str(debug_ext), pcs)
    for f, pc in zip(ours, pcs):
        sym, _offset = symbols.symbol_at(str(debug_ext), pc)
        assert sym.kind == "function" and not sym.plt
        # addr2line -i lists the innermost location first; at -O0 nothing is inlined.
        assert reference[pc][1].split(" (discriminator")[0] == f"{f.file}:{f.line}", (f.function, reference[pc])
        assert (mine[pc].file, mine[pc].line) == (f.file, f.line)


@pytest.mark.gdb
@pytest.mark.slow
def test_export_of_the_debug_ext_session_links_torch_headers_and_quotes_the_kernel(debug_ext_recording, tmp_path):
    from tests.conftest import run_pttrace

    session = debug_ext_recording
    out = tmp_path / "notes.md"
    proc = run_pttrace("export", str(session.path), "-o", str(out), env={"XDG_CACHE_HOME": SHARED_XDG})
    assert proc.returncode == 0, proc.stderr
    md = out.read_text()
    commit = session.info.torch_git_version
    assert commit and re.fullmatch(r"[0-9a-f]{40}", commit)
    for header in BOXING_HEADERS:
        assert f"https://github.com/pytorch/pytorch/blob/{commit}/aten/src/{header}#L" in md, header
    kernel_line = session.hits[0].frames[-1].line
    assert f"`scripts/debug_ext/pttrace_demo.cpp:{kernel_line}`" in md
    # The kernel's source is quoted around its line, and our extension is not linked to GitHub.
    assert f"> {kernel_line}    TORCH_CHECK(a.sizes() == b.sizes()" in md
    assert "github.com/pytorch/pytorch/blob/" + commit + "/scripts/" not in md


def test_a_library_without_dwarf_is_heavy_from_16_mb_with_dwarf_from_100_mb(torch_libs, tmp_path):
    """gdb gets libtorch_python.so (30 MB, symbol table only) as unwind tables, named by our index; a
    library as big with DWARF keeps gdb's own reading (its inlined frames, file:line)."""
    from tracer.recorder import resolve

    python_lib = by_name(torch_libs, "libtorch_python")
    assert resolve.is_heavy(by_name(torch_libs, "libtorch_cpu")) and resolve.is_heavy(python_lib)
    assert not resolve.is_heavy(by_name(torch_libs, "libc10"))  # 1.5 MB: gdb reads it in ~0.03 s
    tiny = tmp_path / "tiny.bin"
    tiny.write_bytes(b"\0" * 16)
    copy = tmp_path / "libwith_dwarf.so"
    subprocess.run(["objcopy", f"--add-section=.debug_info={tiny}", f"--add-section=.debug_line={tiny}",
                    python_lib, str(copy)], check=True)
    assert os.path.getsize(copy) >= resolve.HEAVY_SYMBOL_TABLE and not resolve.is_heavy(str(copy))
