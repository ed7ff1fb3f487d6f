"""The names ``threading`` gives its threads, read from a CPython process's memory (no code run in it).

``threading._active`` maps each running thread's ident (``pthread_t``, the thread state's ``thread_id``)
to its ``Thread`` object, whose ``_name`` is ``Thread(name=...)``. Reaching it takes a few object layouts
beyond frames: the main interpreter's ``sys.modules`` dict -> the ``threading`` module's dict ->
``_active`` -> each ``Thread``'s attributes, which live where the version keeps instance attributes:

- 3.10: a dict at ``tp_dictoffset``;
- 3.11: "managed": a values array at ``obj - 32`` (keys shared in the type's ``ht_cached_keys``) or a
  dict at ``obj - 24``;
- 3.12: one word at ``obj - 24``: a values array minus one (low bit set) or a dict;
- 3.13: values inline after the object (``tp_basicsize``) while valid, else a dict at ``obj - 24``.

Offsets that differ per version are in ``OBJECTS`` (checked against each debug build's DWARF by
tests/integration/test_pyruntime_layouts.py); the rest are the same in 3.10-3.13. Reads are bounded and
untrusted, like the frame reader's: anything that does not look right is no name, never a guess.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .layout import LayoutError
from .reader import PythonRuntime

MAX_ENTRIES = 1 << 16  # entries of a dict read (sys.modules of a big program has a few thousand)
MAX_DIGITS = 4  # of an int (a 64-bit ident has three 30-bit digits)
OB_TYPE, MD_DICT, MA_KEYS, MA_VALUES = 8, 16, 32, 40
TP_BASICSIZE, TP_FLAGS, TP_MEMBERS, TP_DICTOFFSET = 32, 168, 240, 288
MEMBER_DEF_SIZE, MEMBER_OFFSET, MAX_MEMBERS = 40, 16, 256  # PyMemberDef: name, type, offset, flags, doc
LONG_SIZE, LONG_DIGITS = 16, 24  # ob_size (3.10/3.11) or lv_tag (3.12+), then the 30-bit digits
MANAGED_DICT, INLINE_VALUES = 1 << 4, 1 << 2  # tp_flags bits (3.11+, 3.13+)
MANAGED_DICT_AT, MANAGED_VALUES_AT = -24, -32


@dataclass(frozen=True)
class ObjectLayout:
    """Where this CPython build keeps the fields pttrace reads of dicts and objects."""

    keys_log2: bool  # 3.11+: dk_log2_size, dk_log2_index_bytes, dk_kind bytes; 3.10: dk_size
    keys_nentries: int  # PyDictKeysObject.dk_nentries
    keys_indices: int  # PyDictKeysObject.dk_indices
    values_items: int  # PyDictValues.values (3.13: after a 4-byte header)
    cached_keys: int  # PyHeapTypeObject.ht_cached_keys
    long_tag: bool  # 3.12+: lv_tag (digit count << 3 | sign); before: ob_size (signed digit count)
    attributes: str  # where instance attributes are: "offset", "managed", "tagged", "inline" (see above)


OBJECTS = {
    10: ObjectLayout(False, 32, 40, 0, 872, False, "offset"),
    11: ObjectLayout(True, 24, 32, 0, 872, False, "managed"),
    12: ObjectLayout(True, 24, 32, 0, 880, True, "tagged"),
    13: ObjectLayout(True, 24, 32, 8, 880, True, "inline"),
}


def _u64(raw: bytes, off: int) -> int:
    return struct.unpack_from("<Q", raw, off)[0]


class ThreadNames:
    """``names()`` -> {thread ident: ``threading`` name} of a runtime's threads. Raises LayoutError (one
    sentence) for a version whose object layouts are not known here."""

    def __init__(self, runtime: PythonRuntime):
        self.runtime = runtime
        self.read = runtime.read
        obj = OBJECTS.get(runtime.layout.minor)
        if obj is None:
            raise LayoutError(f"Python thread names are not read on CPython 3.{runtime.layout.minor} yet")
        self.obj = obj
        self._active = 0  # threading._active, once found (the module keeps that dict for its life)

    def names(self) -> dict[int, str]:
        """Every thread ``threading`` knows, by ident; {} while ``threading`` is not imported or unreadable."""
        try:
            if not self._active:
                self._active = self._find_active()
            items = self._dict_items(self._active) if self._active else []
        except self.runtime.errors:
            self._active = 0
            return {}
        out: dict[int, str] = {}
        for key, thread in items:
            try:
                ident = self._int(key)
                name = self.runtime.read_str(self._attribute(thread, "_name"))
            except self.runtime.errors:
                continue
            if ident is not None and name is not None:
                out[ident] = name
        return out

    def _find_active(self) -> int:
        return self.module_global("threading", "_active")

    def module_global(self, module_name: str, name: str) -> int:
        """The address of a global of an imported module (``sys.modules[module_name].name``); 0 if the
        module is not imported or has no such global."""
        interps = self.runtime.interpreters()
        if not interps:
            return 0
        main = interps[-1]  # the main interpreter is the last on the list
        modules = _u64(self.read(main + self.runtime.layout.interp_modules, 8), 0)
        module = self._lookup(modules, module_name) if modules else 0
        if not module:
            return 0
        return self._lookup(_u64(self.read(module + MD_DICT, 8), 0), name)

    def dataloader_worker(self) -> tuple[int, int | None] | None:
        """(worker id, number of workers if it can be read) when this process is a DataLoader worker: torch sets
        ``torch.utils.data._utils.worker._worker_info`` before the worker's first ``__getitem__``."""
        try:
            info = self.module_global("torch.utils.data._utils.worker", "_worker_info")
            if not info:
                return None
            # A frozen dataclass with slots (torch 2.6+), or a plain class with instance attributes (before).
            wid = self._attribute(info, "id") or self._slot(info, "id")
            count = self._attribute(info, "num_workers") or self._slot(info, "num_workers")
            number = self._int(wid) if wid else None
            workers = self._int(count) if count else None
        except Exception:  # untrusted memory: anything that does not look right is no answer
            return None
        return (number, workers) if number is not None else None

    def _lookup(self, dict_addr: int, name: str) -> int:
        return self._find(self._dict_items(dict_addr), name)

    def _find(self, items, name: str) -> int:
        # A key's length first (one read of its header), its text only when that matches: sys.modules has
        # ~1,000 keys with torch imported, and two reads a key were most of a first hit's module look-ups.
        runtime, length = self.runtime, len(name)
        for key, value in items:
            if runtime.str_length(key) == length and runtime.read_str(key) == name:
                return value
        return 0

    # -- dicts, ints, attributes ---------------------------------------------------------------------
    def _dict_items(self, addr: int) -> list[tuple[int, int]]:
        if not addr:
            return []
        raw = self.read(addr, MA_VALUES + 8)
        return self._keys_items(_u64(raw, MA_KEYS), _u64(raw, MA_VALUES))

    def _keys_items(self, keys: int, values: int) -> list[tuple[int, int]]:
        """(key, value) addresses of a dict's live entries; ``values``: its split values array, or 0."""
        o = self.obj
        head = self.read(keys, o.keys_indices)
        if o.keys_log2:
            log2_size, log2_index, kind = head[8], head[9], head[10]
            if log2_size > 30 or log2_index > 34:
                raise ValueError("not a dict's keys")
            index_bytes, entry = 1 << log2_index, 24 if kind == 0 else 16  # DICT_KEYS_GENERAL has the hash
        else:
            size = _u64(head, 8)
            if not size or size > 1 << 30 or size & (size - 1):
                raise ValueError("not a dict's keys")
            index_bytes, entry = size * (1 if size <= 0xFF else 2 if size <= 0xFFFF else 4), 24
        count = _u64(head, o.keys_nentries)
        if count > MAX_ENTRIES:
            raise ValueError("not a dict's keys")
        table = self.read(keys + o.keys_indices + index_bytes, count * entry) if count else b""
        split = self.read(values + o.values_items, 8 * count) if values and count else None
        # Every word at once: an ``unpack_from`` a key and a value took 0.83 ms for a dict of sys.modules' size (1,100
        # entries), this 0.12 ms (thread CPU outside gdb); a first hit reads five such tables.
        step = entry // 8
        words = struct.unpack_from(f"<{count * step}Q", table) if count else ()
        key_at = words[step - 2::step]  # the key and value are an entry's last two words
        value_at = struct.unpack_from(f"<{count}Q", split) if split is not None else words[step - 1::step]
        return [(key, value) for key, value in zip(key_at, value_at) if key and value]

    def _int(self, addr: int) -> int | None:
        """A non-negative int's value (idents are), None for another or a negative one."""
        size = struct.unpack_from("<q", self.read(addr + LONG_SIZE, 8), 0)[0]
        if self.obj.long_tag:
            digits, sign = size >> 3, size & 3
            if sign == 1:
                return 0
            if sign != 0:
                return None
        else:
            digits = size
        if digits < 0 or digits > MAX_DIGITS:
            return None
        raw = self.read(addr + LONG_DIGITS, 4 * digits) if digits else b""
        return sum(struct.unpack_from("<I", raw, 4 * i)[0] << (30 * i) for i in range(digits))

    def _slot(self, obj: int, name: str) -> int:
        """The object a ``__slots__`` member of ``obj`` holds (0: none by that name, or unset): its offset
        is in the type's ``tp_members`` (PyMemberDef entries, ended by a null name)."""
        tp = _u64(self.read(obj + OB_TYPE, 8), 0)
        members = _u64(self.read(tp + TP_MEMBERS, 8), 0)
        if not members:
            return 0
        want = name.encode()
        for i in range(MAX_MEMBERS):
            entry = self.read(members + i * MEMBER_DEF_SIZE, MEMBER_DEF_SIZE)
            name_at = _u64(entry, 0)
            if not name_at:
                return 0
            if self.read(name_at, len(want) + 1) == want + b"\0":
                offset = struct.unpack_from("<q", entry, MEMBER_OFFSET)[0]
                if not 0 < offset < 1 << 16:
                    return 0
                return _u64(self.read(obj + offset, 8), 0)
        return 0

    def _cached_keys(self, tp: int) -> int:
        """The keys a heap type's instances share (their values arrays index its entries)."""
        return _u64(self.read(tp + self.obj.cached_keys, 8), 0)

    def _attribute(self, obj: int, name: str) -> int:
        """The address of an instance attribute kept in the instance's attributes (0: not found)."""
        tp = _u64(self.read(obj + OB_TYPE, 8), 0)
        raw = self.read(tp, TP_DICTOFFSET + 8)
        flags, basicsize = _u64(raw, TP_FLAGS), _u64(raw, TP_BASICSIZE)
        dictoffset = struct.unpack_from("<q", raw, TP_DICTOFFSET)[0]
        kind = self.obj.attributes
        if kind == "offset" or not flags & MANAGED_DICT:
            if dictoffset <= 0 or dictoffset > 1 << 16:
                return 0
            return self._lookup(_u64(self.read(obj + dictoffset, 8), 0), name)
        if kind == "managed":
            raw = self.read(obj + MANAGED_VALUES_AT, 16)
            values, dict_addr = _u64(raw, 0), _u64(raw, 8)
            if values:
                return self._find(self._keys_items(self._cached_keys(tp), values), name)
            return self._lookup(dict_addr, name)
        if kind == "tagged":
            word = _u64(self.read(obj + MANAGED_DICT_AT, 8), 0)
            if word & 1:
                return self._find(self._keys_items(self._cached_keys(tp), word + 1), name)
            return self._lookup(word, name)
        if flags & INLINE_VALUES and self.read(obj + basicsize, 4)[3]:  # the values' "valid" byte
            return self._find(self._keys_items(self._cached_keys(tp), obj + basicsize), name)
        return self._lookup(_u64(self.read(obj + MANAGED_DICT_AT, 8), 0), name)
