"""Reading a hop's key set through a frame (gdb-free: a stand-in frame gives the registers gdb would)."""
from __future__ import annotations

from tests.unit.test_keyset_abi import ADAPTER_INPLACE, FROM_STACK
from tracer.gdb.agent import keyset as keyset_read

REGISTERS = {"rdi": 0x7FFFFFFFDE90, "rsi": 0x400010001, "rdx": 0x55555829DA00, "rsp": 0x7FFFFFFFDE08}


class Frame:
    """Registers at a function's first instruction, and no debug information (libtorch_cpu.so)."""

    def read_register(self, name):
        return REGISTERS[name]

    def block(self):
        raise RuntimeError("Cannot locate block for frame.")

    def function(self):
        return None


def test_the_register_the_signature_gives():
    assert keyset_read.entry_keyset(Frame(), ADAPTER_INPLACE, "/nowhere/libtorch_cpu.so") == (0x400010001, None)
    redispatch = "at::_ops::add__Tensor::redispatch(c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&)"
    # Without native_functions.yaml beside the library its return type is unknown: not read, and why.
    value, why = keyset_read.entry_keyset(Frame(), redispatch, "/nowhere/libtorch_cpu.so")
    assert value is None and "return type" in why


def test_unknown_without_debug_information_and_none_without_a_parameter():
    value, why = keyset_read.entry_keyset(Frame(), FROM_STACK, "/nowhere/pttrace_demo.so")
    assert value is None and why
    assert keyset_read.entry_keyset(Frame(), "at::native::relu(at::Tensor const&)", None) == (None, None)


def test_gdb_type_spellings():
    class T:
        def __init__(self, text):
            self.text = text

        def strip_typedefs(self):
            return self

        def __str__(self):
            return self.text

    assert keyset_read._type_name(T("const at::Tensor &")) == "at::Tensor const&"
    assert keyset_read._type_name(T("class c10::DispatchKeySet")) == "c10::DispatchKeySet"
    assert keyset_read._type_name(T("struct c10::OperatorKernel *")) == "c10::OperatorKernel*"
