"""describe(): from a C++ parameter type and where the ABI passed it to a value, over bytes in a fake
address space (the real-process checks are tests/integration/test_values_gdb.py)."""
from __future__ import annotations

import struct

import pytest

from tests.unit.test_values_decode import IMPL, LAYOUT as BASE, Space, impl
from tracer.values import describe
from tracer.values.describe import normal
from tracer.values.layout import Dtype

LAYOUT = BASE.__class__(**{**BASE.__dict__, "dtypes": (Dtype(6, "float32", 4, False, True), Dtype(7, "float64", 8)),
                           "layouts": ((0, "strided"), (1, "sparse_coo")),
                           "memory_formats": ((0, "contiguous_format"), (2, "channels_last")),
                           "scalar_tags": ("HAS_d", "HAS_i", "HAS_u", "HAS_z", "HAS_b", "HAS_sd", "HAS_si", "HAS_sb"),
                           "scalar_value": 16, "ilistref_tags": ("Unboxed", "Boxed", "Materialized", "None"),
                           "ivalue_tags": ("None", "Tensor", "Storage")})
AT = 0x50000


def with_bytes(data: bytes, space: Space | None = None) -> Space:
    s = space or impl()
    s.put(AT, data)
    return s


def value(type_name, raw, space=None):
    return describe(space or impl(), LAYOUT, type_name, raw).to_dict()


@pytest.mark.parametrize("tag, payload, want", [
    (0, struct.pack("<d", 0.25), {"type": "float", "value": 0.25}),
    (1, struct.pack("<q", -7), {"type": "int", "value": -7}),
    (3, struct.pack("<dd", 1.0, -2.0), {"type": "complex", "value": [1.0, -2.0]}),
    (4, struct.pack("<q", 1), {"type": "bool", "value": True}),
])
def test_scalars(tag, payload, want):
    space = with_bytes(struct.pack("<I", tag) + bytes(12) + payload.ljust(16, b"\0"))
    assert value("c10::Scalar const&", AT, space) == {"kind": "scalar", **want}


@pytest.mark.parametrize("tag, payload, why", [(9, 0, "Scalar tag of 9"), (4, 5, "bool Scalar holding 5")])
def test_bad_scalars(tag, payload, why):
    space = with_bytes(struct.pack("<I", tag) + bytes(12) + struct.pack("<q", payload) + bytes(8))
    got = value("const c10::Scalar &", AT, space)
    assert got["kind"] == "unreadable" and why in got["why"]


def test_optional_tensor():
    assert value("std::optional<at::Tensor> const&", AT, with_bytes(struct.pack("<QB", 0, 0)))["kind"] == "none"
    got = value("::std::optional<at::Tensor> const &", AT, with_bytes(struct.pack("<QB", IMPL, 1)))
    assert got["kind"] == "tensor" and got["sizes"] == [2, 3]
    assert value("std::optional<at::Tensor> const&", AT, with_bytes(struct.pack("<QB", IMPL, 3)))["kind"] == "unreadable"


def test_a_null_python_object_is_null_not_unread():
    """A binding's self_ (a module function's) or kwargs (none given) is NULL: a value, said as such."""
    from tracer.export.values import value_text
    from tracer.gdb.agent.argvalues import converted

    got = value("_object*", 0)
    assert got == {"kind": "opaque", "type": "_object*", "address": 0}
    assert value_text(converted(got)) == "NULL"
    assert value("_object*", AT)["kind"] == "unreadable"  # not NULL: read as a tensor (here: no THPVariable)


def test_tensor_lists_in_every_form():
    space = impl()
    space.put(0x60000, struct.pack("<QQ", IMPL, IMPL))  # two at::Tensor words
    unboxed = value("at::ITensorListRef const&", AT, with_bytes(struct.pack("<QQI", 0x60000, 2, 0), space))
    assert unboxed["form"] == "Unboxed" and [t["sizes"] for t in unboxed["tensors"]] == [[2, 3], [2, 3]]
    assert value("at::TensorList", (0x60000, 2), space)["length"] == 2
    # Materialized: a vector of pointers to at::Tensor words.
    space.put(0x61000, struct.pack("<QQQ", 0x62000, 0x62008, 0x62008))
    space.put(0x62000, struct.pack("<Q", 0x60000))
    got = value("c10::IListRef<at::Tensor> const&", AT, with_bytes(struct.pack("<QQI", 0x61000, 0, 2), space))
    assert got["form"] == "Materialized" and got["length"] == 1 and got["tensors"][0]["kind"] == "tensor"
    # Boxed: List<Tensor>* -> intrusive_ptr<ListImpl> -> vector<IValue>; a non-tensor IValue says so.
    space.put(0x63000, struct.pack("<Q", 0x64000))
    space.put(0x64000, bytes(16) + struct.pack("<QQ", 0x65000, 0x65020))
    space.put(0x65000, struct.pack("<QI4xQI4x", IMPL, 1, 5, 3))
    got = value("c10::IListRef<at::Tensor> const&", AT, with_bytes(struct.pack("<QQI", 0x63000, 0, 1), space))
    assert got["form"] == "Boxed" and [t["kind"] for t in got["tensors"]] == ["tensor", "unreadable"]
    bad = value("at::ITensorListRef const&", AT, with_bytes(struct.pack("<QQI", 0x60000, 2, 7), space))
    assert bad["kind"] == "unreadable" and "IListRef tag of 7" in bad["why"]


@pytest.mark.parametrize("type_name, raw, want", [
    ("long", (1 << 64) - 3, -3),
    ("bool", 1, True),
    ("double", struct.unpack("<Q", struct.pack("<d", 2.5))[0], 2.5),
    ("double", 0.125, 0.125),
    ("c10::ScalarType", 6, "float32"),
    ("at::ScalarType", 0x1207, "float64"),  # the register's upper bytes are not the value's
    ("c10::Layout", 1, "sparse_coo"),
    ("c10::MemoryFormat", 2, "channels_last"),
    ("c10::Device", 0xFF00, "cpu"),
    ("c10::Device", 0x030E, "meta:3"),
    ("std::optional<c10::ScalarType>", 0x0106, "float32"),
    ("std::optional<bool>", 0x0101, True),
    ("std::optional<long>", (5, 1), 5),
])
def test_register_values(type_name, raw, want):
    assert value(type_name, raw)["value"] == want


@pytest.mark.parametrize("type_name, raw", [("std::optional<c10::ScalarType>", 0x0006), ("std::optional<long>", (5, 0)),
                                            ("std::optional<c10::Device>", 0x00FF00)])
def test_empty_optionals(type_name, raw):
    assert value(type_name, raw) == {"kind": "none"}


@pytest.mark.parametrize("type_name, raw, why", [("bool", 2, "bool holding 2"), ("c10::ScalarType", 99, "ScalarType 99"),
                                                 ("std::optional<bool>", 0x0501, "flag of 5")])
def test_bad_register_values(type_name, raw, why):
    got = value(type_name, raw)
    assert got["kind"] == "unreadable" and why in got["why"]


def test_arrays_and_string_views():
    space = with_bytes(struct.pack("<qqq", -(1 << 62), -(1 << 62) - 1, 4) + b"mean")
    assert value("c10::ArrayRef<long>", (AT, 3), space)["value"] == [-(1 << 62), -(1 << 62) - 1, 4]
    assert value("c10::SymIntArrayRef", (AT, 3), space)["value"] == [-(1 << 62), "symbolic", 4]  # the lowest plain int, then a node
    assert value("c10::string_view", (4, AT + 24), space)["value"] == "mean"
    assert value("c10::ArrayRef<long>", (AT, 1 << 40), space)["kind"] == "unreadable"
    space.put(0x70000, struct.pack("<QQB", AT, 2, 1))
    assert value("c10::OptionalArrayRef<long>", 0x70000, space)["value"] == [-(1 << 62), -(1 << 62) - 1]


def test_other_types_are_opaque_and_names_normalise():
    assert value("c10::Storage const&", 0x1234) == {"kind": "opaque", "type": "c10::Storage const&", "address": 0x1234}
    assert normal("const at::Tensor &") == "at::Tensor const&"
    assert normal("at::IntArrayRef") == "c10::ArrayRef<long>"
    assert normal("std::basic_string_view<char, std::char_traits<char> >") == "std::string_view"
