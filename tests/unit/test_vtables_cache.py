"""The autograd Nodes' vtable tables (tracer/values/vtables.py) are searched once per build of the libraries
and kept in the cache: a warm start of a recording read them in ~0.2 s of CPU each time before."""
from __future__ import annotations

import os

from tracer.values import vtables


def test_the_tables_are_searched_once_and_again_when_a_library_changes(tmp_path, monkeypatch):
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF first build")
    searched: list[list[str]] = []

    def search(libraries):
        searched.append(list(libraries))
        return {os.path.realpath(lib): {4096 + len(searched): f"vtable for torch::autograd::X{len(searched)}"}}

    monkeypatch.setattr(vtables, "_search", search)
    cache = tmp_path / "cache"
    first = vtables.node_vtables([str(lib)], cache)
    assert first == {os.path.realpath(lib): {4097: "vtable for torch::autograd::X1"}}
    assert vtables.node_vtables([str(lib)], cache) == first  # from the cache: int keys, as searched
    assert len(searched) == 1
    lib.write_bytes(b"\x7fELF another build, another size")
    assert vtables.node_vtables([str(lib)], cache) == {os.path.realpath(lib): {4098: "vtable for torch::autograd::X2"}}
    assert len(searched) == 2
    assert vtables.node_vtables([str(lib)]) and len(searched) == 3  # no cache directory: searched every time


def test_a_damaged_cache_file_is_searched_again(tmp_path, monkeypatch):
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF")
    monkeypatch.setattr(vtables, "_search", lambda libraries: {str(lib): {1: "vtable for A"}})
    cache = tmp_path / "cache"
    vtables.node_vtables([str(lib)], cache)
    for f in (cache / "values").glob("vtables-*.json"):
        f.write_text("{not json")
    assert vtables.node_vtables([str(lib)], cache) == {str(lib): {1: "vtable for A"}}


def test_the_same_build_installed_elsewhere_reads_the_tables_kept(tmp_path, monkeypatch):
    """A new venv (or a reinstall) writes the same library bytes under a new path and time: kept by build-id,
    the tables are not searched again, and come back under the new path."""
    import shutil

    real = "/lib/x86_64-linux-gnu/libc.so.6"  # any library with a build-id
    first, second = tmp_path / "a" / "libfake.so", tmp_path / "b" / "libfake.so"
    for p in (first, second):
        p.parent.mkdir()
        shutil.copyfile(real, p)
    os.utime(second, ns=(1, 1))
    searched: list[list[str]] = []

    def search(libraries):
        searched.append(list(libraries))
        return {os.path.realpath(libraries[0]): {4096: "vtable for torch::autograd::X"}}

    monkeypatch.setattr(vtables, "_search", search)
    cache = tmp_path / "cache"
    assert vtables.node_vtables([str(first)], cache) == {str(first): {4096: "vtable for torch::autograd::X"}}
    assert vtables.node_vtables([str(second)], cache) == {str(second): {4096: "vtable for torch::autograd::X"}}
    assert len(searched) == 1
