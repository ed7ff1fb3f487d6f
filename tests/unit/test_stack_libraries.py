"""The libraries a command's stacks needed, kept for its re-runs (tracer/recorder/stack_libraries.py)."""
from __future__ import annotations

import os

from tracer.recorder.stack_libraries import KEEP, StackLibraries


def test_a_library_is_known_to_the_same_command_only_and_while_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    lib = tmp_path / "libx.so"
    lib.write_bytes(b"x" * 10)
    command = ["/usr/bin/python3", "/work", "prog.py", "", "", "--break", "f"]
    StackLibraries(command).add([str(lib)])
    assert StackLibraries(command).knows(str(lib))
    link = tmp_path / "libx.so.1"
    link.symlink_to(lib)
    assert StackLibraries(command).knows(str(link))  # by its real path
    assert not StackLibraries([*command, "g"]).knows(str(lib))  # another command: its own list
    st = os.stat(lib)
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert not StackLibraries(command).knows(str(lib))  # rebuilt since: read when a stack needs it
    lib.unlink()
    assert not StackLibraries(command).knows(str(lib))


def test_the_list_is_bounded_and_a_damaged_file_reads_as_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    libs = []
    for i in range(KEEP + 5):
        libs.append(tmp_path / f"lib{i}.so")
        libs[-1].write_bytes(b"x")
    kept = StackLibraries(["cmd"])
    for lib in libs:
        kept.add([str(lib)])
    again = StackLibraries(["cmd"])
    assert [again.knows(str(lib)) for lib in libs] == [False] * 5 + [True] * KEEP  # the oldest go
    again.path.write_text('{"half')
    damaged = StackLibraries(["cmd"])
    assert not damaged.knows(str(libs[-1]))
    damaged.add([str(libs[0])])
    assert StackLibraries(["cmd"]).knows(str(libs[0]))
