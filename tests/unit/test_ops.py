"""Operator resolution: names the generated code gives an op, and what ``--op`` finds in the real wheel.

The pure parts (name conventions, overload selection, classification of demangled names) run on
strings; the resolution runs on the installed torch 2.13 CPU wheel's libtorch_cpu.so (no gdb).
"""
from __future__ import annotations

import argparse
import re
import sys

import pytest

from tests.conftest import nm_defined
from tests.support import Lines, allowance, run_child
from tracer.dispatch import dispatch_tables, op_follow, ops
from tracer.errors import UsageError

PY = sys.executable


def fake_facts(**extra):
    table = {
        "sigmoid": [("", False), ("out", True)],
        "sigmoid_": [("", False)],
        "sigmoid_backward": [("", False), ("grad_input", True)],
        "add": [("Tensor", False), ("Scalar", False), ("out", True), ("Scalar_out", True)],
        "add_": [("Tensor", False), ("Scalar", False)],
        "mm": [("", False), ("out", True)],
    }
    table.update(extra)
    return ops.TorchFacts("2.13.0+cpu", "AVX512", None, table)


# -- names ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,expected", [
    ("sigmoid", ("sigmoid", None)),
    ("aten::add.Tensor", ("add", "Tensor")),
    ("sigmoid.default", ("sigmoid", "")),
    ("sigmoid_", ("sigmoid_", None)),
    (" mm ", ("mm", None)),
])
def test_parse_op(spec, expected):
    assert ops.parse_op(spec) == expected


@pytest.mark.parametrize("bad", ["", "add.Tensor.x", "at::_ops::add", "1add", "add(Tensor)"])
def test_parse_op_rejects(bad):
    with pytest.raises(UsageError):
        ops.parse_op(bad)


# The names as they are in libtorch_cpu.so 2.13 (`nm -C`).
@pytest.mark.parametrize("ref,struct,kernel,unstructured", [
    (ops.OpRef("sigmoid"), "sigmoid", "sigmoid", "_sigmoid"),                       # wrapper_MkldnnCPU__sigmoid
    (ops.OpRef("sigmoid_"), "sigmoid_", "sigmoid_", "_sigmoid_"),                   # wrapper_CPU_sigmoid_
    (ops.OpRef("sigmoid", "out", True), "sigmoid_out", "sigmoid_out_out", "out_sigmoid_out"),
    (ops.OpRef("add", "Tensor"), "add_Tensor", "add_Tensor", "Tensor_add"),        # wrapper_MkldnnCPU_Tensor_add
    (ops.OpRef("add_", "Tensor"), "add__Tensor", "add__Tensor", "Tensor_add_"),
    (ops.OpRef("add", "out", True), "add_out", "add_out_out", "out_add_out"),
    (ops.OpRef("sigmoid_backward", "grad_input", True), "sigmoid_backward_grad_input",
     "sigmoid_backward_out_grad_input", "grad_input_sigmoid_backward_out"),       # wrapper_Lazy_grad_input_...
])
def test_generated_names(ref, struct, kernel, unstructured):
    assert ref.struct == struct
    assert ref.kernel_name == kernel
    assert ref.unstructured_name == unstructured


def test_camel_and_base():
    assert ops.camel("sigmoid") == "Sigmoid"
    assert ops.camel("mse_loss") == "MseLoss"
    assert ops.camel("_softmax") == "Softmax"
    assert ops.OpRef("sigmoid_").base == "sigmoid"


# -- which overloads ------------------------------------------------------------------------------------
def test_op_refs_default_is_functional_overloads_and_backward():
    refs = ops.op_refs("sigmoid", fake_facts())
    assert [(r.aten, r.backward) for r in refs] == [("sigmoid", False), ("sigmoid_backward", True)]
    refs = ops.op_refs("add", fake_facts())
    assert [r.aten for r in refs] == ["add.Tensor", "add.Scalar"]  # no add_backward in torch


def test_op_refs_variants_and_no_backward():
    refs = ops.op_refs("sigmoid", fake_facts(), variants=True, backward=False)
    assert [r.aten for r in refs] == ["sigmoid", "sigmoid.out", "sigmoid_"]
    assert [r.out for r in refs] == [False, True, False]
    refs = ops.op_refs("sigmoid_", fake_facts())
    assert [r.aten for r in refs] == ["sigmoid_", "sigmoid_backward"]


def test_op_refs_explicit_overload():
    assert [r.aten for r in ops.op_refs("add.Tensor", fake_facts())] == ["add.Tensor"]
    out = ops.op_refs("sigmoid.out", fake_facts())
    assert len(out) == 1 and out[0].out  # an out= overload has no backward of its own


def test_op_refs_unknown_names():
    with pytest.raises(UsageError, match="is not an operator") as info:
        ops.op_refs("sigmod", fake_facts())
    assert "sigmoid" in (info.value.hint or "")
    with pytest.raises(UsageError, match="no overload 'Nope'.*add.Tensor"):
        ops.op_refs("add.Nope", fake_facts())
    with pytest.raises(UsageError, match="only out= overloads"):
        ops.op_refs("only_out", fake_facts(only_out=[("out", True)]))
    assert [r.aten for r in ops.op_refs("only_out", fake_facts(only_out=[("out", True)]), variants=True)] == \
        ["only_out.out"]


def test_op_refs_without_facts_takes_names_as_given():
    refs = ops.op_refs("sigmoid", None, variants=True)
    assert [r.aten for r in refs] == ["sigmoid", "sigmoid.out", "sigmoid_", "sigmoid_backward"]


# -- what a demangled name is ----------------------------------------------------------------------------
@pytest.mark.parametrize("qual,role,key", [
    ("at::_ops::sigmoid::call", "entry", None),
    ("at::_ops::sigmoid::redispatch", "redispatch", None),
    ("torch::autograd::VariableType::sigmoid", "autograd", "Autograd"),
    ("torch::TraceType::sigmoid", "tracer", "Tracer"),
    ("at::wrapper_CPU_sigmoid", "kernel wrapper", "CPU"),
    ("at::wrapper_MkldnnCPU__sigmoid", "kernel wrapper", "MkldnnCPU"),
    ("at::wrapper_CompositeExplicitAutogradNonFunctional_sigmoid", "kernel wrapper",
     "CompositeExplicitAutogradNonFunctional"),
    ("at::cpu::sigmoid", "direct call", "CPU"),
    ("at::meta::structured_sigmoid::meta", "meta function", None),
    ("at::native::structured_sigmoid_out::impl", "structured kernel", None),
    ("at::native::AVX2::sigmoid_kernel", "native kernel", None),
    ("at::native::sigmoid_kernel", "native kernel", None),
    ("torch::autograd::generated::SigmoidBackward0::apply", "backward node", "Autograd"),
])
def test_family_of_sigmoid_names(qual, role, key):
    fam = ops._family(qual, [ops.OpRef("sigmoid")], backward=True)
    assert fam is not None and (fam[0], fam[2]) == (role, key)


@pytest.mark.parametrize("qual", [
    "at::_ops::sigmoid_backward::call",          # another op
    "at::wrapper_CPU_sigmoid_",                  # the in-place variant
    "at::wrapper_CPU_sigmoid_out_out",           # the out= variant
    "at::wrapper_CPU_log_sigmoid_forward",
    "torch::autograd::generated::LogSigmoidBackward0::apply",
    "at::native::hardsigmoid_kernel",
    "at::native::CPU_CAPABILITY::sigmoid_kernel",
    "at::_ops::sigmoid::call::op",
])
def test_family_rejects_neighbours(qual):
    assert ops._family(qual, [ops.OpRef("sigmoid")], backward=True) is None


def test_backend_structured_kernel_is_named_after_its_dispatch_entry():
    # native_functions.yaml: mm.out dispatches CPU to mm_out_cpu -> at::native::structured_mm_out_cpu::impl
    refs = [ops.OpRef("mm")]
    fam = ops._family("at::native::structured_mm_out_cpu::impl", refs, backward=False)
    assert fam is not None and fam[0] == "structured kernel" and fam[2] == "CPU"
    assert ops._family("at::native::structured_bmm_out_cpu::impl", refs, backward=False) is None
    assert ops._family("at::native::structured_mm_out_weird::impl", refs, backward=False) is None


def test_backward_node_only_when_asked():
    assert ops._family("torch::autograd::generated::SigmoidBackward0::apply", [ops.OpRef("sigmoid")],
                       backward=False) is None


# -- reading hops ----------------------------------------------------------------------------------------
def test_capability_of_label():
    assert ops.capability_of_label("op:sigmoid[AVX512]") == "AVX512"
    assert ops.capability_of_label("op:sigmoid") is None
    assert ops.capability_of_label("wrapper_CPU_sigmoid") is None
    assert ops.capability_of_label(None) is None


def test_keyset_text_never_guesses():
    from tracer.session.model import Frame

    decoded = Frame(kind="native", function="at::_ops::sigmoid::redispatch(c10::DispatchKeySet, at::Tensor const&)",
                    keyset=0x10001, keys=["CPU"])
    assert ops.keyset_text(decoded) == "CPU  (0x10001)"
    raw = Frame(kind="native", function=decoded.function, keyset=0x10001)
    assert "0x10001" in ops.keyset_text(raw) and "no key numbering" in ops.keyset_text(raw)
    unread = Frame(kind="native", function=decoded.function)
    assert ops.keyset_text(unread).startswith("not read")
    assert "only at the frame a breakpoint stopped in" in ops.keyset_text(unread, innermost=False)
    wrapper = Frame(kind="native", function="at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)",
                    dispatch_key="CPU")
    assert ops.keyset_text(wrapper) == "no key-set parameter; registered for CPU"
    call = Frame(kind="native", function="at::_ops::sigmoid::call(at::Tensor const&)")
    assert "computes one from the arguments" in ops.keyset_text(call)


# -- the dispatch table as torch prints it ---------------------------------------------------------------
TABLE = """\
Undefined: registered at /__w/pytorch/pytorch/build/aten/src/ATen/RegisterCompositeExplicitAutogradNonFunctional_0.cpp:8705 [default backend kernel]
CPU: registered at /__w/pytorch/pytorch/build/aten/src/ATen/RegisterCPU_0.cpp:3998 [kernel]
CUDA: registered at /__w/pytorch/pytorch/build/aten/src/ATen/RegisterCompositeExplicitAutogradNonFunctional_0.cpp:8705 [default backend kernel]
Meta: registered at /work/main/.venv/lib/python3.11/site-packages/torch/_meta_registrations.py:54 [kernel]
BackendSelect: fallthrough registered at /__w/pytorch/pytorch/aten/src/ATen/core/BackendSelectFallbackKernel.cpp:3 [backend fallback]
AutogradCPU: registered at /__w/pytorch/pytorch/torch/csrc/autograd/generated/VariableType_6.cpp:8660 [autograd kernel]
Tracer: registered at /__w/pytorch/pytorch/torch/csrc/autograd/generated/TraceType_6.cpp:8598 [kernel]
"""


def test_kernels_registered_by_hand_are_named_in_one_warning():
    hand = TABLE + ("FuncTorchBatched: registered at /__w/pytorch/pytorch/aten/src/ATen/functorch/BatchRulesUnaryOps.cpp:63 "
                    "[kernel]\nBatched: registered at /__w/pytorch/pytorch/aten/src/ATen/LegacyBatchingRegistrations.cpp"
                    ":1076 [kernel]\n")
    rows = dispatch_tables.parse_dispatch_table(hand)
    # generated files, the Python meta kernel and the fallthrough fallback are not "by hand"
    assert [r["key"] for r in dispatch_tables.hand_registered(rows)] == ["FuncTorchBatched", "Batched"]
    text = dispatch_tables.hand_registered_warning({"sigmoid": {"op": "aten::sigmoid", "rows": rows}})
    assert "aten::sigmoid: FuncTorchBatched (BatchRulesUnaryOps.cpp:63), Batched (LegacyBatchingRegistrations.cpp:1076)" \
        in text
    plain = dispatch_tables.parse_dispatch_table(TABLE)
    assert dispatch_tables.hand_registered_warning({"sigmoid": {"op": "aten::sigmoid", "rows": plain}}) is None


def test_parse_dispatch_table_and_match_functions():
    from tracer.commands.ops import _grouped, _short_path

    rows = dispatch_tables.parse_dispatch_table(TABLE)
    assert [r["key"] for r in rows] == ["Undefined", "CPU", "CUDA", "Meta", "BackendSelect", "AutogradCPU", "Tracer"]
    assert rows[4]["fallthrough"] and rows[4]["kind"] == "backend fallback"
    groups = _grouped(rows)
    assert groups[0][0] == ["Undefined", "CUDA"]
    assert _short_path(rows[3]["registered_at"]) == "torch/_meta_registrations.py:54"
    assert _short_path(rows[1]["registered_at"]) == "RegisterCPU_0.cpp:3998"
    fns = [
        ops.OpFunction("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)", "at::wrapper_CPU_sigmoid",
                       "/l.so", 1, "kernel", "kernel wrapper", "sigmoid", "CPU"),
        ops.OpFunction("at::(anonymous namespace)::wrapper_CompositeExplicitAutogradNonFunctional_sigmoid(...)",
                       "at::wrapper_CompositeExplicitAutogradNonFunctional_sigmoid", "/l.so", 2, "kernel",
                       "kernel wrapper", "sigmoid", "CompositeExplicitAutogradNonFunctional"),
        ops.OpFunction("torch::autograd::VariableType::(anonymous namespace)::sigmoid(c10::DispatchKeySet, ...)",
                       "torch::autograd::VariableType::sigmoid", "/l.so", 3, "autograd", "autograd", "sigmoid",
                       "Autograd"),
        ops.OpFunction("torch::TraceType::(anonymous namespace)::sigmoid(c10::DispatchKeySet, ...)",
                       "torch::TraceType::sigmoid", "/l.so", 4, "runtime", "tracer", "sigmoid", "Tracer"),
    ]

    def names(key):
        row = next(r for r in rows if r["key"] == key)
        return [f.address for f in dispatch_tables.functions_for_key(key, row["registered_at"], fns, "sigmoid")]

    assert names("CPU") == [1]
    assert names("CUDA") == [2]  # the default backend kernel, by its registration file
    assert names("AutogradCPU") == [3]
    assert names("Tracer") == [4]
    assert names("BackendSelect") == []


# -- on the real wheel -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def libraries():
    from tracer.symbols import torch_libraries

    return torch_libraries(PY)


@pytest.fixture(scope="module")
def facts(libraries):
    f = ops.torch_facts(PY, libraries)
    assert f is not None, "the interpreter running the tests has torch"
    return f


def test_facts_from_the_interpreter(facts):
    assert facts.torch_version.startswith("2.13.0")
    assert ("", False) in facts.overloads("sigmoid") and ("out", True) in facts.overloads("sigmoid")
    assert ("Tensor", False) in facts.overloads("add")
    assert facts.cpu_capability in ops.CAPABILITY_NAMESPACES
    assert 3000 <= sum(len(v) for v in facts.ops.values()) <= 4000  # ~3,100 aten overloads


def test_resolve_sigmoid_on_the_wheel(libraries, facts):
    res = ops.resolve_op("sigmoid", libraries, facts)
    by_short = {}
    for f in res.functions:
        by_short.setdefault(f.short, []).append(f)
    for name in ("at::_ops::sigmoid::call", "at::_ops::sigmoid::redispatch", "torch::autograd::VariableType::sigmoid",
                 "at::wrapper_CPU_sigmoid", "at::wrapper_Meta_sigmoid", "at::native::structured_sigmoid_out::impl",
                 "torch::autograd::generated::SigmoidBackward0::apply", "at::_ops::sigmoid_backward::call",
                 "at::wrapper_CPU_sigmoid_backward"):
        assert name in by_short, name
    assert all(f.library.endswith("libtorch_cpu.so") for f in res.functions)
    assert not any(f.function.endswith("@plt") or "[clone .cold]" in f.function for f in res.functions)
    assert any("[clone .cold]" in s["function"] for s in res.skipped)
    # Only functional sigmoid: no in-place or out= variant unless asked.
    assert "at::wrapper_CPU_sigmoid_" not in by_short and "at::wrapper_CPU_sigmoid_out_out" not in by_short
    # The wrapper has a body of its own: its adapter is left out.
    assert not any(f.role == "adapter" and "wrapper_CPU_sigmoid" in f.function for f in res.functions)
    # One kernel per CPU capability; anonymous-namespace ones told apart through sigmoid_backward_stub.
    kernels = {(f.short, f.capability): f.label for f in res.functions if f.role == "native kernel"}
    for cap in ("DEFAULT", "AVX2", "AVX512"):
        assert kernels[(f"at::native::{cap}::sigmoid_kernel", cap)] == f"op:sigmoid[{cap}]"
        assert kernels[("at::native::sigmoid_backward_kernel", cap)] == f"op:sigmoid[{cap}]"
    keyed = {f.short: f.takes_keyset for f in res.functions}
    assert keyed["torch::autograd::VariableType::sigmoid"] and keyed["at::_ops::sigmoid::redispatch"]
    assert not keyed["at::_ops::sigmoid::call"] and not keyed["at::wrapper_CPU_sigmoid"]
    bps = res.address_breakpoints()
    assert len(bps) == len(res.functions) and all(b["offset"] > 0 for b in bps)
    assert {b["label"] for b in bps} == {"op:sigmoid", "op:sigmoid[DEFAULT]", "op:sigmoid[AVX2]", "op:sigmoid[AVX512]"}
    # (how long a resolution takes is measured by bench/bench_ops.py, "resolve one op", not asserted here)


def test_resolve_inplace_breaks_on_inlined_adinplaceorview_through_its_adapter(libraries, facts):
    res = ops.resolve_op("sigmoid_", libraries, facts, backward=False)
    roles = {(f.role, f.dispatch_key) for f in res.functions}
    assert ("adapter", "ADInplaceOrView") in roles  # torch::ADInplaceOrView::sigmoid_ exists only inlined
    assert any(f.short == "at::wrapper_CPU_sigmoid_" for f in res.functions)
    assert not any(f.op.startswith("sigmoid_backward") for f in res.functions)


def test_resolve_overload(libraries, facts):
    res = ops.resolve_op("add.Tensor", libraries, facts, backward=False)
    shorts = {f.short for f in res.functions}
    assert {"at::_ops::add_Tensor::call", "torch::autograd::VariableType::add_Tensor", "at::wrapper_CPU_add_Tensor",
            "at::wrapper_MkldnnCPU_Tensor_add"} <= shorts
    assert "at::_ops::add_Scalar::call" not in shorts and "at::wrapper_CPU_add__Tensor" not in shorts
    # add_stub has no AVX512 kernel: DispatchStub falls back, and the resolution says so.
    assert {"stub": "add_stub", "capability": "AVX512", "function": None} in res.stubs


def test_resolve_mm_finds_its_cpu_kernel_under_the_default_overload(libraries, facts):
    res = ops.resolve_op("mm", libraries, facts, backward=False)
    impl = [f for f in res.functions if f.short == "at::native::structured_mm_out_cpu::impl"]
    assert len(impl) == 1 and impl[0].op == "mm" and impl[0].dispatch_key == "CPU"


def test_resolve_ops_breaks_on_a_shared_function_once(libraries, facts):
    a, b = ops.resolve_ops(["sigmoid", "sigmoid_backward"], libraries, facts)
    assert any(f.short == "at::wrapper_CPU_sigmoid_backward" for f in a.functions)
    assert not any(f.short == "at::wrapper_CPU_sigmoid_backward" for f in b.functions)


def test_every_at_ops_call_is_found(libraries):
    from tracer.symbols import search_symbols

    found = search_symbols(["4_ops"], libraries, pattern=r"^_ZN2at4_ops\d+\w+?4callE")
    calls = [m for m in found if not m.cold]
    assert 3000 <= len(calls) <= 3300
    assert all(m.name.startswith("at::_ops::") and "::call(" in m.name for m in calls)


def test_read_pointer_follows_the_dispatch_stub(libraries):
    from tracer.symbols import read_pointer, search_symbols, symbol_at

    cpu = next(lib for lib in libraries if lib.endswith("libtorch_cpu.so"))
    stubs = [m for m in search_symbols(["sigmoid_stub_DECLARE_DISPATCH_type"], [cpu], kinds=("object",))
             if m.name.endswith(">::AVX512") and "::sigmoid_stub" in m.name]
    assert len(stubs) == 1
    fn, offset = symbol_at(cpu, read_pointer(cpu, stubs[0].address))
    assert offset == 0 and fn.name.startswith("at::native::AVX512::sigmoid_kernel(")


# -- the options of run and attach -----------------------------------------------------------------------
def parse(*argv):
    from tracer.cli import build_parser

    args = build_parser().parse_args(list(argv))
    args.passthrough = []
    return args


def test_run_and_attach_take_op_and_layer():
    args = parse("run", "--op", "sigmoid", "--op", "add.Tensor", "--layer", "kernel", "--variants", "x.py")
    assert args.ops == ["sigmoid", "add.Tensor"] and args.layers == ["kernel"] and args.variants and args.backward
    args = parse("attach", "123", "--op", "mm", "--no-backward")
    assert args.ops == ["mm"] and not args.backward


def test_trace_options(libraries):
    from tracer.commands.ops import trace_options
    from tracer.recorder import TraceConfig

    fields = trace_options(argparse.Namespace(ops=["sigmoid"], layers=["kernel", "kernel"], variants=False,
                                              backward=True), PY, None, quiet=True)
    config = TraceConfig(breakpoints=("initModule",), python=PY, **fields)
    assert config.layers == ("kernel",)
    assert config.breakpoints == ("initModule",)  # --op adds to --break
    labels = {b["label"] for b in config.address_breakpoints}
    assert "op:sigmoid" in labels
    assert config.dispatch_keys and config.dispatch_keys["keys"]
    with pytest.raises(UsageError, match="not a layer"):
        trace_options(argparse.Namespace(ops=[], layers=["kernels"], variants=False, backward=True), PY, None)
    with pytest.raises(UsageError, match="go with --op"):
        trace_options(argparse.Namespace(ops=[], layers=[], variants=True, backward=True), PY, None)


def test_attach_finds_torch_from_the_process_map_when_exe_is_a_venv_base_python(tmp_path):
    """/proc/PID/exe of a venv's Python is the base interpreter, which may not see the venv's torch."""
    import os
    import subprocess

    from tracer.commands.ops import trace_options

    target = subprocess.Popen([PY, "-c", "import torch, sys; print('ready', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert Lines(target.stdout, "the target").next(120).strip() == "ready"
        found = ops.torch_of_process(target.pid)
        assert found is not None
        libs, site = found
        assert any(lib.endswith("/torch/lib/libtorch_cpu.so") for lib in libs)
        assert os.path.isdir(os.path.join(site, "torch"))
        exe = os.path.realpath(f"/proc/{target.pid}/exe")
        fields = trace_options(argparse.Namespace(ops=["sigmoid"], layers=[], variants=False, backward=True),
                               exe, target.pid, quiet=True)
        assert any(b["function"].startswith("at::(anonymous namespace)::wrapper_CPU_sigmoid(")
                   for b in fields["address_breakpoints"])
        assert fields["dispatch_keys"] and fields["dispatch_keys"]["torch_version"].startswith("2.13.0")
    finally:
        target.stdin.close()
        target.wait(timeout=allowance(30))
    assert ops.torch_of_process(target.pid) is None  # gone: nothing to say


def test_at_ops_struct_names_back_to_their_overload():
    facts = ops.TorchFacts("2.13.0+cpu", "AVX512", None, {
        "add": [["Tensor", False], ["out", True]], "add_": [["Tensor", False]], "convolution": [["", False]],
        "_convolution": [["", False], ["deprecated", False]], "sum": [["", False], ["dim_IntList", False]]})
    assert op_follow.ref_of_struct("add_Tensor", facts) == ops.OpRef("add", "Tensor")
    assert op_follow.ref_of_struct("add__Tensor", facts) == ops.OpRef("add_", "Tensor")
    assert op_follow.ref_of_struct("_convolution", facts) == ops.OpRef("_convolution", "")
    assert op_follow.ref_of_struct("_convolution_deprecated", facts) == ops.OpRef("_convolution", "deprecated")
    assert op_follow.ref_of_struct("sum_dim_IntList", facts) == ops.OpRef("sum", "dim_IntList")
    assert op_follow.ref_of_struct("add_out", facts) == ops.OpRef("add", "out", True)
    assert op_follow.ref_of_struct("nosuch", facts) is None and op_follow.ref_of_struct("add_Tensor", None) is None


@pytest.mark.parametrize("spec, expected", [
    ("myns::myop", ("myns", "myop", None)), ("pttrace_demo::scale_add.out", ("pttrace_demo", "scale_add", "out")),
    ("aten::add", None), ("add", None), ("myns::", None), ("::op", None)])
def test_library_op_names(spec, expected):
    assert ops.library_op(spec) == expected


# -- oracles pttrace did not write: the dispatcher's own table, and nm --------------------------------
_REGISTERED = re.compile(r"^(\w+): registered at \S*/(Register(\w+?)(?:_\d+)?\.cpp|VariableType_\d+\.cpp|"
                         r"TraceType_\d+\.cpp):\d+ \[(kernel|default backend kernel|autograd kernel)\]$")


def dispatch_table(op: str) -> dict[str, str]:
    """torch's own ``_dispatch_dump_table``: dispatch key -> the generated file its kernel is registered in
    (Register<Key>_N.cpp, VariableType_N.cpp, TraceType_N.cpp), for the keys with a generated kernel."""
    code = f"import torch; print(torch._C._dispatch_dump_table({op!r}))"
    out = run_child([PY, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout
    return {m.group(1): m.group(2) for m in map(_REGISTERED.match, out.splitlines()) if m}


@pytest.fixture(scope="module")
def nm_text_symbols(libraries) -> dict[int, list[str]]:
    """``nm -C --defined-only`` of libtorch_cpu.so: address -> the demangled names of its code there."""
    cpu = next(lib for lib in libraries if lib.endswith("/libtorch_cpu.so"))
    out = nm_defined(cpu)
    names: dict[int, list[str]] = {}
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in ("T", "t"):
            names.setdefault(int(parts[0], 16), []).append(parts[2])
    assert len(names) > 100000
    return names


def test_op_functions_are_the_dispatch_tables_kernels_at_nms_addresses(libraries, facts, nm_text_symbols):
    # GIVEN what --op sigmoid breaks on, torch's own dispatch table of aten::sigmoid and nm's symbols
    res = ops.resolve_op("sigmoid", libraries, facts)
    table = dispatch_table("aten::sigmoid")
    # THEN every function it breaks on is a function nm names so at that address...
    wrong = [(f.function, hex(f.address), nm_text_symbols.get(f.address)) for f in res.functions
             if f.function not in nm_text_symbols.get(f.address, [])]
    assert wrong == []
    # ...and every generated kernel the dispatcher registered for sigmoid is among them: each backend's
    # wrapper (Register<Key>.cpp), the autograd kernel (VariableType), the tracer's (TraceType)
    assert {"CPU", "AutogradCPU", "Tracer"} <= set(table), table
    roles = {(f.role, f.dispatch_key) for f in res.functions if f.op == "sigmoid"}
    for key, registered_in in table.items():
        if registered_in.startswith("Register"):
            generated_key = re.match(r"Register(\w+?)(?:_\d+)?\.cpp", registered_in).group(1)
            assert ("kernel wrapper", generated_key) in roles, (key, registered_in)
        elif registered_in.startswith("VariableType"):
            assert ("autograd", "Autograd") in roles, key
        else:
            assert ("tracer", "Tracer") in roles, key
    # AND nm's functions of the op's generated names are all broken on (none left out): the entry
    # points, every wrapper_<Key>_sigmoid, the autograd and tracer kernels, for sigmoid and its backward
    generated = re.compile(r"^(at::_ops::sigmoid(_backward)?::(call|redispatch)|.*::wrapper_[A-Za-z0-9]+__?sigmoid(_backward)?|"
                           r"torch::(autograd::VariableType|TraceType)::\(anonymous namespace\)::sigmoid(_backward)?)\(")
    in_nm = {addr for addr, names in nm_text_symbols.items()  # (each alternative names sigmoid: the substring
             # test first spares the regex most of 242,000 addresses: 0.5 s of CPU)
             if any("sigmoid" in n and generated.match(n) and not n.endswith("[clone .cold]") for n in names)}
    assert len(in_nm) >= 14 and in_nm <= {f.address for f in res.functions}, \
        sorted(nm_text_symbols[a][0] for a in in_nm - {f.address for f in res.functions})
