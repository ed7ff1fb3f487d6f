"""Sources of native frames without DWARF (tracer.sources), on the real wheel and real recordings.

GIVEN the hello-world recording on the release wheel (no DWARF), its sigmoid frames lead to the op's
entries in the packaged yaml and to the boxing templates' definitions in torch/include; GIVEN the
debug extension built without -g, ``--source-dir scripts/debug_ext`` gives its kernel the file and
definition line DWARF gives the -g build; GIVEN a checkout stand-in made of the wheel's headers laid
out as the repository lays them out, DWARF paths from another machine are found in it.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import PYTHON, ROOT, run_pttrace
from tests.unit.export_support import json_hits
from tests.support import run_child
from tracer.sources import SourceFinder

# Definitions in C++ come from universal-ctags (setup.sh installs it); the yaml entries do not need it.
needs_ctags = pytest.mark.skipif(shutil.which("ctags") is None, reason="universal-ctags is not installed")

COMMIT_RE = r"[0-9a-f]{40}"


def _line(path: str, n: int) -> str:
    return Path(path).read_text(errors="replace").splitlines()[n - 1]


def _frames(session, breakpoint):
    hit = next(h for h in session.hits if h.breakpoint == breakpoint)
    return [f for f in hit.frames if f.kind == "native"]


def _by_short(frames, text):
    return [f for f in frames if text in (f.function or "")]


@pytest.fixture(scope="module")
def wheel_finder(hello_recording):
    _, session = hello_recording
    return SourceFinder(None, session.info.torch_git_version)


@pytest.mark.gdb
def test_sigmoid_op_frames_lead_to_native_functions_yaml(hello_recording, wheel_finder):
    _, session = hello_recording
    frames = _frames(session, "wrapper_CPU_sigmoid")
    for name in ("at::_ops::sigmoid::call(", "at::_ops::sigmoid::redispatch(", "wrapper_CPU_sigmoid(at::Tensor const&)"):
        (frame,) = [f for f in frames if (f.function or "").startswith(name) or name in (f.function or "")
                    and not f.function.startswith("c10::")]
        assert frame.file is None  # the release wheel has no DWARF
        ops = [r for r in wheel_finder.refs(frame.function, frame.library) if r.label == "op"]
        assert [(Path(r.file).name, r.line) for r in ops] == [("native_functions.yaml", 5259)], frame.function
        assert _line(ops[0].file, 5259) == "- func: sigmoid(Tensor self) -> Tensor"
        gen = [r for r in wheel_finder.refs(frame.function, frame.library) if r.label == "generated from"]
        assert len(gen) == 1 and "${" in _line(gen[0].file, gen[0].line)


@pytest.mark.gdb
def test_the_autograd_frame_leads_to_derivatives_yaml(hello_recording, wheel_finder):
    _, session = hello_recording
    (frame,) = _by_short(_frames(session, "wrapper_CPU_sigmoid"), "VariableType::(anonymous namespace)::sigmoid(")
    refs = wheel_finder.refs(frame.function, frame.library)
    ops = {(Path(r.file).name, r.line) for r in refs if r.label == "op"}
    assert ops == {("native_functions.yaml", 5259), ("derivatives.yaml", 1537)}
    deriv = next(r for r in refs if r.file.endswith("derivatives.yaml"))
    assert _line(deriv.file, 1537) == "- name: sigmoid(Tensor self) -> Tensor"
    assert "SigmoidBackward0" in deriv.what
    assert any(r.label == "generated from" and r.file.endswith("autograd/templates/VariableType.cpp") for r in refs)
    # ... and the backward Node of the backward pass, by its generated name
    (node,) = _by_short(_frames(session, "wrapper_CPU_sigmoid_backward"), "SigmoidBackward0::apply(")
    assert any(r.line == 1537 for r in wheel_finder.refs(node.function, node.library))


@needs_ctags
@pytest.mark.gdb
def test_boxing_template_frames_lead_to_their_header_definitions(hello_recording, wheel_finder):
    _, session = hello_recording
    wrappers = _by_short(_frames(session, "wrapper_CPU_sigmoid"), "wrap_kernel_functor_unboxed_<")
    assert len(wrappers) == 2
    seen = {}
    for frame in wrappers:
        (ref,) = wheel_finder.refs(frame.function, frame.library)  # one definition: the specialization that fits
        assert ref.label == "definition" and ref.candidates == 1
        assert ref.file.endswith("torch/include/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h")
        text = Path(ref.file).read_text().splitlines()
        assert "static ReturnType call(" in text[ref.line - 1]
        # The specialization the frame's signature picks: a kernel taking a DispatchKeySet first (the
        # autograd kernel) or not (the CPU wrapper), as its enclosing struct says in the header.
        struct_head = next(text[n] for n in range(ref.line - 1, 0, -1) if "ReturnType(" in text[n])
        takes_keyset = "&torch::autograd::VariableType" in frame.function
        assert ("DispatchKeySet" in struct_head) == takes_keyset, struct_head
        seen[takes_keyset] = ref.line
    assert len(set(seen.values())) == 2


@needs_ctags
@pytest.mark.gdb
def test_markdown_and_json_exports_link_the_sources_at_the_session_commit(hello_recording, tmp_path):
    _, session = hello_recording
    md = tmp_path / "notes.md"
    proc = run_pttrace("export", str(session.path), "-o", str(md))
    assert proc.returncode == 0, proc.stderr
    text = md.read_text()
    commit = session.info.torch_git_version
    base = f"https://github.com/pytorch/pytorch/blob/{commit}/"
    assert f"op: [`torchgen/packaged/ATen/native/native_functions.yaml:5259`]({base}aten/src/ATen/native/" \
           "native_functions.yaml#L5259)" in text
    assert f"({base}tools/autograd/derivatives.yaml#L1537)" in text
    assert f"({base}aten/src/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h#L" in text
    assert "> 5259  - func: sigmoid(Tensor self) -> Tensor" in text  # the excerpt, its line marked
    proc = run_pttrace("export", str(session.path), "--format", "json")
    data = json.loads(proc.stdout)
    hit = next(h for h in json_hits(data) if h["breakpoint"] == "wrapper_CPU_sigmoid")
    kernel = hit["frames"][-1]
    assert [(s["label"], Path(s["file"]).name, s["line"]) for s in kernel["sources"]][0] == \
        ("op", "native_functions.yaml", 5259)


@needs_ctags
@pytest.mark.gdb
def test_show_names_the_source_of_frames_without_dwarf(hello_recording):
    _, session = hello_recording
    proc = run_pttrace("show", str(session.path), env={"COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "↳ op torchgen/packaged/ATen/native/native_functions.yaml:5259 (+1 more) - func: sigmoid(Tensor self) " \
           "-> Tensor" in flat
    assert "↳ definition torch/include/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h:603 static " \
           "ReturnType call(" in flat


# -- the debug extension built without -g --------------------------------------------------------------
@pytest.fixture(scope="module")
def nodwarf_ext() -> Path:
    proc = run_child([PYTHON, str(ROOT / "scripts" / "build_debug_ext.py"), "--no-debug"], capture_output=True,
                     text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def nodwarf_recording(nodwarf_ext, tmp_path_factory):
    from tracer.session import storage

    session_dir = tmp_path_factory.mktemp("nodwarf-sessions")
    proc = run_pttrace("run", "--batch", "--max-hits", "1", "--session-dir", str(session_dir), "--break",
                       "pttrace_demo::scale_add_cpu", str(ROOT / "scripts" / "call_debug_ext.py"), str(nodwarf_ext))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = session_dir.glob("*.jsonl")
    return storage.load(path)


@needs_ctags
@pytest.mark.gdb
@pytest.mark.slow
def test_source_dir_gives_a_release_build_the_definition_dwarf_gives_the_debug_build(
        nodwarf_recording, debug_ext):
    from tracer import symbols

    session = nodwarf_recording
    kernel = session.hits[0].frames[-1]
    assert kernel.function.startswith("pttrace_demo::scale_add_cpu(") and kernel.file is None
    proc = run_pttrace("export", str(session.path), "--format", "json", "--source-dir", "scripts/debug_ext")
    assert proc.returncode == 0, proc.stderr
    frames = json_hits(json.loads(proc.stdout))[0]["frames"]
    (dwarf,) = symbols.find_symbol("pttrace_demo::scale_add_cpu", [str(debug_ext)])
    (ref,) = frames[-1]["sources"]
    assert ref["label"] == "definition"
    assert (ref["file"], ref["line"]) == (dwarf.decl_file, dwarf.decl_line)
    # The boxing templates instantiated in the extension: each definition we find holds the line
    # DWARF gives the same function in the -g build.
    checked = 0
    for frame in frames:
        if frame["kind"] != "native" or "pttrace_demo.so" not in (frame["library"] or "") \
                or not frame["function"].startswith("c10::impl::"):
            continue
        (m,) = [x for x in symbols.find_symbol(frame["function"], [str(debug_ext)]) if not x.cold]
        defs = [s for s in frame.get("sources", []) if s["label"] == "definition"]
        assert defs, frame["function"]
        assert any(Path(s["file"]).name == Path(m.file).name and s["line"] <= m.line <= s["end"] for s in defs), \
            (frame["function"], m.file, m.line, defs)
        checked += 1
    assert checked >= 2
    # `pttrace where` answers with the definition too.
    proc = run_pttrace("where", "pttrace_demo::scale_add_cpu", "--lib", frames[-1]["library"],
                       "--source-dir", "scripts/debug_ext", "--json")
    assert json.loads(proc.stdout)["definitions"][0]["line"] == dwarf.decl_line


# -- a checkout stand-in ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkout(tmp_path_factory, hello_recording):
    """The wheel's dispatcher headers where pytorch/pytorch keeps them, in a git checkout of another commit."""
    include = Path(hello_recording[1].hits[0].frames[-1].library or "").parent.parent / "include"
    if not include.is_dir():
        from tracer.sources.finder import installed_torch_dir

        include = Path(installed_torch_dir()) / "include"
    root = tmp_path_factory.mktemp("pytorch")
    shutil.copytree(include / "ATen" / "core", root / "aten" / "src" / "ATen" / "core")
    shutil.copytree(include / "c10" / "core", root / "c10" / "core")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    return root


@needs_ctags
@pytest.mark.gdb
def test_a_checkout_maps_paths_from_another_machine_and_says_when_its_commit_differs(checkout, hello_recording):
    _, session = hello_recording
    finder = SourceFinder(str(checkout), session.info.torch_git_version)
    assert len(finder.notes) == 1 and "0123456789ab" in finder.notes[0]
    assert session.info.torch_git_version[:12] in finder.notes[0]
    remote = "/home/tk/src/pytorch/aten/src/ATen/core/boxing/KernelFunction_impl.h"
    mapped = finder.local_file(remote)
    assert mapped == str(checkout / "aten" / "src" / "ATen" / "core" / "boxing" / "KernelFunction_impl.h")
    # The wrap_kernel_functor frames now find their definition in the checkout too (and in the wheel).
    (frame, _) = _by_short(_frames(session, "wrapper_CPU_sigmoid"), "wrap_kernel_functor_unboxed_<")
    files = {r.file for r in finder.refs(frame.function, frame.library) if r.label == "definition"}
    assert str(checkout / "aten/src/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h") in files
    # A markdown export of a debug build's session from that machine reads its excerpts from the checkout.
    import copy

    from tracer.export import markdown

    moved = copy.deepcopy(session)
    moved.hits = [h for h in moved.hits if h.breakpoint == "wrapper_CPU_sigmoid"][:1]
    moved.hits[0].frames[-1].file, moved.hits[0].frames[-1].line = remote, 50
    text = markdown.render(moved, finder=finder)
    assert f"> 50  {_line(mapped, 50).rstrip()}" in text
    assert "0123456789ab" in text  # the commit warning, in the notes' metadata


@needs_ctags
def test_a_definition_in_a_generated_header_is_shown_from_the_wheel_without_a_link():
    """ATen/ops/*.h and TensorBody.h exist only in a build directory: no GitHub page to link to."""
    from tracer.export.source import github_url
    from tracer.sources.finder import installed_torch_dir, wheel_commit

    torch_dir = installed_torch_dir()
    commit = wheel_commit(torch_dir)
    finder = SourceFinder(None, commit)
    (ops_header,) = finder.refs("at::sigmoid(at::Tensor const&)")
    assert ops_header.label == "definition" and ops_header.file.endswith("torch/include/ATen/ops/sigmoid.h")
    assert "sigmoid(const at::Tensor & self)" in _line(ops_header.file, ops_header.line)
    assert github_url(ops_header.file, ops_header.line, commit) is None
    (method,) = finder.refs("at::Tensor::sigmoid() const")
    assert method.file.endswith("ATen/core/TensorBody.h") and github_url(method.file, method.line, commit) is None
    (handwritten,) = finder.refs("c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reset_()")
    assert github_url(handwritten.file, handwritten.line, commit) == \
        f"https://github.com/pytorch/pytorch/blob/{commit}/c10/util/intrusive_ptr.h#L{handwritten.line}"


@needs_ctags
def test_sources_from_another_torch_build_are_said_to_be_so():
    """A session recorded elsewhere, read here with another torch: its lines may not match, once said."""
    finder = SourceFinder(None, "0123456789abcdef0123456789abcdef01234567")
    refs = finder.refs("at::sigmoid(at::Tensor const&)", "/elsewhere/site-packages/torch/lib/libtorch_cpu.so")
    assert refs and refs[0].file.endswith("ATen/ops/sigmoid.h")  # from the torch beside pttrace
    finder.refs("at::Tensor::sigmoid() const", "/elsewhere/site-packages/torch/lib/libtorch_cpu.so")
    assert len(finder.notes) == 1 and "not from the traced torch (commit 0123456789ab)" in finder.notes[0]


def test_backward_node_names_are_the_ones_the_wheel_was_generated_with():
    """Every autograd Node the wheel's generated Functions.h declares (but the _foreach_ ones, derived
    from other entries) leads to its derivatives.yaml entry, and every name we derive is a real one."""
    import re

    from tracer.sources import yaml_ops
    from tracer.sources.finder import installed_torch_dir

    torch_dir = Path(installed_torch_dir())
    packaged = torch_dir.parent / "torchgen" / "packaged"
    native = yaml_ops.native_functions(str(packaged / "ATen" / "native" / "native_functions.yaml"))
    deriv = yaml_ops.derivatives(str(packaged / "autograd" / "derivatives.yaml"))
    header = (torch_dir / "include" / "torch" / "csrc" / "autograd" / "generated" / "Functions.h").read_text()
    declared = set(re.findall(r"^struct TORCH_API (\w+) : public", header, re.M))
    assert len(declared) > 500
    missing = []
    for node in sorted(declared):
        ops, grads = yaml_ops.ops_of(f"torch::autograd::generated::{node}::apply", native, deriv)
        if not grads and not node.startswith("Foreach"):
            missing.append(node)
        elif ops:  # (a functional variant codegen makes leads to the entry that asks for it: autogen:)
            assert grads[0].name.startswith(ops[0].name) or ops[0].name.startswith(grads[0].name), node
    assert missing == []
    assert set(deriv._tables["node"]) <= declared
    (mean_nested,) = deriv.get("node", "MeanBackwardAutogradNestedTensor0")
    assert _line(mean_nested.file, mean_nested.line).startswith("- name: mean(Tensor self, *, ScalarType? dtype")


@pytest.mark.parametrize("function, aten", [
    ("at::_ops::new_full_out::call", "new_full"),  # an overload codegen makes (autogen: new_full.out)
    ("at::wrapper_CPU_xlogy_out_OutTensor", "xlogy.OutTensor"),  # an out= overload not named out
    ("at::wrapper_CPU_div_out_out_mode", "div.out_mode"),
    ("at::wrapper_CPU_sigmoid_out_out", "sigmoid.out"),
    ("torch::TraceType::softplus_backward_out_grad_input", "softplus_backward.grad_input"),
    ("torch::autograd::VariableType::unbind_int_AutogradNestedTensor", "unbind.int"),  # another autograd key's
    ("torch::autograd::VariableType::add_Tensor", "add.Tensor"),
    ("at::native::structured_sigmoid_out::impl", "sigmoid.out"),  # named in its dispatch: table
])
def test_generated_names_lead_to_their_operator_entry(function, aten):
    """Names of libtorch_cpu.so's generated functions (every one of 12,404 at::_ops, 2,318 wrappers, 4,700
    TraceType and 2,826 VariableType kernels of the 2.13 wheel maps to an entry; these are the odd forms)."""
    finder = SourceFinder(None, None)
    ops = [r for r in finder.refs(function) if r.label == "op" and r.file.endswith("native_functions.yaml")]
    assert ops, function
    assert _line(ops[0].file, ops[0].line).startswith(f"- func: {aten}(")
