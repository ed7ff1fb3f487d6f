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
