"""The on-disk index cache: ``$XDG_CACHE_HOME/pttrace`` (default ``~/.cache/pttrace``).

Every file carries a header naming what it is, the library it describes (build-id, size, mtime) and
a CRC of its payload. Anything that does not check out (another library, an older format, a torn
write, random bytes) reads as "absent" and is rebuilt; nothing in the cache is ever trusted blindly.
Writes go to a temporary file renamed into place, so readers see a whole file or none.
"""
from __future__ import annotations

import marshal
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from tracer.settings import cache_dir, write_cache_bytes

FORMAT = 4  # bump when any payload changes in layout or in meaning (e.g. the matching rules)
_MAGIC = b"PTTRACE\x00"
_HEADER = struct.Struct("<8sII16sQ")  # magic, format, payload crc32, kind, payload length


@dataclass(frozen=True)
class FileKey:
    """What identifies the content of a library: its build-id when it has one, else where it is and
    its size and modification time. ``size`` is checked in every case."""

    path: str
    size: int
    mtime_ns: int
    build_id: str | None

    @property
    def digest(self) -> str:
        if self.build_id:
            return f"b-{self.build_id}-{self.size:x}"
        # Two checksums, not hashlib: importing it loads OpenSSL (~3 ms of a warm `pttrace where`, which
        # reads the section tables cached under this name). A collision costs a rebuild, never a wrong
        # answer: every file also holds the stamp it was made for, and a reader checks it.
        raw = f"{self.path}\0{self.size}\0{self.mtime_ns}".encode()
        return f"p-{zlib.crc32(raw):08x}{zlib.adler32(raw):08x}"

    def stamp(self) -> tuple:
        return (self.build_id, self.size) if self.build_id else (self.path, self.size, self.mtime_ns)


def entry_path(key: FileKey, kind: str, extra: str = "") -> Path:
    return cache_dir() / "index" / f"{key.digest}{extra}.{kind}"


def read(key: FileKey, kind: str, extra: str = ""):
    """The payload stored for (library, kind), or None when absent, stale or corrupt."""
    path = entry_path(key, kind, extra)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    if len(raw) < _HEADER.size:
        return None
    magic, fmt, crc, kind_b, length = _HEADER.unpack_from(raw)
    if magic != _MAGIC or fmt != FORMAT or kind_b.rstrip(b"\0") != kind.encode()[:16]:
        return None
    payload = raw[_HEADER.size :]
    if len(payload) != length or zlib.crc32(payload) != crc:
        return None
    try:
        stamp, value = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if stamp != key.stamp():
        return None
    return value


def write(key: FileKey, kind: str, value, extra: str = "") -> None:
    """Store a payload (anything ``marshal`` takes); failures to write are not errors, just no cache."""
    path = entry_path(key, kind, extra)
    payload = marshal.dumps((key.stamp(), value))
    header = _HEADER.pack(_MAGIC, FORMAT, zlib.crc32(payload), kind.encode()[:16], len(payload))
    write_cache_bytes(str(path), header + payload, path.name)  # a cache that cannot be written: only slower
