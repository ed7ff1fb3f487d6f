"""torch.compile on CPU under pttrace, checked against the program's source and what inductor wrote.

One recording per backend (a compile takes tens of seconds), shared by the tests:
- inductor, its caches off (so it compiles: g++ and openssl run) with TORCH_COMPILE_DEBUG=1
  (the only artefact naming FX nodes and source lines on 2.13's CPU code), ``--op sigmoid``: sigmoid is
  fused into a generated kernel, which pttrace breaks on as it loads;
- aot_eager, ``--op sigmoid --op tanh``: ATen's kernels run under the compiled graphs, h's graph break
  makes a second graph run from dynamo's resume function.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT, gdb_pids
from tests.support import run_child
from tracer.export import paths as P
from tracer.scripted import inductor
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGET = ROOT / "tests" / "targets" / "compile_fn.py"
SOURCE = TARGET.read_text().splitlines()


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SOURCE, 1) if text in line)


def record(tmp: Path, *args: str, env: dict | None = None):
    sessions = tmp / "sessions"
    before = gdb_pids()
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), *args], cwd=tmp,
                     capture_output=True, text=True, timeout=900,
                     env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert gdb_pids() <= before, "a gdb was left running"
    files = sorted(sessions.glob("*.jsonl"))
    assert proc.returncode == 0 and len(files) == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc, storage.load(files[0]), files[0]


@pytest.fixture(scope="module")
def inductor_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inductor")
    env = {"TORCH_COMPILE_DEBUG": "1", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    return (tmp, *record(tmp, "--op", "sigmoid", str(TARGET), "inductor", env=env))


@pytest.fixture(scope="module")
def aot_eager_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aot_eager")
    return (tmp, *record(tmp, "--op", "sigmoid", "--op", "tanh", str(TARGET), "aot_eager"))


def kernel_hits(session):
    return [h for h in session.hits if (h.breakpoint or "").startswith("inductor ")]


def test_helper_programs_are_one_line_each(inductor_run):
    _, proc, session, _ = inductor_run
    gxx = [w for w in session.info.warnings if "g++" in w]
    assert len(gxx) == 1 and re.match(r"g\+\+: \d+ process(es)? executed it, not Python: not traced", gxx[0]), gxx
    assert not any(w.startswith("process ") and "executes g++" in w for w in session.info.warnings)
    assert any(p.argv and p.argv[0].endswith("g++") for p in session.processes)  # the file keeps them
    from tracer.export import processes as PR
    assert all(not (g.process and g.process.argv and g.process.argv[0].endswith("g++")) for g in PR.groups(session))
    assert proc.stdout.count("g++:") == 1


def test_op_under_compile_breaks_on_the_fused_kernel(inductor_run):
    tmp, proc, session, _ = inductor_run
    labels = [h.breakpoint for h in kernel_hits(session)]
    # cg(x) ran twice, ch(x) once: g's fused kernel, and h's first graph (sigmoid and add before its break)
    assert sorted(labels) == ["inductor cpp_fused_add_mul_sigmoid_tanh_0 (op:sigmoid)"] * 2 + [
        "inductor cpp_fused_add_sigmoid_0 (op:sigmoid)"], labels
    hits = [h for h in kernel_hits(session) if "tanh" in h.breakpoint]
    # GIVEN the output module inductor wrote, its kernel named in the call line of the hits' path
    frames = hits[0].frames
    call = next(f for f in frames if f.kind == "python" and f.layer == "generated")
    name = inductor.kernel_name_at(call.source)
    module = Path(call.file).read_text()
    assert f"{name} = async_compile.cpp_pybinding(" in module
    assert hits[0].breakpoint == f"inductor {name} (op:sigmoid)"
    assert frames[-1].function == "kernel" and frames[-1].layer == "generated"
    assert any(f"--op sigmoid: inductor compiled aten.sigmoid into its kernel {name}" in w
               for w in session.info.warnings)


def test_the_kernel_says_its_fx_nodes_ops_and_the_users_line(inductor_run):
    tmp, _, session, _ = inductor_run
    frames = [h for h in kernel_hits(session) if "tanh" in h.breakpoint][0].frames
    kernel = P.generated_kernel(frames, len(frames) - 1, session.info.cwd)
    assert kernel is not None and kernel.missing is None, kernel
    # THEN the nodes and ops are those of the debug directory's post-grad graph, from g's line
    assert [n.op for n in kernel.nodes] == ["aten.sigmoid.default", "aten.mul.Tensor", "aten.tanh.default",
                                            "aten.add.Tensor"]
    g_line = line_of("return torch.sigmoid(x) * 2.0 + torch.tanh(x)")
    assert {(n.file, n.line) for n in kernel.nodes} == {(str(TARGET), g_line)}
    assert kernel.ops_from_name == ["add", "mul", "sigmoid", "tanh"]
    assert Path(kernel.debug_dir).is_relative_to(tmp / "torch_compile_debug")
    # the generated C++ beside the library, at its kernel's definition
    cpp = Path(kernel.cpp).read_text().splitlines()
    assert cpp[kernel.cpp_line - 1].lstrip().startswith('extern "C"') and "kernel(" in cpp[kernel.cpp_line - 1]


def test_compiler_layer_and_the_compiled_graph(inductor_run):
    tmp, _, session, _ = inductor_run
    frames = kernel_hits(session)[0].frames
    layers = {f.function: f.layer for f in frames if f.kind == "native"}
    assert layers.get("dynamo__custom_eval_frame") == "compiler"
    assert layers.get("dynamo_eval_custom_code") == "compiler"
    g = next(f for f in frames if f.kind == "python" and f.function == "g")
    assert g.file == str(TARGET) and g.compiled and re.fullmatch(r"graph \d+", g.compiled)
    assert any(f.kind == "python" and f.layer == "compiler" and "aot_autograd" in (f.file or "") for f in frames)


def test_show_and_markdown_tell_the_kernel_next_to_the_users_line(inductor_run):
    tmp, _, session, path = inductor_run
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = run_child([*PTTRACE, "show", str(path)], capture_output=True, text=True, cwd=tmp, env=env,
                      timeout=300).stdout
    assert "[compiled: graph" in shown and "inductor kernel cpp_fused_add_mul_sigmoid_tanh_" in shown
    assert "return torch.sigmoid(x) * 2.0 + torch.tanh(x)" in shown
    md = tmp / "notes.md"
    run_child([*PTTRACE, "export", str(path), "-o", str(md)], check=True, cwd=tmp, env=env, timeout=300)
    notes = md.read_text()
    assert "is inductor-generated code" in notes and "| `sigmoid` | `aten.sigmoid.default` |" in notes
    assert "cpp_fused_add_mul_sigmoid_tanh_0(arg0_1, buf0)" in notes  # the generated module, around its call
    assert 'extern "C"' in notes  # the generated C++


def test_aot_eager_runs_aten_under_the_compiled_graphs(aot_eager_run):
    _, _, session, _ = aot_eager_run
    # The compiled g runs ATen's sigmoid kernel: its hits are under g's frame marked with its graph.
    cpu = [h for h in session.hits if h.frames[-1].function and "wrapper_CPU_sigmoid" in h.frames[-1].function
           or (h.frames[-1].function or "").startswith("at::native::structured_sigmoid_out")]
    ran = [h for h in cpu if any(f.kind == "python" and f.function == "g" and f.compiled for f in h.frames)]
    assert ran, [h.frames[-1].function for h in session.hits]
    assert not any(f.layer == "generated" for h in session.hits for f in h.frames)
    # h's graph break: tanh runs in the resume function's graph, another graph than h's own
    tanh_line = line_of("return torch.tanh(y) * 3.0")
    resumed = [f for h in session.hits for f in h.frames
               if f.kind == "python" and (f.function or "").startswith("torch_dynamo_resume_in_h") and f.compiled]
    h_frames = [f for h in session.hits for f in h.frames if f.kind == "python" and f.function == "h" and f.compiled]
    assert resumed and h_frames
    assert {f.compiled for f in resumed}.isdisjoint({f.compiled for f in h_frames})
    assert all(f.file == str(TARGET) for f in resumed + h_frames)
    # the resume function is h's code from its break on: its lines are h's, the break's to the return's
    assert all(line_of("torch._dynamo.graph_break()") <= f.line <= tanh_line for f in resumed)


def test_graph_numbers_are_dynamos_own(aot_eager_run):
    """dynamo puts each graph in the compiled frame's globals as ``__compiled_fn_N_<uuid>``: the recorded
    program prints those names as it ends, and they are the numbers pttrace read from the frames' code in
    memory. (The same process, not a second run of the program without pttrace: that run was ~8 s of CPU
    compiling the same graphs again, and dynamo's numbering in the recorded process is the one to match.)"""
    _, proc, session, _ = aot_eager_run
    line = next(x for x in proc.stdout.splitlines() if x.startswith("GRAPHS "))
    dynamos = {f"graph {n}" for n in line.split()[1:]}
    assert len(dynamos) >= 3, line  # g's graph, h's before its break, the resume function's
    recorded = {f.compiled for h in session.hits for f in h.frames if f.kind == "python" and f.compiled}
    assert recorded == dynamos, (recorded, line)
