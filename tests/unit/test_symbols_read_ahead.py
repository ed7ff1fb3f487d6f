"""The recorder reads a library's address table ahead on a thread of its own (``symbols.read_ahead``) while its
main thread may name a frame there: both must get the one index and its one table, read once, and the
same names as a single thread gets. Real libraries of torch's wheel; a fresh cache, so the table is built."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tracer import symbols
from tracer.symbols.elf_index import LibraryIndex

TORCH_LIB = Path(__import__("importlib.util").util.find_spec("torch").origin).parent / "lib"
LIB = str(TORCH_LIB / "libc10.so")


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """No index open in this process, no cache on disk; each read of the address table counted and slowed
    down, so a second thread that does not wait for the first surely reads it again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(LibraryIndex, "_open", {})
    reads: list[str] = []
    real = LibraryIndex._read_addresses

    def slow_read(self):
        reads.append(threading.current_thread().name)
        time.sleep(0.2)
        return real(self)

    monkeypatch.setattr(LibraryIndex, "_read_addresses", slow_read)
    return reads


def test_read_ahead_and_a_lookup_at_once_share_one_index_and_one_read(fresh):
    # Addresses inside functions of libc10, known from a first index opened without the counting.
    values, sizes, _idx = LibraryIndex(symbols.ElfFile(LIB)).addresses()
    probes = [values[i] + sizes[i] // 2 for i in range(0, len(values), max(1, len(values) // 50)) if sizes[i]]
    expected = [symbols.symbol_at(LIB, a) for a in probes]
    fresh.clear()
    LibraryIndex._open.clear()

    start = threading.Barrier(2)
    answers: list = []

    def ahead():
        start.wait()
        symbols.read_ahead(LIB)

    def lookups():
        start.wait()
        time.sleep(0.05)  # the read ahead has begun its read of the table
        answers.extend(symbols.symbol_at(LIB, a) for a in probes)

    threads = [threading.Thread(target=ahead, name="ahead"), threading.Thread(target=lookups, name="lookups")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert fresh == ["ahead"]  # read once, by the thread that asked first; the other waited for it
    assert len({id(i) for i in LibraryIndex._open.values()}) == 1
    assert answers == expected and all(a is not None for a in answers)


def test_read_ahead_of_a_file_that_is_not_a_library_is_silent(tmp_path):
    bogus = tmp_path / "libnot.so"
    bogus.write_bytes(b"not an ELF file at all")
    symbols.read_ahead(str(bogus))  # the fill says so, when it asks
    symbols.read_ahead(str(tmp_path / "missing.so"))
    with pytest.raises(symbols.SymbolError):
        symbols.symbol_at(str(bogus), 0x10)
