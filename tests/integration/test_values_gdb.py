"""The value readers inside gdb, at the first instruction of real torch functions, from the registers and
stack slots the x86-64 System V ABI puts their arguments in (no call into the target, no DWARF).

GIVEN tests/targets/values_calls.py, which prints what torch says of its tensors and then calls
add (alpha an int, then a float Scalar), clamp (optional tensors, one empty), cat (an ITensorListRef),
sum (an OptionalArrayRef, a bool, an optional ScalarType; the array on the stack), full (a SymInt
ArrayRef, a Scalar, optional dtype/layout/device/bool) and a tensor method at its Python binding
WHEN gdb, attached with address breakpoints, runs tests/targets/values_gdb_reader.py at each hit
THEN every argument reads as the call passed it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import Lines, allowance, stop_process
from tracer import settings
from tracer.symbols import find_symbol, torch_libraries
from tracer.values import layout as layouts
from tracer.values.vtables import load_bases

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "tests" / "targets" / "values_calls.py"
READER = ROOT / "tests" / "targets" / "values_gdb_reader.py"
T, S = "at::Tensor const&", "c10::Scalar const&"
# function -> its parameters' types and where they are at entry (rdi is the returned Tensor's slot)
CALLS = {
    "at::_ops::add_Tensor::call": [[T, "rsi"], [T, "rdx"], [S, "rcx"]],
    "at::_ops::clamp_Tensor::call": [[T, "rsi"], ["std::optional<at::Tensor> const&", "rdx"],
                                     ["std::optional<at::Tensor> const&", "rcx"]],
    "at::_ops::cat::call": [["c10::IListRef<at::Tensor> const&", "rsi"], ["long", "rdx"]],
    "at::_ops::sum_dim_IntList::call": [[T, "rsi"], ["c10::OptionalArrayRef<long>", "stack+8"], ["bool", "rdx"],
                                        ["std::optional<c10::ScalarType>", "rcx"]],
    "at::_ops::full::call": [["c10::ArrayRef<c10::SymInt>", ["rsi", "rdx"]], [S, "rcx"],
                             ["std::optional<c10::ScalarType>", "r8"], ["std::optional<c10::Layout>", "r9"],
                             ["std::optional<c10::Device>", "slot+8"], ["std::optional<bool>", "slot+16"]],
    "torch::autograd::THPVariable_sigmoid(_object*, _object*)": [["_object*", "rdi"], ["_object*", "rsi"]],
    "torch::autograd::THPVariable_sigmoid(_object*, _object*, _object*)": [["_object*", "rsi"]],
}


def _entry(name: str, libraries: list[str]):
    for m in find_symbol(name.split("(")[0], libraries, lines=False):
        if not m.plt and not m.cold and (m.name.endswith(name[name.find("("):]) if "(" in name else True):
            return m
    raise AssertionError(f"{name} not found")


# More interpreters with a torch of their own, by hand (never in CI): PTTRACE_VALUES_PYTHONS=PATH[:PATH]
PYTHONS = [sys.executable] + [p for p in os.environ.get("PTTRACE_VALUES_PYTHONS", "").split(os.pathsep) if p]


@pytest.fixture(scope="module", params=PYTHONS)
def hits(request, tmp_path_factory):
    if shutil.which("gdb") is None:
        pytest.skip("no gdb")
    tmp = tmp_path_factory.mktemp("values")
    python = request.param
    libraries = torch_libraries(python)
    # pttrace's own cache: the probe runs once per torch build (test_values_tensors.py establishes it anew)
    lay = layouts.establish(python, libraries, settings.cache_dir())
    (tmp / "layout.json").write_text(lay.to_json())
    proc = subprocess.Popen([python, str(TARGET)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    gdb = None
    try:
        out = Lines(proc.stdout, "the values target")  # (every read has a deadline and sees the EOF)
        facts = json.loads(out.next(120))
        assert out.next(60).strip() == "ready"
        bases = load_bases(proc.pid)
        breaks = []
        for name, params in CALLS.items():
            m = _entry(name, libraries)
            breaks.append([bases[os.path.realpath(m.library)] + m.address, name, params])
        env = dict(os.environ, VALUES_REPO=str(ROOT), VALUES_LAYOUT=str(tmp / "layout.json"),
                   VALUES_OUT=str(tmp / "out.jsonl"), VALUES_BREAKS=json.dumps(breaks))
        armed = tmp / "armed"
        gdb = subprocess.Popen(
            ["gdb", "-nx", "--batch", "-iex", "set auto-solib-add off",  # address breakpoints need no symbols
             "-p", str(proc.pid), "-x", str(READER),
             "-ex", f"python open({str(armed)!r}, 'w').close()", "-ex", "continue"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + allowance(120)
        while not armed.exists():
            assert gdb.poll() is None and time.monotonic() < deadline, gdb.communicate()
            time.sleep(0.05)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert out.next(120).strip() == "done", proc.stderr.read()[-3000:]
        gdb.wait(timeout=allowance(120))
        lines = [json.loads(x) for x in (tmp / "out.jsonl").read_text().splitlines()]
        yield facts, lines
    finally:
        for p in (gdb, proc):
            stop_process(p)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


def _calls(lines, name):
    return [line["args"] for line in lines if line["function"] == name]


def _is(tensor, fact):
    return {k: tensor[k] for k in ("sizes", "strides", "storage_offset", "dtype", "data_ptr", "impl")} == \
        {k: fact[k] for k in ("sizes", "strides", "storage_offset", "dtype", "data_ptr", "impl")}


def test_tensors_and_scalars_of_add(hits):
    facts, lines = hits
    first, second = _calls(lines, "at::_ops::add_Tensor::call")[:2]
    assert _is(first[0], facts["a"]) and _is(first[1], facts["b"])
    assert first[0]["values"] == [1.0, -2.0, 3.0, 4.5]
    assert first[2] == {"kind": "scalar", "type": "int", "value": 2}
    assert second[2] == {"kind": "scalar", "type": "float", "value": 0.25}


def test_optional_tensors_of_clamp(hits):
    facts, lines = hits
    (args,) = _calls(lines, "at::_ops::clamp_Tensor::call")
    assert _is(args[0], facts["a"]) and _is(args[1], facts["low"])
    assert args[2] == {"kind": "none"}


def test_a_tensor_list_of_cat(hits):
    facts, lines = hits
    (args,) = _calls(lines, "at::_ops::cat::call")
    listed = args[0]
    assert listed["kind"] == "tensors" and listed["length"] == 3 and listed["form"] == "Unboxed"
    assert _is(listed["tensors"][0], facts["a"]) and _is(listed["tensors"][1], facts["b"])
    assert listed["tensors"][2]["sizes"] == [2, 2] and listed["tensors"][2]["dtype"] == "float32"
    assert args[1]["value"] == 1


def test_arrays_bools_and_optionals_of_sum(hits):
    facts, lines = hits
    (args,) = _calls(lines, "at::_ops::sum_dim_IntList::call")
    assert _is(args[0], facts["a"])
    assert args[1]["value"] == [1] and args[2]["value"] is True and args[3]["value"] == "float64"


def test_a_factory_function(hits):
    _, lines = hits
    (args,) = _calls(lines, "at::_ops::full::call")
    assert args[0]["value"] == [2, 3]
    assert args[1] == {"kind": "scalar", "type": "float", "value": 1.5}
    assert args[2]["value"] == "float64"
    # The binding passes no layout, the default device and pin_memory=False (stack slots: no registers left).
    assert args[3] == {"kind": "none"}
    assert args[4]["value"] == "cpu" and args[5]["value"] is False


def test_the_tensor_at_the_python_binding(hits):
    facts, lines = hits
    (args,) = _calls(lines, "torch::autograd::THPVariable_sigmoid(_object*, _object*)")
    assert _is(args[0], facts["a"])
    assert args[1] == {"kind": "opaque", "type": "_object*", "address": 0}  # a method without arguments: NULL
    (args,) = _calls(lines, "torch::autograd::THPVariable_sigmoid(_object*, _object*, _object*)")
    assert args[0] == {"kind": "unreadable", "why": "a tuple object, not a tensor", "type": "THPVariable*",
                       "address": args[0]["address"]}  # torch.sigmoid(a): its arguments' tuple
