"""Matching demangled frame names to C++ definitions (tracer.sources): the parser's pieces on real
frame names of the 2.13 wheel, and ctags-indexed scratch sources with overloads and specializations."""
from __future__ import annotations

import shutil

import pytest

from tracer.sources import names
from tracer.sources.finder import best_definitions, map_onto

AUTOGRAD_WRAPPER = (
    "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunction"
    "Pointer<at::Tensor (c10::DispatchKeySet, at::Tensor const&), &torch::autograd::VariableType::(anonymous "
    "namespace)::sigmoid>, at::Tensor, c10::guts::typelist::typelist<c10::DispatchKeySet, at::Tensor const&> >, "
    "at::Tensor (c10::DispatchKeySet, at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, "
    "at::Tensor const&)")


@pytest.mark.parametrize("demangled, qualified, params", [
    (AUTOGRAD_WRAPPER, "c10::impl::wrap_kernel_functor_unboxed_::call",
     ("c10::OperatorKernel*", "c10::DispatchKeySet", "at::Tensor const&")),
    ("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)", "at::wrapper_CPU_sigmoid",
     ("at::Tensor const&",)),
    ("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
     "torch::autograd::Node::operator()", ("std::vector<at::Tensor, std::allocator<at::Tensor> >&&",)),
    ("at::Tensor c10::Dispatcher::call<at::Tensor, at::Tensor const&>(c10::TypedOperatorHandle<at::Tensor "
     "(at::Tensor const&)> const&, at::Tensor const&) const", "c10::Dispatcher::call",
     ("c10::TypedOperatorHandle<at::Tensor (at::Tensor const&)> const&", "at::Tensor const&")),
    ("initModule", "initModule", None),
    ("THPVariable_tensor(_object*, _object*, _object*) [clone .cold]", "THPVariable_tensor",
     ("_object*", "_object*", "_object*")),
    ("c10::intrusive_ptr<c10::TensorImpl>::operator->() const", "c10::intrusive_ptr::operator->", ()),
])
def test_a_demangled_name_is_taken_apart(demangled, qualified, params):
    parsed = names.parse(demangled)
    assert parsed.qualified == qualified
    assert parsed.params == params


def test_the_class_template_arguments_of_a_member_are_kept():
    parsed = names.parse(AUTOGRAD_WRAPPER)
    assert parsed.class_targs[-1] == "at::Tensor (c10::DispatchKeySet, at::Tensor const&)"
    assert names.function_type_params(parsed.class_targs[-1]) == ["c10::DispatchKeySet", "at::Tensor const&"]


@pytest.mark.parametrize("source, frame", [
    ("const at::Tensor & self", "at::Tensor const&"),
    ("OperatorKernel * functor", "c10::OperatorKernel*"),
    ("int64_t dim", "long"),
    ("PyObject* args", "_object*"),
    ("IntArrayRef size", "c10::ArrayRef<long>"),
    ("unsigned int", "unsigned int"),
    ("std::vector<at::Tensor>&& inputs", "std::vector<at::Tensor, std::allocator<at::Tensor> >&&"),
])
def test_a_source_parameter_and_its_demangled_type_agree(source, frame):
    assert names.base_type(names.strip_param_name(source)) == names.base_type(frame)


def test_a_pack_takes_any_number_of_trailing_types_and_template_parameters_match_anything():
    wild = names.template_params("<class KernelFunctor,class ReturnType,class...ParameterTypes>")
    assert wild == {"KernelFunctor", "ReturnType", "ParameterTypes"}
    assert names.type_conflicts(["c10::DispatchKeySet", "at::Tensor const&"], ["DispatchKeySet", "ParameterTypes..."],
                                wild) == (0, 1)
    assert names.type_conflicts(["at::Tensor const&"], ["DispatchKeySet", "ParameterTypes..."], wild) == (1, 0)
    assert names.type_conflicts([], ["DispatchKeySet", "ParameterTypes..."], wild) is None


def test_a_path_from_another_machine_is_found_by_its_longest_tail(tmp_path):
    target = tmp_path / "torch" / "csrc" / "Module.cpp"
    target.parent.mkdir(parents=True)
    target.write_text("int x;\n")
    assert map_onto("/home/tk/pytorch/torch/csrc/Module.cpp", str(tmp_path)) == str(target)
    assert map_onto("/home/tk/pytorch/torch/csrc/Other.cpp", str(tmp_path)) is None


@pytest.mark.skipif(shutil.which("ctags") is None, reason="universal-ctags is not installed")
def test_overloads_and_partial_specializations_are_told_apart_by_types(tmp_path):
    from tracer.sources.tags import DefinitionIndex

    (tmp_path / "x.h").write_text("""
namespace ns {
int pick(int a) { return a; }
int pick(const Tensor& t, double alpha) { return 0; }
template <class T> int pick(T a, T b) { return 1; }

template <class F, class Sig> struct W final {};
template <class F, class R, class... Args>
struct W<F, R(Args...)> final {
  static R call(Kernel* k, Args... args) { return R(); }
};
template <class F, class R, class... Args>
struct W<F, R(KeySet, Args...)> final {
  static R call(Kernel* k, KeySet ks, Args... args) { return R(); }
};
}  // namespace ns
""")
    index = DefinitionIndex.build(str(tmp_path), use_cache=False)

    def lines(demangled):
        parsed = names.parse(demangled)
        return sorted(d.line for d in best_definitions(index.lookup(parsed.qualified), parsed))

    assert lines("ns::pick(int)") == [3]
    assert lines("ns::pick(at::Tensor const&, double)") == [4]
    assert lines("ns::pick<float>(float, float)") == [5]
    assert lines("ns::W<Fn, at::Tensor (at::Tensor const&)>::call(ns::Kernel*, at::Tensor const&)") == [10]
    assert lines("ns::W<Fn, at::Tensor (ns::KeySet, at::Tensor const&)>::call(ns::Kernel*, ns::KeySet, "
                 "at::Tensor const&)") == [14]
    # no types to tell them apart: every definition of the name, none picked silently
    assert lines("ns::pick") == [3, 4, 5]


@pytest.mark.skipif(shutil.which("ctags") is None, reason="universal-ctags is not installed")
def test_structured_kernels_defined_through_pytorchs_macros_are_found(tmp_path):
    from tracer.sources.tags import DefinitionIndex

    (tmp_path / "UnaryOps.cpp").write_text("""namespace at {
namespace meta {
TORCH_META_FUNC(sigmoid) (const Tensor& self) {
  build_borrowing_unary_op(maybe_get_output(), self);
}
} // namespace meta
namespace native {
TORCH_IMPL_FUNC(sigmoid_out) (const Tensor& self, const Tensor& result) {
  sigmoid_stub(device_type(), *this);
}
} // namespace native
} // namespace at
""")
    index = DefinitionIndex.build(str(tmp_path), use_cache=False)
    assert [d.line for d in index.lookup("at::native::structured_sigmoid_out::impl")] == [8]
    assert [d.line for d in index.lookup("at::meta::structured_sigmoid::meta")] == [3]


@pytest.mark.skipif(shutil.which("ctags") is None, reason="universal-ctags is not installed")
def test_the_index_is_cached_a_damaged_shard_is_rebuilt_and_an_edited_file_parsed_again(tmp_path, monkeypatch):
    import os
    import time

    from tracer.sources import tags
    from tracer.symbols import cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)  # a checkout: its commit and git index time stand for its content
    (tree / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    (tree / ".git" / "index").write_text("")
    (tree / "a.h").write_text("namespace ns {\nint f(int a) { return a; }\n}\n")
    assert [d.line for d in tags.DefinitionIndex.build(str(tree)).lookup("ns::f")] == [2]
    key = cache.FileKey(str(tree.resolve()), 0, 0, "tree-" + tags.tree_stamp(str(tree)))
    shard = cache.entry_path(key, tags.KIND, f"-{tags._shard_of('ns::f', tags.DefinitionIndex.SHARDS)}")
    assert shard.exists() and cache.entry_path(key, tags.KIND).exists()
    # GIVEN the shard holding ns::f damaged: the index is read from the cache, the lookup parses again
    shard.write_bytes(b"garbage")
    index = tags.DefinitionIndex.build(str(tree))
    assert index._load is not None  # from the cache
    assert [d.line for d in index.lookup("ns::f")] == [2]
    assert shard.read_bytes() != b"garbage"  # and cached again
    # GIVEN the file edited after the index was built (not committed: same cache key): a lookup
    # landing in it parses it again
    (tree / "a.h").write_text("namespace ns {\n\n\nint f(int a) { return a; }\n}\n")
    later = time.time_ns() + 10**9
    os.utime(tree / "a.h", ns=(later, later))
    index = tags.DefinitionIndex.build(str(tree))
    assert index._load is not None
    assert [d.line for d in index.lookup("ns::f")] == [4]
