"""``pttrace where`` on damaged and crafted ELF files: one sentence and exit 2, or an answer; never a
traceback, never a read outside the file.

Mutants of two real libraries (the debug extension: .symtab and DWARF 5; zlib: a stripped system
library with .dynsym and PLT only), seeded so that a failure names its mutant and replays. Each
mutant gets a fresh index cache: the per-unit cache is keyed by build-id, which a mutant keeps.
"""
from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import run_child
from tracer import symbols
from tracer.cli import main
from tracer.errors import SymbolError
from tracer.symbols.elf_index import LibraryIndex
from tracer.symbols.elffile import ElfFile

SEED = 20261123
LIBZ = Path("/lib/x86_64-linux-gnu/libz.so.1")
EHDR = struct.Struct("<16sHHIQQQIHHHHHH")  # e_shoff at field 6, e_shentsize 11, e_shnum 12, e_shstrndx 13
SHDR = struct.Struct("<IIQQQQIIQQ")  # name, type, flags, addr, offset, size, link, info, align, entsize
SHDR_FIELDS = {"sh_name": (0, "I"), "sh_type": (4, "I"), "sh_offset": (24, "Q"), "sh_size": (32, "Q"),
               "sh_link": (40, "I"), "sh_entsize": (56, "Q")}
TARGETED = (".debug_info", ".debug_abbrev", ".debug_line", ".debug_aranges", ".debug_rnglists",
            ".debug_str_offsets", ".debug_addr", ".symtab", ".strtab", ".dynsym", ".dynstr", ".rela.plt",
            ".plt", ".plt.sec", ".gnu_debuglink", ".note.gnu.build-id", ".shstrtab")


def section_headers(data: bytes) -> tuple[int, int, list[tuple[str, int]]]:
    """(e_shoff, e_shentsize, [(name, header offset)])."""
    eh = EHDR.unpack_from(data)
    shoff, shentsize, shnum, shstrndx = eh[6], eh[11], eh[12], eh[13]
    heads = [SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names_at = heads[shstrndx][4]
    out = []
    for i, h in enumerate(heads):
        end = data.index(b"\0", names_at + h[0])
        out.append((data[names_at + h[0]:end].decode(), shoff + i * shentsize))
    return shoff, shentsize, out


def boundary_values(rng: random.Random, width: str, size: int) -> int:
    top = 0xFFFFFFFF if width == "I" else 0xFFFFFFFFFFFFFFFF
    return rng.choice([0, 1, 7, 0x7FFFFFFF, 0xFFFFFFFF, top, top - 15, size, size - 1, size + 1, size // 2,
                       rng.randrange(top + 1)]) & top


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One damaged copy of ``data`` and what was done to it."""
    buf = bytearray(data)
    _shoff, _entsize, sections = section_headers(data)
    kind = rng.choice(["header", "header", "elf", "bytes", "bytes", "bytes", "truncate"])
    if kind == "header":
        name, at = rng.choice([s for s in sections if s[0] in TARGETED] or sections)
        field = rng.choice(list(SHDR_FIELDS))
        off, width = SHDR_FIELDS[field]
        value = boundary_values(rng, width, len(data))
        struct.pack_into("<" + width, buf, at + off, value)
        return bytes(buf), f"{name}.{field} = {value:#x}"
    if kind == "elf":
        field, off, width = rng.choice([("e_shoff", 0x28, "Q"), ("e_shentsize", 0x3A, "H"),
                                        ("e_shnum", 0x3C, "H"), ("e_shstrndx", 0x3E, "H")])
        if width == "H":
            value = rng.choice([0, 1, 0xFFFF, rng.randrange(0x10000)])
        else:  # often somewhere inside the file: garbage read as section headers
            value = rng.randrange(0, len(data), 8) if rng.random() < 0.5 else boundary_values(rng, width, len(data))
        struct.pack_into("<" + width, buf, off, value)
        return bytes(buf), f"{field} = {value:#x}"
    if kind == "bytes":
        name, at = rng.choice([s for s in sections if s[0] in TARGETED])
        start, size = struct.unpack_from("<QQ", data, at + 24)
        if not size:
            return bytes(buf), f"{name}: empty, unchanged"
        span = min(size, 256) if rng.random() < 0.7 else size  # headers live at the start
        for _ in range(rng.randint(1, 16)):
            buf[start + rng.randrange(span)] = rng.choice([0, 0xFF, 0x80, rng.randrange(256)])
        return bytes(buf), f"{name}: bytes overwritten (seeded)"
    cut = rng.randrange(64, len(data))
    return bytes(buf[:cut]), f"truncated to {cut} bytes"


def where(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err


def known_address(lib: Path, name: str) -> int:
    (match,) = [m for m in symbols.find_symbol(name, [str(lib)]) if not m.plt and not m.cold]
    return match.address + min(8, match.size // 2)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A new index cache and no library open from before, for each call."""
    counter = iter(range(10**6))

    def reset() -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / f"xdg{next(counter)}"))
        monkeypatch.delenv("PTTRACE_DEBUG_DIRS", raising=False)
        for index in LibraryIndex._open.values():
            index.elf.close()
        LibraryIndex._open.clear()
        symbols._readers.clear()

    reset()
    yield reset
    reset()


def fuzz(original: Path, name: str, count: int, seed: int, tmp_path: Path, capsys, fresh) -> dict[int, int]:
    data = original.read_bytes()
    address = known_address(original, name)
    rng = random.Random(seed)
    codes: dict[int, int] = {}
    for i in range(count):
        mutant, what = mutate(data, rng)
        path = tmp_path / f"mutant{i}_{original.name}"
        path.write_bytes(mutant)
        fresh()
        for argv in (["where", name, "--lib", str(path)], ["where", hex(address), "--lib", str(path)],
                     ["where", name, "--lib", str(path), "--json", "--mangled"]):
            try:
                code, err = where(argv, capsys)
            except Exception as exc:  # the test's own edge: name the mutant that broke through
                pytest.fail(f"mutant {i} of {original.name} (seed {seed}: {what}): {' '.join(argv[:2])} "
                            f"raised {type(exc).__name__}: {exc}")
            assert code in (0, 1, 2), (i, what, argv, code)
            assert "Traceback" not in err, (i, what, err)
            if code == 2:
                assert err.startswith("pttrace: ") and len(err.strip().splitlines()) <= 2, (i, what, err)
            codes[code] = codes.get(code, 0) + 1
        fresh()
        path.unlink()
    return codes


def test_mutated_debug_extension_never_breaks_through(debug_ext, tmp_path, capsys, fresh):
    codes = fuzz(debug_ext, "pttrace_demo::scale_add_cpu", 60, SEED, tmp_path, capsys, fresh)
    # The mutants are not all harmless, nor all fatal: the fuzzer reaches both outcomes.
    assert codes.get(2, 0) >= 5 and codes.get(0, 0) >= 5, codes


@pytest.mark.skipif(not LIBZ.is_file(), reason="no system zlib to mutate")
def test_mutated_system_library_never_breaks_through(tmp_path, capsys, fresh):
    codes = fuzz(LIBZ, "deflate", 40, SEED + 1, tmp_path, capsys, fresh)
    assert codes.get(2, 0) >= 3 and codes.get(0, 0) >= 3, codes


def crafted_shstrtab(original: Path, out: Path) -> tuple[Path, int]:
    """The issue's case: ``.shstrtab`` claiming sh_size = 0xFFFFFFFFFFFFFFF0; (file, where it would end)."""
    data = bytearray(original.read_bytes())
    _shoff, _entsize, sections = section_headers(bytes(data))
    (at,) = [at for name, at in sections if name == ".shstrtab"]
    struct.pack_into("<Q", data, at + 32, 0xFFFFFFFFFFFFFFF0)
    out.write_bytes(bytes(data))
    return out, struct.unpack_from("<Q", data, at + 24)[0] + 0xFFFFFFFFFFFFFFF0


def test_huge_shstrtab_is_one_sentence_and_exit_2_through_the_cli(debug_ext, tmp_path, fresh):
    crafted, end = crafted_shstrtab(debug_ext, tmp_path / "crafted.so")
    proc = run_child([sys.executable, "-m", "tracer", "where", "scale_add_cpu", "--lib", str(crafted)],
                     capture_output=True, text=True, timeout=120,
                     env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert proc.returncode == 2, proc
    assert proc.stderr.strip().splitlines() == [
        f"pttrace: {crafted}: truncated ELF file ({crafted.stat().st_size} bytes; section .shstrtab ends at "
        f"byte {end})"]


def test_section_reaching_past_the_file_is_refused_before_any_read(debug_ext, tmp_path, fresh):
    crafted, _ = crafted_shstrtab(debug_ext, tmp_path / "crafted.so")
    with pytest.raises(SymbolError, match=r"section \.shstrtab ends at byte \d+"):
        ElfFile(str(crafted))


def test_a_crafted_symbol_name_never_reaches_the_terminal_raw(debug_ext, tmp_path, fresh):
    # GIVEN the debug extension with every "scale_add_cpu" (symbol tables, DWARF strings) rewritten to a
    # name of the same length holding a window-title escape sequence
    evil = b"\x1b]0;" + b"p" * (len(b"scale_add_cpu") - 5) + b"\x07"
    data = Path(debug_ext).read_bytes()
    crafted = tmp_path / "evil.so"
    crafted.write_bytes(data.replace(b"scale_add_cpu", evil))
    nm = subprocess.run(["nm", "--defined-only", str(debug_ext)], capture_output=True, text=True, check=True)
    address = next(int(line.split()[0], 16) for line in nm.stdout.splitlines() if "scale_add_cpu" in line)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    # WHEN pttrace where names that address, and looks the spelled-out name up
    for argv in (["where", hex(address), "--lib", str(crafted)], ["where", hex(address), "--lib", str(crafted), "--mangled"]):
        proc = run_child([sys.executable, "-m", "tracer", *argv], capture_output=True, text=True, timeout=120,
                         env=env)
        # THEN the name is shown, its control characters spelled out, none raw
        assert proc.returncode == 0, proc
        assert "\\x1b]0;" in proc.stdout, proc.stdout
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, proc.stdout
