"""An ELF file opened for reading: section table through pyelftools, section bytes through mmap.

pyelftools gives us the structure (headers, section names); the bytes of big sections are read
straight from an mmap so that a 400 MB library costs only the pages we touch. Compressed debug
sections (``SHF_COMPRESSED`` with zlib or zstd, and the older ``.zdebug_*``) are inflated here.
Every way a file can be unreadable becomes one ``SymbolError`` sentence.
"""
from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import zlib
from dataclasses import dataclass

from tracer.errors import SymbolError

from . import cache
from .cache import FileKey

SHT_NOBITS = 8
SHT_NOTE = 7
SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB = 1
ELFCOMPRESS_ZSTD = 2
NT_GNU_BUILD_ID = 3
MAX_INFLATED = 1 << 36  # 64 GiB: far more than any debug section, far less than "the header is garbage"
INFLATE_TO_DISK = 64 << 20  # compressed sections inflating to more than this go to a mapped cache file
INFLATE_CHUNK = 16 << 20


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


class ElfFile:
    """One ELF file: its sections, build-id and debug link; raises SymbolError if unreadable."""

    def __init__(self, path: str):
        self.path = os.path.realpath(path)
        self.display = path
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise SymbolError(f"{path}: no such file") from None
        except OSError as exc:
            raise SymbolError(f"{path}: cannot read it ({exc.strerror})") from None
        if not os.path.isfile(self.path):
            raise SymbolError(f"{path}: not a regular file")
        self.size = st.st_size
        self.mtime_ns = st.st_mtime_ns
        try:
            self._fh = open(self.path, "rb")
        except OSError as exc:
            raise SymbolError(f"{path}: cannot read it ({exc.strerror})") from None
        head = self._fh.read(64)
        if head[:4] != b"\x7fELF":
            raise SymbolError(f"{path}: not an ELF file")
        if len(head) < 52:
            raise SymbolError(f"{path}: truncated ELF file ({self.size} bytes)")
        if head[4] not in (1, 2) or head[5] != 1:
            raise SymbolError(f"{path}: unsupported ELF variant (only little-endian ELF32/ELF64 are read)")
        self.elfclass = 64 if head[4] == 2 else 32
        self.machine = struct.unpack_from("<H", head, 18)[0]
        self.mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.sections = self._read_sections(path)
        self._decompressed: dict[str, bytes | memoryview] = {}
        self._inflated_maps: dict[str, mmap.mmap] = {}
        self._lazy: dict[str, _Inflation] = {}

    def _read_sections(self, shown: str) -> dict[str, Section]:
        # The section table (and build-id) is cached by path, size and mtime: a warm lookup then
        # never parses ELF headers at all.
        self._locator = FileKey(self.path, self.size, self.mtime_ns, None)
        stored = cache.read(self._locator, "sections")
        if stored is not None:
            listed = [Section(*t) for t in stored[0]]
            self._build_id = stored[1]
        else:
            listed = self._parse_sections(shown)
            self._build_id = self._find_build_id(listed)
            cache.write(self._locator, "sections", ([tuple(x.__dict__.values()) for x in listed], self._build_id))
        self.section_list = listed
        sections: dict[str, Section] = {}
        for sec in listed:
            sections.setdefault(sec.name, sec)
        return sections

    def _parse_sections(self, shown: str) -> list[Section]:
        """Section headers through pyelftools' header structures (not its section objects, which
        would parse whole hash tables of a 400 MB library just to list it). Every offset and size is
        checked against the file before it is used: a damaged header is one sentence, never a read
        outside the file."""
        from elftools.common.exceptions import ELFError
        from elftools.common.utils import struct_parse
        from elftools.elf.elffile import ELFFile

        try:
            elf = ELFFile(self._fh)
            shoff = elf.header["e_shoff"]
            shentsize = elf.header["e_shentsize"]
            shnum = elf.num_sections()
            if shnum == 0 or shoff == 0:
                return []
            minimum = 64 if self.elfclass == 64 else 40
            if shentsize < minimum:
                raise SymbolError(f"{shown}: corrupt ELF file (section headers of {shentsize} bytes, "
                                  f"they take {minimum})")
            if shoff + shnum * shentsize > self.size:
                raise SymbolError(f"{shown}: truncated ELF file ({self.size} bytes; its section table "
                                  f"ends at byte {shoff + shnum * shentsize})")
            headers = [struct_parse(elf.structs.Elf_Shdr, self._fh, shoff + i * shentsize) for i in range(shnum)]
            shstrndx = elf.get_shstrndx()
            names = headers[shstrndx] if 0 <= shstrndx < shnum else None
            if names is not None:
                self._check_bounds(shown, ".shstrtab", names["sh_offset"], names["sh_size"])
            listed = []
            for h in headers:
                name = ""
                if names is not None and h["sh_name"] < names["sh_size"]:
                    start = names["sh_offset"] + h["sh_name"]
                    stop = self.mm.find(b"\0", start, names["sh_offset"] + names["sh_size"])
                    name = self.mm[start : stop if stop >= 0 else start].decode("utf-8", "replace")
                sec = Section(name, _sh_type(h["sh_type"]), h["sh_flags"], h["sh_addr"], h["sh_offset"],
                              h["sh_size"], h["sh_link"], h["sh_entsize"])
                if sec.type != SHT_NOBITS and sec.size:
                    self._check_bounds(shown, sec.name, sec.offset, sec.size)
                elif sec.size >= 1 << 48:  # NOBITS: no bytes in the file, but no more than an address space
                    raise SymbolError(f"{shown}: corrupt ELF file (section {sec.name or '?'} claims "
                                      f"{sec.size:#x} bytes)")
                listed.append(sec)
            return listed
        except SymbolError:
            raise
        except (ELFError, struct.error, ValueError, KeyError, IndexError, OSError, OverflowError) as exc:
            raise SymbolError(f"{shown}: corrupt or truncated ELF file ({exc})") from None

    def _check_bounds(self, shown: str, name: str, offset: int, size: int) -> None:
        if offset + size > self.size:
            raise SymbolError(f"{shown}: truncated ELF file ({self.size} bytes; section {name or '?'} "
                              f"ends at byte {offset + size})")

    # -- identity -------------------------------------------------------------------------------
    @property
    def build_id(self) -> str | None:
        return self._build_id

    def _find_build_id(self, listed: list[Section]) -> str | None:
        for sec in listed:
            if sec.type != SHT_NOTE or sec.size > 1 << 16:
                continue
            data = bytes(self.mm[sec.offset : sec.offset + sec.size])
            pos = 0
            while pos + 12 <= len(data):
                namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
                name_start = pos + 12
                desc_start = name_start + ((namesz + 3) & ~3)
                end = desc_start + ((descsz + 3) & ~3)
                if end > len(data):
                    break
                if ntype == NT_GNU_BUILD_ID and data[name_start : name_start + namesz].rstrip(b"\0") == b"GNU":
                    return data[desc_start : desc_start + descsz].hex()
                pos = end
        return None

    def key(self) -> FileKey:
        return FileKey(self.path, self.size, self.mtime_ns, self.build_id)

    @property
    def debuglink(self) -> tuple[str, int] | None:
        """(file name, crc32) from ``.gnu_debuglink``."""
        sec = self.sections.get(".gnu_debuglink")
        if sec is None or sec.size < 8:
            return None
        data = bytes(self.mm[sec.offset : sec.offset + sec.size])
        end = data.find(b"\0")
        if end <= 0:
            return None
        crc_at = (end + 4) & ~3
        if crc_at + 4 > len(data):
            return None
        return data[:end].decode("utf-8", "replace"), struct.unpack_from("<I", data, crc_at)[0]

    # -- section bytes --------------------------------------------------------------------------
    def raw(self, sec: Section) -> memoryview:
        return memoryview(self.mm)[sec.offset : sec.offset + sec.size]

    def has(self, name: str) -> bool:
        """Whether the section is there with contents (compressed or not), without reading it."""
        sec = self.sections.get(name)
        if sec is None and name.startswith(".debug_"):
            sec = self.sections.get(".z" + name[1:])
        return sec is not None and sec.type != SHT_NOBITS and sec.size > 0

    def data(self, name: str, lazy: bool = False) -> memoryview | bytes | None:
        """The contents of a section, inflated if compressed; None if absent or NOBITS. ``lazy``: a big
        zlib section is inflated only as far as ``ensure`` asks (the caller must ask before it reads)."""
        if name in self._decompressed:
            if not lazy and name in self._lazy:
                self.ensure(name, self._lazy[name].size)  # asked for whole, after a lazy read of it
            return self._decompressed[name]
        sec = self.sections.get(name)
        legacy = False
        if sec is None and name.startswith(".debug_"):
            sec = self.sections.get(".z" + name[1:])
            legacy = sec is not None
        if sec is None or sec.type == SHT_NOBITS or sec.size == 0:
            return None
        raw = self.raw(sec)
        out: bytes | memoryview
        if legacy:
            out = _inflate_zdebug(raw, self.display, name)
        elif sec.flags & SHF_COMPRESSED:
            out = self._inflate(raw, name, lazy)
        else:
            return raw
        self._decompressed[name] = out
        return out

    def ensure(self, name: str, end: int) -> None:
        """Bytes [0, end) of a section given out by ``data(name, lazy=True)`` are inflated (a no-op for
        any other section)."""
        lazy = self._lazy.get(name)
        if lazy is not None:
            lazy.ensure(end)

    def discard_partial(self) -> None:
        """What sections read lazily hold so far is dropped from the cache: for DWARF that does not decode,
        which may be a damaged stream that zlib could not tell from a good one before its end."""
        for lazy in self._lazy.values():
            with contextlib.suppress(OSError), lazy.locked():
                lazy.discard()

    def _inflate(self, raw: memoryview, name: str, lazy: bool = False) -> bytes | memoryview:
        header = 24 if self.elfclass == 64 else 12
        if len(raw) < header:
            raise SymbolError(f"{self.display}: section {name} has a bad compression header")
        if self.elfclass == 64:
            ch_type, _, ch_size, _ = struct.unpack_from("<IIQQ", raw)
        else:
            ch_type, ch_size, _ = struct.unpack_from("<III", raw)
        body = raw[header:]
        if ch_type == ELFCOMPRESS_ZLIB and ch_size >= INFLATE_TO_DISK:
            if ch_size > MAX_INFLATED:
                raise SymbolError(f"{self.display}: section {name} claims to inflate to {ch_size} bytes")
            done = cache.entry_path(self.key(), "inflated", extra=name)
            if lazy and not _complete(done, ch_size):
                sec = self.sections[name]
                try:
                    inflation = _Inflation(self, name, body, sec.offset + len(raw) - len(body), ch_size, done)
                except OSError as exc:
                    raise SymbolError(f"{self.display}: cannot inflate section {name} into the cache "
                                      f"({exc.strerror})") from None
                self._lazy[name] = inflation
                self._inflated_maps[name] = inflation.mm
                view = memoryview(inflation.mm)
                self._decompressed[name] = view
                return view
            return self._inflated_file(body, ch_size, name)
        if ch_type == ELFCOMPRESS_ZLIB:
            out = _inflate_zlib(body, ch_size, self.display, name)
        elif ch_type == ELFCOMPRESS_ZSTD:
            import zstandard

            try:
                out = zstandard.ZstdDecompressor().decompress(bytes(body), max_output_size=ch_size)
            except zstandard.ZstdError as exc:
                raise SymbolError(f"{self.display}: section {name} does not decompress ({exc})") from None
        else:
            raise SymbolError(f"{self.display}: section {name} uses an unknown compression ({ch_type})")
        if len(out) != ch_size:
            raise SymbolError(f"{self.display}: section {name} decompresses to {len(out)} bytes, "
                              f"its header says {ch_size}")
        return out

    def _inflated_file(self, body: memoryview, size: int, name: str) -> memoryview:
        """A big compressed section (a -gz debug build's .debug_info: gigabytes) inflated once, a chunk at a
        time, into a file of the cache (``inflated/``, keyed like every cache entry), and mapped: a lookup
        touches the pages of its unit only, and nothing holds the whole section in memory."""
        if size > MAX_INFLATED:
            raise SymbolError(f"{self.display}: section {name} claims to inflate to {size} bytes")
        path = cache.entry_path(self.key(), "inflated", extra=name)
        try:
            if path.stat().st_size != size:
                raise FileNotFoundError
        except OSError:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            try:
                base = self.sections.get(name) or self.sections.get(".z" + name[1:])
                assert base is not None, name  # the caller read the section's bytes from it
                start = base.offset + (len(self.raw(base)) - len(body))

                def consumed(upto: int) -> None:
                    self._release(self.mm, start, start + upto)

                with open(tmp, "wb") as out:
                    _stream_inflate(body, size, out, self.display, name, consumed)
                os.replace(tmp, path)
            finally:
                if tmp.exists():
                    tmp.unlink()
        with open(path, "rb") as fh:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self._inflated_maps[name] = mm
        view = memoryview(mm)
        self._decompressed[name] = view
        return view

    def release(self, name: str, start: int, end: int) -> None:
        """Unmap the pages of bytes [start, end) of a section read through a mapping (they stay in the page
        cache, and are read again if touched): a walk over a gigabyte section does not keep it all resident."""
        mm = self._inflated_maps.get(name)
        if mm is None:
            sec = self.sections.get(name)
            if sec is None or name in self._decompressed:
                return
            mm, start, end = self.mm, sec.offset + start, sec.offset + end
        self._release(mm, start, end)

    @staticmethod
    def _release(mm: mmap.mmap, start: int, end: int) -> None:
        start -= start % mmap.PAGESIZE
        end -= end % mmap.PAGESIZE
        if end > start and hasattr(mm, "madvise"):
            try:
                mm.madvise(mmap.MADV_DONTNEED, start, end - start)
            except (OSError, ValueError):
                pass  # only memory use depends on it

    def close(self) -> None:
        try:
            self.mm.close()
        except BufferError:
            pass  # views are still alive; the mapping goes with them
        self._fh.close()
        for lazy in self._lazy.values():
            lazy.close()


def _complete(path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


_TRAILER = struct.Struct("<QQ")  # how many leading bytes of a section being inflated are: (n, n ^ _CHECK)
_CHECK = 0x5054_5452_4143_4521


class _Inflation:
    """A big zlib section inflated only as far as it is read: a cold lookup needs one unit of a -gz debug
    build's gigabyte ``.debug_info``, not all of it (bench/RESULTS.md).

    The cache file (``*.inflating``) has the section's size plus a trailer saying how many leading bytes
    are inflated; it is mapped whole (its holes read as zeros: every read is preceded by ``ensure``).
    Later lookups, in this process or another, read what is there and go on from it; once all of it is
    there the file loses its trailer and becomes the ``*.inflated`` that ``_inflated_file`` writes in one
    go. Writers take a lock file in turn. zlib's state cannot be stored, so a process that needs more
    than the file holds inflates the stream again from its start, writing only what is new. Memory stays
    flat: the output goes to the file a chunk at a time, the compressed pages read are let go. Nothing
    is checked past what is read: damage further on in the stream is found when a lookup gets there."""

    def __init__(self, elf: ElfFile, name: str, body: memoryview, start: int, size: int, done) -> None:
        self.elf, self.name, self.body, self.start, self.size, self.done = elf, name, body, start, size, done
        self.path = done.with_suffix(".inflating")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        with self.locked():
            have = os.fstat(self.fd).st_size
            if have == size:  # whole: another process renamed it since it was opened, or stopped before
                with contextlib.suppress(FileNotFoundError):
                    os.replace(self.path, done)
            elif have != size + _TRAILER.size:
                os.ftruncate(self.fd, 0)  # new (or not what this writes): all holes, nothing inflated
                os.ftruncate(self.fd, size + _TRAILER.size)
        self.mm = mmap.mmap(self.fd, size, access=mmap.ACCESS_READ)
        self.valid = self._progress()
        self._inflater: zlib._Decompress | None = None
        self._fed = self._out = 0  # compressed bytes given to the inflater, bytes it gave back

    @contextlib.contextmanager
    def locked(self):
        lock = os.open(self.path.with_suffix(".inflating-lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)  # the lock file stays: removing it would let two writers hold two locks

    def _progress(self) -> int:
        if os.fstat(self.fd).st_size == self.size:
            return self.size  # all of it: the trailer is gone
        raw = os.pread(self.fd, _TRAILER.size, self.size)
        if len(raw) == _TRAILER.size:
            n, check = _TRAILER.unpack(raw)
            if check == n ^ _CHECK and n <= self.size:
                return n
        return 0

    def ensure(self, end: int) -> None:
        end = min(end, self.size)
        if end <= self.valid:
            return
        self.valid = self._progress()
        if end <= self.valid:
            return
        try:
            with self.locked():
                self.valid = self._progress()
                if end > self.valid:
                    self._advance(end)
                if self.valid == self.size and os.fstat(self.fd).st_size != self.size:
                    os.ftruncate(self.fd, self.size)
                    os.replace(self.path, self.done)
        except OSError as exc:
            raise SymbolError(f"{self.elf.display}: cannot inflate section {self.name} into the cache "
                              f"({exc.strerror})") from None

    def _advance(self, end: int) -> None:
        """Inflate (under the lock) until ``end`` bytes are in the file; what it held already is not rewritten."""
        inflater = self._inflater
        if inflater is None or self._out > self.valid:
            inflater = self._inflater = zlib.decompressobj()
            self._fed, self._out = 0, 0
        body = self.body
        try:
            while self._out < end:
                want = INFLATE_CHUNK if self._out < self.valid else min(INFLATE_CHUNK, max(end - self._out, 1 << 20))
                if inflater.unconsumed_tail:
                    chunk = inflater.decompress(inflater.unconsumed_tail, want)
                elif self._fed < len(body):
                    if self._fed:
                        self.elf._release(self.elf.mm, self.start, self.start + self._fed)
                    chunk = inflater.decompress(body[self._fed:self._fed + INFLATE_CHUNK], want)
                    self._fed += INFLATE_CHUNK
                else:
                    chunk = inflater.flush()
                    if not chunk:
                        break
                if self._out + len(chunk) > self.size:
                    self._out += len(chunk)
                    break
                skip = self.valid - self._out
                if skip < len(chunk):
                    os.pwrite(self.fd, memoryview(chunk)[max(skip, 0):], self._out + max(skip, 0))
                self._out += len(chunk)
                if inflater.eof:
                    break
            if self._out == self.size and not inflater.eof and inflater.decompress(
                    inflater.unconsumed_tail or body[self._fed:self._fed + INFLATE_CHUNK], 1):
                self._out += 1  # more than the header says
        except zlib.error as exc:
            self.discard()
            raise SymbolError(f"{self.elf.display}: section {self.name} does not decompress ({exc})") from None
        if self._out > self.size or (self._out < end and (inflater.eof or self._fed >= len(body))):
            self.discard()
            raise SymbolError(f"{self.elf.display}: section {self.name} decompresses to "
                              f"{'more than ' if self._out > self.size else ''}{self._out} bytes, its header "
                              f"says {self.size}")
        self.valid = self._out
        os.pwrite(self.fd, _TRAILER.pack(self.valid, self.valid ^ _CHECK), self.size)

    def discard(self) -> None:
        """A stream that does not inflate: nothing of it stays in the cache (the file is not truncated:
        another process may have it mapped). Under the lock."""
        self._inflater = None
        self.valid = self._fed = self._out = 0
        os.pwrite(self.fd, _TRAILER.pack(0, _CHECK), self.size)
        try:
            self.path.unlink()
        except OSError:
            pass

    def close(self) -> None:
        try:
            self.mm.close()
        except BufferError:
            pass  # views are still alive; the mapping goes with them
        os.close(self.fd)


def _inflate_zdebug(raw: memoryview, shown: str, name: str) -> bytes:
    if bytes(raw[:4]) != b"ZLIB" or len(raw) < 12:
        raise SymbolError(f"{shown}: section {name} has a bad compression header")
    size = struct.unpack_from(">Q", raw, 4)[0]
    out = _inflate_zlib(raw[12:], size, shown, name)
    if len(out) != size:
        raise SymbolError(f"{shown}: section {name} decompresses to {len(out)} bytes, not {size}")
    return out


def _inflate_zlib(body, size: int, shown: str, name: str) -> bytes:
    """Inflate at most ``size`` + 1 bytes: a header that lies cannot make us allocate more than it says,
    and a size no machine holds is refused before anything is allocated."""
    if size > MAX_INFLATED:
        raise SymbolError(f"{shown}: section {name} claims to inflate to {size} bytes")
    try:
        return zlib.decompressobj().decompress(body, size + 1)
    except zlib.error as exc:
        raise SymbolError(f"{shown}: section {name} does not decompress ({exc})") from None


def _stream_inflate(body, size: int, out, shown: str, name: str, consumed=None) -> None:
    """Inflate ``body`` into the file ``out`` INFLATE_CHUNK bytes at a time; exactly ``size`` bytes or an error.
    ``consumed(n)`` is told when the first n bytes of ``body`` are no longer needed."""
    inflater = zlib.decompressobj()
    written = 0
    pos = 0
    step = INFLATE_CHUNK
    try:
        while True:
            if inflater.unconsumed_tail:
                chunk = inflater.decompress(inflater.unconsumed_tail, INFLATE_CHUNK)
            elif pos < len(body):
                if consumed is not None and pos:
                    consumed(pos)
                chunk = inflater.decompress(body[pos:pos + step], INFLATE_CHUNK)
                pos += step
            else:
                chunk = inflater.flush()
                if not chunk:
                    break
            written += len(chunk)
            if written > size:
                break
            out.write(chunk)
            if inflater.eof:
                break
    except zlib.error as exc:
        raise SymbolError(f"{shown}: section {name} does not decompress ({exc})") from None
    if written != size:
        raise SymbolError(f"{shown}: section {name} decompresses to {'more than ' if written > size else ''}"
                          f"{written} bytes, its header says {size}")


_SH_TYPES = {"SHT_NULL": 0, "SHT_PROGBITS": 1, "SHT_SYMTAB": 2, "SHT_STRTAB": 3, "SHT_RELA": 4, "SHT_HASH": 5,
             "SHT_DYNAMIC": 6, "SHT_NOTE": 7, "SHT_NOBITS": 8, "SHT_REL": 9, "SHT_DYNSYM": 11}


def _sh_type(value) -> int:
    """pyelftools reports known section types by name; we want the number."""
    if isinstance(value, int):
        return value
    return _SH_TYPES.get(value, -1)
