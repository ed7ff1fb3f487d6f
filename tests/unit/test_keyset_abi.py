"""Where each dispatcher hop receives its DispatchKeySet, from real function names of the torch 2.13 wheel
and the debug extension (as gdb names their frames). The positions were checked against gdb's register
reads at those stops (the issue's ``rsi=0x400010001`` at the ADInplaceOrView adapter of add_), and the
recorded runs in tests/integration/test_op_keysets.py check them end to end."""
from __future__ import annotations

import pytest

from tracer.dispatch import keyset_abi as K

ADAPTER_INPLACE = (
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer"
    "<at::Tensor& (c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&), &torch::ADInplaceOrView::"
    "(anonymous namespace)::add__Tensor>, at::Tensor&, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor&, "
    "at::Tensor const&, c10::Scalar const&> >, at::Tensor& (c10::DispatchKeySet, at::Tensor&, at::Tensor const&, "
    "c10::Scalar const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor&, at::Tensor const&, "
    "c10::Scalar const&)"
)
ADAPTER_FUNCTIONAL = (
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer"
    "<at::Tensor (c10::DispatchKeySet, at::Tensor const&, c10::ArrayRef<c10::SymInt>), &torch::ADInplaceOrView::"
    "(anonymous namespace)::view>, at::Tensor, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor const&, "
    "c10::ArrayRef<c10::SymInt> > >, at::Tensor (c10::DispatchKeySet, at::Tensor const&, c10::ArrayRef<c10::SymInt>)>"
    "::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&, c10::ArrayRef<c10::SymInt>)"
)
ADAPTER_CPU = (
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer"
    "<at::Tensor (at::Tensor const&), &at::(anonymous namespace)::wrapper_CPU__relu>, at::Tensor, c10::guts::typelist::"
    "typelist<at::Tensor const&> >, at::Tensor (at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, "
    "at::Tensor const&)"
)
BOXED = (
    "c10::impl::make_boxed_from_unboxed_functor<c10::impl::detail::WrapFunctionIntoRuntimeFunctor_<at::Tensor (*)("
    "at::Tensor const&, at::Tensor const&, double), at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, "
    "at::Tensor const&, double> >, false>::call(c10::OperatorKernel*, c10::OperatorHandle const&, c10::DispatchKeySet, "
    "std::vector<c10::IValue, std::allocator<c10::IValue> >*)"
)
KERNEL_CALL = (
    "at::Tensor c10::KernelFunction::call<at::Tensor, at::Tensor const&, at::Tensor const&, double>(c10::OperatorHandle "
    "const&, c10::DispatchKeySet, at::Tensor const&, at::Tensor const&, double) const"
)
FALLBACK = (
    "torch::autograd::VariableHooks::basic_autograd_not_implemented_fallback(c10::OperatorHandle const&, "
    "c10::DispatchKeySet, std::vector<c10::IValue, std::allocator<c10::IValue> >*) const"
)
FROM_STACK = (
    "std::decay<c10::guts::infer_function_traits<c10::impl::detail::WrapFunctionIntoRuntimeFunctor_<at::Tensor (*)("
    "at::Tensor const&, at::Tensor const&, double), at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, "
    "at::Tensor const&, double> > >::type::return_type>::type c10::impl::call_functor_with_args_from_stack<"
    "c10::impl::detail::WrapFunctionIntoRuntimeFunctor_<at::Tensor (*)(at::Tensor const&, at::Tensor const&, double), "
    "at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&, double> >, false>("
    "c10::OperatorKernel*, c10::DispatchKeySet, std::vector<c10::IValue, std::allocator<c10::IValue> >*)"
)
# What native_functions.yaml says these operators return, by the names generated code gives them.
RETURNS = {"add__Tensor": "at::Tensor&", "sigmoid": "at::Tensor", "add_out": "at::Tensor&",
           "add_out_out": "at::Tensor&", "max_dim_max": "std::tuple<…>", "_foreach_add__List": "void"}.get


@pytest.mark.parametrize("name,where", [
    # The functor is the first argument, the key set the second: the pointer read as a key set.
    (ADAPTER_INPLACE, "rsi"),
    # ... and third when the kernel returns an at::Tensor by value (its address comes first).
    (ADAPTER_FUNCTIONAL, "rdx"),
    (ADAPTER_CPU, "rdx"),
    (BOXED, "rdx"),  # functor, operator handle, key set; returns nothing
    (FALLBACK, "rdx"),  # a boxed kernel returns void; this, handle, key set
    (KERNEL_CALL, "rcx"),  # return slot, this, handle, key set
    ("at::_ops::add__Tensor::redispatch(c10::DispatchKeySet, at::Tensor&, at::Tensor const&, c10::Scalar const&)", "rdi"),
    ("at::_ops::sigmoid::redispatch(c10::DispatchKeySet, at::Tensor const&)", "rsi"),
    ("torch::autograd::VariableType::(anonymous namespace)::add__Tensor(c10::DispatchKeySet, at::Tensor&, "
     "at::Tensor const&, c10::Scalar const&)", "rdi"),
    ("torch::autograd::VariableType::(anonymous namespace)::add_out_out(c10::DispatchKeySet, at::Tensor const&, "
     "at::Tensor const&, c10::Scalar const&, at::Tensor&)", "rdi"),
    ("at::_ops::max_dim_max::redispatch(c10::DispatchKeySet, at::Tensor const&, long, bool, at::Tensor&, at::Tensor&)",
     "rsi"),  # std::tuple<Tensor&, Tensor&> is returned in memory: gdb read rdi=its slot, rsi=0x400010001
    ("at::_ops::_foreach_add__List::redispatch(c10::DispatchKeySet, c10::ArrayRef<at::Tensor>, "
     "c10::ArrayRef<at::Tensor>, c10::Scalar const&)", "rdi"),
])
def test_where_the_key_set_is(name, where):
    arg = K.locate(K.signature_from_name(name, RETURNS))
    assert arg is not None and arg.register == where, arg


@pytest.mark.parametrize("name,why", [
    # A template's return type spelled through traits: not guessed.
    (FROM_STACK, "cannot tell how std::decay<"),
    # A generated function of an operator the yaml file does not know.
    ("at::_ops::mystery::redispatch(c10::DispatchKeySet, at::Tensor const&)", "return type is not known"),
    # Not one of the dispatcher's known classes or namespaces: is there a `this`?
    ("at::Tensor my_ext::Kernels::run<int>(c10::DispatchKeySet, at::Tensor const&)", "member function"),
])
def test_unknown_is_said_with_a_reason(name, why):
    arg = K.locate(K.signature_from_name(name, RETURNS))
    assert arg is not None and arg.register is None and arg.stack is None and why in arg.why


def test_no_key_set_parameter_of_its_own():
    # The wrapped kernel's signature in the template arguments does not count.
    assert not K.takes_keyset("at::(anonymous namespace)::wrapper_CPU__relu(at::Tensor const&)")
    assert K.takes_keyset(ADAPTER_CPU) and K.takes_keyset(BOXED)
    assert K.locate(K.signature_from_name("at::native::relu(at::Tensor const&)")) is None
    assert not K.takes_keyset("c10::impl::wrap_kernel_functor_unboxed_<c10::CompileTimeFunctionPointer<at::Tensor "
                              "(c10::DispatchKeySet, at::Tensor const&), &f>>::operator()(at::Tensor const&)")


def test_arguments_that_do_not_fit_in_registers():
    # return slot, 2 + 2 words of ArrayRefs, a long: six registers; the key set is the first stack word
    sig = K.Signature(("c10::ArrayRef<long>", "c10::ArrayRef<long>", "long", "c10::DispatchKeySet"), False, "at::Tensor")
    assert K.locate(sig) == K.KeysetArg(stack=8)
    # a third ArrayRef no longer fits in the one register left: it goes on the stack, the key set takes r9
    sig = K.Signature(("c10::ArrayRef<long>", "c10::ArrayRef<long>", "c10::ArrayRef<long>", "c10::DispatchKeySet"),
                      False, "at::Tensor")
    assert K.locate(sig) == K.KeysetArg(register="r9")
    assert K.locate(K.Signature(("double", "c10::DispatchKeySet"), False, "void")) == K.KeysetArg(register="rdi")
    assert "c10::Half" in K.locate(K.Signature(("c10::Half", "c10::DispatchKeySet"), False, "void")).why


@pytest.mark.parametrize("schema,cpp,in_memory", [
    ("Tensor(a!)", "at::Tensor&", False),
    ("Tensor", "at::Tensor", True),
    ("Tensor(a)", "at::Tensor", True),  # a view: a new Tensor
    ("()", "void", False),
    ("(Tensor(a!) values, Tensor(b!) indices)", "std::tuple<…>", True),
    ("Tensor[]", "std::vector<…>", True),
    ("bool", "bool", False),
    ("SymInt", "c10::SymInt", True),
    ("ScalarType", "c10::ScalarType", False),
])
def test_schema_returns(schema, cpp, in_memory):
    assert K.schema_return_cpp(schema) == cpp
    assert K.returns_in_memory(cpp) is in_memory


def test_gdb_spellings_of_types():
    # With debug information the types come from gdb, which writes `const at::Tensor &`.
    assert K.returns_in_memory("at::Tensor &") is False and K.integer_words("const at::Tensor &") == 1
    assert K.returns_in_memory("std::optional<c10::ScalarType>") is False
    assert K.returns_in_memory("std::optional<at::Tensor>") is True
