"""The value readers' pure parts: elements from bytes, enums from header text, a TensorImpl from bytes,
and the checks that make garbage ``Unreadable`` instead of a number."""
from __future__ import annotations

import math
import struct

import pytest

from tracer.values import elements
from tracer.values.layout import Dtype, TorchLayout, parse_enum
from tracer.values.memory import Unreadable
from tracer.values.tensor import TensorValue, UndefinedTensor, read_tensor


@pytest.mark.parametrize("dtype, raw, want", [
    ("float32", struct.pack("<f", 1.5), 1.5),
    ("float64", struct.pack("<d", -2.25), -2.25),
    ("float16", struct.pack("<e", 0.5), 0.5),
    ("bfloat16", struct.pack("<f", -3.0)[2:], -3.0),
    ("complex64", struct.pack("<ff", 1.0, -2.0), complex(1, -2)),
    ("complex32", struct.pack("<ee", 0.5, 4.0), complex(0.5, 4)),
    ("int8", b"\xff", -1), ("uint8", b"\xff", 255), ("uint64", b"\xff" * 8, 2**64 - 1),
    ("bool", b"\x01", True), ("qint8", b"\xfe", -2),
    # torch's own encodings (torch.tensor([0.5, -3.0]).to(dtype).view(torch.uint8)):
    ("float8_e4m3fn", bytes([48]), 0.5), ("float8_e4m3fn", bytes([196]), -3.0), ("float8_e4m3fn", bytes([126]), 448.0),
    ("float8_e5m2", bytes([194]), -3.0), ("float8_e4m3fnuz", bytes([204]), -3.0),
    ("float8_e5m2fnuz", bytes([198]), -3.0), ("float8_e8m0fnu", bytes([129]), 4.0),
    ("float4_e2m1fn_x2", bytes([0x21]), (0.5, 1.0)),
])
def test_elements_decode_as_torch_encodes(dtype, raw, want):
    assert elements.decode(dtype, raw) == want


@pytest.mark.parametrize("dtype, raw", [("float8_e4m3fn", 127), ("float8_e5m2", 127), ("float8_e4m3fnuz", 128),
                                        ("float8_e8m0fnu", 255)])
def test_minifloat_nans(dtype, raw):
    assert math.isnan(elements.decode(dtype, bytes([raw])))


def test_undecoded_dtypes_give_none_and_json_has_no_nan():
    assert elements.decode("bits8", b"\x01") is None and not elements.decodable("quint4x2")
    assert elements.to_json(complex(1, math.nan)) == [1.0, "nan"]


def test_enums_from_header_text():
    text = """
    #define TORCH_X_TAGS(_, ...) \\
      _(Unboxed, ##__VA_ARGS__) \\
      _(Boxed, ##__VA_ARGS__)
    enum class DeviceType : int8_t {
      CPU = 0,
      CUDA = 1, // CUDA.
      /* gap */ Meta = 14,
      Next,
    };
    enum class IListRefTag {
    #define DEFINE_TAG(tag, ...) tag,
      TORCH_X_TAGS(DEFINE_TAG)
    #undef DEFINE_TAG
          None
    };
    enum class Odd { A = 1 << 2 };
    """
    assert parse_enum(text, "DeviceType") == (("CPU", 0), ("CUDA", 1), ("Meta", 14), ("Next", 15))
    assert [n for n, _ in parse_enum(text, "IListRefTag")] == ["Unboxed", "Boxed", "None"]
    assert parse_enum(text, "Odd") == ()  # an expression: no enum rather than a wrong one
    assert parse_enum(text, "Missing") == ()


# A TensorImpl laid out as torch 2.13's, built in a fake address space.
LAYOUT = TorchLayout(sizes_and_strides=56, inline_dims=5, storage_offset=144, numel=152, data_type=160,
                     device_opt=162, key_set=168, storage=16, autograd_meta=24, storage_data=16, grad_fn=48,
                     requires_grad=128, is_view=130, thp_variable_cdata=16, undefined_key_set=0xC00000000,
                     dtypes=(Dtype(6, "float32", 4, False, True),), device_types=((0, "cpu"), (14, "meta")))
IMPL, STORAGE, DATA, SLOT = 0x10000, 0x20000, 0x30000, 0x40000


class Space:
    def __init__(self):
        self.mem = {}

    def put(self, address, data):
        for i, b in enumerate(data):
            self.mem[address + i] = b

    def __call__(self, address, length):
        try:
            return bytes(self.mem[address + i] for i in range(length))
        except KeyError:
            raise OSError("unmapped") from None


def impl(sizes=(2, 3), strides=(3, 1), numel=6, dtype=6, device=b"\x00\xff\x01", keys=0x9400010001, meta=0):
    s = Space()
    body = bytearray(256)
    struct.pack_into("<QQ", body, 16, STORAGE, meta)
    struct.pack_into("<Q", body, 56, len(sizes))
    struct.pack_into(f"<{len(sizes)}q", body, 64, *sizes)
    struct.pack_into(f"<{len(strides)}q", body, 104, *strides)
    struct.pack_into("<qqH", body, 144, 0, numel, dtype)
    body[162:165] = device
    struct.pack_into("<Q", body, 168, keys)
    s.put(IMPL, bytes(body))
    s.put(STORAGE, bytes(16) + struct.pack("<Q", DATA))
    s.put(DATA, struct.pack("<6f", *range(6)))
    s.put(SLOT, struct.pack("<Q", IMPL))
    return s


def test_a_tensor_from_bytes():
    got = read_tensor(impl(), LAYOUT, SLOT)
    assert isinstance(got, TensorValue)
    assert (got.sizes, got.strides, got.dtype, got.device, got.values) == ((2, 3), (3, 1), "float32", "cpu",
                                                                           (0.0, 1.0, 2.0, 3.0, 4.0, 5.0))
    assert got.is_leaf and not got.requires_grad and got.data_ptr == DATA
    assert got.to_dict()["sizes"] == [2, 3]


def test_the_undefined_tensor():
    assert isinstance(read_tensor(impl(device=b"\x00\x00\x00", keys=0xC00000000), LAYOUT, SLOT), UndefinedTensor)


@pytest.mark.parametrize("kwargs, why", [
    ({"sizes": (2, -3)}, "a size of -3"),
    ({"sizes": (2, 3), "numel": 7}, "numel 7 is not the product"),
    ({"dtype": 99}, "dtype index 99"),
    ({"device": b"\x63\xff\x01"}, "device type 99"),
    ({"device": b"\x00\x00\x00", "keys": 5}, "no device"),
    ({"strides": (3, -1)}, "a stride of -1"),
    ({"meta": 0x1234}, "not aligned"),
])
def test_garbage_is_unreadable(kwargs, why):
    got = read_tensor(impl(**kwargs), LAYOUT, SLOT)
    assert isinstance(got, Unreadable) and why in got.why, got


def test_too_many_dimensions_and_unmapped_memory():
    s = impl()
    s.put(IMPL + 56, struct.pack("<Q", 70))
    assert "70 dimensions" in read_tensor(s, LAYOUT, SLOT).why
    assert "cannot be read" in read_tensor(impl(), LAYOUT, 0x50000).why
    assert "not a user-space address" in read_tensor(impl(), LAYOUT, 1 << 50).why


def test_a_layout_without_a_field_says_so():
    bare = TorchLayout(problems=("sizes_and_strides_: not found",))
    got = read_tensor(impl(), bare, SLOT)
    assert isinstance(got, Unreadable) and "sizes_and_strides_: not found" in got.why


def test_layout_round_trips_through_json():
    assert TorchLayout.from_json(LAYOUT.to_json()) == LAYOUT


def test_a_tensor_reaching_past_its_storage_is_unreadable():
    from dataclasses import replace

    sized = replace(LAYOUT, storage_nbytes=24)
    s = impl()
    s.put(STORAGE + 24, struct.pack("<q", 24))  # 6 float32: exactly enough
    assert isinstance(read_tensor(s, sized, SLOT), TensorValue)
    s.put(STORAGE + 24, struct.pack("<q", 20))
    got = read_tensor(s, sized, SLOT)
    assert isinstance(got, Unreadable) and "reach byte 24 of a storage of 20 bytes" in got.why


def test_a_layout_that_cannot_be_established_says_why(tmp_path):
    from tracer.values.layout import LayoutUnknown, establish, from_probe

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(LayoutUnknown, match=r"the layout probe failed with .*python \(exit 1\): ModuleNotFoundError"):
        establish(str(fake), [], tmp_path)
    partial = from_probe({"tensor": {"numel": 152}, "problems": ["key_set_: ambiguous at [168, 176]"]}, None)
    assert partial.key_set is None and partial.numel == 152
    assert "key_set_: ambiguous at [168, 176]" in partial.problems
    assert any("no torch/include headers" in p for p in partial.problems)
