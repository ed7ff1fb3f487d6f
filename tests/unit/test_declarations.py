"""A function's own declaration in the wheel's torch/include headers (tracer/dispatch/declarations.py): the
parameter names, return type and membership of kernels the demangled name gives only the types of."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracer.dispatch import declarations as D

OPS = Path(__file__).resolve().parents[2] / ".venv/lib/python3.11/site-packages/torch/include/ATen/ops"
T, M = "at::Tensor const&", "at::Tensor&"
pytestmark = pytest.mark.skipif(not OPS.is_dir(), reason="the venv's torch headers are not installed")


@pytest.mark.parametrize("qualified, params, names, returns, member", [
    ("at::native::structured_sigmoid_out::impl", (T, T), ("self", "out"), "void", True),
    ("at::meta::structured_sigmoid::meta", (T,), ("self",), "void", True),
    ("at::cpu::sigmoid_out", (M, T), ("out", "self"), "at::Tensor &", False),
    ("at::cpu::sigmoid_outf", (T, M), ("self", "out"), "at::Tensor &", False),
    ("at::native::structured_ufunc_add_CPU::impl", (T, T, "c10::Scalar const&", T),
     ("self", "other", "alpha", "out"), "void", True),
    ("at::native::empty_cpu", ("c10::ArrayRef<long>", "std::optional<c10::ScalarType>", "std::optional<c10::Layout>",
                               "std::optional<c10::Device>", "std::optional<bool>", "std::optional<c10::MemoryFormat>"),
     ("size", "dtype", "layout", "device", "pin_memory", "memory_format"), "at::Tensor", False),  # defaults `={}`
    ("at::native::linear", (T, T, "std::optional<at::Tensor> const&"), ("input", "weight", "bias"), "at::Tensor", False),
    ("at::native::add_out_sparse_cpu", (T, T, "c10::Scalar const&", M), ("self", "other", "alpha", "out"),
     "at::Tensor &", False),
])
def test_declarations_of_kernels(qualified, params, names, returns, member):
    d = D.find(OPS, qualified, params)
    assert d is not None and (d.names, d.returns, d.member) == (names, returns, member)
    assert d.where.startswith("ATen/ops/")


def test_types_must_match_and_other_namespaces_are_not_guessed():
    assert D.find(OPS, "at::native::structured_sigmoid_out::impl", (T,)) is None  # another arity
    assert D.find(OPS, "at::cpu::sigmoid_out", (T, T)) is None  # const& is not &
    assert D.find(OPS, "torch::autograd::THPVariable_sigmoid", ("_object*", "_object*", "_object*")) is None
    assert D.find(None, "at::cpu::sigmoid", (T,)) is None


ADAPTER = ("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<"
           "at::Tensor (at::Tensor const&, at::Tensor const&, c10::Scalar const&), &at::(anonymous namespace)::"
           "(anonymous namespace)::wrapper_CPU_Tensor_add>, at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, "
           "at::Tensor const&, c10::Scalar const&> >, at::Tensor (at::Tensor const&, at::Tensor const&, c10::Scalar const&)>"
           "::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, c10::Scalar const&)")


def test_a_boxing_adapter_is_named_by_its_template_and_its_operators_schema():
    from tracer.gdb.agent import arguments as A

    params = ("c10::OperatorKernel*", "c10::DispatchKeySet", T, T, "c10::Scalar const&")
    names, named_by = A._adapter_names(OPS, ADAPTER, params)
    assert names == ("functor", "dispatchKeySet", "self", "other", "alpha")  # wrapper_CPU_Tensor_add: add_Tensor
    assert named_by[0].startswith("declaration ATen/core/boxing/") and named_by[2:] == ("schema",) * 3
    odd = ADAPTER.replace("wrapper_CPU_Tensor_add", "my_kernel")  # not named after an operator: its two only
    assert A._adapter_names(OPS, odd, params)[0] == ("functor", "dispatchKeySet", None, None, None)
