"""The example sessions kept in ``sessions/``: recorded by ``scripts/record_examples.sh`` with the real
tool, and their markdown is what ``pttrace export`` writes for them today (a change of the export
format without a re-recording fails here)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.export_support import code_spans, fences, tables, unclosed_fence
from tracer.session import storage
from tracer.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "record_examples.sh"
NAMES = re.findall(r"^record (\S+) (\S+) (.+)$", SCRIPT.read_text(), re.M)
PATH_HEADER = ["#", "layer", "function", "dispatch key", "library", "file:line"]


def test_the_script_records_every_example_the_issue_names():
    breaks = {name: (script, specs.split()) for name, script, specs in NAMES}
    assert breaks == {
        "initModule": ("scripts/hello-world.py", ["initModule"]),
        "tensor": ("scripts/hello-world.py", ["THPVariable_tensor"]),
        "sigmoid-forward": ("scripts/hello-world.py", ["wrapper_CPU_sigmoid"]),
        "sigmoid-backward": ("scripts/hello-world.py", ["wrapper_CPU_sigmoid_backward"]),
        "debug-ext": ("scripts/call_debug_ext.py", ["pttrace_demo::scale_add_cpu"]),
        "torchscript": ("scripts/torchscript.py", ["wrapper_CPU_sigmoid", "at::native::relu"]),
    }


@pytest.fixture(params=[name for name, _, _ in NAMES])
def example(request):
    name = request.param
    jsonl = ROOT / "sessions" / f"example-{name}.jsonl"
    md = ROOT / "sessions" / f"example-{name}.md"
    assert jsonl.exists() and md.exists(), f"run scripts/record_examples.sh ({jsonl.name} or {md.name} missing)"
    report = storage.LoadReport()
    session = storage.load(jsonl, report)
    return name, session, report, md.read_text()


def test_each_example_is_a_whole_recording_of_its_script(example):
    name, session, report, _ = example
    script, specs = next((s, b.split()) for n, s, b in NAMES if n == name)
    assert not report.bad_lines
    assert session.info.status == "completed" and session.info.exit_code == 0
    assert session.info.argv[1:] == [script]
    assert [b.spec for b in session.breakpoints] == specs
    assert session.hits and all(b.hits for b in session.breakpoints)
    assert session.info.torch_git_version and re.fullmatch(r"[0-9a-f]{40}", session.info.torch_git_version)


def test_each_example_markdown_is_what_export_writes_today(example, tmp_path, capsys):
    name, session, _, committed = example
    path = session.path
    if session.info.cwd != str(ROOT):
        # Recorded in another checkout (CI clones elsewhere): move the session and the markdown expected
        # of it into this one, so that the source excerpts are read from the same files here.
        old = session.info.cwd
        path = tmp_path / Path(session.path).name
        path.write_text(Path(session.path).read_text().replace(old, str(ROOT)))
        committed = committed.replace(old, str(ROOT))
    out = tmp_path / f"{name}.md"
    assert main(["export", str(path), "-o", str(out)]) == 0
    assert out.read_text() == committed, f"sessions/example-{name}.md is stale: run scripts/record_examples.sh"
    told = capsys.readouterr().err
    assert told == f"pttrace: wrote {len(session.hits)} {'hit' if len(session.hits) == 1 else 'hits'} as markdown to {out}.\n"


def test_each_example_markdown_is_valid_commonmark_with_its_call_paths(example):
    name, session, _, md = example
    assert unclosed_fence(md) is None
    all_tables = tables(md)
    for t in all_tables:
        assert all(len(row) == len(t[0]) for row in t), (name, t[0])
    # a path's table: these columns, then `carried` where a frame of it carried values
    path_tables = [t for t in all_tables if t[0][:len(PATH_HEADER)] == PATH_HEADER]
    # each path studied has its flowchart; the import-time paths folded under the others have none
    studied = md.split("## At import time")[0]
    assert path_tables and md.count("```mermaid") == studied.count("```mermaid") == len(tables(studied)) - len(
        [t for t in tables(studied) if t[0][:len(PATH_HEADER)] != PATH_HEADER])
    spans = code_spans(md)
    commit = session.info.torch_git_version
    if name == "sigmoid-forward":
        (rows,) = path_tables
        kernel = rows[-1]
        assert kernel[1:5] == ["kernel", "`at::wrapper_CPU_sigmoid`", "CPU", "`libtorch_cpu.so`"]
        assert "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)" in \
            [content.strip() for info, content in fences(md) if info == "text"]
    if name == "initModule":
        assert any(r[1:3] == ["binding", "`initModule`"] for t in path_tables for r in t)
        assert "`import torch`" not in spans and "import torch" in md  # the Python line, quoted in an excerpt
    if name == "debug-ext":
        rows = path_tables[0]
        kernel = rows[-1]
        assert kernel[4] == "`pttrace_demo.so`" and kernel[5].startswith("`scripts/debug_ext/pttrace_demo.cpp:")
        assert f"https://github.com/pytorch/pytorch/blob/{commit}/aten/src/ATen/core/boxing/impl/" in md
        assert any(info == "cpp" and "scale_add_cpu" in content for info, content in fences(md))
    if name == "torchscript":  # the scripted lines the interpreter ran, checked against the script itself
        source = (ROOT / "scripts" / "torchscript.py").read_text().splitlines()
        for text in ("return torch.sigmoid(x) * 2.0", "y = torch.relu(y - 1.0)", "y = gate(y)"):
            line = next(n for n, t in enumerate(source, 1) if t.strip() == text)
            assert f"| `scripts/torchscript.py:{line}` | `{text}` |" in md, text  # a row of the scripted lines
        assert "graph(%x.1, %steps.1):" in md and "aten::sigmoid" in md and "prim::Loop" in md
