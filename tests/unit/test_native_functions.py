"""native_functions.yaml read for the names of each operator's kernels: its text format on excerpts of the
real file, then the wheel's own file and what ``--op`` and ``pttrace ops`` make of it (no gdb)."""
from __future__ import annotations

import sys

import pytest

from tracer.text.cxxtext import split_top

from tracer.dispatch import native_functions as nf
from tracer.dispatch import dispatch_tables, ops

PY = sys.executable

# Excerpts of torch 2.13's native_functions.yaml, as written (comments, ufunc loops, a delegate).
EXCERPT = """\
- func: relu(Tensor self) -> Tensor
  device_check: NoCheck   # TensorIterator
  variants: function, method
  dispatch:
    CPU, CUDA: relu
    MkldnnCPU: mkldnn_relu
    NestedTensorCPU, NestedTensorHPU, NestedTensorCUDA: NestedTensor_relu
  tags: [core, pointwise]

- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  structured_delegate: add.out
  dispatch:
    MkldnnCPU: mkldnn_add

- func: add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
  structured: True
  structured_inherits: TensorIteratorBase
  ufunc_inner_loop:
    Generic: add (AllAndComplex, BFloat16, Half, ComplexHalf)
    ScalarOnly: add (Bool)
  dispatch:
    SparseCPU, SparseMeta: add_out_sparse_cpu
    MPS: add_out_mps

- func: mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU: mm_out_cpu
    # NB: a comment inside the section
    SparseCPU, SparseCUDA, SparseMPS: _sparse_mm_out

- func: conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor
  dispatch:
    CompositeImplicitAutograd: conv2d_symint

- func: dropout(Tensor input, float p, bool train) -> Tensor
  tags: nondeterministic_seeded
"""


@pytest.fixture(scope="module")
def excerpt():
    return nf.parse(EXCERPT)


def test_plain_dispatch_entries(excerpt):
    relu = excerpt["relu"]
    assert relu.arguments == 1 and relu.delegate is None
    assert [(k.keys, k.qualified, k.structured) for k in relu.kernels] == [
        (("CPU", "CUDA"), "at::native::relu", False),
        (("MkldnnCPU",), "at::native::mkldnn_relu", False),
        (("NestedTensorCPU", "NestedTensorHPU", "NestedTensorCUDA"), "at::native::NestedTensor_relu", False)]


def test_structured_entries_and_their_plain_neighbours(excerpt):
    mm = excerpt["mm.out"]
    assert mm.arguments == 3
    assert [(k.qualified, k.structured) for k in mm.kernels] == [
        ("at::native::structured_mm_out_cpu::impl", True), ("at::native::_sparse_mm_out", False)]
    add = excerpt["add.out"]
    # A ufunc operator's CPU kernel is generated from its inner loops: named by torchgen, not the file.
    assert ("at::native::structured_ufunc_add_CPU::impl", ("CPU",)) in [(k.qualified, k.keys) for k in add.kernels]
    assert ("at::native::structured_add_out_mps::impl", ("MPS",)) in [(k.qualified, k.keys) for k in add.kernels]
    assert excerpt["add.Tensor"].delegate == "add.out" and excerpt["add.Tensor"].arguments == 3


def test_composite_implicit_by_default(excerpt):
    conv = excerpt["conv2d"]
    assert conv.arguments == 7  # defaults with brackets and commas do not split arguments
    assert [k.qualified for k in conv.kernels] == ["at::native::conv2d_symint"]
    (dropout,) = excerpt["dropout"].kernels
    assert dropout.implicit and dropout.keys == ("CompositeImplicitAutograd",)
    assert dropout.qualified == "at::native::dropout"


def test_entries_in_file_order_with_their_lines_and_fields():
    # What tracer.sources links a frame to: the entry's line, its schema as written, and the kernels
    # its dispatch: section names (not the default nor the generated ufunc ones).
    entries = nf.entries(EXCERPT + "- func: relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
                                   "  python_module: nn  # a comment\n  autogen: relu_copy, relu_copy.out\n")
    lines = EXCERPT.splitlines()
    assert [e.line for e in entries] == [n for n, text in enumerate(lines, 1) if text.startswith("- func:")] + [
        len(lines) + 1]
    relu, add_out, dropout, relu_out = entries[0], entries[2], entries[5], entries[6]
    assert relu.schema == "relu(Tensor self) -> Tensor" and relu.variants == ("function", "method")
    assert [k.name for k in add_out.kernels if k.written] == ["add_out_sparse_cpu", "add_out_mps"]
    assert not any(k.written for k in dropout.kernels) and dropout.variants == ("function",)
    assert relu_out.out and relu_out.python_module == "nn" and relu_out.autogen == ("relu_copy", "relu_copy.out")


@pytest.mark.parametrize("text,parts", [
    ("a, b<c, d>, e[1, 2]", ["a", "b<c, d>", "e[1, 2]"]),
    ("", []),
    ("at::Tensor const&, std::optional<at::Tensor> const&, c10::ArrayRef<long>", 3),
    ("std::function<int (int)> f, int -> x, c10::Dict<a, b>", 3),  # "->" closes nothing
    ("c10::Dispatcher::call::impl", ["c10", "Dispatcher", "call", "impl"]),
])
def test_split_top(text, parts):
    got = split_top(text, "::") if "::" in text and "," not in text else split_top(text)
    assert (len(got) if isinstance(parts, int) else got) == parts


# -- the wheel's own file ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def libraries():
    from tracer.symbols import torch_libraries

    return torch_libraries(PY)


@pytest.fixture(scope="module")
def facts(libraries):
    return ops.torch_facts(PY, libraries)


def test_the_wheel_ships_the_file(libraries):
    entries = nf.entries_for(libraries)
    assert entries is not None and 2500 <= len(entries) <= 3000
    assert nf.entries_for(["/usr/lib/libc.so.6"]) is None


@pytest.mark.parametrize("spec,function,key", [
    ("relu", "at::native::relu", "CPU"),  # non-structured: the plain function the CPU wrapper calls
    ("relu", "at::native::mkldnn_relu", "MkldnnCPU"),
    ("convolution", "at::native::convolution", "CompositeExplicitAutograd"),
    ("conv2d", "at::native::conv2d_symint", "CompositeImplicitAutograd"),
    ("add", "at::native::structured_ufunc_add_CPU::impl", "CPU"),  # add.Tensor runs add.out's kernel
    ("add", "at::native::add", "CompositeExplicitAutograd"),  # add.Scalar
    ("view", "at::native::view", "Meta"),
])
def test_resolution_finds_the_native_functions(libraries, facts, spec, function, key):
    res = ops.resolve_op(spec, libraries, facts, backward=False)
    found = [f for f in res.functions if f.short == function]
    assert len(found) == 1, [f.short for f in res.functions]
    assert found[0].dispatch_key == key and found[0].role in ("native function", "structured kernel")
    assert found[0].label == f"op:{spec}" and found[0].layer == "kernel"


def test_a_shared_name_is_told_apart_by_its_parameters(libraries, facts):
    # at::native::_convolution is two C++ overloads: aten::_convolution's (13 parameters) and, by default
    # (no dispatch entry), aten::_convolution.deprecated's (12).
    both = ops.resolve_op("_convolution", libraries, facts, backward=False)
    by_op = {f.op: ops._param_count(f.function) for f in both.functions if f.short == "at::native::_convolution"}
    assert by_op == {"_convolution": 13, "_convolution.deprecated": 12}
    one = ops.resolve_op("_convolution.deprecated", libraries, facts, backward=False)
    (native,) = [f for f in one.functions if f.short == "at::native::_convolution"]
    assert ops._param_count(native.function) == 12 and native.dispatch_key == "CompositeImplicitAutograd"
    assert any("other parameters" in s["why"] for s in one.skipped)


def test_table_entry_says_what_is_inlined_and_what_it_calls(libraries, facts):
    res = ops.resolve_op("relu", libraries, facts, backward=False)
    cpu = dispatch_tables.table_entry(["CPU"], "/pytorch/build/aten/src/ATen/RegisterCPU_2.cpp:3928", res.functions, "relu")
    assert cpu.registered == [] and cpu.inlined == ["at::wrapper_CPU__relu"]
    assert {f.short.split("<")[0] for f in cpu.adapters} == {"wrap_kernel_functor_unboxed_",
                                                             "make_boxed_from_unboxed_functor"}
    assert [f.short for f in cpu.calls] == ["at::native::relu"]
    mkldnn = dispatch_tables.table_entry(["MkldnnCPU"], "RegisterMkldnnCPU_0.cpp:630", res.functions, "relu")
    assert [f.short for f in mkldnn.registered] == ["at::wrapper_MkldnnCPU__relu"] and not mkldnn.inlined
    assert [f.short for f in mkldnn.calls] == ["at::native::mkldnn_relu"]
    # A key whose kernel comes from another key's file (the alias CompositeExplicitAutograd for Lazy when
    # Lazy registered nothing) gets that file's functions, not Lazy's own wrapper.
    res = ops.resolve_op("convolution", libraries, facts, backward=False)
    lazy = dispatch_tables.table_entry(["Lazy"], "RegisterCompositeExplicitAutograd_0.cpp:3073", res.functions, "convolution")
    assert lazy.inlined == ["at::wrapper_CompositeExplicitAutograd__convolution"]
    assert [f.short for f in lazy.calls] == ["at::native::convolution"]


def test_a_composite_kernel_is_said_not_to_be_followed(libraries, facts):
    notes = ops.resolve_op("conv2d", libraries, facts, backward=False).composite_notes()
    assert len(notes) == 2 and "aten::conv2d has a CompositeImplicitAutograd kernel (at::native::conv2d_symint)" \
        in notes[0] and "--op conv2d" in notes[0]
    assert ops.resolve_op("relu", libraries, facts, backward=False).composite_notes() == []


def test_run_puts_the_note_in_the_session_config():
    import argparse

    from tracer.commands.ops import trace_options
    from tracer.recorder import TraceConfig

    fields = trace_options(argparse.Namespace(ops=["dropout"], layers=[], variants=False, backward=False), PY, None,
                           quiet=True)
    config = TraceConfig(breakpoints=(), python=PY, **fields)
    assert [n.split(" has ")[0] for n in config.notes] == ["aten::dropout"]


def test_return_types_cached_on_disk_and_rebuilt_when_the_file_changes(tmp_path, monkeypatch):
    """The agent's table of return types at an operator's first hit: read back from pttrace's cache, the same as
    parsed; a yaml file changed since (size and time) is parsed again, never answered from the old table."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yaml = tmp_path / "native_functions.yaml"
    yaml.write_text(EXCERPT)
    first = nf.cached_return_types(str(yaml))
    assert first == nf.return_types(nf.parse(EXCERPT)) and first
    assert list((tmp_path / "cache" / "pttrace" / "native-functions").iterdir())
    assert nf.cached_return_types(str(yaml)) == first
    extra = "\n- func: frobnicate(Tensor self) -> (Tensor, Tensor)\n"
    yaml.write_text(EXCERPT + extra)
    nf.load.cache_clear()
    again = nf.cached_return_types(str(yaml))
    assert again == nf.return_types(nf.parse(EXCERPT + extra))
    assert "frobnicate" in again and "frobnicate" not in first


def test_return_types_of_the_same_file_elsewhere_come_from_the_cache(tmp_path, monkeypatch):
    """A new venv (or a reinstall) writes the same native_functions.yaml under another path and time: the table is
    kept by the file's content, so it is read back, not parsed again."""
    import os

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for p in (first, second):
        p.write_text(EXCERPT)
    os.utime(second, ns=(1, 1))
    table = nf.cached_return_types(str(first))
    parsed: list[str] = []
    monkeypatch.setattr(nf, "load", lambda path: parsed.append(path))
    assert nf.cached_return_types(str(second)) == table and not parsed
