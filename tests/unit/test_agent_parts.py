"""The agent's modules that do not need gdb, imported outside it: Python frame records, whole-stack
reuse, the DispatchKeySet read, and the caches' one invalidation."""
from __future__ import annotations

import sys

import pytest

from tracer.gdb.agent import keyset, pycode, reuse
from tracer.gdb.agent.state import Caches, State
from tracer.pyruntime import PyFrame


def test_frame_record_reads_its_source_line_once(tmp_path):
    src = tmp_path / "x.py"
    src.write_text("import torch\n  y = torch.add(x, x)   \n")
    sources = pycode.SourceLines()
    rec = pycode.frame_record(PyFrame("x.py", 2, "f", 0x1000), sources)
    assert (rec["file"], rec["line"], rec["function"], rec["source"], rec["layer"]) == ("x.py", 2, "f", None, "python")
    frame = PyFrame(str(src), 2, "f", 0x1000)
    assert pycode.frame_record(frame, sources)["source"] == "y = torch.add(x, x)"
    src.write_text("changed\nchanged\n")
    assert pycode.frame_record(frame, sources)["source"] == "y = torch.add(x, x)"  # read once
    assert pycode.SourceLines().line(str(tmp_path / "gone.py"), 1) is None


def _slot(addr: int, pc: int):
    return addr, pc.to_bytes(8, sys.byteorder)


def test_walk_reuse_checks_every_return_address_and_fills_python_groups():
    a, b, c = {"function": "a"}, {"function": "b"}, {"function": "c"}
    entries = [(a, None), (reuse.EVAL, _slot(0x7000, 0x11)), (b, _slot(0x7010, 0x22)), (reuse.EVAL, None),
               (c, _slot(0x7100, 0x33))]
    walk = reuse.make_walk(entries)
    assert (walk.lo, walk.size, walk.n_eval) == (0x7000, 0x108, 2)
    mem = bytearray(walk.size)
    for addr, want in (e[1] for e in entries if e[1]):
        mem[addr - walk.lo:addr - walk.lo + 8] = want
    assert reuse.stack_matches(walk, bytes(mem))
    assert reuse.assemble(walk, [["p1", "p2"], ["p3"]]) == [a, "p1", "p2", b, "p3", c]
    mem[0x10] ^= 1  # b's caller returned: another stack
    assert not reuse.stack_matches(walk, bytes(mem))


def test_walk_without_slots_or_spread_too_far_is_not_kept():
    assert reuse.make_walk([({"function": "a"}, None)]) is None
    assert reuse.make_walk([("a", _slot(0, 1)), ("b", _slot(reuse.MAX_STACK_READ, 2))]) is None


class _Frame:
    def __init__(self, **regs):
        self.regs = regs

    def read_register(self, name):
        if name not in self.regs:
            raise ValueError(f"Bad register {name}")
        return self.regs[name]

    def block(self):  # a release library: no debug information
        raise RuntimeError("Cannot locate block for frame.")

    def function(self):
        return None


def test_keyset_comes_from_the_register_its_signature_gives():
    import os

    import torch

    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")  # native_functions.yaml beside it
    name = "at::_ops::add_Tensor::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, c10::Scalar const&)"
    # add.Tensor returns an at::Tensor: the address of its slot comes first, the key set second
    assert keyset.entry_keyset(_Frame(rdi=0x7FFF0040, rsi=0x8021), name, lib) == (0x8021, None)
    inplace = "at::_ops::add__Tensor::redispatch(c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&)"
    assert keyset.entry_keyset(_Frame(rdi=-1, rsi=0), inplace, lib) == (0xFFFFFFFFFFFFFFFF, None)  # Tensor&: rdi
    value, why = keyset.entry_keyset(_Frame(rdi=1), name, lib)
    assert value is None and "could not read" in why  # a register gdb cannot read
    assert keyset.entry_keyset(_Frame(rdi=1), "at::add(at::Tensor const&)") == (None, None)


def test_invalidate_forgets_frames_and_on_exit_code_objects():
    caches = Caches()
    for d in (caches.native, caches.lib_bases, caches.symbols_loaded, caches.suffix, caches.walks, caches.tstates,
              caches.py_frames):
        d[1] = {"library": "x"}
    caches.runtime = True
    caches.py_runtime = object()
    caches.invalidate()
    assert not (caches.native or caches.lib_bases or caches.symbols_loaded or caches.suffix or caches.walks
                or caches.tstates)
    assert caches.runtime is None  # checked again at the next hit
    assert caches.py_runtime and caches.py_frames  # the same target: its code objects stay
    caches.invalidate(target_exited=True)
    assert caches.py_runtime is None and not caches.py_frames


def test_state_stops_at_max_hits_or_in_stop_mode():
    state = State()
    assert not state.wants_stop()
    state.max_hits, state.hits = 3, 3
    assert state.wants_stop()
    state.max_hits, state.mode = 0, "stop"
    assert state.wants_stop()


def test_regions_are_read_as_few_ranges_that_give_each_regions_bytes():
    # GIVEN regions on three pages (two adjacent, one far), overlapping and out of order
    from tracer.gdb.agent.spans import spans_of

    memory = bytes(range(256)) * 64  # 16 KB: pages 0-3
    regions = [(5000, 8), (100, 16), (108, 16), (4090, 20), (3 * 4096 + 7, 4), (200, 1)]
    # WHEN they are turned into ranges
    spans, pick = spans_of(regions)
    got = b"".join(memory[a:a + n] for a, n in spans)
    # THEN pages 0 and 1 are one range and page 3 another (page 2 has no region: never read)
    assert spans == [(100, 5008 - 100), (3 * 4096 + 7, 4)]
    # AND each region's bytes come back in the order given
    assert list(pick(got)) == [memory[a:a + n] for a, n in regions]
    # AND one region alone is a tuple of one
    spans, pick = spans_of([(42, 3)])
    assert spans == [(42, 3)] and pick(memory[42:45]) == (memory[42:45],)
