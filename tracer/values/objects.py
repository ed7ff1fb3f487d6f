"""Torch's argument objects other than a lone tensor, read from memory: ``c10::Scalar``,
``std::optional<at::Tensor>``, tensor lists (``at::TensorList``, ``at::ITensorListRef``), and the tensor
of a ``THPVariable*``/``PyObject*`` at the Python binding.

Layouts (x86-64, libstdc++), from the wheel's headers:
- ``c10::Scalar``: ``Tag tag`` (int), then ``union v`` at ``layout.scalar_value`` (16: the union holds a
  ``c10::complex<double>``, declared ``alignas(16)``): ``double d``, ``int64_t i``, ``uint64_t u``,
  ``complex<double> z``, or a ``SymNode`` pointer for the symbolic tags (``HAS_sd/si/sb``); a bool is
  kept in ``i``.
- ``std::optional<at::Tensor>``: the tensor's word, then the engaged flag (byte 8).
- ``c10::ArrayRef<at::Tensor>`` (``at::TensorList``): ``{const Tensor* data; size_t length}``.
- ``c10::IListRef<at::Tensor>`` (``at::ITensorListRef``): a 16-byte payload union, then its tag (int):
  ``Unboxed`` = an ArrayRef, ``Boxed`` = ``const c10::List<Tensor>*`` (a ``ListImpl``: its
  ``intrusive_ptr_target`` header, then ``std::vector<IValue>``; an IValue is a word of payload, then
  its tag), ``Materialized`` = ``const std::vector<std::reference_wrapper<const Tensor>>*``.
Standard library only.
"""
from __future__ import annotations

from dataclasses import dataclass

from .layout import TorchLayout
from .memory import BadValue, Memory, Snapshot, Unreadable, check_pointer
from .tensor import TensorValue, UndefinedTensor, read_impl

MAX_TENSORS = 16  # tensors of a list read; the list's length is kept when it is longer
MAX_LENGTH = 1 << 31
_LIST_IMPL_VECTOR = 16  # ListImpl: vtable pointer and two 32-bit counts (intrusive_ptr_target), then the vector
_IVALUE = 16  # an IValue: 8 bytes of payload, a 32-bit tag, padding


@dataclass(frozen=True)
class ScalarValue:
    """A ``c10::Scalar``: ``kind`` is torch's (``float``, ``int``, ``uint``, ``complex``, ``bool``) or
    ``symbolic`` (a SymFloat/SymInt/SymBool: a node whose value is not in memory)."""

    kind_of: str
    value: object
    kind = "scalar"

    def to_dict(self) -> dict:
        v = self.value
        if isinstance(v, complex):
            v = [v.real, v.imag]
        elif isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
            v = repr(v)
        return {"kind": self.kind, "type": self.kind_of, "value": v}

    def text(self) -> str:
        return f"{self.value!r}" if self.kind_of != "symbolic" else f"symbolic ({self.value})"


@dataclass(frozen=True)
class TensorList:
    """A list of tensors: each read, or unreadable; ``length`` may exceed what was read."""

    tensors: tuple
    length: int
    form: str = "ArrayRef"  # or the IListRef's tag: Unboxed, Boxed, Materialized
    kind = "tensors"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "length": self.length, "form": self.form,
                "tensors": [t.to_dict() for t in self.tensors]}

    def text(self) -> str:
        more = f", … {self.length - len(self.tensors)} more" if self.length > len(self.tensors) else ""
        return "[" + "; ".join(t.text() for t in self.tensors) + more + "]"


@dataclass(frozen=True)
class NoneValue:
    """An empty ``std::optional``."""

    kind = "none"

    def to_dict(self) -> dict:
        return {"kind": self.kind}

    def text(self) -> str:
        return "None"


def read_scalar(read_memory, layout: TorchLayout, address: int) -> ScalarValue | Unreadable:
    """The ``c10::Scalar`` at ``address`` (a ``const c10::Scalar&``'s register, or a by-value Scalar's
    hidden pointer: both are its address)."""
    if not layout.scalar_tags or layout.scalar_value is None:
        return Unreadable("c10::Scalar's layout was not found in this torch's headers", "c10::Scalar", address)
    mem = Memory(read_memory)
    try:
        mem = Snapshot(mem, address, layout.scalar_value + 16)  # the tag and the widest value: one read
        tag = mem.u32(address)
        if tag >= len(layout.scalar_tags):
            raise BadValue(f"a Scalar tag of {tag} (this torch has {len(layout.scalar_tags)})")
        name = layout.scalar_tags[tag]
        at = address + layout.scalar_value
        if name == "HAS_d":
            return ScalarValue("float", mem.f64(at))
        if name == "HAS_i":
            return ScalarValue("int", mem.i64(at))
        if name == "HAS_u":
            return ScalarValue("uint", mem.u64(at))
        if name == "HAS_z":
            return ScalarValue("complex", complex(mem.f64(at), mem.f64(at + 8)))
        if name == "HAS_b":
            b = mem.i64(at)
            if b not in (0, 1):
                raise BadValue(f"a bool Scalar holding {b}")
            return ScalarValue("bool", bool(b))
        if name in ("HAS_sd", "HAS_si", "HAS_sb"):
            node = mem.pointer(at, "the symbolic Scalar's node")
            return ScalarValue("symbolic", f"{'SymFloat SymInt SymBool'.split()[('HAS_sd', 'HAS_si', 'HAS_sb').index(name)]} "
                                           f"node at {node:#x}")
        raise BadValue(f"a Scalar tag pttrace does not know ({name})")
    except BadValue as exc:
        return Unreadable(str(exc), "c10::Scalar", address)


def read_optional_tensor(read_memory, layout: TorchLayout, address: int, symbolize=None):
    """A ``std::optional<at::Tensor>`` at ``address``: None (``NoneValue``), or the tensor."""
    mem = Memory(read_memory)
    try:
        engaged = mem.boolean(address + 8, "the optional's engaged flag")
        if not engaged:
            return NoneValue()
        impl = mem.pointer(address, "the tensor's TensorImpl pointer")
    except BadValue as exc:
        return Unreadable(str(exc), "std::optional<at::Tensor>", address)
    return read_impl(mem, layout, impl, symbolize)


def read_tensor_list(read_memory, layout: TorchLayout, data: int, length: int, symbolize=None,
                     form: str = "ArrayRef") -> TensorList | Unreadable:
    """``length`` at::Tensors stored one word each from ``data`` (an ArrayRef's two words)."""
    mem = Memory(read_memory)
    try:
        if not 0 <= length < MAX_LENGTH:
            raise BadValue(f"a list of {length} tensors")
        if length:
            check_pointer(data, "the list's data pointer")
        impls = mem.words(data, min(length, MAX_TENSORS), signed=False) if length else ()
    except BadValue as exc:
        return Unreadable(str(exc), "at::TensorList", data)
    return TensorList(tuple(_impl(mem, layout, i, symbolize) for i in impls), length, form)


def read_array_ref_tensors(read_memory, layout: TorchLayout, address: int, symbolize=None):
    """An ``at::TensorList`` object at ``address`` (its two words in memory)."""
    try:
        data, length = Memory(read_memory).words(address, 2, signed=False)
    except BadValue as exc:
        return Unreadable(str(exc), "at::TensorList", address)
    return read_tensor_list(read_memory, layout, data, length, symbolize)


def read_itensor_list(read_memory, layout: TorchLayout, address: int, symbolize=None):
    """The ``at::ITensorListRef`` at ``address``, whichever form it holds."""
    tags = layout.ilistref_tags
    if not tags:
        return Unreadable("IListRef's tags were not found in this torch's headers", "at::ITensorListRef", address)
    mem = Memory(read_memory)
    try:
        first, second = mem.words(address, 2, signed=False)
        tag = mem.u32(address + 16)
        if tag >= len(tags):
            raise BadValue(f"an IListRef tag of {tag}")
        form = tags[tag]
        if form == "Unboxed":
            return read_tensor_list(read_memory, layout, first, second, symbolize, form)
        if form == "Materialized":  # a vector of pointers to tensors
            begin, end = mem.words(check_pointer(first, "the materialized vector"), 2, signed=False)
            return _vector_of_refs(mem, layout, begin, end, symbolize)
        if form == "Boxed":
            return _boxed(mem, layout, first, symbolize)
        raise BadValue(f"an IListRef holding {form}")
    except BadValue as exc:
        return Unreadable(str(exc), "at::ITensorListRef", address)


def _vector_of_refs(mem: Memory, layout, begin: int, end: int, symbolize) -> TensorList:
    count = _count(begin, end, 8)
    refs = mem.words(begin, min(count, MAX_TENSORS), signed=False) if count else ()
    out = []
    for ref in refs:
        try:
            out.append(_impl(mem, layout, mem.u64(check_pointer(ref, "a tensor reference")), symbolize))
        except BadValue as exc:
            out.append(Unreadable(str(exc), "at::Tensor", ref))
    return TensorList(tuple(out), count, "Materialized")


def _boxed(mem: Memory, layout: TorchLayout, list_ptr: int, symbolize) -> TensorList:
    if "Tensor" not in layout.ivalue_tags:
        raise BadValue("IValue's tags were not found in this torch's headers")
    impl = mem.pointer(check_pointer(list_ptr, "the boxed list"), "the list's ListImpl")
    begin, end = mem.words(impl + _LIST_IMPL_VECTOR, 2, signed=False)
    count = _count(begin, end, _IVALUE)
    out: list[TensorValue | UndefinedTensor | Unreadable] = []
    for i in range(min(count, MAX_TENSORS)):
        payload, tag = mem.u64(begin + i * _IVALUE), mem.u32(begin + i * _IVALUE + 8)
        if tag != layout.ivalue_tags.index("Tensor"):
            out.append(Unreadable(f"an IValue tagged {tag}, not a Tensor", "c10::IValue", begin + i * _IVALUE))
        else:
            out.append(_impl(mem, layout, payload, symbolize))
    return TensorList(tuple(out), count, "Boxed")


def _count(begin: int, end: int, size: int) -> int:
    if end < begin or (end - begin) % size or (end - begin) // size >= MAX_LENGTH:
        raise BadValue(f"a vector from {begin:#x} to {end:#x} is not one of {size}-byte elements")
    if begin:
        check_pointer(begin, "the vector's storage")
    return (end - begin) // size


def _impl(mem: Memory, layout: TorchLayout, impl: int, symbolize) -> TensorValue | UndefinedTensor | Unreadable:
    try:
        check_pointer(impl, "the tensor's TensorImpl pointer")
    except BadValue as exc:
        return Unreadable(str(exc), "at::Tensor", impl)
    return read_impl(mem, layout, impl, symbolize)
