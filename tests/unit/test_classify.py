"""The layer classifier on real frame names from the torch 2.13 CPU wheel (recorded by pttrace or read with nm)."""
from __future__ import annotations

import pytest

from tracer.dispatch.classify import (classify, dispatch_key, is_cold_clone, is_plt, kernel_below_adapter, short_name,
                             target_of)

CPU = "/x/site-packages/torch/lib/libtorch_cpu.so"
PYB = "/x/site-packages/torch/lib/libtorch_python.so"
C10 = "/x/site-packages/torch/lib/libc10.so"
LIBPY = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"
EXE = "/root/.pyenv/versions/3.11.7/bin/python3.11"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"

ADAPTER_CPU = (
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer"
    "<at::Tensor (at::Tensor const&), &at::(anonymous namespace)::wrapper_CPU_sigmoid>, at::Tensor, "
    "c10::guts::typelist::typelist<at::Tensor const&> >, at::Tensor (at::Tensor const&)>::call(c10::OperatorKernel*, "
    "c10::DispatchKeySet, at::Tensor const&)"
)
ADAPTER_AUTOGRAD = (
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer"
    "<at::Tensor (c10::DispatchKeySet, at::Tensor const&), &torch::autograd::VariableType::(anonymous namespace)::sigmoid>, "
    "at::Tensor, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor const&> >, at::Tensor (c10::DispatchKeySet, "
    "at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&)"
)
BOXED_ADD = (
    "c10::impl::make_boxed_from_unboxed_functor<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer"
    "<at::Tensor (at::Tensor const&, at::Tensor const&, c10::Scalar const&), &at::(anonymous namespace)::wrapper_CPU_add_Tensor>, "
    "at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&, c10::Scalar const&> >, false>::call("
    "c10::OperatorKernel*, c10::OperatorHandle const&, c10::DispatchKeySet, std::vector<c10::IValue, std::allocator<c10::IValue> >*)"
)

# A TORCH_LIBRARY_IMPL kernel of the debug extension (scripts/debug_ext), as gdb names its frames.
DEMO = "/x/.cache/pttrace/debug_ext/pttrace_demo.so"
RUNTIME_FUNCTOR = (
    "c10::impl::detail::WrapFunctionIntoRuntimeFunctor_<at::Tensor (*)(at::Tensor const&, at::Tensor const&, double), "
    "at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&, double> >::operator()"
)
AUTOGRAD_FALLBACK = (
    "torch::autograd::VariableHooks::basic_autograd_not_implemented_fallback(c10::OperatorHandle const&, "
    "c10::DispatchKeySet, std::vector<c10::IValue, std::allocator<c10::IValue> >*) const"
)

# Function templates demangle with their return type first (recorded from the debug extension's run).
DISPATCHER_CALL = (
    "at::Tensor c10::Dispatcher::call<at::Tensor, at::Tensor const&, at::Tensor const&, double>(c10::TypedOperatorHandle"
    "<at::Tensor (at::Tensor const&, at::Tensor const&, double)> const&, at::Tensor const&, at::Tensor const&, double) const"
)
FROM_STACK = (
    "std::decay<c10::guts::infer_function_traits<c10::impl::detail::WrapFunctionIntoRuntimeFunctor_<at::Tensor (*)("
    "at::Tensor const&, at::Tensor const&, double), at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, "
    "at::Tensor const&, double> > >::type::return_type>::type c10::impl::call_functor_with_args_from_stack<"
    "c10::impl::detail::WrapFunctionIntoRuntimeFunctor_<at::Tensor (*)(at::Tensor const&, at::Tensor const&, double), "
    "at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&, double> >, false>("
    "c10::OperatorKernel*, c10::DispatchKeySet, std::vector<c10::IValue, std::allocator<c10::IValue> >*)"
)

INVOKE_PARALLEL = (
    "void at::internal::invoke_parallel<at::parallel_for<at::TensorIteratorBase::for_each(c10::function_ref<void (char**, "
    "long const*, long, long)>, long)::{lambda(long, long)#1}>(long, long, long, at::TensorIteratorBase::for_each("
    "c10::function_ref<void (char**, long const*, long, long)>, long)::{lambda(long, long)#1} const&)::{lambda(long, "
    "long)#1}>(long, long, long, at::parallel_for<at::TensorIteratorBase::for_each(c10::function_ref<void (char**, long "
    "const*, long, long)>, long)::{lambda(long, long)#1}>(long, long, long, at::TensorIteratorBase::for_each("
    "c10::function_ref<void (char**, long const*, long, long)>, long)::{lambda(long, long)#1} const&)::{lambda(long, "
    "long)#1} const&) [clone ._omp_fn.0]"
)

CASES = [
    # (function, library, layer, dispatch key)
    (DISPATCHER_CALL, DEMO, "dispatcher", None),
    (FROM_STACK, DEMO, "dispatcher", None),
    ("at::Tensor const& at::native::resize_output_impl<float>(at::Tensor const&)", CPU, "kernel", None),
    (RUNTIME_FUNCTOR, DEMO, "dispatcher", None),
    (AUTOGRAD_FALLBACK, CPU, "autograd", None),
    ("pttrace_demo::scale_add_cpu", DEMO, "runtime", None),  # by name alone; see the test below
    ("_start", EXE, "interpreter", None),
    ("Py_BytesMain", LIBPY, "interpreter", None),
    ("_PyEval_EvalFrameDefault", LIBPY, "interpreter", None),
    ("cfunction_call", LIBPY, "interpreter", None),
    ("_PyImport_LoadDynamicModuleWithSpec", LIBPY, "interpreter", None),
    ("__libc_start_call_main", LIBC, "runtime", None),
    ("initModule", PYB, "binding", None),
    ("torch::cpu::initModule(_object*)", PYB, "binding", None),
    ("torch::autograd::THPVariable_tensor(_object*, _object*, _object*)", PYB, "binding", None),
    ("torch::autograd::THPVariable_sigmoid(_object*, _object*, _object*)", PYB, "binding", None),
    ("THPEngine_run_backward(_object*, _object*, _object*)", PYB, "binding", None),
    ("at::_ops::sigmoid::call(at::Tensor const&)", CPU, "dispatcher", None),
    ("at::_ops::sigmoid::redispatch(c10::DispatchKeySet, at::Tensor const&)", CPU, "dispatcher", None),
    ("at::_ops::sigmoid_backward::call(at::Tensor const&, at::Tensor const&)", CPU, "dispatcher", None),
    ("c10::Dispatcher::callBoxed(c10::OperatorHandle const&, std::vector<c10::IValue, std::allocator<c10::IValue> >*) const",
     CPU, "dispatcher", None),
    (ADAPTER_CPU, CPU, "dispatcher", "CPU"),
    (BOXED_ADD, CPU, "dispatcher", "CPU"),
    (ADAPTER_AUTOGRAD, CPU, "autograd", "Autograd"),
    # BackendSelect's kernels are the operator's own name in at's anonymous namespace (ones, empty...)
    ("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunction"
     "Pointer<at::Tensor (c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>), &at::(anonymous namespace)::ones>"
     ", at::Tensor, c10::guts::typelist::typelist<c10::ArrayRef<c10::SymInt> > >, at::Tensor (c10::ArrayRef<c10::"
     "SymInt>)>::call(c10::OperatorKernel*, c10::DispatchKeySet, c10::ArrayRef<c10::SymInt>)", CPU, "dispatcher",
     "BackendSelect"),
    # TensorIterator's reduction helper is the kernel's, not an at::NAME( operator function
    ("at::two_pass_reduction(at::TensorIteratorBase&, c10::function_ref<void (char**, long const*, long, long)>)",
     CPU, "kernel", None),
    ("torch::autograd::VariableType::(anonymous namespace)::sigmoid(c10::DispatchKeySet, at::Tensor const&)",
     CPU, "autograd", "Autograd"),
    ("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, "
     "torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)", CPU, "autograd", None),
    ("torch::autograd::generated::SigmoidBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
     CPU, "autograd", None),
    ("torch::autograd::python::PythonEngine::execute(std::vector<torch::autograd::Edge, "
     "std::allocator<torch::autograd::Edge> > const&)", PYB, "autograd", None),
    ("torch::ADInplaceOrView::(anonymous namespace)::add__Tensor(c10::DispatchKeySet, at::Tensor&, at::Tensor const&, "
     "c10::Scalar const&)", CPU, "autograd", "ADInplaceOrView"),
    ("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)", CPU, "kernel", "CPU"),
    ("at::(anonymous namespace)::wrapper_CPU_sigmoid_backward(at::Tensor const&, at::Tensor const&)", CPU, "kernel", "CPU"),
    ("at::(anonymous namespace)::wrapper_Meta_sigmoid_(at::Tensor&)", CPU, "kernel", "Meta"),
    ("at::(anonymous namespace)::wrapper_CompositeExplicitAutograd__sigmoid_(at::Tensor&)", CPU, "kernel",
     "CompositeExplicitAutograd"),
    ("at::(anonymous namespace)::wrapper_MkldnnCPU__sigmoid(at::Tensor const&)", CPU, "kernel", "MkldnnCPU"),
    ("at::(anonymous namespace)::structured_sigmoid_out_out::maybe_get_output(long)", CPU, "kernel", None),
    ("at::native::AVX2::exp_kernel(at::TensorIteratorBase&)", CPU, "kernel", None),
    ("c10::DefaultCPUAllocator::allocate(unsigned long)", C10, "runtime", None),
    ("c10::alloc_cpu(unsigned long)", C10, "runtime", None),
    # Intra-op parallelism: OpenMP by library and entry point, ATen's launchers by name (recorded with
    # torch.set_num_threads(2), breaking on at::internal::set_thread_num in the worker and the caller).
    ("GOMP_parallel", "/x/site-packages/torch/lib/libgomp.so.1", "parallel", None),
    ("gomp_thread_start", "/x/site-packages/torch/lib/libgomp.so.1", "parallel", None),
    ("GOMP_parallel", None, "parallel", None),
    (INVOKE_PARALLEL, CPU, "parallel", None),
    ("at::internal::set_thread_num(int)", CPU, "parallel", None),
    ("void at::parallel_for<at::native::(anonymous namespace)::cpu_padding<float>(at::Tensor const&)::{lambda(long, "
     "long)#1}>(long, long, long, at::native::(anonymous namespace)::cpu_padding<float>(at::Tensor const&)::{lambda(long, "
     "long)#1} const&)", CPU, "parallel", None),
    ("at::TensorIteratorBase::for_each(c10::function_ref<void (char**, long const*, long, long)>, long)", CPU, "kernel",
     None),  # TensorIterator's loop: the kernel's, whether it runs serially or in parallel
    ("at::internal::serial_for_each(c10::ArrayRef<long>, c10::ArrayRef<long>, char**, unsigned long, "
     "c10::function_ref<void (char**, long const*, long, long)>, at::Range)", CPU, "kernel", None),
    # TorchScript's interpreter (recorded from a torch.jit.script function); its Python bindings stay binding.
    ("bool torch::jit::InterpreterStateImpl::runTemplate<false>(std::vector<c10::IValue, std::allocator<c10::IValue> >&)",
     CPU, "torchscript", None),
    ("torch::jit::GraphExecutorImplBase::run(std::vector<c10::IValue, std::allocator<c10::IValue> >&)", CPU,
     "torchscript", None),
    ("torch::jit::InterpreterState::run(std::vector<c10::IValue, std::allocator<c10::IValue> >&)", CPU, "torchscript",
     None),
    ("torch::jit::runAndInsertCall(torch::jit::Function&, torch::jit::tuple_slice const&, pybind11::kwargs const&, "
     "std::optional<c10::IValue>, std::function<torch::jit::Value* (torch::jit::Graph&, torch::jit::MatchedSchema "
     "const&)> const&)", PYB, "binding", None),
    # Code compiled while the program ran, by library: inductor's output and cpp_extension.load builds.
    ("cpp_fused_add_sigmoid_0", "/tmp/torchinductor_root/ab/cabcdef.so", "generated", None),
    ("kernel", "/tmp/torchinductor_root/ab/cabcdef.so", "generated", None),
    ("my_ext::scale(at::Tensor const&)", "/root/.cache/torch_extensions/py311_cpu/my_ext/my_ext.so", "generated",
     None),
    (None, None, "runtime", None),
]


@pytest.mark.parametrize("function,library,layer,key", CASES)
def test_layer_and_dispatch_key(function, library, layer, key):
    assert classify(function, library) == layer
    assert dispatch_key(function) == key


def test_adapter_names_its_target():
    assert target_of(ADAPTER_CPU) == "at::(anonymous namespace)::wrapper_CPU_sigmoid"
    assert target_of("at::_ops::sigmoid::call(at::Tensor const&)") is None


@pytest.mark.parametrize("function,short", [
    ("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)", "at::wrapper_CPU_sigmoid"),
    ("at::_ops::sigmoid::call(at::Tensor const&)", "at::_ops::sigmoid::call"),
    ("torch::autograd::VariableType::(anonymous namespace)::sigmoid(c10::DispatchKeySet, at::Tensor const&)",
     "torch::autograd::VariableType::sigmoid"),
    (ADAPTER_CPU, "wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>::call"),
    (BOXED_ADD, "make_boxed_from_unboxed_functor<…wrapper_CPU_add_Tensor…>::call"),
    ("c10::Dispatcher::callBoxed(c10::OperatorHandle const&, std::vector<c10::IValue, std::allocator<c10::IValue> >*) const",
     "c10::Dispatcher::callBoxed"),
    ("std::vector<at::Tensor, std::allocator<at::Tensor> >::push_back(at::Tensor const&)", "std::vector<…>::push_back"),
    ("initModule", "initModule"),
    (None, None),
])
def test_short_names(function, short):
    assert short_name(function) == short


def test_plt_and_cold_labels():
    assert is_plt("THPVariable_tensor@plt")
    assert not is_plt("torch::autograd::THPVariable_tensor(_object*, _object*, _object*)")
    assert is_cold_clone("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&) [clone .cold]")
    assert not is_cold_clone("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)")


@pytest.mark.parametrize("function,short", [
    ("std::function<void ()>::operator()() const", "std::function<…>::operator()"),
    ("at::native::AVX2::foo(at::TensorIteratorBase&)::{lambda(char**, long const*, long, long)#1}::operator()"
     "(char**, long const*, long, long) const",
     "at::native::AVX2::foo(at::TensorIteratorBase&)::{lambda(char**, long const*, long, long)#1}::operator()"),
])
def test_short_names_keep_operator_call_and_lambdas(function, short):
    assert short_name(function) == short


def test_a_kernel_with_a_name_of_its_own_is_known_by_the_adapter_calling_it():
    # GIVEN the innermost frames of a hit in the debug extension's kernel
    callee, caller = "pttrace_demo::scale_add_cpu", RUNTIME_FUNCTOR
    # THEN the function the adapter calls is the kernel; the same function called by anything else is not
    assert kernel_below_adapter(classify(callee, DEMO), caller)
    assert kernel_below_adapter(classify(callee, DEMO), ADAPTER_CPU)
    assert not kernel_below_adapter(classify(callee, DEMO), "c10::Dispatcher::callBoxed(c10::OperatorHandle const&) const")
    # and a frame that already has a layer keeps it (the autograd kernel under its adapter stays autograd)
    assert not kernel_below_adapter(classify("torch::autograd::VariableType::(anonymous namespace)::sigmoid(c10::"
                                             "DispatchKeySet, at::Tensor const&)", CPU), ADAPTER_AUTOGRAD)


@pytest.mark.parametrize("function,short", [
    (DISPATCHER_CALL, "c10::Dispatcher::call<…>"),
    (FROM_STACK, "c10::impl::call_functor_with_args_from_stack<…>"),
    ("void* operator new(unsigned long)", "operator new"),
    ("c10::SymInt::operator bool() const", "c10::SymInt::operator bool"),
])
def test_short_names_drop_a_template_return_type(function, short):
    assert short_name(function) == short


# torch.compile's machinery, as recorded from tests/targets/compile_fn.py on the 2.13 wheel.
@pytest.mark.parametrize("function,library,layer", [
    ("dynamo__custom_eval_frame", PYB, "compiler"),
    ("dynamo__custom_eval_frame::{lambda()#2}::operator()() const", PYB, "compiler"),
    ("dynamo_eval_custom_code", PYB, "compiler"),
    ("torch::dynamo::(anonymous namespace)::RootGuardManager::check_nopybind(_object*)", PYB, "compiler"),
    ("torch::dynamo::autograd::CacheNode::lookup(torch::autograd::Node*)", PYB, "compiler"),
    ("torch::autograd::THPVariable_sigmoid(_object*, _object*)", PYB, "binding"),
    ("kernel", "/tmp/torchinductor_root/yo/cyonjxmefkbsfcqbx4hf4ryclcmmvfp7r3fv7db6zu2cyu3ey4jb.main.so", "generated"),
])
def test_compiler_frames(function, library, layer):
    assert classify(function, library) == layer


@pytest.mark.parametrize("file,layer", [
    ("/x/site-packages/torch/_dynamo/eval_frame.py", "compiler"),
    ("/x/site-packages/torch/_functorch/aot_autograd.py", "compiler"),
    ("/x/site-packages/torch/_functorch/_aot_autograd/runtime_wrappers.py", "compiler"),
    ("/x/site-packages/torch/_inductor/output_code.py", "compiler"),
    ("/tmp/torchinductor_root/nq/cnqq3hjt2elhuiwtxj7g2kgoum45c46ewddmdwxmgpzjwliznzam.py", "generated"),
    ("/x/site-packages/torch/nn/modules/activation.py", "python"),
    ("/home/me/compile_fn.py", "python"),
    (None, "python"),
])
def test_python_layer(file, layer):
    from tracer.dispatch.classify import python_layer
    assert python_layer(file) == layer


def test_compiled_graphs_from_a_codes_names():
    from tracer.gdb.agent.pycode import compiled_graphs
    # GIVEN the co_names of dynamo's code for a frame it compiled with a graph break (a resume function)
    names = ["__compiled_fn_1_7d0c6c1e_4f4e_4d8e_9d55_1a2b3c4d5e6f", "torch", "print", "__resume_at_30_2"]
    assert compiled_graphs(names) == "graph 1"
    assert compiled_graphs(["__compiled_fn_3_x", "__compiled_fn_7_y"]) == "graphs 3, 7"
    assert compiled_graphs(["torch", "sigmoid"]) is None
    assert compiled_graphs(None) is None


@pytest.mark.parametrize("name, proper, without_args", [
    ("bool operator<(a, b)", "operator<(a, b)", "bool operator<(a, b)"),
    ("foo::operator bool() const", "foo::operator bool() const", "foo::operator bool"),
    ("std::vector<int, std::allocator<int> > f_operator(int)", "f_operator(int)",
     "std::vector<int, std::allocator<int> > f_operator"),
    ("foo(int)::{lambda()#1}::operator()", "foo(int)::{lambda()#1}::operator()", "foo(int)::{lambda()#1}::operator()"),
    ("void (anonymous namespace)::g<int (*)(int)>(int)", "(anonymous namespace)::g<int (*)(int)>(int)",
     "void (anonymous namespace)::g<int (*)(int)>"),
    ("at::Tensor c10::Dispatcher::call<at::Tensor, at::Tensor const&>(c10::TypedOperatorHandle<at::Tensor "
     "(at::Tensor const&)> const&, at::Tensor const&) const",
     "c10::Dispatcher::call<at::Tensor, at::Tensor const&>(c10::TypedOperatorHandle<at::Tensor (at::Tensor const&)> "
     "const&, at::Tensor const&) const", "at::Tensor c10::Dispatcher::call<at::Tensor, at::Tensor const&>"),
])
def test_return_types_and_parameter_lists_are_cut_at_the_right_place(name, proper, without_args):
    """drop_return_type and _strip_args scan only brackets, spaces and `operator` (regular expressions over
    names of thousands of characters): operators, local scopes, anonymous namespaces and function-pointer
    template arguments are cut as a character-by-character scan cut them (checked equal on 103,707 of
    libtorch_cpu.so's demangled names when the scan changed)."""
    from tracer.dispatch.classify import _strip_args, drop_return_type

    assert drop_return_type(name) == proper
    assert _strip_args(name) == without_args
