"""tracer/elfparts.py, which the agent inside gdb and tracer/symbols both read libraries with, against
binutils' own reading of the same files (readelf, objcopy): an oracle pttrace did not write."""
from __future__ import annotations

import mmap
import re
import zlib
from pathlib import Path

import pytest

from tests.support import run_child
from tracer import elfparts

LIBC = Path("/usr/lib/x86_64-linux-gnu/libc.so.6")


def _mapped(path: Path):
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)


def _readelf(*args: str) -> str:
    return run_child(["readelf", *args], capture_output=True, text=True, check=True, timeout=60).stdout


def test_section_headers_and_build_id_are_readelfs():
    data = _mapped(LIBC)
    try:
        found = elfparts.read_sections(data)
        assert found is not None and found.is64 and found.order == "<"
        # readelf -SW: "[Nr] Name Type Address Off Size ES ..." (hex), one line per section
        rows = re.findall(r"^\s*\[\s*(\d+)\]\s+(\S*)\s+\S+\s+([0-9a-f]+) ([0-9a-f]+) ([0-9a-f]+)",
                          _readelf("-SW", str(LIBC)), re.M)
        theirs = [(name, int(addr, 16), int(off, 16), int(size, 16)) for _nr, name, addr, off, size in rows[1:]]
        ours = [(s.name, s.addr, s.offset, s.size) for s in found.items[1:]]
        assert ours == theirs and len(ours) > 20
        (build_id,) = re.findall(r"Build ID: ([0-9a-f]+)", _readelf("-n", str(LIBC)))
        assert elfparts.build_id(data, found) == build_id
    finally:
        data.close()


def test_the_debuglink_is_the_one_objcopy_wrote(tmp_path):
    debug = tmp_path / "libc.debug"
    debug.write_bytes(b"the debug file's bytes " * 1000)
    unlinked, linked = tmp_path / "libc-unlinked.so", tmp_path / "libc-linked.so"
    run_child(["objcopy", "--remove-section=.gnu_debuglink", str(LIBC), str(unlinked)], check=True, timeout=120)
    run_child(["objcopy", f"--add-gnu-debuglink={debug}", str(unlinked), str(linked)], check=True, timeout=120)
    data = _mapped(linked)
    try:
        found = elfparts.read_sections(data)
        assert found is not None
        assert elfparts.debuglink(data, found) == ("libc.debug", zlib.crc32(debug.read_bytes()))
    finally:
        data.close()
    assert elfparts.debuglink_candidates(str(tmp_path), "libc.debug", ["/d"]) == [
        str(debug), str(tmp_path / ".debug" / "libc.debug"), f"/d{tmp_path}/libc.debug"]


@pytest.mark.parametrize("name", ["", ".", "..", "../evil.debug", "a/b.debug", "x\0.debug"])
def test_a_hostile_debuglink_name_names_nothing(name):
    assert elfparts.debuglink_candidates("/usr/lib", name, ["/usr/lib/debug"]) == []


def test_what_is_not_elf_or_has_its_headers_outside_the_file_is_none():
    assert elfparts.read_sections(b"#!/bin/sh\n" + b"\0" * 100) is None
    head = LIBC.read_bytes()[:64]  # the ELF header alone: its section table is past the end
    assert elfparts.read_sections(head) is None
    assert elfparts.build_id_file("/usr/lib/debug", "93ac61ec") == "/usr/lib/debug/.build-id/93/ac61ec.debug"
