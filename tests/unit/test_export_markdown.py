"""The markdown export, read back with a CommonMark parser (markdown-it-py with GFM tables)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.unit.export_support import (CPU_ADAPTER, KERNEL, TORCH_COMMIT, clone_hit, code_spans, fences,
                                      hit_by_breakpoint, html_code, load_sigmoid, native, one_hit_session, parser,
                                      python, tables, unclosed_fence)
from tracer.export import markdown
from tracer.export import paths as P
from tracer.export.local_files import SourceTrust
from tracer.session.model import Thread

PATH_HEADER = ["#", "layer", "function", "dispatch key", "library", "file:line"]


@pytest.fixture(scope="module")
def sigmoid_md() -> str:
    return markdown.render(load_sigmoid())


def path_tables(md):
    return [t for t in tables(md) if t[0] == PATH_HEADER]


def test_every_table_row_has_its_header_width_and_every_fence_closes(sigmoid_md):
    all_tables = tables(sigmoid_md)
    assert len(all_tables) == 2 + 4  # metadata, breakpoints, one per distinct path
    for t in all_tables:
        assert all(len(r) == len(t[0]) for r in t), t
    assert unclosed_fence(sigmoid_md) is None
    # Every line of source is accounted for: nothing swallowed by an unterminated HTML block.
    html_blocks = [t for t in parser().parse(sigmoid_md) if t.type == "html_block"]
    assert all(b.content.strip() in ("<details>", "</details>") or b.content.startswith("<details>\n<summary>")
               for b in html_blocks)


def test_metadata_table(sigmoid_md):
    meta = dict((k.strip("*"), v) for k, v in tables(sigmoid_md)[0][1:])
    assert sigmoid_md.startswith("# pttrace: `python scripts/hello-world.py`\n")
    for key in ("command", "mode", "Python", "torch", "torch git commit", "gdb", "date", "status", "warnings"):
        assert key in meta
    assert meta["command"] == "`python scripts/hello-world.py`"
    assert meta["status"] == "completed (exit code 0)"
    assert meta["Python"] == "3.11.7" and meta["gdb"] == "13.1"
    assert f"https://github.com/pytorch/pytorch/commit/{TORCH_COMMIT}" in meta["torch git commit"]
    assert "no DWARF line information" in meta["warnings"]
    assert meta["hits"] == "4 in 4 distinct call paths"


def test_breakpoint_table(sigmoid_md):
    bps = tables(sigmoid_md)[1]
    assert bps[0] == ["breakpoint", "resolved locations", "hits"]
    assert [r[0] for r in bps[1:]] == ["`THPVariable_tensor`", "`wrapper_CPU_sigmoid`", "`wrapper_CPU_sigmoid_backward`"]
    assert [r[2] for r in bps[1:]] == ["2", "1", "1"]
    assert "libtorch_cpu.so" in bps[2][1]
    assert "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)" in code_spans(sigmoid_md)


def test_each_distinct_path_once_top_down_with_its_layers(sigmoid_md):
    t = path_tables(sigmoid_md)[2]  # the forward sigmoid path
    rows = t[1:]
    assert [r[0] for r in rows] == [str(i) for i in range(1, len(rows) + 1)]
    assert rows[0][1:3] == ["python", "`<module>`"] and "hello-world.py:13" in rows[0][5]
    assert rows[-1][1:5] == ["kernel", "`at::wrapper_CPU_sigmoid`", "CPU", "`libtorch_cpu.so`"]
    layers = [r[1] for r in rows]
    assert layers.index("binding") < layers.index("dispatcher") < layers.index("autograd") < layers.index("kernel")
    assert "interpreter" not in layers
    assert "### Path 3: `at::wrapper_CPU_sigmoid` from `torch/nn/modules/activation.py:361` (1 hit)" in sigmoid_md
    assert sigmoid_md.count("### Path ") == 4


def test_full_names_survive_in_details_blocks(sigmoid_md):
    texts = [content.strip() for info, content in fences(sigmoid_md) if info == "text"]
    assert KERNEL in texts
    assert CPU_ADAPTER in texts
    assert "wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>::call" in html_code(sigmoid_md)
    assert "<module>" in html_code(sigmoid_md)


def test_interpreter_frames_fold_unless_all_frames():
    s = load_sigmoid()
    folded = markdown.render(s)
    full = markdown.render(s, all_frames=True)
    assert "cfunction_call" not in folded and "_PyEval_EvalFrame" not in folded
    assert "`--all-frames` shows them" in folded
    assert "`cfunction_call`" in full and "`_PyEval_EvalFrame`" in full
    assert "interpreter" in [r[1] for t in path_tables(full) for r in t[1:]]
    for t in tables(full):
        assert all(len(r) == len(t[0]) for r in t)


def test_github_links_for_torch_frames_only(sigmoid_md):
    tokens = parser().parse(sigmoid_md)
    hrefs = [c.attrGet("href") for t in tokens if t.type == "inline" for c in t.children or []
             if c.type == "link_open"]
    blob = [h for h in hrefs if "/blob/" in h]
    assert f"https://github.com/pytorch/pytorch/blob/{TORCH_COMMIT}/torch/nn/modules/activation.py#L361" in blob
    assert f"https://github.com/pytorch/pytorch/blob/{TORCH_COMMIT}/torch/autograd/graph.py#L979" in blob
    assert all(h.startswith(f"https://github.com/pytorch/pytorch/blob/{TORCH_COMMIT}/torch/") for h in blob)
    assert not any("hello-world" in h for h in hrefs)


def test_mermaid_flowchart_of_layers_per_path(sigmoid_md):
    charts = [content for info, content in fences(sigmoid_md) if info == "mermaid"]
    assert len(charts) == 4
    chart = charts[2]
    assert chart.startswith("flowchart LR\n")
    assert "p3n0 --> p3n1 --> p3n2 --> p3n3 --> p3n4 --> p3n5" in chart
    for layer in ("python", "binding", "dispatcher", "autograd", "kernel"):
        assert f":::{layer}" in chart
    # Template brackets are entity-coded, never raw, so mermaid does not read them as HTML.
    assert "wrap_kernel_functor_unboxed_#lt;…wrapper_CPU_sigmoid…#gt;::call" in chart
    assert "<" not in chart.replace("-->", "")


NASTY = [
    "std::function<void (int|float)>::operator()(int) const",
    "ns::`weird``name`::run<int*, char**>(a|b)",
    "c10::impl::boxed<**x**, _y_>::call",
    "operator|(at::Tensor const&, at::Tensor const&)",
    "`leading_backtick",
    "html<script>alert(1)</script>&amp;",
]


def test_names_full_of_markdown_survive_intact():
    frames = [python("forward", "/nowhere/model.py", 7, "return x | y")] + [
        native(name, "/opt/lib/lib|odd*name.so") for name in NASTY]
    md = markdown.render(one_hit_session(frames, warnings=["a | b <c> *d* `e`"]))
    for t in tables(md):
        assert all(len(r) == len(t[0]) for r in t), t
    assert unclosed_fence(md) is None
    spans = code_spans(md)
    shorts = [P.short_of(f) for f in frames]
    for s in shorts:
        assert s in spans, s
    assert "lib|odd*name.so" in spans
    texts = [content.strip() for info, content in fences(md) if info == "text"]
    for name in NASTY:
        assert name in texts, name
    summaries = html_code(md)
    for s in shorts:
        assert s in summaries
    rendered = parser().render(md)
    assert "<script>" not in rendered
    (t,) = path_tables(md)
    assert len(t) == 1 + len(frames)


def test_source_excerpts_for_readable_python_and_native_files(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n\nx = torch.ones(3)\ny = x.sigmoid()\nprint(y)\n")
    kernel_src = tmp_path / "my_kernel.cpp"
    kernel_src.write_text("#include <torch/extension.h>\n\nat::Tensor my_sigmoid(const at::Tensor& x) {\n"
                          "  return x.sigmoid();\n}\n")
    frames = [python("<module>", str(script), 4, "y = x.sigmoid()"),
              native("my_sigmoid(at::Tensor const&)", str(tmp_path / "ext.so"), file=str(kernel_src), line=4)]
    # The native file is quoted when something vouches for it: here the source directory it is under.
    assert "my_sigmoid(const at::Tensor& x)" not in markdown.render(one_hit_session(frames, cwd=str(tmp_path)))
    md = markdown.render(one_hit_session(frames, cwd=str(tmp_path)), trust=SourceTrust(dirs=(str(tmp_path),)))
    blocks = dict(fences(md))
    assert blocks["python"].splitlines() == [
        "  2  ", "  3  x = torch.ones(3)", "> 4  y = x.sigmoid()", "  5  print(y)"]
    assert "> 4    return x.sigmoid();" in blocks["cpp"]
    assert "`train.py:4`" in [r[5] for r in path_tables(md)[0][1:]]


def test_recorded_line_is_shown_when_the_file_is_gone_or_changed(tmp_path):
    changed = tmp_path / "m.py"
    changed.write_text("a = 1\nb = 2\n")
    frames = [python("<module>", "/nowhere/gone.py", 3, "y = model(x)"),
              python("f", str(changed), 2, "b = 3")]
    md = markdown.render(one_hit_session(frames))
    py = [c for info, c in fences(md) if info == "python"]
    assert py == ["> 3  y = model(x)\n", "> 2  b = 3\n"]
    assert "a = 1" not in md  # a file that disagrees with the recording is not this frame's source


TORCH_SPEC = importlib.util.find_spec("torch")


@pytest.mark.skipif(TORCH_SPEC is None, reason="torch is not installed")
def test_a_debug_build_frame_in_an_installed_torch_header_gets_an_excerpt_and_a_link():
    # A C++ extension built with -g: its adapter's DWARF line points into torch's installed headers.
    header = Path(TORCH_SPEC.origin).parent / "include/ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h"
    text = header.read_text().splitlines()
    line = text.index("    return (*functor_)(std::forward<ParameterTypes>(args)...);") + 1
    frames = [native(CPU_ADAPTER, "/tmp/ext/my_ops.so", file=str(header), line=line)]
    # The header is quoted because the extension's DWARF names it (here: what the library would say).
    named = SourceTrust(dwarf_files=lambda library: {str(header)} if library == "/tmp/ext/my_ops.so" else set())
    assert not [c for info, c in fences(markdown.render(one_hit_session(frames))) if info == "cpp"]
    md = markdown.render(one_hit_session(frames), trust=named)
    assert (f"https://github.com/pytorch/pytorch/blob/{TORCH_COMMIT}/aten/src/ATen/core/boxing/impl/"
            f"make_boxed_from_unboxed_functor.h#L{line}") in md
    cpp = [c for info, c in fences(md) if info == "cpp"]
    assert len(cpp) == 1 and f"> {line}      return (*functor_)(std::forward<ParameterTypes>(args)...);" in cpp[0]


def test_an_empty_session_still_renders():
    s = load_sigmoid()
    s.hits = []
    s.breakpoints = []
    md = markdown.render(s)
    assert "No hits were recorded." in md and "No breakpoints were recorded." in md
    assert unclosed_fence(md) is None


def test_code_spans_pick_a_fence_longer_than_any_backtick_run():
    assert markdown.code("a`b") == "``a`b``"
    assert markdown.code("`x`") == "`` `x` ``"
    assert markdown.code("a|b", in_table=True) == "`a\\|b`"
    for s in ["a`b", "``x", "`x`", "a ``` b", " x "]:
        assert code_spans(markdown.code(s)) == [s], s


def test_source_that_contains_fences_cannot_break_out_of_its_excerpt(tmp_path):
    doc = tmp_path / "doc.py"
    doc.write_text('"""Example:\n\n```python\nx = 1\n````\n"""\nrun()\n')
    md = markdown.render(one_hit_session([python("<module>", str(doc), 4, "x = 1")]))
    assert unclosed_fence(md) is None
    (excerpt,) = [c for info, c in fences(md) if info == "python"]
    assert "```python" in excerpt and "````" in excerpt and "> 4  x = 1" in excerpt
    for t in tables(md):
        assert all(len(r) == len(t[0]) for r in t)


def test_a_threads_python_name_is_shown_next_to_its_os_name():
    s = load_sigmoid()
    hit = hit_by_breakpoint(s, "wrapper_CPU_sigmoid")
    worker = Thread.from_dict({"id": 2, "name": "python3", "lwp": 7, "python_name": "known-worker"})
    main = Thread.from_dict({"id": 1, "name": "python3", "lwp": 6})
    assert worker.to_dict()["python_name"] == "known-worker" and "python_name" not in main.to_dict()
    s.hits = [clone_hit(hit, 1, thread=worker), clone_hit(hit, 2, thread=main),
              clone_hit(hit, 3, thread=Thread(id=3, name="loader", python_name="loader"))]
    assert [h.thread.names for h in s.hits] == ["python3 [Python: known-worker]", "python3", "loader"]
    md = markdown.render(s)
    assert r"threads 2 (python3 \[Python: known-worker\]), 1 (python3), 3 (loader)" in md  # brackets escaped
