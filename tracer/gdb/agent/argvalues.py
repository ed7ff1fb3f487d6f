"""An argument's value from its C++ type and its bytes (registers) or address (memory), with no call into
the target: one reader per type, each with its sanity limits, and ``Unreadable`` (why) for anything that
fails them. A type no reader knows is given as its address: never a guess.

What ``describe`` returns is merged into the argument's record (``tracer/session/records.py``, ``args``):
``{"value": 3}``, ``{"value": [2, 3]}``, ``{"value": "mean"}``, ``{"keyset": raw bits}``,
``{"scalar_type": 6}``, ``{"device": [type, index]}``, ``{"none": true}`` (an empty optional),
``{"tensor": {...}}``, ``{"tensors": [{...}, ...]}``, ``{"address": 0x...}``. Tensors are read by
``tracer.values`` where it is installed (its layouts per torch build); without it a tensor is its
``TensorImpl`` address. No gdb import (the unit tests drive it with bytes).
"""
from __future__ import annotations

import re
import struct
from functools import lru_cache

MAX_LIST = 64  # elements of an ArrayRef read; the length is kept when it is longer
MAX_TENSORS = 16
MAX_TEXT = 256
_OPTIONAL = re.compile(r"^(?:::)?(?:std|c10)::optional<(.*)>$")
_SIGNED = {"signed char": 1, "short": 2, "int": 4, "long": 8, "long long": 8, "int64_t": 8, "int32_t": 4,
           "int8_t": 1, "int16_t": 2}
_UNSIGNED = {"unsigned char": 1, "char": 1, "unsigned short": 2, "unsigned int": 4, "unsigned long": 8,
             "unsigned long long": 8, "uint64_t": 8, "size_t": 8}
_ENUMS = {"c10::ScalarType": "scalar_type", "at::ScalarType": "scalar_type", "c10::Layout": "layout",
          "at::Layout": "layout", "c10::MemoryFormat": "memory_format", "at::MemoryFormat": "memory_format",
          "c10::QScheme": "qscheme", "c10::DeviceType": "device_type"}
_SYMINT_HEAP = -(1 << 62)  # c10::SymInt: a value below this is a pointer to a symbolic node, tagged
_TENSOR_TYPES = ("at::Tensor", "at::TensorBase")


class Unreadable(Exception):
    """A value that cannot be read or fails a sanity check: the message says which."""


class Memory:
    """The target's memory through the agent's reader, bounded and with named failures."""

    def __init__(self, read_memory) -> None:
        self._read = read_memory

    def read(self, address: int, length: int) -> bytes:
        if self._read is None:
            raise Unreadable("no memory reader")
        if address <= 0 or address >= 1 << 48 or length < 0 or length > 1 << 16:
            raise Unreadable(f"address {address:#x} is not one a value can be at")
        try:
            return bytes(self._read(address, length))
        except (RuntimeError, ValueError, OSError) as exc:  # gdb.MemoryError is a RuntimeError
            raise Unreadable(f"memory at {address:#x} cannot be read ({exc})") from None

    def word(self, address: int) -> int:
        return struct.unpack("<Q", self.read(address, 8))[0]


@lru_cache(maxsize=4096)  # a pure function of the type's spelling, asked for each argument of each hit
def normal(cpp: str) -> str:
    t = " ".join(cpp.split()).lstrip(":")
    t = re.sub(r"\s*\bconst$", "", t)
    return t.replace("::std::", "std::")


def describe(cpp: str, data: bytes | None, address: int | None, mem: Memory) -> dict:
    """The value of an object of type ``cpp`` (a referent, no ``&``), given its bytes or its address."""
    t = normal(cpp)
    if data is None and address is not None and _size_of(t):
        data = mem.read(address, _size_of(t))  # a reference to a trivially copyable value
    if t in _TENSOR_TYPES:
        return {"tensor": tensor(address, mem)}
    m = _OPTIONAL.match(t)
    if m:
        return _optional(normal(m.group(1)), data, address, mem)
    if t.startswith("c10::ArrayRef<") or t in ("at::TensorList", "at::IntArrayRef", "c10::IntArrayRef",
                                                 "c10::SymIntArrayRef"):
        return _array_ref(_element(t), _bytes(data), mem)
    if t.startswith("c10::OptionalArrayRef<"):
        raw = _bytes(data if data is not None else mem.read(_addr(address), 24))
        return {"none": True} if not raw[16] else _array_ref(_element(t), raw[:16], mem)
    if t.startswith(("std::basic_string_view<", "std::string_view", "c10::string_view")):
        return _string_view(_bytes(data), mem)
    if t == "c10::SymInt":
        return _symint(struct.unpack("<q", _bytes(data if data is not None else mem.read(_addr(address), 8))[:8])[0])
    if data is not None:
        scalar = _scalar(t, data)
        if scalar is not None:
            return scalar
        if t.endswith("*"):
            return {"address": struct.unpack("<Q", data[:8])[0]}
    if address is not None:
        return {"address": address}
    raise Unreadable(f"pttrace has no reader for {t}")


def _bytes(data: bytes | None) -> bytes:
    if data is None:
        raise Unreadable("its bytes were not read")
    return data


def _addr(address: int | None) -> int:
    if address is None:
        raise Unreadable("its address is not known")
    return address


def _size_of(t: str) -> int:
    """Bytes of a trivially copyable type read from memory (a reference to one); 0: read by address."""
    if t in _SIGNED:
        return _SIGNED[t]
    if t in _UNSIGNED:
        return _UNSIGNED[t]
    if t in ("bool", "double", "float", "c10::DispatchKeySet", "c10::Device") or t in _ENUMS:
        return {"bool": 1, "double": 8, "float": 4, "c10::DispatchKeySet": 8, "c10::Device": 2}.get(t, 1)
    if t.startswith(("c10::ArrayRef<", "std::basic_string_view<", "std::string_view", "c10::string_view")):
        return 16
    m = _OPTIONAL.match(t)
    if m:
        inner = normal(m.group(1))
        size = _size_of(inner)
        if size and size <= 16:
            return size + 1 if size < 8 else size + 8
    return 0


def _scalar(t: str, data: bytes) -> dict | None:
    if t == "bool":
        if data[0] > 1:
            raise Unreadable(f"a bool holding {data[0]}")
        return {"value": bool(data[0])}
    if t in _SIGNED:
        n = _SIGNED[t]
        return {"value": int.from_bytes(data[:n], "little", signed=True)}
    if t in _UNSIGNED:
        n = _UNSIGNED[t]
        return {"value": int.from_bytes(data[:n], "little")}
    if t == "double":
        return {"value": _finite(struct.unpack("<d", data[:8])[0])}
    if t == "float":
        return {"value": _finite(struct.unpack("<f", data[:4])[0])}
    if t == "c10::DispatchKeySet":
        return {"keyset": struct.unpack("<Q", data[:8])[0]}
    if t in _ENUMS:
        return {_ENUMS[t]: data[0]}
    if t == "c10::Device":
        return {"device": [int.from_bytes(data[:1], "little", signed=True), int.from_bytes(data[1:2], "little", signed=True)]}
    return None


def _finite(x: float):
    """JSON has no inf or nan: they are said as text."""
    return x if x == x and x not in (float("inf"), float("-inf")) else repr(x)


def _optional(inner: str, data: bytes | None, address: int | None, mem: Memory) -> dict:
    if inner in _TENSOR_TYPES:
        # std::optional<at::Tensor>: torch's specialisation keeps an undefined Tensor for "none".
        return {"tensor": tensor(address, mem)}
    size = _size_of(inner)
    if not size:
        return {"address": _addr(address)} if address is not None else {}
    raw = data if data is not None else mem.read(_addr(address), _size_of(f"std::optional<{inner}>"))
    flag = raw[size] if size < 8 else raw[((size + 7) // 8) * 8]
    if flag > 1:
        raise Unreadable(f"an optional whose flag holds {flag}")
    if not flag:
        return {"none": True}
    return describe(inner, raw[:size], None, mem)


def _element(t: str) -> str:
    if t == "at::TensorList":
        return "at::Tensor"
    if t in ("at::IntArrayRef", "c10::IntArrayRef"):
        return "long"
    if t == "c10::SymIntArrayRef":
        return "c10::SymInt"
    inner = t[t.index("<") + 1: t.rindex(">")]
    return normal(inner)


def _array_ref(element: str, raw: bytes, mem: Memory) -> dict:
    pointer, length = struct.unpack("<QQ", raw[:16])
    if length > 1 << 31:
        raise Unreadable(f"an ArrayRef of length {length}")
    if element in _TENSOR_TYPES:
        shown = min(length, MAX_TENSORS)
        out: dict = {"tensors": [tensor(pointer + 8 * i, mem) for i in range(shown)]}
    elif element in ("long", "int64_t", "c10::SymInt", "double"):
        shown = min(length, MAX_LIST)
        words = struct.unpack(f"<{shown}q", mem.read(pointer, 8 * shown)) if shown else ()
        if element == "double":
            values = [_finite(x) for x in struct.unpack(f"<{shown}d", struct.pack(f"<{shown}q", *words))]
        elif element == "c10::SymInt":
            values = [w if w >= _SYMINT_HEAP else "symbolic" for w in words]
        else:
            values = list(words)
        out = {"value": values}
    elif element == "bool":
        shown = min(length, MAX_LIST)
        out = {"value": [bool(b) for b in mem.read(pointer, shown)] if shown else []}
    else:
        return {"address": pointer, "length": length}
    if shown < length:
        out["length"] = length
    return out


def _string_view(raw: bytes, mem: Memory) -> dict:
    length, pointer = struct.unpack("<QQ", raw[:16])  # libstdc++: _M_len, then _M_str
    if length > 1 << 31:
        raise Unreadable(f"a string_view of length {length}")
    text = mem.read(pointer, min(length, MAX_TEXT)).decode("utf-8", "backslashreplace") if length else ""
    out: dict = {"value": text}
    if length > MAX_TEXT:
        out["length"] = length
    return out


def _symint(value: int) -> dict:
    return {"value": value} if value >= _SYMINT_HEAP else {"value": "symbolic"}


# Types whose reading needs the torch build's layout (tracer.values): tensors, Scalars, torch's enums.
_LAYOUT_TYPES = re.compile(r"^(?:at::Tensor|at::TensorBase|c10::Scalar|at::Scalar|c10::IListRef<at::Tensor>|"
                           r"at::ITensorListRef|at::TensorList|c10::ArrayRef<at::Tensor>|_object\*|PyObject\*|"
                           r"THPVariable\*|(?:c10|at)::(?:ScalarType|Layout|MemoryFormat|Device)|"
                           r"std::optional<(?:at::Tensor|(?:c10|at)::(?:ScalarType|Layout|MemoryFormat|Device|Scalar))>)$")


@lru_cache(maxsize=4096)
def needs_layout(cpp: str) -> bool:
    return bool(_LAYOUT_TYPES.match(normal(cpp)))


def from_values(cpp: str, passed, read_memory) -> dict:
    """A parameter read by ``tracer.values`` (``agent_value``: its layout installed by pttrace-setup), in
    this module's shape; without that package, its type and address."""
    reader = _values_reader()
    if reader is None:
        return {"address": passed} if isinstance(passed, int) else {"unreadable": "tracer.values is not installed"}
    return converted(reader(cpp, passed, read_memory))


def converted(d: dict) -> dict:
    """``tracer.values``' dict (``{kind, ...}``) as an argument's value here."""
    kind = d.get("kind")
    if kind in ("tensor", "undefined"):
        return {"tensor": d if kind == "tensor" else {"undefined": True}}
    if kind == "tensors":
        tensors = [x if x.get("kind") != "undefined" else {"undefined": True} for x in d.get("tensors") or []]
        out: dict[str, object] = {"tensors": tensors}
        if d.get("length", 0) > len(tensors):
            out["length"] = d["length"]
        return out
    if kind == "none":
        return {"none": True}
    if kind in ("value", "scalar"):
        return {"value": d.get("value")} if kind == "value" else {"value": d.get("value"), "scalar": d.get("type")}
    if kind == "opaque":
        return {"address": d.get("address")}
    if kind == "unreadable":
        out = {"unreadable": d.get("why") or "not read"}
        if isinstance(d.get("address"), int):
            out["address"] = d["address"]
        return out
    return {"unreadable": f"tracer.values gave a {kind!r}"}


def _values_reader():
    if not _VALUES:
        try:
            from tracer.values import agent_value

            _VALUES.append(agent_value)
        except ImportError:
            _VALUES.append(None)
    return _VALUES[0]


_VALUES: list = []


def tensor(address: int | None, mem: Memory) -> dict:
    """An ``at::Tensor`` at ``address`` (its one word: the ``TensorImpl*``), read by ``tracer.values``
    when it is there; else its impl's address."""
    at = _addr(address)
    reader = _tensor_reader()
    if reader is not None:
        return reader(at, mem)
    return {"impl": mem.word(at), "unreadable": "pttrace's tensor reader is not installed (tracer.values)"}


_READER: list = []


def _tensor_reader():
    if not _READER:
        try:
            from tracer.values import agent_tensor

            _READER.append(lambda at, mem: converted(agent_tensor(at, mem._read))["tensor"])
        except ImportError:
            _READER.append(None)
    return _READER[0]


def describe_gdb_value(value, cpp: str) -> dict:
    """A DWARF variable's value (a debug build's frame), by the same readers: gdb gives its bytes or
    address, pttrace reads it."""
    import gdb  # type: ignore[import-not-found]

    code = value.type.strip_typedefs().code
    mem = Memory(lambda a, n: gdb.selected_inferior().read_memory(a, n))
    if code in (gdb.TYPE_CODE_REF, getattr(gdb, "TYPE_CODE_RVALUE_REF", -1)):
        target = value.referenced_value()
        return describe(re.sub(r"&&?$", "", normal(cpp)).strip(), None, int(target.address), mem)
    if code == gdb.TYPE_CODE_PTR:
        return {"address": int(value) & 0xFFFFFFFFFFFFFFFF}
    if code in (gdb.TYPE_CODE_INT, gdb.TYPE_CODE_BOOL, gdb.TYPE_CODE_ENUM, gdb.TYPE_CODE_CHAR):
        return describe(cpp, (int(value) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"), None, mem)
    if code == gdb.TYPE_CODE_FLT:
        return {"value": _finite(float(value))}
    if value.address is not None:
        return describe(cpp, None, int(value.address), mem)
    raise Unreadable("gdb holds it in registers, not in memory")
