"""Reading demangled names and matching them the way gdb's ``break NAME`` does (real torch names)."""
from __future__ import annotations

import pytest

from tracer.symbols import names

PYBIND_COLD = (
    "pybind11::class_<WeakTensorRef>& pybind11::class_<WeakTensorRef>::def<pybind11::detail::initimpl::factory"
    "<initModule::{lambda(pybind11::object)#1}, pybind11::detail::void_type (*)(), WeakTensorRef (pybind11::object),"
    " pybind11::detail::void_type ()>::execute<pybind11::class_<WeakTensorRef>>(pybind11::class_<WeakTensorRef>&)"
    " &&::{lambda(pybind11::detail::value_and_holder&, pybind11::object)#1}, pybind11::detail::is_new_style_constructor>"
    "(char const*, pybind11::class_<WeakTensorRef>&&, pybind11::detail::is_new_style_constructor const&)"
    " [clone .constprop.0] [clone .isra.0] [clone .cold]"
)


@pytest.mark.parametrize(
    "demangled, components, params",
    [
        ("torch::cpu::initModule(_object*)", ("torch", "cpu", "initModule"), "(_object*)"),
        ("initModule", ("initModule",), None),
        ("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)",
         ("at", "(anonymous namespace)", "wrapper_CPU_sigmoid"), "(at::Tensor const&)"),
        ("torch::cpu::initModule(_object*)::{lambda()#1}::operator()() const",
         ("torch", "cpu", "initModule(_object*)", "{lambda()#1}", "operator()"), "() const"),
        ("std::basic_ostream<char, std::char_traits<char> >& std::operator<< <std::char_traits<char> >"
         "(std::basic_ostream<char, std::char_traits<char> >&, char const*)",
         ("std", "operator<< <std::char_traits<char> >"), "(std::basic_ostream<char, std::char_traits<char> >&, char const*)"),
        ("c10::operator<<(std::ostream&, c10::Device const&)", ("c10", "operator<<"), "(std::ostream&, c10::Device const&)"),
        ("at::Tensor::operator bool() const", ("at", "Tensor", "operator bool"), "() const"),
        ("operator new(unsigned long)", ("operator new",), "(unsigned long)"),
        ("torch::jit::Foo::operator unsigned long() const", ("torch", "jit", "Foo", "operator unsigned long"), "() const"),
        ("void at::native::AVX2::foo<float>(int) [clone .isra.0]", ("at", "native", "AVX2", "foo<float>"), "(int)"),
        ("at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
         ("at", "_ops", "add_Tensor", "call"), "(at::Tensor const&, at::Tensor const&, c10::Scalar const&)"),
    ],
)
def test_parse_splits_return_type_components_and_params(demangled, components, params):
    parsed = names.parse(demangled)
    assert parsed.components == components
    assert parsed.params == params


def test_clone_suffixes_are_split_off_and_cold_is_recognised():
    base, clones = names.split_clones(PYBIND_COLD)
    assert clones == (".constprop.0", ".isra.0", ".cold")
    assert base.endswith("is_new_style_constructor const&)")
    assert names.parse(PYBIND_COLD).cold
    assert names.split_clones("initModule.cold") == ("initModule", (".cold",))
    assert names.split_clones("foo.part.0.isra.0") == ("foo", (".part.0", ".isra.0"))
    assert names.split_clones("at::foo(int)") == ("at::foo(int)", ())
    assert not names.parse("torch::cpu::initModule(_object*) [clone .isra.0]").cold


@pytest.mark.parametrize("name", [PYBIND_COLD, "initModule.cold", "initModule.cold.12", "foo.part.0.isra.0",
                                  "torch::cpu::initModule(_object*) [clone .isra.0]", "at::foo(int) [clone .cold.3]",
                                  " f(int) [clone .cold] ", "coldfn", "a::cold(int)", "x.coldish", ""])
def test_is_cold_says_what_parse_says(name):
    """symbol_at asks is_cold of every symbol it names, instead of taking the whole name apart."""
    assert names.is_cold(name) == names.parse(name).cold


@pytest.mark.parametrize(
    "query, demangled, expected",
    [
        ("initModule", "torch::cpu::initModule(_object*)", True),
        ("initModule", "initModule", True),
        ("initModule", "initModule.cold", True),
        ("initModule", "torch::cpu::initModule(_object*) [clone .cold]", True),
        ("initModule", "THPVariable_initModule(_object*)", False),
        ("initModule", "torch::cpu::initModule(_object*)::{lambda()#1}::operator()() const", False),
        ("cpu::initModule", "torch::cpu::initModule(_object*)", True),
        ("mtia::initModule", "torch::cpu::initModule(_object*)", False),
        ("::initModule", "torch::cpu::initModule(_object*)", False),
        ("::initModule", "initModule", True),
        ("::torch::cpu::initModule", "torch::cpu::initModule(_object*)", True),
        ("initModule(_object*)", "torch::cpu::initModule(_object*)", True),
        ("initModule(int)", "torch::cpu::initModule(_object*)", False),
        ("torch::cpu::initModule(_object*)", "torch::cpu::initModule(_object*)", True),
        ("wrapper_CPU_sigmoid", "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)", True),
        ("at::wrapper_CPU_sigmoid", "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)", True),
        ("at::_ops::sigmoid::call", "at::_ops::sigmoid::call(at::Tensor const&)", True),
        ("at::_ops::sigmoid::call", "at::_ops::sigmoid_::call(at::Tensor&)", False),
        ("foo", "void at::native::AVX2::foo<float>(int)", True),
        ("foo<float>", "void at::native::AVX2::foo<float>(int)", True),
        ("foo<double>", "void at::native::AVX2::foo<float>(int)", False),
        ("get", "outer::Widget::get() const", True),
        ("get()", "outer::Widget::get() const", True),
        ("c10::str", "c10::str[abi:cxx11]()", True),
    ],
)
def test_name_matches_like_gdb_break(query, demangled, expected):
    assert names.name_matches(query, demangled) is expected


def test_mangled_names_match_themselves_with_or_without_clone_suffix():
    mangled = "_ZN5torch3cpu10initModuleEP7_object"
    assert names.name_matches(mangled, "torch::cpu::initModule(_object*)", mangled)
    assert names.name_matches(mangled, "torch::cpu::initModule(_object*) [clone .cold]", mangled + ".cold")
    assert not names.name_matches("_ZN5torch3cpu10initModuleEv", "torch::cpu::initModule(_object*)", mangled)


def test_search_tokens_are_the_identifiers_spelled_in_mangled_names():
    assert names.search_tokens("at::_ops::empty_memory_format::call") == ["call", "empty_memory_format", "_ops", "at"]
    assert names.search_tokens("at::Tensor::~Tensor") == ["Tensor", "at"]
    assert names.search_tokens("std::vector<int>::push_back") == ["push_back", "vector", "std"]
    assert names.search_tokens("operator()") == []


def test_short_name_is_a_valid_break_spec():
    assert names.short_name("at::Tensor at::native::add<float>(at::Tensor const&) [clone .cold]") == \
        "at::native::add<float>"
    assert names.short_name("initModule") == "initModule"
