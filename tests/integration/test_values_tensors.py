"""The tensor reader (tracer.values) on a real process: what torch says of each tensor, pttrace reads.

GIVEN tests/targets/values_tensors.py, which makes tensors of every kind (views, non-contiguous,
channels_last, 0-dim, empty, more than 5 dimensions, meta, sparse, every dtype, requires_grad with a
grad_fn, under no_grad and inference_mode), prints what torch says of each and stops itself
WHEN pttrace establishes the layout of that torch (the probe; cached by build-id) and reads each
tensor from /proc/PID/mem, from the THPVariable (``id(t)``) as at the binding
THEN sizes, strides, storage offset, dtype, device, layout, requires_grad, is_leaf, grad_fn's class,
is_view, data pointer, the DispatchKeySet and the values of small CPU tensors are exactly torch's.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import Lines, allowance, wait_for
from tracer.symbols import torch_libraries
from tracer.values import layout as layouts
from tracer.values import read_tensor, read_tensor_impl, read_thp_variable
from tracer.values.memory import ProcMemory, Unreadable
from tracer.values.tensor import TensorValue, UndefinedTensor
from tracer.values.vtables import Symbolizer, load_bases, node_vtables

TARGET = Path(__file__).resolve().parents[1] / "targets" / "values_tensors.py"


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


# More interpreters with a torch of their own, by hand (a CUDA wheel's venv is 4.7 GB: never in CI):
# PTTRACE_VALUES_PYTHONS=/work/venv-torch212/bin/python pytest tests/integration/test_values_tensors.py
PYTHONS = [sys.executable] + [p for p in os.environ.get("PTTRACE_VALUES_PYTHONS", "").split(os.pathsep) if p]


@pytest.fixture(scope="module", params=PYTHONS)
def stopped(request, tmp_path_factory):
    python = request.param
    libraries = torch_libraries(python)
    lay = layouts.establish(python, libraries, tmp_path_factory.mktemp("cache"))
    proc = subprocess.Popen([python, str(TARGET), "stop", "symbolic"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        facts, symbolic = [], None
        lines = Lines(proc.stdout, "the tensor target")  # (every read has a deadline and sees the EOF)
        while (line := lines.next(120)).strip() != "ready":
            fact = json.loads(line)
            if "symbolic" in fact:
                symbolic = fact
            else:
                facts.append(fact)
        wait_for(lambda: _state(proc.pid) == "T" or proc.poll() is not None, 60, "the target to stop itself")
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        symbolize = Symbolizer(node_vtables(libraries), load_bases(proc.pid))
        with ProcMemory(proc.pid) as mem:
            read = {f["name"]: (read_thp_variable(mem, lay, f["id"], symbolize), f) for f in facts}
            if symbolic is not None:
                symbolic["read"] = read_tensor_impl(mem, lay, symbolic["impl"])
        yield lay, read, python, symbolic
    finally:
        proc.kill()
        proc.wait(timeout=allowance(30))
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()


def test_the_layout_is_established_without_problems(stopped):
    lay, _, _, _ = stopped
    assert lay.problems == ()
    assert lay.dtype(6).name == "float32" and lay.inline_dims == 5


def test_every_tensor_reads_as_torch_says(stopped):
    _, read, _, _ = stopped
    assert len(read) > 60  # the kinds above and every dtype
    wrong = []
    for name, (value, f) in read.items():
        if not isinstance(value, TensorValue):
            wrong.append((name, value))
            continue
        got = {"sizes": list(value.sizes), "strides": list(value.strides) if value.strides is not None else None,
               "dtype": value.dtype, "device": value.device, "layout": value.layout,
               "requires_grad": value.requires_grad, "is_leaf": value.is_leaf, "grad_fn": value.grad_fn,
               "is_view": value.is_view, "key_set": value.key_set, "numel": value.numel, "impl": value.impl}
        want = {k: f[k] for k in got}
        if f["storage_offset"] is not None:
            got["storage_offset"], want["storage_offset"] = value.storage_offset, f["storage_offset"]
        if f["data_ptr"] is not None:
            got["data_ptr"], want["data_ptr"] = value.data_ptr, f["data_ptr"]
        if got != want:
            wrong.append((name, {k: (got[k], want[k]) for k in got if got[k] != want[k]}))
    assert not wrong, wrong


def test_small_cpu_tensors_give_their_values(stopped):
    _, read, _, _ = stopped
    checked = 0
    for name, (value, f) in read.items():
        if f["values"] is None:
            continue
        assert value.values is not None, (name, value.note)
        got = [[v.real, v.imag] if isinstance(v, complex) else v for v in value.values]
        assert len(got) == len(f["values"]), name
        for g, w in zip(got, f["values"]):
            if isinstance(w, float) and math.isnan(w):
                assert math.isnan(g), (name, got)
            else:
                assert g == w, (name, got, f["values"])
        checked += 1
    assert checked > 25
    assert read["transposed"][0].values is None  # 12 elements: more than 8
    assert read["float32 2x3"][0].values == (0.0, 1.0, 2.0, 3.0, 4.0, 5.0)


def test_the_one_line_text(stopped):
    _, read, _, _ = stopped
    assert read["sigmoid"][0].text() == "float32[3] cpu requires_grad grad_fn=SigmoidBackward0 = [" + ", ".join(
        repr(v) for v in read["sigmoid"][0].values) + "]"
    assert read["transposed"][0].text() == "float32[4, 3] strides (1, 4) cpu view"
    assert read["meta"][0].text() == "float32[4, 5] meta"


def test_garbage_is_unreadable_not_a_number(stopped):
    lay, read, _, _ = stopped
    value, f = read["float32 2x3"]
    # A pointer to the tensor's sizes, read as if it were a tensor: its "TensorImpl" fails a check.
    def fake(address, length):
        return (f["impl"] + lay.sizes_and_strides + 8).to_bytes(8, "little") if address == 0x1000 else b""
    got = read_tensor(fake, lay, 0x1000)
    assert isinstance(got, Unreadable), got
    assert isinstance(read_tensor(fake, lay, 0), Unreadable)
    assert not isinstance(value, UndefinedTensor)


def test_a_tensor_with_symbolic_sizes_says_so(stopped):
    """GIVEN a fake tensor with symbolic sizes (dynamo's kind), made by the stopped target THEN it is
    unreadable, not sizes read from its unused SizesAndStrides (which said float32[0] before ExtraMeta was
    placed). (Made in the target, read from its memory: a process of its own importing torch for it was
    ~3 s of CPU more.)"""
    _, _, _, symbolic = stopped
    assert symbolic is not None, "the target made no symbolic tensor"
    assert symbolic["symbolic"].startswith("torch.Size([s") and "symbolic" not in symbolic["symbolic"]
    assert symbolic["read"].text().endswith(
        "its sizes and strides are symbolic (SymInts in its SymbolicShapeMeta): not read")
