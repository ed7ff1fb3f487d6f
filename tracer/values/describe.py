"""One entry point from a C++ parameter type to its value: ``describe(read_memory, layout, type, value)``.

``type`` is the parameter's type as the demangled signature spells it; ``value`` is what the caller
found where the x86-64 System V ABI puts that parameter at the function's first instruction:

| parameter type | how it is passed | ``value`` to give |
|---|---|---|
| ``at::Tensor const&``, ``at::Tensor&``, ``at::TensorBase const&`` | a pointer in an integer register (or stack slot) | that pointer |
| ``at::Tensor`` by value (non-trivial class) | the caller's copy, by its address | that address |
| ``std::optional<at::Tensor> const&`` | a pointer | that pointer |
| ``c10::Scalar const&``, ``c10::Scalar`` by value | a pointer (a by-value Scalar is a caller's copy) | that pointer |
| ``at::TensorList`` = ``c10::ArrayRef<at::Tensor>``, ``c10::ArrayRef<long>`` (``IntArrayRef``), ``c10::ArrayRef<c10::SymInt>`` | two words, two integer registers (data, length) | ``(data, length)`` |
| ``at::ITensorListRef const&`` | a pointer | that pointer |
| ``c10::OptionalArrayRef<long>`` (24 bytes) | in memory: on the stack | its address |
| ``_object*`` / ``PyObject*`` / ``THPVariable*`` of a tensor | a pointer | that pointer |
| ``long``, ``bool``, ``c10::ScalarType``, ``c10::Layout``, ``c10::MemoryFormat``, ``c10::Device`` | an integer register (Device: type in the low byte, index in the next) | the register's value |
| ``double`` | an xmm register | the float, or its 8 bytes |
| ``std::optional<c10::ScalarType>`` and other optionals of a byte | an integer register (value byte, then the flag byte) | the register's value |
| ``std::optional<long>``, ``std::optional<double>`` | two eightbytes: the value (int or xmm register), then the flag (int register) | ``(value, flag)`` |
| ``c10::string_view``, ``std::string_view`` | two words (libstdc++: length, then pointer) | ``(length, pointer)`` |
| any of the register kinds above once the six integer registers are taken | an 8-byte stack slot | the slot's 8 bytes |

A type it has no reader for gives ``Opaque(type, value)``: its type and address, never a guess.
Standard library only.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import lru_cache

from .layout import TorchLayout
from .memory import BadValue, Memory, Unreadable
from .objects import (NoneValue, read_array_ref_tensors, read_itensor_list, read_optional_tensor, read_scalar,
                      read_tensor_list)
from .tensor import read_tensor, read_thp_variable

MAX_INTS = 64
MAX_TEXT = 256
# c10::SymInt's MAX_UNREPRESENTABLE_INT (-1 & ~(1 << 62)): at or below it, a tagged pointer to a symbolic node
_SYMINT_LIMIT = -(1 << 62) - 1
_OPTIONAL = re.compile(r"^(?:std|c10)::optional<(.*)>$")
_ARRAY = re.compile(r"^c10::ArrayRef<(.*)>$")


@dataclass(frozen=True)
class Plain:
    """A number, a bool, a name (a dtype, a layout, a device) or a list of them."""

    type: str
    value: object
    kind = "value"

    def to_dict(self) -> dict:
        v = self.value
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            v = repr(v)
        return {"kind": self.kind, "type": self.type, "value": list(v) if isinstance(v, tuple) else v}

    def text(self) -> str:
        v = self.value
        if isinstance(v, tuple):
            return "[" + ", ".join(map(str, v)) + "]"
        return v if isinstance(v, str) and self.type in _NAMED else repr(v)


@dataclass(frozen=True)
class Opaque:
    """A value of a type pttrace does not read: its type and where it is."""

    type: str
    address: int | None
    kind = "opaque"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "type": self.type, "address": self.address}

    def text(self) -> str:
        return f"{self.type} at {self.address:#x}" if self.address is not None else self.type


_NAMED = {"c10::ScalarType", "c10::Layout", "c10::MemoryFormat", "c10::Device", "std::string_view"}


@lru_cache(maxsize=4096)
def normal(cpp: str) -> str:
    """``const at::Tensor &`` / ``at::Tensor const&`` -> ``at::Tensor const&``; ``at::`` aliases of c10 types
    to their c10 names."""
    t = " ".join(cpp.split()).replace("::std::", "std::").lstrip(":")
    t = re.sub(r"^const (.*?)\s*(&|\*)$", r"\1 const\2", t).replace(" &", "&").replace(" *", "*")
    for alias, real in (("at::ScalarType", "c10::ScalarType"), ("at::Layout", "c10::Layout"),
                        ("at::MemoryFormat", "c10::MemoryFormat"), ("at::Device", "c10::Device"),
                        ("at::IntArrayRef", "c10::ArrayRef<long>"), ("c10::IntArrayRef", "c10::ArrayRef<long>"),
                        ("c10::SymIntArrayRef", "c10::ArrayRef<c10::SymInt>"),
                        ("at::TensorList", "c10::ArrayRef<at::Tensor>"),
                        ("at::ITensorListRef", "c10::IListRef<at::Tensor>"), ("at::Scalar", "c10::Scalar"),
                        ("int64_t", "long"), ("c10::string_view", "std::string_view")):
        t = re.sub(r"(?<![\w:])" + re.escape(alias) + r"(?![\w])", real, t)
    t = re.sub(r"std::basic_string_view<char(?:, std::char_traits<char> ?)?>", "std::string_view", t)
    return t


def describe(read_memory, layout: TorchLayout, type_name: str, value, symbolize=None):
    """The value of a parameter of C++ type ``type_name`` passed as ``value`` (see the table above)."""
    t, base = _parse(type_name)
    try:
        return _describe(read_memory, layout, t, base, value, symbolize)
    except BadValue as exc:
        return Unreadable(str(exc), type_name, value if isinstance(value, int) else None)
    except (TypeError, ValueError, struct.error) as exc:  # a value of the wrong shape for the type
        return Unreadable(f"pttrace was given {value!r} for a {type_name} ({exc})", type_name)


@lru_cache(maxsize=4096)
def _parse(type_name: str) -> tuple[str, str]:
    """(the normal spelling, the type without const or &): once per type name."""
    t = normal(type_name)
    return t, re.sub(r"\s*const(?=&|\*|$)", "", t).rstrip("&").strip()


def _describe(read_memory, layout, t, base, value, symbolize):
    by_ref = t.endswith("&")
    if base in ("at::Tensor", "at::TensorBase"):
        return read_tensor(read_memory, layout, value, symbolize)
    if base in ("_object*", "PyObject*", "THPVariable*"):
        if value == 0:  # NULL, a value in its own right: a module function's self_, kwargs when none were given
            return Opaque(t, 0)
        return read_thp_variable(read_memory, layout, value, symbolize)
    if base == "c10::Scalar":
        return read_scalar(read_memory, layout, value)
    if base == "std::optional<at::Tensor>":
        return read_optional_tensor(read_memory, layout, value, symbolize)
    if base == "c10::IListRef<at::Tensor>":
        return read_itensor_list(read_memory, layout, value, symbolize)
    m = _ARRAY.match(base)
    if m:
        if by_ref:
            value = Memory(read_memory).words(value, 2, signed=False)
        data, length = _two_words(value)
        if m.group(1) == "at::Tensor":
            return read_tensor_list(read_memory, layout, data, length, symbolize)
        return _int_array(read_memory, base, m.group(1), data, length)
    if base.startswith("c10::OptionalArrayRef<"):
        mem = Memory(read_memory)
        if not mem.boolean(value + 16, "the optional's engaged flag"):
            return NoneValue()
        data, length = mem.words(value, 2, signed=False)
        return _int_array(read_memory, base, base[len("c10::OptionalArrayRef<"):-1], data, length)
    if base == "std::string_view":
        length, pointer = _two_words(Memory(read_memory).words(value, 2, signed=False) if by_ref else value)
        return _string_view(read_memory, length, pointer)
    if by_ref and _BYTES.get(base.split("<")[0] if base.startswith("std::optional") else base):
        value = Memory(read_memory).bytes(value, 16 if base.startswith("std::optional") else _BYTES[base])
        if base.startswith("std::optional") and _BYTES.get(base[len("std::optional<"):-1], 0) == 8:
            value = (value[:8], value[8:16])  # the payload's eightbyte, then the flag's
    return _register_value(layout, base, value) or Opaque(t, value if isinstance(value, int) else None)


_BYTES = {"long": 8, "bool": 1, "double": 8, "int": 4, "c10::ScalarType": 1, "c10::Layout": 1,
          "c10::MemoryFormat": 1, "c10::Device": 2, "std::optional": 16}


def _two_words(value) -> tuple[int, int]:
    if isinstance(value, (bytes, bytearray)):
        return struct.unpack("<QQ", bytes(value[:16]))
    a, b = value
    return int(a) & (1 << 64) - 1, int(b) & (1 << 64) - 1


def _int_array(read_memory, base: str, element: str, data: int, length: int):
    if length >= 1 << 31:
        raise BadValue(f"an ArrayRef of length {length}")
    if element not in ("long", "c10::SymInt", "double", "bool"):
        return Opaque(base, data)
    shown = min(length, MAX_INTS)
    mem = Memory(read_memory)
    values: tuple[bool | int | float | str, ...]  # a str: a symbolic SymInt, or how many more there are
    if element == "bool":
        values = tuple(mem.boolean(data + i, "a bool") for i in range(shown))
    elif element == "double":
        values = struct.unpack(f"<{shown}d", mem.bytes(data, 8 * shown)) if shown else ()
    else:
        words = mem.words(data, shown) if shown else ()
        values = tuple(w if element == "long" or w > _SYMINT_LIMIT else "symbolic" for w in words)
    if shown < length:
        values += (f"… {length - shown} more",)
    return Plain(base, values)


def _string_view(read_memory, length: int, pointer: int):
    if length >= 1 << 31:
        raise BadValue(f"a string_view of length {length}")
    raw = Memory(read_memory).bytes(pointer, min(length, MAX_TEXT)) if length else b""
    text = raw.decode("utf-8", "backslashreplace") + ("…" if length > MAX_TEXT else "")
    return Plain("std::string_view", text)


def _int(value, size: int, signed: bool) -> int:
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(bytes(value[:size]), "little", signed=signed)
    v = int(value) & ((1 << (8 * size)) - 1)
    return v - (1 << 8 * size) if signed and v >> (8 * size - 1) else v


def _register_value(layout: TorchLayout, base: str, value):
    """A value passed in a register (or read into bytes): numbers, bools, torch's enums, optionals."""
    m = _OPTIONAL.match(base)
    if m:
        inner = m.group(1)
        if isinstance(value, tuple):  # (value eightbyte, flag eightbyte): optional<long>/<double>
            payload, flag = value
            if _int(flag, 1, False) > 1:
                raise BadValue(f"an optional's flag of {_int(flag, 1, False)}")
            return NoneValue() if not _int(flag, 1, False) else _register_value(layout, inner, payload)
        size = _BYTES.get(inner)
        if size is None or size > 2:
            return None
        raw = _int(value, 8, False)
        flag = raw >> (8 * size) & 0xFF
        if flag > 1:
            raise BadValue(f"an optional's flag of {flag}")
        return NoneValue() if not flag else _register_value(layout, inner, raw & ((1 << 8 * size) - 1))
    if base in ("long", "int", "int64_t"):
        return Plain(base, _int(value, 8 if base != "int" else 4, True))
    if base == "bool":
        b = _int(value, 1, False)
        if b > 1:
            raise BadValue(f"a bool holding {b}")
        return Plain(base, bool(b))
    if base == "double":
        if isinstance(value, float):
            return Plain(base, value)
        return Plain(base, struct.unpack("<d", _int(value, 8, False).to_bytes(8, "little"))[0])
    if base == "c10::ScalarType":
        d = layout.dtype(_int(value, 1, False))
        if d is None:
            raise BadValue(f"ScalarType {_int(value, 1, False)} is not one of this torch's dtypes")
        return Plain(base, d.name)
    if base in ("c10::Layout", "c10::MemoryFormat"):
        table = "layouts" if base == "c10::Layout" else "memory_formats"
        name = layout.enum_name(table, _int(value, 1, False))
        if name is None:
            raise BadValue(f"{base} {_int(value, 1, False)} is not one this torch knows")
        return Plain(base, name)
    if base == "c10::Device":
        kind, index = _int(value, 1, False), _int(_int(value, 2, False) >> 8, 1, True)
        name = layout.enum_name("device_types", kind)
        if name is None or not -1 <= index < 64:
            raise BadValue(f"a Device of type {kind}, index {index}")
        return Plain(base, name if index < 0 else f"{name}:{index}")
    return None
