"""A tensor's elements from their bytes, for every dtype torch has, by torch's dtype name.

Decoders are pure (bytes in, Python numbers out) so they are tested against torch itself. Formats
torch has but pttrace does not decode (``bits8``, the sub-byte ``int1``-``uint7`` shells) give None:
the caller then says the values are not shown, never prints a guess.
"""
from __future__ import annotations

import math
import struct

_STRUCT = {"float32": "f", "float64": "d", "float16": "e", "int8": "b", "uint8": "B", "int16": "h",
           "uint16": "H", "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q", "bool": "?",
           "qint8": "b", "quint8": "B", "qint32": "i"}
# Minifloats: (exponent bits, mantissa bits, bias, how NaN/inf are spelt).
_MINIFLOATS = {"float8_e4m3fn": (4, 3, 7, "fn"), "float8_e5m2": (5, 2, 15, "ieee"),
               "float8_e4m3fnuz": (4, 3, 8, "fnuz"), "float8_e5m2fnuz": (5, 2, 16, "fnuz")}
QUANTIZED = ("qint8", "quint8", "qint32")  # their elements are the stored integers, before scale/zero point


def minifloat(bits: int, ebits: int, mbits: int, bias: int, style: str) -> float:
    """One minifloat: ``fn`` has no infinity (all ones is NaN), ``fnuz`` no negative zero (the sign bit
    alone is NaN), ``ieee`` the usual infinities and NaNs."""
    sign = -1.0 if bits >> (ebits + mbits) & 1 else 1.0
    exp = bits >> mbits & ((1 << ebits) - 1)
    man = bits & ((1 << mbits) - 1)
    top = (1 << ebits) - 1
    if style == "fnuz" and bits == 1 << (ebits + mbits):
        return math.nan
    if style == "fn" and exp == top and man == (1 << mbits) - 1:
        return math.nan
    if style == "ieee" and exp == top:
        return sign * math.inf if man == 0 else math.nan
    if exp == 0:
        return sign * man * 2.0 ** (1 - bias - mbits)
    return sign * (1 + man / (1 << mbits)) * 2.0 ** (exp - bias)


def decode(dtype: str, data: bytes) -> object | None:
    """One element of ``dtype`` from its bytes; None if pttrace does not decode that dtype."""
    code = _STRUCT.get(dtype)
    if code is not None:
        return struct.unpack("<" + code, data)[0]
    if dtype == "bfloat16":
        return struct.unpack("<f", b"\0\0" + data[:2])[0]
    if dtype in ("complex64", "complex128", "complex32"):
        half = len(data) // 2
        fmt = {4: "f", 8: "d", 2: "e"}[half]
        return complex(struct.unpack("<" + fmt, data[:half])[0], struct.unpack("<" + fmt, data[half:])[0])
    if dtype in _MINIFLOATS:
        return minifloat(data[0], *_MINIFLOATS[dtype])
    if dtype == "float8_e8m0fnu":
        return math.nan if data[0] == 0xFF else 2.0 ** (data[0] - 127)
    if dtype == "float4_e2m1fn_x2":  # two e2m1 values a byte, the first in the low nibble
        return (minifloat(data[0] & 0xF, 2, 1, 1, "none"), minifloat(data[0] >> 4, 2, 1, 1, "none"))
    return None


def decode_many(dtype: str, raw: bytes, itemsize: int, offsets: list[int] | tuple[int, ...]) -> tuple:
    """The elements at ``offsets`` (in elements) of ``raw``: one unpack for the plain types."""
    code = _STRUCT.get(dtype)
    if code is not None:
        every = struct.unpack(f"<{len(raw) // itemsize}{code}", raw[: len(raw) // itemsize * itemsize])
        return tuple(every[o] for o in offsets)
    return tuple(decode(dtype, raw[o * itemsize : (o + 1) * itemsize]) for o in offsets)


def decodable(dtype: str) -> bool:
    return dtype in _STRUCT or dtype in _MINIFLOATS or dtype in (
        "bfloat16", "complex64", "complex128", "complex32", "float8_e8m0fnu", "float4_e2m1fn_x2")


def show(value: object) -> str:
    """An element as torch prints it, closely enough to read: ``1.5``, ``True``, ``(1+2j)``, ``nan``."""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else
                                                           ("inf" if value > 0 else "-inf"))
    if isinstance(value, tuple):
        return "(" + ", ".join(show(v) for v in value) + ")"
    return repr(value)


def to_json(value: object) -> object:
    """JSON has no complex numbers, NaN or infinities: ``[re, im]`` and the strings ``nan``/``inf``."""
    if isinstance(value, complex):
        return [to_json(value.real), to_json(value.imag)]
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return show(value)
    return value
