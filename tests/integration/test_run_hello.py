"""``pttrace run`` on the real torch wheel: the recorded call paths read as PyTorch's layers do."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.gdb, pytest.mark.slow]


def hits_of(session, spec):
    return [h for h in session.hits if h.breakpoint == spec]


def layered(hit):
    """The frames a reader looks at: interpreter and runtime plumbing left out."""
    return [f for f in hit.frames if f.layer not in ("interpreter", "runtime")]


def test_session_metadata(hello_recording):
    proc, session = hello_recording
    info = session.info
    assert info.status == "completed"
    assert info.exit_code == 0
    assert info.mode == "run"
    assert info.argv[-1].endswith("hello-world.py")
    assert info.torch_version and info.torch_version.startswith("2.13.0")
    assert info.torch_git_version and len(info.torch_git_version) == 40
    assert info.gdb_version and "gdb" in info.gdb_version.lower()
    # The target's own output reached the user, apart from gdb's MI.
    assert "grad_fn=<SigmoidBackward0>" in proc.stdout
    assert "^done" not in proc.stdout and "*stopped" not in proc.stdout


def test_summary_paths_fit_a_terminal_line(hello_recording):
    proc, _ = hello_recording
    # site-packages and the working directory are cut off the paths, start-up frames are folded away
    assert "  python     torch/nn/modules/activation.py:361 Sigmoid.forward" in proc.stdout
    assert "  python     scripts/hello-world.py:13 <module>" in proc.stdout
    assert "__libc_start_main" not in proc.stdout
    # (the target's own warnings reach stdout too, with their full paths: only the summary's rows count)
    rows = [line for line in proc.stdout.splitlines() if line.startswith("  python     ")]
    assert rows and not any("site-packages" in row or row.split()[1].startswith("/") for row in rows), rows


def test_initmodule_lists_every_location_and_is_under_import_torch(hello_recording):
    _, session = hello_recording
    bp = session.breakpoint("initModule")
    functions = {loc.function for loc in bp.locations}
    assert "initModule" in functions
    assert any(f and f.startswith("torch::cpu::initModule") for f in functions)
    assert len(bp.locations) >= 3
    # Set by address from pttrace's index: torch/_C's stub calling it is listed, never stopped at, as gdb lists it
    bodies = [loc for loc in bp.locations if not (loc.function or "").endswith("@plt")]
    assert len(bodies) >= 3 and all(loc.library and loc.library.endswith("libtorch_python.so") for loc in bodies)
    assert all(not loc.enabled for loc in bp.locations if loc not in bodies)
    plain = [h for h in hits_of(session, "initModule") if h.innermost.function == "initModule"]
    assert len(plain) == 1
    hit = plain[0]
    assert hit.innermost.layer == "binding"
    py = [f for f in hit.frames if f.kind == "python"]
    assert py[0].file.endswith("hello-world.py")
    assert py[0].source == "import torch"
    assert py[0].line == 6
    # Python frames sit above the native ones, in call order.
    kinds = [f.kind for f in hit.frames]
    assert kinds.index("python") < len(kinds) - 1


def test_sigmoid_forward_path_reads_through_the_layers(hello_recording):
    _, session = hello_recording
    hits = hits_of(session, "wrapper_CPU_sigmoid")
    assert len(hits) == 1
    frames = layered(hits[0])
    py = [f for f in frames if f.kind == "python"]
    assert py[0].file.endswith("hello-world.py") and py[0].source == "y = model(x)"
    assert py[-1].file.endswith("torch/nn/modules/activation.py") and py[-1].function.endswith("forward")
    assert py[-1].source == "return torch.sigmoid(input)"
    native = [f for f in frames if f.kind == "native"]
    expected = [
        ("binding", "THPVariable_sigmoid"),
        ("dispatcher", "at::_ops::sigmoid::call"),
        ("autograd", "VariableType::sigmoid"),
        ("dispatcher", "at::_ops::sigmoid::redispatch"),
        ("kernel", "wrapper_CPU_sigmoid"),
    ]
    # Each expected hop appears, in this order (adapters may sit between them).
    pos = 0
    for layer, name in expected:
        while pos < len(native) and not (native[pos].layer == layer and name in (native[pos].short or "")):
            pos += 1
        assert pos < len(native), f"{layer} {name} missing or out of order in {[(f.layer, f.short) for f in native]}"
        pos += 1
    kernel = native[-1]
    assert kernel.dispatch_key == "CPU"
    assert kernel.function == "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)"
    assert kernel.library.endswith("libtorch_cpu.so")
    assert kernel.address and kernel.address > 0
    # Python frames come before every native torch frame: outermost first.
    assert frames.index(py[-1]) < frames.index(native[0])


def test_tensor_binding_under_torch_tensor_line(hello_recording):
    _, session = hello_recording
    hits = hits_of(session, "THPVariable_tensor")
    assert len(hits) == 2  # x and target
    for hit in hits:
        assert hit.innermost.layer == "binding"
        assert "THPVariable_tensor" in hit.innermost.function
        callers = [f for f in hit.frames if f.kind == "python"]
        assert callers[-1].source.startswith(("x = torch.tensor(", "target = torch.tensor("))


def test_backward_kernel_runs_under_the_autograd_engine(hello_recording):
    _, session = hello_recording
    hits = hits_of(session, "wrapper_CPU_sigmoid_backward")
    assert hits, "the sigmoid backward kernel was not hit"
    hit = hits[0]
    names = " ".join(f.function or "" for f in hit.frames)
    assert "Engine::evaluate_function" in names
    assert "SigmoidBackward0" in names
    assert hit.innermost.dispatch_key == "CPU"
    assert hit.thread.id is not None and hit.thread.name
    engine = [f for f in hit.frames if "Engine::evaluate_function" in (f.function or "")]
    assert engine[0].layer == "autograd"
    # backward() was called from hello-world.py's last line.
    py = [f for f in hit.frames if f.kind == "python"]
    assert any(f.source == "loss.backward()" for f in py)


def test_unresolved_breakpoint_is_reported_with_close_names(hello_recording):
    proc, session = hello_recording
    bp = session.breakpoint("THPVariable_tensr")
    assert bp is not None and not [loc for loc in bp.locations if loc.address]
    assert bp.hits == 0
    assert "THPVariable_tensr" in proc.stdout and "never resolved" in proc.stdout
    assert "THPVariable_tensor" in proc.stdout.split("THPVariable_tensr", 1)[1]


def test_json_export_is_the_contract(hello_recording):
    import json

    from tests.conftest import run_pttrace

    _, session = hello_recording
    proc = run_pttrace("export", session.path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema"] == 2
    assert set(data["session"]) >= {"id", "mode", "argv", "pid", "python", "torch_version", "torch_git_version",
                                    "gdb_version", "started", "status", "warnings"}
    assert {b["spec"] for b in data["breakpoints"]} >= {"initModule", "wrapper_CPU_sigmoid"}
    hit = data["hits"][0]
    assert set(hit) >= {"seq", "breakpoint", "thread", "time", "stack"}
    frame_keys = {"kind", "function", "short", "library", "address", "file", "line", "layer", "dispatch_key"}
    for f in (data["frames"][i] for i in data["stacks"][hit["stack"]]):
        assert set(f) >= frame_keys
        if f["kind"] == "python":
            assert "source" in f


def test_markdown_export_of_a_real_recording(hello_recording, tmp_path):
    from markdown_it import MarkdownIt

    from tests.conftest import run_pttrace

    _, session = hello_recording
    out = tmp_path / "notes.md"
    proc = run_pttrace("export", session.path, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert not any(t.type == "fence" and t.info == "" and t.content.count("```") for t in tokens)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`at::wrapper_CPU_sigmoid`" in line]
    assert rows and "| CPU |" in rows[0] and "libtorch_cpu.so" in rows[0]
    assert "y = model(x)" in text
    assert "```mermaid" in text
    # The torch frames link to GitHub at the wheel's exact commit (torch's own word for it), at the line of
    # the call in the installed file (the rest of the links: test_exports_real.py). torch.version is torch's
    # version.py run as Python: run here as it is at `import torch` (pttrace reads the file with patterns),
    # without importing all of torch for it (2.5 s of CPU at load 8)
    import importlib.util
    import runpy

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin
    commit = runpy.run_path(str(Path(spec.origin).with_name("version.py")))["git_version"]
    assert session.info.torch_git_version == commit
    forward = next(f for h in session.hits if h.breakpoint == "wrapper_CPU_sigmoid" for f in h.frames
                   if f.kind == "python" and f.file.endswith("torch/nn/modules/activation.py"))
    assert open(forward.file).read().splitlines()[forward.line - 1].strip() == "return torch.sigmoid(input)"
    assert f"https://github.com/pytorch/pytorch/blob/{commit}/torch/nn/modules/activation.py#L{forward.line})" in text
    # folded stacks for flame graphs: one line per distinct path, ending in its count.
    proc = run_pttrace("export", session.path, "--format", "folded")
    lines = proc.stdout.strip().splitlines()
    assert any(line.endswith(" 1") and "wrapper_CPU_sigmoid" in line for line in lines)
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == len(session.hits)
