"""Where every parameter is at a function's entry, from real demangled names of the torch 2.13 wheel
(``nm -DC libtorch_cpu.so``) and the operator headers it ships. The locations the agent reads are checked
against the target's own prints in tests/integration/test_hop_values.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from tracer.dispatch import arg_abi as A
from tracer.dispatch import keyset_abi as K
from tracer.dispatch import op_headers as H

RETURNS = {"to_dtype_layout": "at::Tensor", "upsample_nearest2d": "at::Tensor", "linalg_vector_norm": "at::Tensor",
           "randint_low": "at::Tensor", "_foreach_add__List": "void", "max_dim_max": "std::tuple<…>",
           "add_Tensor": "at::Tensor"}.get


def where(name: str) -> list[str]:
    return [loc.where for loc in K.arguments(K.signature_from_name(name, RETURNS))]


@pytest.mark.parametrize("name,expected", [
    # The returned Tensor's slot is rdi; optionals of one-byte enums and a Device fit one register each;
    # past r9 the arguments are stack words above the return address.
    ("at::_ops::to_dtype_layout::call(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, "
     "std::optional<c10::Device>, std::optional<bool>, bool, bool, std::optional<c10::MemoryFormat>)",
     ["*rsi", "rdx", "rcx", "r8", "r9", "[rsp+8]", "[rsp+16]", "[rsp+24]"]),
    # An ArrayRef is two integer words; std::optional<double> a double's SSE word then its flag's integer word.
    ("at::_ops::upsample_nearest2d::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<double>, "
     "std::optional<double>)", ["*rsi", "rdx:rcx", "xmm0:r8", "xmm1:r9"]),
    # c10::OptionalArrayRef is 24 trivially copyable bytes: copied onto the stack, taking no register.
    ("at::_ops::linalg_vector_norm::call(at::Tensor const&, c10::Scalar const&, c10::OptionalArrayRef<long>, bool, "
     "std::optional<c10::ScalarType>)", ["*rsi", "*rdx", "[rsp+8]", "rcx", "r8"]),
    # A SymInt by value has a destructor: the caller's copy, by address.
    ("at::_ops::randint_low::call(c10::SymInt, c10::SymInt, c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, "
     "std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>)",
     ["*rsi", "*rdx", "rcx:r8", "r9", "[rsp+8]", "[rsp+16]", "[rsp+24]"]),
    ("at::_ops::_foreach_add__List::redispatch(c10::DispatchKeySet, c10::ArrayRef<at::Tensor>, "
     "c10::ArrayRef<at::Tensor>, c10::Scalar const&)", ["rdi", "rsi:rdx", "rcx:r8", "*r9"]),
    ("at::_ops::max_dim_max::redispatch(c10::DispatchKeySet, at::Tensor const&, long, bool, at::Tensor&, at::Tensor&)",
     ["rsi", "*rdx", "rcx", "r8", "*r9", "*[rsp+8]"]),
    # A plain double takes an SSE register and leaves the integer ones to the next arguments.
    ("at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)", ["*rsi", "*rdx", "*rcx"]),
])
def test_every_parameter(name, expected):
    assert where(name) == expected


def test_double_and_overflow():
    locs = A.locate_all(("double", "long", "double", "c10::ArrayRef<long>", "c10::ArrayRef<long>",
                         "c10::ArrayRef<long>", "long"), False, False)
    assert [x.where for x in locs] == ["xmm0", "rdi", "xmm1", "rsi:rdx", "rcx:r8", "[rsp+8]", "r9"]


def test_unknown_types_and_everything_after_them_say_why():
    locs = A.locate_all(("long", "c10::Half", "long"), False, False)
    assert locs[0].where == "rdi"
    assert [x.how for x in locs[1:]] == [None, None] and "c10::Half" in locs[2].why
    unknown_return = A.locate_all(("at::Tensor const&",), False, None)
    assert unknown_return[0].how is None and "return type" in unknown_return[0].why


def test_object_types():
    loc = A.locate_all(("at::Tensor const&", "std::optional<at::Tensor> const&", "at::Tensor"), False, False)
    assert [x.object_type for x in loc] == ["at::Tensor", "std::optional<at::Tensor>", "at::Tensor"]
    assert [x.how for x in loc] == ["address"] * 3


TORCH = Path(__file__).resolve().parents[2] / ".venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"


@pytest.mark.skipif(not TORCH.exists(), reason="the torch wheel of the venv")
def test_every_operator_header_of_the_wheel_is_located():
    """Every at::_ops entry the wheel declares (its headers' spellings, gdb's when it has DWARF) gets a
    location for every parameter: no type of an operator's signature is unknown to the table."""
    ops_dir = H.include_dir(str(TORCH))
    unknown = {}
    count = 0
    for header in sorted(Path(ops_dir).glob("*_ops.h")):
        for (struct, method), sig in H._header(str(header)).items():
            count += 1
            params = tuple(H.demangled(t) for t in sig.types)
            for loc in K.arguments(K.Signature(params, False, H.demangled(sig.returns))):
                if loc.how is None:
                    unknown.setdefault(loc.why, f"{struct}::{method}")
    assert count > 4000 and not unknown, unknown


def test_header_signatures_and_types():
    ops_dir = H.include_dir(str(TORCH)) if TORCH.exists() else None
    if ops_dir is None:
        pytest.skip("the torch wheel of the venv")
    sig = H.signature(ops_dir, "add_Tensor", "call")
    assert sig.returns == "at::Tensor" and sig.names == ("self", "other", "alpha")
    assert H.signature(ops_dir, "log_normal", "call").returns == "at::Tensor"  # autogen: not in the yaml
    assert H.same_type("const at::Tensor &", "at::Tensor const&") and H.same_type("int64_t", "long")
    assert H.same_type("at::TensorList", "c10::ArrayRef<at::Tensor>")
    assert not H.same_type("at::Tensor &", "at::Tensor const&")
    found = H.matching(ops_dir, ["sigmoid"], ("at::Tensor const&",))
    assert found is not None and found.returns == "at::Tensor"
