"""What each hop carried, against what the target itself printed at the same moment: one recording of
tests/targets/hop_values.py (``--op sigmoid --variants`` and the debug extension's TORCH_LIBRARY op),
whose every call line first writes torch's own view of its tensors and of the thread's key sets. Every
case is checked at the operator's entry (``at::_ops::sigmoid::call`` and its in-place and out= siblings):
sizes, strides, offset, dtype, device, requires_grad, grad_fn, view, data pointer, each tensor's key set,
the TLS included and excluded sets, and the set the dispatcher computes from them; then the hops below
(the key set each was handed, the key that selected it), backward, and the extension's debug-built kernel."""
from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT, run_pttrace

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "hop_values.py"
ENTRY = re.compile(r"^at::_ops::sigmoid(?:_|_out)?::call$")


@pytest.fixture(scope="module")
def recording(tmp_path_factory, debug_ext):
    from tracer.session import storage

    tmp = tmp_path_factory.mktemp("hop_values")
    oracle = tmp / "oracle.json"
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp), "--op", "sigmoid", "--variants",
                       "--op", "pttrace_demo::scale_add", str(TARGET), str(oracle), str(debug_ext))
    assert proc.returncode == 0, proc.stderr
    (path,) = sorted(tmp.glob("*.jsonl"))
    return storage.load(path), json.loads(oracle.read_text()), path


def case_of(hit) -> str | None:
    """The ``# CASE name`` of the innermost Python line of the target (calls a dispatch mode makes
    inside a case run from the mode's own line: none)."""
    py = [f for f in hit.frames if f.kind == "python" and f.file and f.file.endswith("hop_values.py")]
    if not py or not py[-1].source or "# CASE " not in py[-1].source:
        return None
    return py[-1].source.rsplit("# CASE ", 1)[1].strip()


def entries(session):
    """(case, hit) of every operator entry a case line made, in order."""
    return [(case_of(h), h) for h in session.hits if ENTRY.match(h.innermost.short or "") and case_of(h)]


def carried(hit):
    (fv,) = [v for v in hit.values or () if v.frame is hit.innermost]
    return fv


def test_every_case_was_recorded_with_its_values(recording):
    session, oracle, _ = recording
    got = [case for case, _ in entries(session)]
    assert got == [o["case"] for o in oracle if o["case"] != "ext"], got


def test_tensors_are_what_torch_printed(recording):
    session, oracle, _ = recording
    expected = [o for o in oracle if o["case"] != "ext"]
    for (case, hit), want in zip(entries(session), expected):
        fv = carried(hit)
        tensors = [a["tensor"] for a in fv.args if "tensor" in a]
        assert len(tensors) == len(want["tensors"]), (case, fv.args)
        for t, w in zip(tensors, want["tensors"]):
            for key in ("sizes", "strides", "storage_offset", "dtype", "device", "requires_grad", "is_leaf",
                        "grad_fn", "is_view", "key_set", "data_ptr", "numel"):
                assert t.get(key) == w[key], (case, key, t.get(key), w[key])


def test_thread_key_sets_and_the_computed_set(recording):
    session, oracle, _ = recording
    expected = [o for o in oracle if o["case"] != "ext"]
    for (case, hit), want in zip(entries(session), expected):
        d = carried(hit).decision
        assert d is not None and d.how == "computed", case
        assert (d.included, d.excluded) == (want["included"], want["excluded"]), case
        union = 0
        for t in want["tensors"]:
            union |= t["key_set"]
        assert d.computed == (union | want["included"]) & ~want["excluded"], case
    by_case = {case: carried(hit).decision for case, hit in entries(session)}
    assert by_case["plain"].key == "AutogradCPU"
    assert by_case["mode"].key == "PythonTLSSnapshot"  # the dispatch mode's keys, included by the mode
    assert by_case["inference"].key == "CPU"  # an inference tensor has no autograd keys
    assert by_case["inference"].passed_over == ["BackendSelect"] and by_case["inference"].op == "aten::sigmoid"
    assert "RegisterCPU" in by_case["inference"].kernel


def test_the_hops_below_show_which_key_was_handled(recording):
    from tracer.export import op_calls as O

    session, _, _ = recording
    call = next(c for c in O.group_calls(list(session.hits)) if case_of(c.first) == "plain")
    hops = call.hops()
    shorts = [h.frame.short for h in hops]
    autograd = hops[shorts.index("torch::autograd::VariableType::sigmoid")]
    redispatch = hops[shorts.index("at::_ops::sigmoid::redispatch")]
    assert carried(autograd.hit).decision.key == "AutogradCPU" and carried(autograd.hit).decision.how == "handed"
    assert carried(redispatch.hit).decision.key == "CPU" and "AutogradCPU" in redispatch.handled()
    # below autograd the thread excludes the autograd functionality (AutoDispatchBelowADInplaceOrView)
    below = carried(redispatch.hit).decision
    assert "AutogradFunctionality (alone)" in below.names[below.excluded]
    above = carried(autograd.hit).decision
    assert "AutogradFunctionality (alone)" not in above.names[above.excluded]
    kernel = hops[shorts.index("at::wrapper_CPU_sigmoid")]
    self_arg = carried(kernel.hit).args[0]
    assert self_arg["name"] == "self" and self_arg["tensor"]["sizes"] == [2, 3]


def test_inplace_out_and_backward(recording):
    session, oracle, _ = recording
    by_case = {case: hit for case, hit in entries(session)}
    inplace = carried(by_case["inplace"]).args
    assert inplace[0]["name"] == "self" and inplace[0]["tensor"]["sizes"] == [3]
    out = carried(by_case["out"]).args
    assert [a["name"] for a in out] == ["self", "out"]
    assert out[1]["tensor"]["data_ptr"] == next(o for o in oracle if o["case"] == "out")["tensors"][1]["data_ptr"]
    backward = [h for h in session.hits if h.innermost.short == "at::_ops::sigmoid_backward::call"]
    assert backward, "no sigmoid_backward entry"
    args = {a["name"]: a for a in carried(backward[0]).args}
    assert args["grad_output"]["tensor"]["sizes"] == [2, 3] and args["output"]["tensor"]["sizes"] == [2, 3]
    assert args["grad_output"]["tensor"]["dtype"] == "float32"


def test_the_extensions_debug_built_kernel(recording):
    session, oracle, _ = recording
    want = next(o for o in oracle if o["case"] == "ext")
    kernel = [h for h in session.hits if (h.innermost.function or "").startswith("pttrace_demo::scale_add_cpu")]
    assert kernel, sorted({h.innermost.short for h in session.hits})
    args = carried(kernel[0]).args
    assert [a["tensor"]["sizes"] for a in args[:2]] == [t["sizes"] for t in want["tensors"]]
    assert args[2]["value"] == 2.5  # a double: xmm0
    # the outer frames of the debug build: their arguments by name from DWARF, as gdb's bt shows them
    outer = {fv.frame.short: fv.args for fv in kernel[0].values if fv.frame is not kernel[0].innermost}
    boxed = outer["c10::impl::make_boxed_from_unboxed_functor<…>::call"]
    assert [a["name"] for a in boxed] == ["functor", "dispatchKeySet", "stack"]
    assert all(a["where"] == "DWARF" for a in boxed) and boxed[1]["keys"] == ["CPU"]
    wrapped = outer["c10::impl::wrap_kernel_functor_unboxed_<…>::call"]
    assert [a["tensor"]["sizes"] for a in wrapped if "tensor" in a] == [[4], [4]] and wrapped[-1]["value"] == 2.5
    # nothing is read from the release wheel's frames (no DWARF) or the interpreter's
    assert all((fv.frame.library or "").endswith("pttrace_demo.so") for fv in kernel[0].values)


@pytest.fixture(scope="module")
def shown(recording):
    """``pttrace show`` of the recording, once for the tests that read it."""
    _, _, path = recording
    return run_pttrace("show", str(path))


def test_show_and_json_give_them(recording, shown, tmp_path):
    session, _, path = recording
    assert shown.returncode == 0, shown.stderr
    assert "self: float32[2, 3]" in shown.stdout and "dispatches on AutogradCPU" in shown.stdout
    out = tmp_path / "s.json"
    assert run_pttrace("export", str(path), "--format", "json", "-o", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    first = next(h for h in doc["hits"] if "values" in h)
    (entry,) = doc["values"][first["values"]]
    tensor = entry["args"][0]["tensor"]
    assert {"sizes", "strides", "dtype", "device", "requires_grad"} <= set(tensor)
    frame = doc["frames"][doc["stacks"][first["stack"]][entry["frame"]]]
    assert frame["short"] == "at::_ops::sigmoid::call"


def test_each_parameter_is_named_where_a_source_names_it(recording, shown):
    """The operator header's schema names an entry's parameters, a structured kernel's own declaration in
    torch/include names its (and gives its return type: it is read), the debug build's DWARF names the
    extension's kernel; a static kernel of a .cpp file that no source names says unnamed."""
    session, _, _ = recording

    def args_at(short):
        hit = next(h for h in session.hits if h.innermost.short == short)
        return carried(hit).args

    entry = args_at("at::_ops::sigmoid::call")
    assert [(a["name"], a["named_by"]) for a in entry] == [("self", "schema")]
    impl = args_at("at::native::structured_sigmoid_out::impl")
    assert [a["name"] for a in impl] == ["self", "out"] and impl[0]["named_by"].startswith(
        "declaration ATen/ops/sigmoid_native.h:")
    assert impl[0]["tensor"]["sizes"] == [2, 3] and "unreadable" not in impl[0]
    meta = args_at("at::meta::structured_sigmoid::meta")
    assert [a["name"] for a in meta] == ["self"] and meta[0]["named_by"].startswith("declaration ATen/ops/sigmoid_meta.h:")
    kernel = next(h for h in session.hits if (h.innermost.function or "").startswith("pttrace_demo::scale_add_cpu"))
    assert [(a["name"], a["named_by"]) for a in carried(kernel).args] == [("a", "DWARF"), ("b", "DWARF"),
                                                                          ("alpha", "DWARF")]
    import torch

    # (the kernel of the CPU capability torch chose on this machine: AVX2 on some, AVX512 on others)
    stub = args_at(f"at::native::{torch.backends.cpu.get_cpu_capability()}::sigmoid_kernel")
    assert "name" not in stub[0]
    assert shown.returncode == 0, shown.stderr
    assert "#0 unnamed at::TensorIteratorBase&" in shown.stdout and "out: float32[2, 3]" in shown.stdout


def test_the_extensions_shared_templates_carry_their_arguments(recording):
    """A TORCH_LIBRARY operator's boxing templates become hops at a later stop (stash.py): their
    arguments are the ones read at their own entry, kept with the stash."""
    session, oracle, _ = recording
    want = next(o for o in oracle if o["case"] == "ext")
    adapter = [h for h in session.hits if h.innermost.short == "c10::impl::wrap_kernel_functor_unboxed_<…>::call"
               and "pttrace_demo" in (h.innermost.library or "")]
    assert adapter, sorted({h.innermost.short for h in session.hits})
    args = carried(adapter[0]).args
    assert [a.get("name") for a in args[:2]] == ["functor", "dispatchKeySet"]
    assert [a["tensor"]["sizes"] for a in args if "tensor" in a] == [t["sizes"] for t in want["tensors"]]
    assert args[-1]["value"] == 2.5
