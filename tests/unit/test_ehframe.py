"""The unwind rule read through ``.eh_frame_hdr`` (tracer/symbols/ehframe.py) against binutils' own reading
of the same tables: ``readelf --debug-dump=frames-interp`` prints every row of every FDE (where the CFA is,
where each register was saved). Real libraries of torch's wheel; every row of libc10.so, a sample of
libtorch_python.so's, each at its first address, inside it, and as a return address (the row before)."""
from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tracer.symbols.cfi import cfi_copy
from tracer.symbols.ehframe import EhFrame, Unsupported

TORCH_LIB = Path(__import__("importlib.util").util.find_spec("torch").origin).parent / "lib"
_NAMES = {n: i for i, n in enumerate("rax rdx rcx rbx rsi rdi rbp rsp r8 r9 r10 r11 r12 r13 r14 r15 ra".split())}
_FDE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)")

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils' readelf is the oracle")


def readelf_rows(path: Path) -> list[tuple[int, int, tuple, dict]]:
    """(row start, row end, FDE range, {column: rule}) for each row readelf interprets."""
    out = subprocess.run(["readelf", "--debug-dump=frames-interp", str(path)], capture_output=True, text=True,
                         check=True).stdout
    rows: list = []
    fde = cols = None
    for line in out.splitlines():
        m = _FDE.match(line)
        if m:
            fde, cols = (int(m.group(1), 16), int(m.group(2), 16)), None
        elif " CIE" in line:
            fde = None
        elif line.strip().startswith("LOC"):
            cols = line.split()[1:]
        elif fde and cols and re.match(r"^[0-9a-f]{8,16} ", line):
            parts = line.split()
            start = int(parts[0], 16)
            if rows and rows[-1][2] == fde:
                rows[-1] = (rows[-1][0], start, fde, rows[-1][3])
            rows.append((start, fde[1], fde, dict(zip(cols, parts[1:]))))
    return rows


def expected(row: dict, fde: tuple) -> tuple | None:
    """What EhFrame.rule must give for a readelf row; None for a row it leaves to gdb (a DWARF expression)."""
    m = re.match(r"(\w+)\+(\d+)$", row["CFA"])
    rules = [v for k, v in row.items() if k != "CFA"]
    if not m or any(v == "exp" or re.match(r"(v[+-]|r\d)", v) for v in rules):
        return None
    saved = {_NAMES[k]: int(v[1:]) for k, v in row.items() if k in _NAMES and re.match(r"c[+-]\d+$", v)}
    if _NAMES["ra"] not in saved:
        return None  # no return address: the outermost frame, left to gdb
    return _NAMES[m.group(1)], int(m.group(2)), saved, fde[0]


def got(table: EhFrame, address: int, exact: bool) -> tuple | None | str:
    try:
        rule = table.rule(address, exact)
    except Unsupported:
        return "unsupported"
    return None if rule is None else (rule.cfa_reg, rule.cfa_offset, dict(rule.saved), rule.start)


def check(path: Path, sample: int | None) -> int:
    rows = readelf_rows(path)
    if sample is not None:
        rows = random.Random(29).sample(rows, min(sample, len(rows)))
    table = EhFrame(str(path))
    compared = 0
    try:
        for start, end, fde, row in rows:
            want = expected(row, fde)
            if want is None:
                assert got(table, start, True) in ("unsupported", None), (hex(start), row)
                continue
            inside = start + (end - start) // 2
            for address, exact in ((start, True), (inside, True), (inside + 1, False)):
                if start <= address - (0 if exact else 1) < end:
                    assert got(table, address, exact) == want, (path.name, hex(address), exact, row)
                    compared += 1
    finally:
        table.close()
    return compared


def test_every_row_of_libc10_is_read_as_readelf_reads_it():
    assert check(TORCH_LIB / "libc10.so", None) > 20000


def test_a_sample_of_libtorch_python_read_from_its_cfi_only_copy(tmp_path, monkeypatch):
    # The copy pttrace gives gdb holds .eh_frame and .eh_frame_hdr at the library's own addresses.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    copy = Path(cfi_copy(str(TORCH_LIB / "libtorch_python.so")))
    assert copy.stat().st_size < os.path.getsize(TORCH_LIB / "libtorch_python.so") / 4
    rows = readelf_rows(TORCH_LIB / "libtorch_python.so")
    table = EhFrame(str(copy))
    try:
        for start, end, fde, row in random.Random(29).sample(rows, 3000):
            want = expected(row, fde)
            if want is not None:
                assert got(table, start, True) == want, (hex(start), row)
        assert table.text_range()[0] <= rows[0][0] < table.text_range()[1]
    finally:
        table.close()


def test_an_address_no_fde_covers_has_no_rule():
    table = EhFrame(str(TORCH_LIB / "libc10.so"))
    try:
        rows = readelf_rows(TORCH_LIB / "libc10.so")
        first = min(fde[0] for _, _, fde, _ in rows)
        assert table.rule(first - 1) is None  # before the first function with unwind tables
        assert table.rule(0) is None
    finally:
        table.close()


def test_covers_and_next_start_are_readelfs_fde_ranges_around_the_loaders_entry():
    # GIVEN the dynamic loader, whose entry code (glibc's _start, _dl_start_user) no FDE describes, and
    # binutils' list of its FDEs
    loader = Path("/lib64/ld-linux-x86-64.so.2")
    # (binutils 2.40's readelf exits 1 on this file with nothing on stderr, after printing its FDEs: the output
    # is the oracle, checked not to be empty)
    out = subprocess.run(["readelf", "--debug-dump=frames", str(loader)], capture_output=True, text=True).stdout
    ranges = sorted((int(m.group(1), 16), int(m.group(2), 16)) for m in map(_FDE.match, out.splitlines()) if m)
    assert ranges, out[:2000]
    entry = int(re.search(r"Entry point address:\s+0x([0-9a-f]+)",
                          subprocess.run(["readelf", "-h", str(loader)], capture_output=True, text=True,
                                         check=True).stdout).group(1), 16)
    table = EhFrame(str(loader))
    try:
        # THEN an address is covered exactly when readelf's FDEs hold it, around the entry and at each FDE's ends
        for address in {entry, entry + 8, *(x for lo, hi in ranges[:50] for x in (lo, hi - 1, hi))}:
            assert table.covers(address) == any(lo <= address < hi for lo, hi in ranges), hex(address)
        # AND the next FDE above the entry starts where readelf's first range above it does
        assert not table.covers(entry)
        assert table.next_start(entry) == min(lo for lo, _ in ranges if lo > entry)
    finally:
        table.close()
