"""Grouping hits into distinct call paths, folding, and where a frame's source lives."""
from __future__ import annotations

import pytest

from tests.unit.export_support import clone_hit, hit_by_breakpoint, load_sigmoid, native, python
from tracer.export import paths as P
from tracer.export.source import SourceReader, github_url, pinned_ref, repo_path
from tracer.session.model import Frame


def test_each_hit_of_the_sigmoid_session_is_its_own_path():
    s = load_sigmoid()
    paths = P.group(s.hits)
    assert [p.count for p in paths] == [1, 1, 1, 1]
    assert [p.title for p in paths] == [
        "torch::autograd::THPVariable_tensor",
        "torch::autograd::THPVariable_tensor",
        "at::wrapper_CPU_sigmoid",
        "at::wrapper_CPU_sigmoid_backward",
    ]


def test_folding_starts_at_the_outermost_python_frame_and_drops_the_interpreter():
    s = load_sigmoid()
    hit = hit_by_breakpoint(s, "wrapper_CPU_sigmoid")
    shown = P.visible_frames(hit.frames)
    assert shown[0].kind == "python" and shown[0].function == "<module>" and shown[0].line == 13
    assert shown[-1].function == "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)"
    assert not any(P.layer_of(f) == "interpreter" for f in shown)
    assert "__libc_start_call_main" not in [f.function for f in shown]
    # Top-down: module.py/container.py/activation.py, then the binding, dispatcher, autograd, kernel.
    assert [f.short for f in shown if f.kind == "native"] == [
        "torch::autograd::THPVariable_sigmoid",
        "at::_ops::sigmoid::call",
        "wrap_kernel_functor_unboxed_<…sigmoid…>::call",
        "torch::autograd::VariableType::sigmoid",
        "at::_ops::sigmoid::redispatch",
        "wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>::call",
        "at::wrapper_CPU_sigmoid",
    ]
    path = P.group([hit])[0]
    assert path.layers == ["python", "binding", "dispatcher", "autograd", "dispatcher", "kernel"]
    assert path.hidden == len(hit.frames) - len(shown)


def test_a_cpython_function_broken_on_is_shown_though_the_interpreter_is_folded():
    lib = "/usr/lib/libpython3.12.so.1.0"
    frames = [native("__libc_start_call_main", "/lib/libc.so.6", layer="runtime"),
              native("Py_RunMain", lib, layer="interpreter"), python("<module>", "m.py", 1),
              native("_PyEval_EvalFrameDefault", lib, layer="interpreter"),
              native("PyNumber_ToBase", lib, layer="interpreter")]
    assert [f.function for f in P.visible_frames(frames)] == ["<module>", "PyNumber_ToBase"]
    # without Python frames (an interpreter pttrace cannot read): still the breakpoint's own frame
    assert [f.function for f in P.visible_frames([frames[0], frames[1], frames[4]])] == [
        "__libc_start_call_main", "PyNumber_ToBase"]


def test_all_frames_keeps_everything():
    hit = hit_by_breakpoint(load_sigmoid(), "wrapper_CPU_sigmoid")
    assert P.visible_frames(hit.frames, all_frames=True) == hit.frames
    assert P.group([hit], all_frames=True)[0].hidden == 0


def test_hits_that_differ_only_in_interpreter_frames_share_a_path():
    # GIVEN two hits of the same Python and native frames, one with an extra interpreter hop
    s = load_sigmoid()
    hit = hit_by_breakpoint(s, "wrapper_CPU_sigmoid")
    other = clone_hit(hit, 10)
    at = next(i for i, f in enumerate(other.frames) if f.function == "cfunction_call")
    other.frames.insert(at, native("_PyObject_VectorcallTstate", "/usr/lib/libpython3.11.so.1.0"))
    # WHEN grouped folded, THEN one path of 2 hits; with all frames, two paths
    folded = P.group([hit, other])
    assert len(folded) == 1 and folded[0].count == 2
    assert [h.seq for h in folded[0].hits] == [hit.seq, 10]
    assert len(P.group([hit, other], all_frames=True)) == 2


def test_a_different_python_line_is_a_different_path():
    s = load_sigmoid()
    a, b = [h for h in s.hits if h.breakpoint == "THPVariable_tensor"]
    assert len(P.group([a, b])) == 2
    assert len(P.group([a, clone_hit(a, 99)])) == 1


def test_paths_come_in_order_of_their_first_hit_and_count_breakpoints_and_threads():
    s = load_sigmoid()
    sig = hit_by_breakpoint(s, "wrapper_CPU_sigmoid")
    hits = list(s.hits) + [clone_hit(sig, 5), clone_hit(sig, 6)]
    hits[-1].thread.id = 7
    hits[-1].thread.name = "worker"
    paths = P.group(hits)
    sigmoid_path = paths[2]
    assert sigmoid_path.count == 3
    assert sigmoid_path.breakpoints == ["wrapper_CPU_sigmoid"]
    assert sigmoid_path.threads == ["1 (python3)", "7 (worker)"]


def test_portable_keys_ignore_where_torch_is_installed():
    s = load_sigmoid()
    hit = hit_by_breakpoint(s, "wrapper_CPU_sigmoid")
    moved = clone_hit(hit, 2)
    for f in moved.frames:
        if f.library:
            f.library = f.library.replace("/work/main/.venv", "/home/someone/venv")
        if f.file:
            f.file = f.file.replace("/work/main/.venv", "/home/someone/venv")
        if f.address:
            f.address += 0x1000  # ASLR
    assert len(P.group([hit, moved], portable=True)) == 1
    assert len(P.group([hit, moved])) == 2


def test_a_stop_without_frames_is_still_a_path():
    hit = clone_hit(hit_by_breakpoint(load_sigmoid(), "wrapper_CPU_sigmoid"), 1, frames=[])
    (path,) = P.group([hit])
    assert path.frames == [] and path.title == "(no frames)" and path.layers == []


def test_missing_derived_fields_degrade_without_reclassifying():
    # Export never re-runs the classifier (imports go down only): a frame without derived fields
    # shows its full name, the runtime layer and no key, rather than a guess.
    f = native("at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)", layer=None)
    f.short = None
    f.dispatch_key = None
    assert P.layer_of(f) == "runtime"
    assert P.short_of(f) == "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)"
    assert P.dispatch_key_of(f) is None


@pytest.mark.parametrize("file, expected", [
    ("/work/main/.venv/lib/python3.11/site-packages/torch/nn/modules/activation.py", "torch/nn/modules/activation.py"),
    ("/usr/lib/python3/dist-packages/torch/autograd/graph.py", "torch/autograd/graph.py"),
    ("/__w/pytorch/pytorch/torch/csrc/utils/tensor_numpy.cpp", "torch/csrc/utils/tensor_numpy.cpp"),
    ("/__w/pytorch/pytorch/aten/src/ATen/native/UnaryOps.cpp", "aten/src/ATen/native/UnaryOps.cpp"),
    ("/x/site-packages/torch/include/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h",
     "aten/src/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h"),
    ("/x/site-packages/torch/include/c10/core/DispatchKeySet.h", "c10/core/DispatchKeySet.h"),
    ("/x/site-packages/torch/include/torch/library.h", "torch/library.h"),
    ("/x/site-packages/torch/include/torch/csrc/api/include/torch/nn/module.h",
     "torch/csrc/api/include/torch/nn/module.h"),
    ("/home/tk/pytorch-that-I-built/torch/csrc/Module.cpp", "torch/csrc/Module.cpp"),
    ("/home/tk/pytorch/torch/nn/modules/module.py", "torch/nn/modules/module.py"),
    ("../aten/src/ATen/native/cpu/UnaryOpsKernel.cpp", "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp"),
    # Not in the repository: generated files, third-party headers, other code.
    ("/__w/pytorch/pytorch/build/aten/src/ATen/Operators_2.cpp", None),
    ("/__w/pytorch/pytorch/torch/csrc/autograd/generated/VariableType_0.cpp", None),
    ("/x/site-packages/torch/include/ATen/ops/sigmoid.h", None),
    ("/x/site-packages/torch/include/ATen/core/TensorBody.h", None),
    ("/x/site-packages/torch/include/pybind11/pybind11.h", None),
    ("/x/site-packages/torch/version.py", None),
    ("/x/site-packages/torch/lib/libtorch_cpu.so", None),
    ("/work/main/scripts/hello-world.py", None),
    ("/tmp/python-build.20260509073455.222/Python-3.11.7/Objects/call.c", None),
    (None, None),
])
def test_repo_path(file, expected):
    assert repo_path(file) == expected


def test_github_links_are_pinned_to_the_torch_commit():
    ref = pinned_ref("cf30153c4c131c8164ee7798e5022d810682e2cb", "2.13.0+cpu")
    assert github_url("/__w/pytorch/pytorch/torch/csrc/autograd/python_engine.cpp", 290, ref) == (
        "https://github.com/pytorch/pytorch/blob/cf30153c4c131c8164ee7798e5022d810682e2cb/"
        "torch/csrc/autograd/python_engine.cpp#L290")
    assert github_url("/work/main/scripts/hello-world.py", 13, ref) is None
    # Without a commit, a release's tag is the next best pin; a dev build gets no link.
    assert pinned_ref(None, "2.13.0+cpu") == "v2.13.0"
    assert pinned_ref("Unknown", "2.14.0a0+git1234") is None


def test_display_paths_are_short():
    assert P.display_path("/work/main/scripts/hello-world.py", "/work/main") == "scripts/hello-world.py"
    assert P.display_path("/v/lib/python3.11/site-packages/torch/_tensor.py") == "torch/_tensor.py"
    assert P.display_path("/__w/pytorch/pytorch/torch/csrc/Module.cpp") == "torch/csrc/Module.cpp"
    assert P.display_path("/usr/include/c++/12/bits/shared_ptr.h") == "/usr/include/c++/12/bits/shared_ptr.h"


def test_source_reader_excerpts_and_relative_paths(tmp_path):
    (tmp_path / "m.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    reader = SourceReader(cwd=str(tmp_path))

    def py(file, line, source=None):
        return Frame(kind="python", function="f", file=file, line=line, source=source or f"line {line}")

    assert reader.excerpt(py("m.py", 1)) == [(1, "line 1"), (2, "line 2"), (3, "line 3")]
    assert reader.excerpt(py(str(tmp_path / "m.py"), 10), context=1) == [(9, "line 9"), (10, "line 10")]
    assert reader.excerpt(py("m.py", 11)) is None
    assert reader.excerpt(py("m.py", 3, "something else")) is None  # not what ran there: not shown
    assert reader.excerpt(Frame(kind="native", file="/no/such/file.cpp", line=3)) is None
    assert reader.excerpt(py("m.py", None)) is None


def test_frame_labels():
    assert P.frame_label(python("forward", "/v/site-packages/torch/nn/modules/activation.py", 361)) == (
        "forward (torch/nn/modules/activation.py:361)")
    assert P.frame_label(native("at::_ops::sigmoid::call(at::Tensor const&)")) == "at::_ops::sigmoid::call"


def test_portable_keys_see_the_users_script_relative_to_the_cwd():
    hit = hit_by_breakpoint(load_sigmoid(), "THPVariable_tensor")
    moved = clone_hit(hit, 2)
    for f in moved.frames:
        if f.file and f.file.startswith("/work/main/"):
            f.file = f.file.replace("/work/main/", "/home/u/checkout/")
    (a,) = P.group([hit], portable=True, cwd="/work/main")
    (b,) = P.group([moved], portable=True, cwd="/home/u/checkout")
    assert a.key == b.key
