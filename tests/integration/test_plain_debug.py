"""Separate debug files with compressed DWARF (Debian's libc6-dbg) kept decompressed in pttrace's cache, which gdb
looks in first (tracer/symbols/plain_debug.py, tracer/gdb/spawn.py): made once, the same build-id, read by gdb."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT
from tests.support import allowance
from tracer import elfparts
from tracer.gdb import spawn
from tracer.symbols import plain_debug

pytestmark = [pytest.mark.gdb]

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


@pytest.fixture
def compressed_libc():
    found = plain_debug.compressed_debug_file(LIBC) if os.path.exists(LIBC) else None
    if found is None or shutil.which("objcopy") is None:
        pytest.skip("no compressed debug file of libc (libc6-dbg) or no objcopy here")
    return found


def _compressed(path: str) -> list[str]:
    with open(path, "rb") as fh:
        sections = elfparts.read_sections(fh.read())
    return [s.name for s in sections.items if s.name.startswith(".debug_") and s.flags & plain_debug.SHF_COMPRESSED]


def test_the_copy_is_decompressed_made_once_and_of_the_same_build(tmp_path, compressed_libc):
    ident, original = compressed_libc
    assert _compressed(original)  # GIVEN libc's debug file with compressed DWARF
    # WHEN its copy is kept
    copy = plain_debug.keep_decompressed(LIBC, str(tmp_path))
    # THEN it is where gdb looks by build-id, nothing compressed, the same build-id; a second call keeps it
    assert copy == elfparts.build_id_file(str(tmp_path), ident)
    assert not _compressed(copy) and elfparts.file_build_id(copy) == ident
    made = os.stat(copy).st_mtime_ns
    assert plain_debug.keep_decompressed(LIBC, str(tmp_path)) == copy and os.stat(copy).st_mtime_ns == made
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []
    # AND a library without a separate debug file has none
    assert plain_debug.keep_decompressed(str(ROOT / "scripts" / "hello-world.py"), str(tmp_path)) is None


def test_gdb_started_by_pttrace_reads_the_copy(tmp_path, monkeypatch, compressed_libc):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert spawn.debug_file_settings() == []  # no copy ever made: gdb's directories as they are
    copy = plain_debug.keep_decompressed(LIBC)
    assert copy and copy.startswith(str(tmp_path))
    # GIVEN gdb started with pttrace's settings, WHEN it reads libc
    iex = [a for s in spawn.debug_file_settings() for a in ("-iex", s)]
    out = subprocess.run([shutil.which("gdb") or "gdb", "-nx", "-batch", *iex, "-ex", "show debug-file-directory",
                          "-ex", f"file {LIBC}", "-ex", "python print('OBJFILES', [o.filename for o in gdb.objfiles()])"],
                         capture_output=True, text=True, timeout=allowance(60), env=dict(os.environ)).stdout
    # THEN our directory comes first, gdb's own after it, and libc's DWARF is the copy's
    assert f'"{plain_debug.directory()}:' in out and "/usr/lib/debug" in out, out
    assert repr(copy) in out.split("OBJFILES", 1)[1], out
