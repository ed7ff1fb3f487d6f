"""TorchScript interpreter layout (tracer/scripted/interp_layout.py) established from the installed torch
wheel itself: its libtorch_cpu.so's TLS relocation and symbol, its headers compiled and preprocessed."""
from __future__ import annotations

import struct
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tracer.scripted import interp_layout as IL

TORCH = Path(sysconfig.get_paths()["purelib"]) / "torch"
LIB = TORCH / "lib" / "libtorch_cpu.so"
INCLUDE = TORCH / "include"
pytestmark = pytest.mark.skipif(not LIB.exists(), reason="no torch wheel in this interpreter")


def _sections(path: Path) -> dict[str, tuple[int, int]]:
    """name -> (address, size): an independent reading of the section table, for the checks below."""
    data = path.read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx]
    out = {}
    for h in heads:
        start = names[4] + h[0]
        out[data[start:data.index(b"\0", start)].decode()] = (h[3], h[5])
    return out


def test_tls_state_is_found_in_libtorch_cpu():
    slot, offset, loops = IL.tls_location(str(LIB))
    sections = _sections(LIB)  # (once: each reading is 157 MB, 0.4 s of CPU)
    got, got_size = sections[".got"]
    text, text_size = sections[".text"]
    # runTemplate<false> and runTemplate<true>: the interpreter's loop, inside the code
    assert len(loops) >= 2 and all(text <= start and start + size <= text + text_size for start, size in loops)
    tbss, tbss_size = sections[".tbss"]
    assert got <= slot < got + got_size  # the module id is a GOT slot the loader fills
    tdata = sections.get(".tdata", (tbss, 0))
    assert offset + 8 <= (tbss + tbss_size) - tdata[0]  # an 8-byte pointer inside the TLS block


def test_a_library_without_the_symbol_says_why():
    with pytest.raises(ValueError, match="tls_int_state_ptr_|module-id"):
        IL.tls_location(str(TORCH / "lib" / "libc10.so"))


def test_assembly_constants_are_parsed():
    text = "ptt_frame_code:\n\t.zero\t8\n\t.globl x\nptt_frame_pc:\n\t.quad\t16\n"
    assert IL.parse_assembly(text) == {"frame_code": 0, "frame_pc": 16}


def test_layout_from_the_wheel_is_consistent_and_cached(tmp_path):
    layout = IL.establish(str(LIB), str(INCLUDE), tmp_path)
    assert not layout.problems, layout.problems
    o = layout.offsets
    assert o["frame_code"] == 0 and o["frame_size"] % 8 == 0 and o["frame_pc"] < o["frame_size"]
    assert o["node_range"] < o["node_callstack"] and o["range_size"] >= o["range_start"] + 16
    assert o["source_first_line"] < o["source_line_starts"]
    # the NDEBUG build: code_impl.h's debug-only operator table is not counted before function_name_
    assert o["code_name"] > o["code_sources"]
    assert layout.symbol(0) == "namespaces::prim"
    assert "aten::sigmoid" in layout.symbols and "aten::relu" in layout.symbols
    assert layout.symbol(len(layout.symbols)) is None  # interned at run time: no name here
    start = time.monotonic()
    again = IL.establish(str(LIB), str(INCLUDE), tmp_path)
    assert again == layout and time.monotonic() - start < 10  # from the cache, no compiler run
