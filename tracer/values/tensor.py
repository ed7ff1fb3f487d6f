"""An ``at::Tensor`` read from the target's memory: shape, strides, dtype, device, autograd state, key set
and, for a CPU tensor of at most ``MAX_VALUES`` elements, its values.

An ``at::Tensor`` is one word, an ``intrusive_ptr<TensorImpl>``; an undefined tensor points at
``UndefinedTensorImpl``'s singleton (an empty device, the key set the layout recorded for it). Every
field passes a check before it is believed (a dimension count over 64, a negative size or stride, a
numel that is not the product of the sizes, an unknown dtype or device, a bool that is neither 0 nor 1,
an unaligned pointer): a tensor that fails one is ``Unreadable(why)``, never partly shown.
Standard library only (the gdb agent imports it); no call into the target.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from . import elements
from .layout import ImplFields, TorchLayout
from .memory import BadValue, Memory, Snapshot, Unreadable, check_pointer

MAX_DIMS = 64  # torch's own limit on a tensor's dimensions
MAX_VALUES = 8
_MAX_EXTENT = 1 << 62  # sizes, strides and offsets beyond this cannot index real memory
TENSOR_TYPE = "at::Tensor"
# Several elements a byte: their storages are smaller than numel bytes (no inside-the-storage check).
_PACKED = ("quint4x2", "quint2x4")
# A TensorImpl's checked shape is kept by its bytes (TorchLayout.shape_cache): a tensor is read at every hop
# of a call (the entry, autograd, the kernel) with the same bytes; storage, autograd state and values are
# read afresh each time.
_SHAPES_MAX = 4096
_INLINE: dict[int, struct.Struct] = {}  # the inline sizes and strides, by capacity
_U64, _I64, _U16 = struct.Struct("<Q"), struct.Struct("<q"), struct.Struct("<H")


@dataclass(frozen=True)
class UndefinedTensor:
    """An ``at::Tensor`` that holds no tensor (a missing optional argument, a default ``Tensor()``)."""

    address: int | None = None
    kind = "undefined"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "type": TENSOR_TYPE}

    def text(self) -> str:
        return "undefined tensor"


@dataclass(frozen=True)
class TensorValue:
    """What pttrace read of one tensor (``impl``: its TensorImpl's address)."""

    impl: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None  # None for layouts without strides (sparse, mkldnn)
    storage_offset: int
    numel: int
    dtype: str
    device: str
    layout: str
    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None  # the autograd Node's class (``SigmoidBackward0``); None for a leaf
    is_view: bool
    data_ptr: int | None  # None without storage (meta tensors have a null one: 0)
    key_set: int
    values: tuple | None = None  # the elements, row-major, for a small CPU tensor
    note: str | None = None  # what was not read, and why (values, the grad_fn's name)

    kind = "tensor"

    def to_dict(self) -> dict:
        out: dict[str, object] = {"kind": self.kind, "sizes": list(self.sizes),
               "strides": list(self.strides) if self.strides is not None else None,
               "storage_offset": self.storage_offset, "numel": self.numel, "dtype": self.dtype,
               "device": self.device, "layout": self.layout, "requires_grad": self.requires_grad,
               "is_leaf": self.is_leaf, "grad_fn": self.grad_fn, "is_view": self.is_view,
               "data_ptr": self.data_ptr, "key_set": self.key_set, "impl": self.impl}
        if self.values is not None:
            out["values"] = [elements.to_json(v) for v in self.values]
        if self.note:
            out["note"] = self.note
        return out

    def text(self) -> str:
        """``float32[2, 3] strides (3, 1) cpu requires_grad grad_fn=SigmoidBackward0``, as one line."""
        parts = [f"{self.dtype}[{', '.join(map(str, self.sizes))}]"]
        if self.strides is not None and self.strides != contiguous_strides(self.sizes):
            parts.append(f"strides ({', '.join(map(str, self.strides))})")
        if self.storage_offset:
            parts.append(f"offset {self.storage_offset}")
        parts.append(self.device)
        if self.layout != "strided":
            parts.append(self.layout)
        if self.requires_grad:
            parts.append("requires_grad")
        if self.grad_fn:
            parts.append(f"grad_fn={self.grad_fn}")
        if self.is_view:
            parts.append("view")
        if self.values is not None:
            parts.append("= [" + ", ".join(elements.show(v) for v in self.values) + "]")
        return " ".join(parts)


def contiguous_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for s in reversed(sizes):
        out.append(step)
        step *= max(s, 1)
    return tuple(reversed(out))


def read_tensor(read_memory, layout: TorchLayout, address: int, symbolize=None) -> TensorValue | UndefinedTensor | Unreadable:
    """The ``at::Tensor`` stored at ``address`` (a ``const at::Tensor&`` argument's register value).

    ``symbolize(address) -> name | None`` names a C++ vtable (``vtable for torch::autograd::generated::
    SigmoidBackward0``) from pttrace's symbol index; without it the grad_fn is given by address."""
    mem = Memory(read_memory)
    try:
        impl = mem.pointer(address, "the tensor's TensorImpl pointer")
    except BadValue as exc:
        return Unreadable(str(exc), TENSOR_TYPE, address)
    return read_impl(mem, layout, impl, symbolize)


def read_tensor_impl(read_memory, layout: TorchLayout, impl: int, symbolize=None):
    """The tensor whose ``TensorImpl`` is at ``impl`` (``t._cdata`` in Python; an ``intrusive_ptr``'s target)."""
    try:
        check_pointer(impl, "the TensorImpl pointer")
    except BadValue as exc:
        return Unreadable(str(exc), TENSOR_TYPE, impl)
    return read_impl(Memory(read_memory), layout, impl, symbolize)


def read_impl(mem: Memory, layout: TorchLayout, impl: int, symbolize=None) -> TensorValue | UndefinedTensor | Unreadable:
    """The tensor whose ``TensorImpl`` is at ``impl``."""
    fields = layout.impl_fields
    if fields is None:
        why = "; ".join(layout.problems) or "no layout"
        missing = ", ".join(layout.tensor_missing)
        return Unreadable(f"the layout of this torch has no {missing} ({why})", TENSOR_TYPE, impl)
    try:
        return _read(mem, layout, fields, impl, symbolize)
    except BadValue as exc:
        return Unreadable(str(exc), TENSOR_TYPE, impl)


def _shape(mem: Memory, lay: TorchLayout, f: ImplFields, impl: int, blk: bytes) -> tuple:
    """What the TensorImpl's own bytes say, checked: (key set, device, dtype, sizes, strides, numel, storage
    offset, layout, whether these bytes alone decide it), or (None, ...) for the undefined tensor."""
    sas, inline = f.sizes_and_strides, f.inline_dims
    key_set, = _U64.unpack_from(blk, f.key_set)
    dev = blk[f.device_opt : f.device_opt + 3]
    if dev[2] == 0:
        if lay.undefined_key_set is not None and key_set == lay.undefined_key_set:
            return (None,) * 9
        raise BadValue("the TensorImpl has no device and is not the undefined tensor")
    if dev[2] != 1:
        raise BadValue(f"the device's optional flag is {dev[2]}, not a bool")
    device = _device(lay, dev[0], dev[1] - 256 if dev[1] > 127 else dev[1])
    index, = _U16.unpack_from(blk, f.data_type)
    dtype = lay.dtype(index)
    if dtype is None:
        raise BadValue(f"dtype index {index} is not one of this torch's dtypes")
    ndim, = _U64.unpack_from(blk, sas)
    if ndim > MAX_DIMS:
        raise BadValue(f"{ndim} dimensions is more than torch allows ({MAX_DIMS})")
    own = ndim <= inline  # sizes on the heap can change under the same pointer: not cached
    if own:
        words = _INLINE.setdefault(inline, struct.Struct(f"<{2 * inline}q")).unpack_from(blk, sas + 8)
        sizes, strides = words[:ndim], words[inline : inline + ndim]
    else:
        heap = check_pointer(_U64.unpack_from(blk, sas + 8)[0], "the out-of-line sizes pointer")
        words = mem.words(heap, 2 * ndim)
        sizes, strides = words[:ndim], words[ndim:]
    _check_extents(sizes, "size")
    _check_extents(strides, "stride")
    numel, = _I64.unpack_from(blk, f.numel)
    offset, = _I64.unpack_from(blk, f.storage_offset)
    layout_name = _layout(lay, key_set)
    if layout_name == "sparse_csr" and lay.compressed_layout is not None:  # the key is the family's
        own = False
        byte = mem.u8(impl + lay.compressed_layout)
        layout_name = lay.enum_name("compressed_layouts", byte) or ""
        if not layout_name:
            raise BadValue(f"a compressed sparse tensor whose layout byte is {byte}")
    product = 1
    for s in sizes:
        product *= s
    if layout_name == "strided" and numel != product:
        raise BadValue(f"numel {numel} is not the product of the sizes {list(sizes)}")
    if not 0 <= offset < _MAX_EXTENT:
        raise BadValue(f"storage offset {offset} is out of range")
    return key_set, device, dtype, tuple(sizes), tuple(strides), numel, offset, layout_name, own


def _read(mem: Memory, lay: TorchLayout, f: ImplFields, impl: int, symbolize) -> TensorValue | UndefinedTensor:
    """One read of the TensorImpl's fields (each read is a gdb call inside the agent), then the storage's
    data pointer, the AutogradMeta if there is one, and the values of a small CPU tensor."""
    blk = mem.bytes(impl, f.span)
    if lay.extra_meta is not None and blk[lay.extra_meta : lay.extra_meta + 8] != bytes(8):
        extra = check_pointer(_U64.unpack_from(blk, lay.extra_meta)[0], "the ExtraMeta pointer")
        if mem.u64(extra):
            raise BadValue("its sizes and strides are symbolic (SymInts in its SymbolicShapeMeta): not read")
    shapes = lay.shape_cache
    shape = shapes.get(blk)
    if shape is None:
        shape = _shape(mem, lay, f, impl, blk)
        if shape[-1] and len(shapes) < _SHAPES_MAX:
            shapes[blk] = shape
    if shape[0] is None:
        return UndefinedTensor(impl)
    key_set, device, dtype, sizes, strides, numel, offset, layout_name, _ = shape
    storage = check_pointer(_U64.unpack_from(blk, f.storage)[0], "the storage pointer", null=True)
    data = None
    if storage:
        sto = Snapshot(mem, storage, max(f.storage_data, lay.storage_nbytes or 0) + 8)  # one read for both
        base = sto.pointer(storage + f.storage_data, "the storage's data pointer", null=True, align=1)
        data = base + offset * dtype.itemsize if base else 0
        if layout_name == "strided" and numel and lay.storage_nbytes is not None and dtype.name not in _PACKED:
            _check_inside(sto.i64(storage + lay.storage_nbytes), offset, sizes, strides, dtype.itemsize)
    meta = check_pointer(_U64.unpack_from(blk, f.autograd_meta)[0], "the AutogradMeta pointer", null=True)
    requires_grad, grad_fn, is_view, note = _autograd(mem, lay, meta, symbolize) if meta else (False, None, False, None)
    values = None
    if layout_name == "strided" and device == "cpu" and 0 < numel <= MAX_VALUES and data:
        values, why = _values(mem, dtype, sizes, strides, data)
        note = _join(note, why)
    return TensorValue(impl, tuple(sizes), tuple(strides) if layout_name == "strided" else None, offset, numel,
                       dtype.name, device, layout_name, requires_grad, grad_fn is None, grad_fn, is_view, data,
                       key_set, values, note)


def _check_inside(nbytes: int, offset: int, sizes, strides, itemsize: int) -> None:
    """The last element a tensor can reach lies inside its storage (a SymInt size, symbolic: not checked)."""
    if nbytes < -(1 << 62):
        return
    last = offset + sum((n - 1) * s for n, s in zip(sizes, strides))
    if (last + 1) * itemsize > nbytes:
        raise BadValue(f"its elements reach byte {(last + 1) * itemsize} of a storage of {nbytes} bytes")


def _check_extents(values, what: str) -> None:
    for v in values:
        if not 0 <= v < _MAX_EXTENT:
            raise BadValue(f"a {what} of {v} in {list(values)}")


def _device(lay: TorchLayout, dtype_byte: int, index: int) -> str:
    name = lay.enum_name("device_types", dtype_byte)
    if name is None:
        raise BadValue(f"device type {dtype_byte} is not one this torch knows")
    if not -1 <= index < 64:
        raise BadValue(f"device index {index} is out of range")
    return name if index < 0 else f"{name}:{index}"


def _layout(lay: TorchLayout, key_set: int) -> str:
    for name, bits in lay.layout_bits:
        if bits and key_set & bits == bits:
            return name
    return "strided"


def _autograd(mem: Memory, lay: TorchLayout, meta: int, symbolize) -> tuple[bool, str | None, bool, str | None]:
    """(requires_grad, grad_fn's name, is_view, note) from the tensor's AutogradMeta at ``meta``."""
    grad_fn, requires_grad, view = lay.grad_fn, lay.requires_grad, lay.is_view
    if grad_fn is None or requires_grad is None or view is None:
        raise BadValue("the layout of this torch does not place AutogradMeta's fields")
    mem = Snapshot(mem, meta, max(grad_fn + 8, requires_grad + 1, view + 1))
    flag = mem.boolean(meta + requires_grad, "requires_grad_")
    is_view = mem.boolean(meta + view, "is_view_")
    node = mem.pointer(meta + grad_fn, "grad_fn_", null=True)
    if not node:
        return flag, None, is_view, None
    name, note = node_name(mem, node, symbolize)
    return True, name, is_view, note


def node_name(mem: Memory, node: int, symbolize) -> tuple[str, str | None]:
    """An autograd Node's class from its vtable symbol (Itanium ABI: the object's first word points two
    words into ``vtable for Class``); its address when the symbol is not known."""
    vptr = mem.pointer(node, "the grad_fn's vtable pointer")
    name = symbolize(vptr) if symbolize is not None else None
    if name and name.startswith("vtable for "):
        cls = name[len("vtable for "):]
        if cls.startswith("torch::autograd::generated::"):  # torch's own name for them: SigmoidBackward0
            cls = cls[len("torch::autograd::generated::"):]
        return cls, None
    return f"Node@{node:#x}", "the grad_fn's class is not named: no symbol for its vtable"


def _values(mem: Memory, dtype, sizes, strides, data: int) -> tuple[tuple | None, str | None]:
    if not elements.decodable(dtype.name):
        return None, f"values of {dtype.name} are not decoded"
    offsets = _offsets(tuple(sizes), tuple(strides))
    span = (max(offsets) + 1) * dtype.itemsize
    try:
        raw = mem.bytes(data, span)
    except BadValue as exc:
        return None, f"values not read: {exc}"
    return elements.decode_many(dtype.name, raw, dtype.itemsize, offsets), None


@lru_cache(maxsize=256)
def _offsets(sizes: tuple, strides: tuple) -> tuple[int, ...]:
    """The elements' offsets, row-major: a small tensor's shape recurs at every hit of a loop."""
    offsets = [0]
    for size, stride in zip(sizes, strides):
        offsets = [o + i * stride for o in offsets for i in range(size)]
    return tuple(offsets)


def _join(a: str | None, b: str | None) -> str | None:
    return "; ".join(x for x in (a, b) if x) or None


def _check_tensor_type(mem: Memory, layout: TorchLayout, obj: int) -> None:
    """The object's type is torch's tensor type or derives from it (torch.Tensor, nn.Parameter, a subclass);
    else BadValue naming the object's type (the ``args`` tuple of a binding, say)."""
    tp_name, tp_base = layout.py_tp_name, layout.py_tp_base
    if tp_name is None or tp_base is None or not layout.py_tensor_base:
        return  # not established: the tensor's own checks still apply
    cls = mem.pointer(obj + 8, "the object's type")
    first = None
    for _ in range(32):  # a class hierarchy deeper than this is not a tensor's
        name = _c_string(mem, mem.pointer(cls + tp_name, "tp_name", align=1))
        first = first or name
        if name == layout.py_tensor_base:
            return
        cls = mem.pointer(cls + tp_base, "tp_base", null=True)
        if not cls:
            break
    raise BadValue(f"a {first} object, not a tensor")


def _c_string(mem: Memory, address: int, limit: int = 128) -> str:
    """A NUL-terminated name, read a page-safe chunk at a time."""
    out = b""
    while len(out) < limit:
        chunk = min(32, 4096 - (address + len(out)) % 4096)
        part = mem.bytes(address + len(out), chunk)
        if b"\0" in part:
            return (out + part.split(b"\0")[0]).decode("utf-8", "replace")
        out += part
    raise BadValue(f"a type name longer than {limit} bytes at {address:#x}")


def check_impl(value: int, what: str = "the TensorImpl pointer") -> int:
    """``value`` if it can be a TensorImpl's address (for a THPVariable's or an IValue's payload)."""
    return check_pointer(value, what)


def read_thp_variable(read_memory, layout: TorchLayout, address: int, symbolize=None):
    """The tensor a ``THPVariable*`` / ``PyObject*`` of a tensor holds (at the Python binding): the
    object's header, then its ``at::Tensor``."""
    if layout.thp_variable_cdata is None:
        return Unreadable("the layout of this torch does not place THPVariable's tensor", "THPVariable*", address)
    try:
        check_pointer(address, "the THPVariable pointer")
        _check_tensor_type(Memory(read_memory), layout, address)
    except BadValue as exc:
        return Unreadable(str(exc), "THPVariable*", address)
    return read_tensor(read_memory, layout, address + layout.thp_variable_cdata, symbolize)
