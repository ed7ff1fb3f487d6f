"""Collapsed stacks for flame-graph tools: ``frame;frame;frame count``, outermost first."""
from __future__ import annotations

import re

from tests.unit.export_support import clone_hit, hit_by_breakpoint, load_sigmoid, native, one_hit_session, python
from tracer.export import folded

LINE_RE = re.compile(r"^(?P<stack>[^;\n]+(?:;[^;\n]+)*) (?P<count>\d+)$")


def test_one_line_per_distinct_stack_with_its_count():
    s = load_sigmoid()
    sig = hit_by_breakpoint(s, "wrapper_CPU_sigmoid")
    s.hits += [clone_hit(sig, 5), clone_hit(sig, 6)]
    out = folded.render(s)
    lines = out.splitlines()
    assert out.endswith("\n") and len(lines) == 4
    parsed = [LINE_RE.match(line) for line in lines]
    assert all(parsed), lines
    assert sum(int(m["count"]) for m in parsed) == len(s.hits)
    stacks = {m["stack"]: int(m["count"]) for m in parsed}
    forward = next(k for k in stacks if k.endswith("at::wrapper_CPU_sigmoid"))
    assert stacks[forward] == 3
    frames = forward.split(";")
    assert frames[0] == "<module> (scripts/hello-world.py:13)"
    assert frames[6] == "Sigmoid.forward (torch/nn/modules/activation.py:361)"
    assert frames[7:] == [
        "torch::autograd::THPVariable_sigmoid",
        "at::_ops::sigmoid::call",
        "wrap_kernel_functor_unboxed_<…sigmoid…>::call",
        "torch::autograd::VariableType::sigmoid",
        "at::_ops::sigmoid::redispatch",
        "wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>::call",
        "at::wrapper_CPU_sigmoid",
    ]


def test_interpreter_frames_only_with_all_frames():
    s = load_sigmoid()
    assert "cfunction_call" not in folded.render(s)
    full = folded.render(s, all_frames=True)
    assert "cfunction_call" in full
    assert full.splitlines()[0].startswith("_start;__libc_start_main_impl;__libc_start_call_main;Py_BytesMain;")


def test_separators_inside_names_cannot_split_a_frame():
    s = one_hit_session([python("f;g", "/x/a;b.py", 3), native("weird;name\nhere(int)")])
    (line,) = folded.render(s).splitlines()
    assert LINE_RE.match(line)
    assert line == "f,g (/x/a,b.py:3);weird,name here 1"


def test_no_hits_no_lines():
    s = load_sigmoid()
    s.hits = []
    assert folded.render(s) == ""
