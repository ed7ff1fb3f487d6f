"""A small build of the full-size debug-library generator (bench/gen_big_debug.py: three units shaped like
torch's, deep inlined template chains, every header's debug types): pttrace's answers equal
``addr2line -f -C -i``, and a breakpoint in a big library of the user's own is set from pttrace's index
while gdb gets the library as unwind tables only, its frames named with DWARF file:line by pttrace.

The size that makes a library "big" (resolve.HEAVY_LIBRARY, 100 MB) is stood in for by ``--cfi-lib``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_pttrace
from tests.support import allowance, run_child, stop_process
from tracer import symbols
from tracer.session import storage
from tracer.errors import SymbolError
from tracer.symbols.elf_index import LibraryIndex

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not all(shutil.which(t) for t in ("g++", "addr2line", "nm", "gdb")),
                                reason="needs g++, binutils and gdb")


@pytest.fixture(scope="module")
def biglib() -> Path:
    env = dict(os.environ)
    env.setdefault("PTTRACE_CACHE", str(ROOT / "tests" / ".cache"))
    proc = run_child([sys.executable, str(ROOT / "bench" / "gen_big_debug.py"), "--units", "3", "--types", "60",
                      "--small"], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


def addr2line(lib: Path, addresses: list[int]) -> dict[int, list[str]]:
    out = subprocess.run(["addr2line", "-f", "-C", "-i", "-a", "-e", str(lib), *(hex(a) for a in addresses)],
                         capture_output=True, text=True, check=True).stdout
    blocks: dict[int, list[str]] = {}
    current = None
    for line in out.splitlines():
        if re.fullmatch(r"0x[0-9a-f]{16}", line):
            current = int(line, 16)
            blocks[current] = []
        else:
            blocks[current].append(line)
    return blocks


def gdb_lines(lib: Path, addresses: list[int]) -> dict[int, str | None]:
    """gdb's ``info line`` at each address, one gdb for them all (each reads the library's DWARF once)."""
    commands = [arg for a in addresses for arg in ("-ex", f"echo @{a:#x}\\n", "-ex", f"info line *{a:#x}")]
    out = run_child(["gdb", "-nx", "-batch", *commands, str(lib)], capture_output=True, text=True,
                    timeout=60).stdout
    found: dict[int, str | None] = {a: None for a in addresses}
    for part in out.split("@0x")[1:]:
        address, _, said = part.partition("\n")
        m = re.search(r'Line (\d+) of "([^"]+)"', said)
        found[int(address, 16)] = f"{m.group(2)}:{m.group(1)}" if m else None
    return found


def functions(lib: Path) -> dict[str, tuple[int, int]]:
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and parts[2] in "tTwW" and int(parts[1], 16):
            found[parts[3]] = (int(parts[0], 16), int(parts[1], 16))
    return found


def test_lines_agree_with_addr2line_in_deeply_inlined_code(biglib, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    LibraryIndex._open.clear()
    symbols._readers.clear()
    funcs = functions(biglib)
    addresses = set()
    for name, (start, size) in funcs.items():
        # Every byte of the kernels and the hot function (eight template steps inlined into each other),
        # every 5th byte of the rest (the standard library's instantiations).
        step = 1 if ("kernel_" in name or "tick_" in name or name.startswith("bigdebug_")) else 5
        addresses.update(range(start, start + size, step))
    addresses = sorted(addresses)
    ours = symbols.lines_for_addresses(str(biglib), addresses)
    theirs = addr2line(biglib, addresses)
    deepest = max(len(ours[a].inlined) for a in addresses if ours[a])
    assert deepest >= 8, deepest  # Stage<8>::step ... Stage<1>::step inside tick_/kernel_
    bad, names_differ, ask_gdb = [], [], []
    for a in addresses:
        mine = ours[a].addr2line_lines() if ours[a] else ["??", "??:0"]
        if mine == theirs[a]:
            continue
        if len(mine) == len(theirs[a]) and mine[1::2] == theirs[a][1::2]:
            names_differ.append(a)  # same file:line at every level: see below
            continue
        alone = addr2line(biglib, [a])[a]
        if mine == alone:
            continue
        # binutils 2.40 gives a DWARF 5 sequence that sets no file the previous sequence's file (DWARF:
        # file 1); there only the innermost file differs, and gdb's `info line` agrees with pttrace.
        if mine[0] == alone[0] and mine[2:] == alone[2:] and mine[1].rsplit(":", 1)[1] == alone[1].rsplit(":", 1)[1]:
            ask_gdb.append((a, mine, alone))
            continue
        bad.append((hex(a), mine, alone))
    gdb_says = gdb_lines(biglib, [a for a, _, _ in ask_gdb]) if ask_gdb else {}
    bad += [(hex(a), mine, alone) for a, mine, alone in ask_gdb
            if re.sub(r" \(discriminator \d+\)$", "", mine[1]) != gdb_says[a]]
    assert not bad, bad[:3]
    # addr2line -i in one batch names inlined callers after what it learnt for earlier addresses; asked
    # alone it names them as pttrace does. Checked on a spread of them (each is a process).
    for a in names_differ[:: max(1, len(names_differ) // 25)]:
        assert ours[a].addr2line_lines() == addr2line(biglib, [a])[a], hex(a)
    assert len(addresses) > 5000


def mangled(lib: Path, *parts: str) -> str:
    """The one mangled name whose demangled form holds every one of ``parts``."""
    names = subprocess.run(["nm", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    plain = [ln.split()[-1] for ln in names.splitlines() if len(ln.split()) == 3]
    demangled = subprocess.run(["c++filt"], input="\n".join(plain), capture_output=True, text=True,
                               check=True).stdout.splitlines()
    found = {m for m, d in zip(plain, demangled) if all(p in d for p in parts)}
    assert len(found) == 1, (parts, found)
    return found.pop()


# Breakpoints in functions called from inlined code, so that the caller's frame (a return address) is
# in inlined code, and at an entry that is itself inlined code: kernel_1_0's std::for_each ->
# std::function::operator() calls the lambda's _M_invoke, whose first instruction is inside
# vector::begin() inlined in the lambda inlined through std::__invoke_r; std::sort -> __sort ->
# __final_insertion_sort, inlined in kernel_1_0, call __insertion_sort. Mangled: --break takes no spaces.
INLINED_BREAKS = (("_M_invoke", "kernel_1_0(int)::{lambda(big1::Record1 const&)#2}"),
                  ("__insertion_sort<", "kernel_1_0(int)::{lambda"))


@pytest.fixture(scope="module")
def run_cache() -> Path:
    """pttrace's cache for the module's recordings: the suite's own (the environment's), where its other
    recordings built the index of torch's libraries and their unwind-table copies (~10-20 s of CPU, 30-40 s
    of wall at load 10, that this module's first recording spent again in a cache of its own). What a test
    claims of a first run is per command (stack_libraries.py keeps the libraries by the command line): the
    module runs its own copy of the target script (``target``), a command no run before it used."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    """bench/call_bigdebug.py copied to a directory of this module's own: its commands are new to the cache."""
    copy = tmp_path_factory.mktemp("target") / "call_bigdebug.py"
    shutil.copy(ROOT / "bench" / "call_bigdebug.py", copy)
    return copy


def record_big(biglib: Path, target: Path, inlined: list[str], sessions: Path, log: Path, cache: Path):
    """`pttrace run` of kernel_1_0 once (the lambda 3 times, the insertion sort once under it), then the hot
    function three times, the library standing in for a big one: (the process, its one session file)."""
    proc = run_pttrace("run", "--batch", "-b", "big1::kernel_1_0", "-b", "big1::tick_1", *(f"-b{m}" for m in inlined),
                       "--cfi-lib", biglib.name, "--log", str(log), "--session-dir", str(sessions), "--",
                       str(target), str(biglib), "1", "3", "--kernel-too", env={"XDG_CACHE_HOME": str(cache)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = sorted(sessions.glob("*.jsonl"))
    assert len(files) == 1, proc.stdout
    return proc, files[0]


@pytest.fixture(scope="module")
def big_recording(biglib, tmp_path_factory, run_cache, target):
    """The first run of that command (``record_big``): its hits, status, records, the inlined breakpoints,
    its session file and its log."""
    session_dir = tmp_path_factory.mktemp("sessions")
    inlined = [mangled(biglib, *parts) for parts in INLINED_BREAKS]
    log = session_dir.parent / (session_dir.name + ".log")
    proc, path = record_big(biglib, target, inlined, session_dir, log, run_cache)
    session = storage.load(path)
    hits = [hit.to_dict() for hit in session.hits]
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    return proc, hits, session.info.status, raw, inlined, path, log


def test_the_breakpoint_is_set_from_the_index_and_gdb_reads_no_dwarf(biglib, big_recording):
    proc, hits, status, raw, inlined, _path, _log = big_recording
    assert status == "completed"
    assert [h["breakpoint"] for h in hits] == ["big1::kernel_1_0", inlined[1], *[inlined[0]] * 3,
                                               *["big1::tick_1"] * 3]
    warnings = [r["message"] for r in raw if r.get("type") == "warning"]
    assert any(biglib.name in w and "does not read" in w and "big1::tick_1" in w for w in warnings), warnings
    bps = {}
    for r in raw:
        if r.get("type") == "breakpoint":
            bps[r["spec"]] = r  # the last record of each is what views show
    assert [loc["function"] for loc in bps["big1::tick_1"]["locations"] if loc.get("address")] \
        == ["big1::tick_1(double, int)"], bps["big1::tick_1"]
    assert not bps["big1::tick_1"].get("error")
    assert "never resolved" not in proc.stdout.split("big1::tick_1", 1)[1].split("breakpoint", 1)[0]


def physical_frames(frames: list[dict], lib: Path) -> list[tuple[int, list[dict]]]:
    """The frames of ``lib`` grouped as one pc each: (the pc looked up, its frames innermost first). A
    caller's pc is a return address, looked up at pc - 1 (as addr2line's users and gdb do)."""
    real = os.path.realpath(lib)
    groups: list[list[dict]] = []
    for f in frames:
        if not (f.get("library") and os.path.realpath(f["library"]) == real):
            continue
        if f.get("inlined") and groups and groups[-1][0]["offset"] == f["offset"]:
            groups[-1].append(f)
        else:
            groups.append([f])
    innermost = frames[-1]["offset"] if frames and frames[-1].get("offset") is not None else None
    out = []
    for i, group in enumerate(groups):
        pc = group[0]["offset"] - (0 if i == len(groups) - 1 and group[0]["offset"] == innermost else 1)
        out.append((pc, group[::-1]))
    return out


def test_frames_of_the_big_library_are_addr2lines_answer_inlined_frames_included(biglib, big_recording):
    """Every frame pttrace names in the big library, one per function addr2line -f -C -i lists for its pc
    (gdb, given the library as unwind tables only, has one frame there): the inlined functions' frames
    follow the frame they are inlined in, each with its name and file:line."""
    _proc, hits, _end, _raw, inlined, _path, _log = big_recording
    checked, deepest = set(), {}
    for hit in hits:
        frames = hit["frames"]
        names = [f.get("function") or "" for f in frames]
        assert any("c10::Dispatcher" in n for n in names), "the library's code runs under torch's dispatcher"
        for pc, group in physical_frames(frames, biglib):
            assert group[-1].get("offset") is not None and not group[-1].get("inlined"), group[-1]
            assert all(f.get("inlined") for f in group[:-1]), group
            chain = addr2line(biglib, [pc])[pc]
            theirs = list(zip(chain[0::2], [re.sub(r" \(discriminator \d+\)$", "", x) for x in chain[1::2]]))
            mine = [(f["function"], f"{f['file']}:{f['line']}") for f in group]
            assert [m[1] for m in mine] == [t[1] for t in theirs], (hex(pc), mine, theirs)
            # The inlined functions' names too (the frame they are inlined in is named from the symbol
            # table, as before). For inlined code whose function has no linkage name, addr2line names
            # the innermost level after the enclosing ELF symbol (bfd's slip): pttrace gives DWARF's name.
            skip = 1 if len(group) > 1 and theirs[0][0] == theirs[-1][0] else 0
            assert [m[0] for m in mine][skip:-1] == [t[0] for t in theirs][skip:-1], (hex(pc), mine, theirs)
            checked.add(pc)
            deepest[hit["breakpoint"]] = max(deepest.get(hit["breakpoint"], 0), len(group) - 1)
    assert len(checked) >= 6, checked
    # The lambda's entry is 5 functions deep in inlined code, its caller 2; the insertion sort's caller 3.
    assert deepest == {"big1::kernel_1_0": 0, "big1::tick_1": 0, inlined[0]: 5, inlined[1]: 3}, deepest


GDB_FRAMES = """
import json
import gdb


class Recorder(gdb.Breakpoint):
    def stop(self):
        frames, f = [], gdb.newest_frame()
        while f is not None:
            sal = f.find_sal()
            frames.append({"name": f.name(), "inlined": f.type() == gdb.INLINE_FRAME, "pc": f.pc(),
                           "library": gdb.solib_name(f.pc()), "line": sal.line,
                           "file": sal.symtab.fullname() if sal.symtab else None})
            try:
                f = f.older()
            except gdb.error:  # past the library, in one whose symbols (and CFI) gdb was not asked to read
                break
        print("FRAMES " + json.dumps(frames), flush=True)
        return False


def at_load(event):
    if event.new_objfile.filename.endswith("LIB_NAME"):
        base = int(gdb.parse_and_eval("(long)&bigdebug_unit_1")) - UNIT_OFFSET
        for offset in OFFSETS:
            Recorder("*%#x" % (base + offset))  # a user breakpoint: gdb shows the inlined frames at its pc


gdb.events.new_objfile.connect(at_load)
# Only the library's symbols, added as it loads: its frames are what is compared, and reading every
# library's (torch's) made this run 8.6 s of CPU, 2.9 s without, the same frames (load 8).
gdb.execute("set auto-solib-add off")
gdb.execute("catch load LIB_NAME")
gdb.execute("run")
gdb.execute("sharedlibrary LIB_NAME")
gdb.execute("continue")
"""


def test_recorded_paths_are_gdbs_backtrace_on_the_full_dwarf(biglib, big_recording, tmp_path):
    """gdb reading the library's DWARF, stopped where pttrace stopped: the same frames in the library,
    one for one (inlined or not, the same function), at the same file:line, but for the innermost line
    (gdb's choice among the rows at one address differs from addr2line's, which pttrace follows)."""
    _proc, hits, _end, _raw, inlined, _path, _log = big_recording
    syms = {ln.split()[2]: int(ln.split()[0], 16)
            for ln in subprocess.run(["nm", "--defined-only", str(biglib)], capture_output=True, text=True,
                                     check=True).stdout.splitlines() if len(ln.split()) == 3}
    script = tmp_path / "frames.py"
    script.write_text(GDB_FRAMES.replace("LIB_NAME", biglib.name).replace("UNIT_OFFSET", str(syms["bigdebug_unit_1"]))
                      .replace("OFFSETS", repr([syms[m] for m in inlined])))
    proc = run_child(["gdb", "-nx", "-batch", "-ex", f"source {script}", "--args", sys.executable,
                      str(ROOT / "bench" / "call_bigdebug.py"), str(biglib), "1"], capture_output=True,
                     text=True, timeout=300)
    backtraces = [json.loads(ln[7:]) for ln in proc.stdout.splitlines() if ln.startswith("FRAMES ")]
    assert len(backtraces) == 4, proc.stdout[-2000:] + proc.stderr[-2000:]  # the insertion sort, the lambda 3x
    real = os.path.realpath(biglib)

    def base_name(name: str) -> str:
        # gdb names a function without parameters and qualifies one that has no linkage name (std::sort<...>),
        # addr2line and pttrace give parameters and DWARF's name (sort<...>): compare the last component.
        while re.search(r"<[^<>]*>|\([^()]*\)", name):
            name = re.sub(r"<[^<>]*>|\([^()]*\)", "", name)
        return name.removesuffix(" const").rsplit("::", 1)[-1].split()[-1]

    hits = [h for h in hits if h["breakpoint"] in inlined]
    for hit, gdb_frames in zip(hits, backtraces):
        theirs = [f for f in reversed(gdb_frames) if f["library"] and os.path.realpath(f["library"]) == real]
        mine = [f for f in hit["frames"] if f.get("library") and os.path.realpath(f["library"]) == real]
        assert [(bool(f.get("inlined")), base_name(f["function"])) for f in mine] \
            == [(f["inlined"], base_name(f["name"])) for f in theirs], (mine, theirs)
        assert [(f["file"], f["line"]) for f in mine][:-1] == [(f["file"], f["line"]) for f in theirs][:-1]


def test_compressed_sections_are_inflated_to_a_mapped_cache_file(biglib, tmp_path, monkeypatch):
    """The -gz variant: a big compressed .debug_info is inflated a chunk at a time into the cache and
    mapped (here every section counts as big), answers unchanged; a re-run reads the file, not the zlib."""
    from tracer.symbols import elffile

    compressed = biglib.with_name(biglib.stem + ".gz.so")
    assert "C" in subprocess.run(["readelf", "-SW", str(compressed)], capture_output=True, text=True,
                                 check=True).stdout.split(".debug_info", 1)[1].splitlines()[0]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(elffile, "INFLATE_TO_DISK", 1)
    monkeypatch.setattr(elffile, "INFLATE_CHUNK", 4096)  # many chunks: the loop's edges are exercised
    LibraryIndex._open.clear()
    symbols._readers.clear()
    start, size = functions(biglib)["big2::tick_2(double, int)"]
    addresses = list(range(start, start + size))
    ours = symbols.lines_for_addresses(str(compressed), addresses)
    plain = {a: r.addr2line_lines() for a, r in symbols.lines_for_addresses(str(biglib), addresses).items()}
    assert {a: r.addr2line_lines() for a, r in ours.items()} == plain
    inflated = sorted((tmp_path / "cache" / "pttrace" / "index").glob("*.debug_info.inflated"))
    assert len(inflated) == 1
    info = next(ln for ln in subprocess.run(["readelf", "-SW", str(biglib)], capture_output=True, text=True,
                                            check=True).stdout.splitlines() if " .debug_info " in ln)
    assert inflated[0].stat().st_size == int(info.split(".debug_info")[1].split()[3], 16)
    # A damaged stream is one sentence, and leaves no partial file behind.
    bad = tmp_path / "bad.so"
    raw = bytearray(compressed.read_bytes())
    sec = next(ln for ln in subprocess.run(["readelf", "-SW", str(compressed)], capture_output=True, text=True,
                                           check=True).stdout.splitlines() if " .debug_info " in ln)
    offset = int(sec.split(".debug_info")[1].split()[2], 16)
    raw[offset + 24 + 100: offset + 24 + 400] = b"\xff" * 300
    bad.write_bytes(bytes(raw))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache2"))  # same build-id and size: a fresh cache
    with pytest.raises(SymbolError) as err:
        symbols.line_for_address(str(bad), start)
    # zlib may give bytes for a damaged stream without a word until its end: then the DWARF read from
    # them does not decode.
    assert any(why in err.value.message for why in ("does not decompress", "decompresses to", "corrupt DWARF"))
    assert "\n" not in err.value.message
    assert not list((tmp_path / "cache2" / "pttrace" / "index").glob("*.tmp"))
    assert not list((tmp_path / "cache2" / "pttrace" / "index").glob("*.inflating"))


def test_a_cold_lookup_inflates_the_compressed_section_only_as_far_as_its_unit(biglib, tmp_path, monkeypatch):
    """A cold lookup in the first unit inflates .debug_info up to that unit (and a bit), into a cache file
    that the next lookups read, in this process or another, and go on from: the section never whole in
    memory, and not inflated whole on disk for an address near its start."""
    from tracer.symbols import elffile

    compressed = biglib.with_name(biglib.stem + ".gz.so")
    index = tmp_path / "cache" / "pttrace" / "index"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(elffile, "INFLATE_TO_DISK", 1)  # every compressed section counts as big

    def fresh() -> None:  # as a new process would: no reader, no index, no unit tables
        LibraryIndex._open.clear()
        symbols._readers.clear()
        for p in index.glob("*"):
            if p.suffix in (".cu", ".units", ".aranges"):
                p.unlink()

    funcs = functions(biglib)
    units = [sorted(range(start, start + size, 3)) for start, size in
             (funcs[f"big{u}::kernel_{u}_0(int)"] for u in range(3))]
    plain = {a: r.addr2line_lines() for u in units for a, r in symbols.lines_for_addresses(str(biglib), u).items()}
    info_size = int(next(ln for ln in subprocess.run(["readelf", "-SW", str(biglib)], capture_output=True, text=True,
                                                     check=True).stdout.splitlines() if " .debug_info " in ln)
                    .split(".debug_info")[1].split()[3], 16)
    fresh()
    assert {a: r.addr2line_lines() for a, r in symbols.lines_for_addresses(str(compressed), units[0]).items()} \
        == {a: plain[a] for a in units[0]}
    (partial,) = index.glob("*.debug_info.inflating")
    assert not list(index.glob("*.debug_info.inflated"))
    written = partial.stat().st_blocks * 512
    assert written < info_size * 0.7, (written, info_size)  # unit 0 and 1 MB of slack, of 3 units

    # Another lookup there reads the file: no zlib at all (every other section is in the cache whole).
    fresh()

    def no_zlib(*args, **kwargs):
        raise AssertionError("inflated again")

    with monkeypatch.context() as m:
        m.setattr(elffile.zlib, "decompressobj", no_zlib)
        assert symbols.line_for_address(str(compressed), units[0][5]).addr2line_lines() == plain[units[0][5]]
    # The last unit: inflated on from where the file stops (a new process inflates again to there,
    # writing only what is new), then the file is whole and renamed.
    fresh()
    assert {a: r.addr2line_lines() for a, r in symbols.lines_for_addresses(str(compressed), units[2]).items()} \
        == {a: plain[a] for a in units[2]}
    assert not list(index.glob("*.debug_info.inflating"))
    (whole,) = index.glob("*.debug_info.inflated")
    assert whole.stat().st_size == info_size
    fresh()
    assert {a: r.addr2line_lines() for a, r in symbols.lines_for_addresses(str(compressed), units[1]).items()} \
        == {a: plain[a] for a in units[1]}


def _frame_rows(app, lib: Path) -> list[tuple[int, object]]:
    """(row, frame) of each call-path row showing a frame of ``lib``."""
    real = os.path.realpath(lib)
    frames = app.call_path.frames
    return [(r, frames[row.start]) for r, row in enumerate(app.call_path._rows)
            if row.kind == "frame" and frames[row.start].library
            and os.path.realpath(frames[row.start].library) == real]


async def _each_frame_opens_its_source(pilot, lib: Path) -> int:
    """Put the cursor on each frame of ``lib`` in the call path: the source pane shows its file, the
    frame's line marked. Returns how many of them were inlined frames."""
    from tests.tui.support import wait_until
    from tracer.tui.widgets.source import SourcePane

    app = pilot.app
    pane = app.query_one(SourcePane)
    path = app.call_path
    path.focus()
    rows = _frame_rows(app, lib)
    assert rows
    for row, frame in rows:
        path.move_cursor(row=row)
        await wait_until(pilot, lambda: pane.frame is frame)
        want = Path(frame.file).read_text().splitlines()[frame.line - 1].strip()
        text = _pane_text(pane)
        assert f"▶{frame.line} " in text and want[:40] in text.split(f"▶{frame.line} ", 1)[1].splitlines()[0], \
            (frame.function, frame.file, frame.line, text[:2000])
        assert pane.border_title.endswith(f"{os.path.basename(frame.file)}:{frame.line}"), pane.border_title
    return sum(1 for _, f in rows if f.inlined)


def _pane_text(pane) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    console.print(pane.shown)
    return console.export_text()


def test_the_tui_opens_the_source_of_every_frame_of_the_big_library_inlined_ones_too(biglib, big_recording,
                                                                                  tmp_path, monkeypatch):
    """`pttrace view` of the recording: the lambda's hit, each of its frames in the library (the kernel,
    std::for_each and std::function::operator() inlined in it, the lambda's handler and the five functions
    inlined at its entry) opens its file at its line. What vouches for a file is the DWARF of the one unit
    holding the frame's pc, not every unit's (in a full debug build that reads all of it: minutes)."""
    from tests.tui.support import run_pilot, wait_until
    from tracer.symbols import source_names
    from tracer.symbols.dwarf.reader import DwarfReader
    from tracer.tui.app import make_app
    from tracer.tui.sources import SessionSource

    _proc, _hits, _end, _raw, inlined, session_path, _log = big_recording
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nothing decoded yet
    LibraryIndex._open.clear()
    symbols._readers.clear()
    source_names.dwarf_file_names.cache_clear()
    source_names.dwarf_files_at.cache_clear()

    def every_unit(self):
        raise AssertionError("every unit of the library walked to vouch for one frame's file")

    monkeypatch.setattr(DwarfReader, "unit_offsets", every_unit)

    async def scenario():
        app = make_app(SessionSource.open(session_path))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.call_path.hit is not None)
            await pilot.press("down", "down")  # hit 3: the lambda
            await wait_until(pilot, lambda: app.call_path.hit.seq == 3)
            assert app.call_path.hit.breakpoint == inlined[0]
            assert await _each_frame_opens_its_source(pilot, biglib) == 7
            await pilot.press("q")

    run_pilot(scenario(), timeout=60)


@pytest.mark.gdb
def test_the_live_tui_opens_the_source_of_inlined_frames_of_the_big_library(biglib, tmp_path, monkeypatch, run_cache,
                                                                            target):
    """The same while recording (`pttrace run` with its TUI): the hits arrive with their frames named and
    the inlined ones in place, and the source pane opens them."""
    from tests.tui.support import run_pilot, wait_until
    from tracer.recorder import TraceConfig
    from tracer.tui.app import make_app
    from tracer.tui.sources import LiveSource

    monkeypatch.setenv("XDG_CACHE_HOME", str(run_cache))
    monkeypatch.setenv("PTTRACE_CFI_LIBS", biglib.name)
    spec = mangled(biglib, *INLINED_BREAKS[1])  # the insertion sort: 3 functions inlined at its caller's pc
    config = TraceConfig(breakpoints=(spec,), python=sys.executable, script=str(target),
                         script_args=(str(biglib), "1"), session_dir=tmp_path, live=True, forward_output=False)

    async def scenario():
        app = make_app(LiveSource(config))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.call_path.hit is not None, timeout=120, step=0.2)
            assert await _each_frame_opens_its_source(pilot, biglib) == 3
            await wait_until(pilot, lambda: app.state.status is not None, timeout=60, step=0.2)
            await pilot.press("q")

    run_pilot(scenario(), timeout=180)


LOOKUP_UNIT = """
import json, sys
from tracer.symbols import elffile
elffile.INFLATE_TO_DISK, elffile.INFLATE_CHUNK = 1, 4096  # every section big; many small chunks: many turns
from tracer import symbols
found = symbols.lines_for_addresses(sys.argv[1], [int(a) for a in sys.argv[2:]])
print(json.dumps({a: r.addr2line_lines() for a, r in found.items()}))
"""


def test_processes_inflating_the_same_section_at_once_take_turns(biglib, tmp_path):
    """Three processes with one cache, each wanting a different unit of the compressed section at the same
    time: each answer is right, and the section ends up whole in the cache, once."""
    compressed = biglib.with_name(biglib.stem + ".gz.so")
    funcs = functions(biglib)
    units = [[str(a) for a in range(start, start + size, 7)] for start, size in
             (funcs[f"big{u}::kernel_{u}_0(int)"] for u in (2, 0, 1))]
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", LOOKUP_UNIT, str(compressed), *u], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for u in units]
    try:
        outs = [p.communicate(timeout=allowance(120)) for p in procs]
    finally:
        for p in procs:
            stop_process(p)
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    for u, (out, _err) in zip(units, outs):
        plain = symbols.lines_for_addresses(str(biglib), [int(a) for a in u])
        assert json.loads(out) == {a: plain[int(a)].addr2line_lines() for a in u}
    index = tmp_path / "cache" / "pttrace" / "index"
    assert not list(index.glob("*.debug_info.inflating")) and len(list(index.glob("*.debug_info.inflated"))) == 1


def test_a_rerun_reads_the_libraries_its_last_stacks_needed_as_they_load(biglib, tmp_path, run_cache, target,
                                                                          big_recording):
    """A hit whose stack passes through small libraries gdb was not given (libffi, _ctypes: the ctypes call
    into the library) is walked again once each is read; a re-run of the same command reads them as they
    load (stack_libraries.py) and records the same frames without those walks. The first run is the module's
    recording (its command new to the cache: ``target``); this test runs it again."""
    _proc, first_hits, _end, _raw, inlined, _path, first_log_path = big_recording
    proc, path = record_big(biglib, target, inlined, tmp_path / "sessions", tmp_path / "log.txt", run_cache)
    hits = [hit.to_dict() for hit in storage.load(path).hits]
    first_log, again_log = first_log_path.read_text(), (tmp_path / "log.txt").read_text()
    asked = set(re.findall(r"gdb reads the symbols of (\S+) \(a stack passes through it\)", first_log))
    assert any("libffi" in p for p in asked) and any("_ctypes" in p for p in asked), first_log[-3000:]
    assert not re.search(r"a stack passes through it\)", again_log), again_log[-3000:]
    assert set(re.findall(r"a stack of this command's last run passed through (\S+)", again_log)) == asked

    def frames(hit: dict) -> list[tuple]:
        return [(f.get("kind"), f.get("function"), f.get("library"), f.get("file"), f.get("line"))
                for f in hit["frames"]]

    assert [h["breakpoint"] for h in hits] == [h["breakpoint"] for h in first_hits]
    assert [frames(h) for h in hits] == [frames(h) for h in first_hits]
    assert any(lib and "_ctypes" in lib for _k, _f, lib, _file, _line in frames(hits[0]))
