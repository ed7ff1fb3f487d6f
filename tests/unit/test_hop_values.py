"""What a hop carried: arguments turned into values from bytes and memory (gdb-free), interned in the
session file, read back by the loader and the JSON contract, and the dispatcher's decision worked out."""
from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pytest

from tracer.dispatch import decision as D
from tracer.export import json as json_export
from tracer.export import values as V
from tracer.gdb.agent import argvalues as AV
from tracer.session import records, storage
from tracer.session.model import Breakpoint, Location

TORCH_LIB = Path(__file__).resolve().parents[2] / ".venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"


class FakeMemory:
    def __init__(self, blocks: dict[int, bytes]):
        self.blocks = blocks

    def __call__(self, address: int, length: int) -> bytes:
        for start, data in self.blocks.items():
            if start <= address and address + length <= start + len(data):
                return data[address - start: address - start + length]
        raise RuntimeError(f"Cannot access memory at address {address:#x}")


def words(*values: int) -> bytes:
    return b"".join(struct.pack("<q", v) for v in values)


def test_scalars_from_register_bytes():
    mem = AV.Memory(FakeMemory({}))
    assert AV.describe("long", words(-3), None, mem) == {"value": -3}
    assert AV.describe("bool", (1).to_bytes(8, "little"), None, mem) == {"value": True}
    assert AV.describe("double", struct.pack("<d", 0.5), None, mem) == {"value": 0.5}
    assert AV.describe("c10::DispatchKeySet", words(0x10001), None, mem) == {"keyset": 0x10001}
    # std::optional<c10::ScalarType>: the enum's byte, then the flag
    assert AV.describe("std::optional<c10::ScalarType>", bytes([6, 1]) + bytes(6), None, mem) == {"scalar_type": 6}
    assert AV.describe("std::optional<c10::ScalarType>", bytes([0x55, 0]) + bytes(6), None, mem) == {"none": True}
    # std::optional<double>: xmm0's word, then the flag's
    assert AV.describe("std::optional<double>", struct.pack("<d", 2.0) + words(1), None, mem) == {"value": 2.0}
    with pytest.raises(AV.Unreadable, match="a bool holding 7"):
        AV.describe("bool", bytes([7]) + bytes(7), None, mem)


def test_lists_and_strings_from_memory():
    mem = AV.Memory(FakeMemory({0x1000: words(2, 3, 4), 0x2000: b"mean"}))
    assert AV.describe("c10::ArrayRef<long>", words(0x1000, 3), None, mem) == {"value": [2, 3, 4]}
    assert AV.describe("c10::ArrayRef<c10::SymInt>", words(0x1000, 2), None, mem) == {"value": [2, 3]}
    view = "std::basic_string_view<char, std::char_traits<char> >"
    assert AV.describe(view, words(4, 0x2000), None, mem) == {"value": "mean"}
    # a reference to an ArrayRef: its two words read at its address first
    assert AV.describe("c10::ArrayRef<long>", None, 0x1000, AV.Memory(FakeMemory({0x1000: words(0x1000, 1)}))) == \
        {"value": [0x1000]}
    # c10::OptionalArrayRef on the stack: (pointer, length, flag)
    stack = AV.Memory(FakeMemory({0x3000: words(0x1000, 2, 1), 0x1000: words(2, 3)}))
    assert AV.describe("c10::OptionalArrayRef<long>", None, 0x3000, stack) == {"value": [2, 3]}
    with pytest.raises(AV.Unreadable, match="cannot be read"):
        AV.describe("c10::ArrayRef<long>", words(0x9000, 2), None, mem)
    with pytest.raises(AV.Unreadable, match="length"):
        AV.describe("c10::ArrayRef<long>", words(0x1000, 1 << 40), None, mem)


def test_unknown_types_are_their_address():
    mem = AV.Memory(FakeMemory({}))
    assert AV.describe("at::TensorIteratorBase", None, 0x7000, mem) == {"address": 0x7000}


TABLE = {"keys": [["CPU", 0x10001], ["AutogradCPU", 0x1000000001], ["ADInplaceOrView", 0x800000000],
                  ["BackendSelect", 0x2000]], "bits": {}, "tls_defaults": [0x800002000, 0x0]}


def test_the_decision_at_an_entry_and_a_redispatch():
    tensor = {"sizes": [2, 3], "dtype": "float32", "key_set": 0x1800010001}
    args = [{"name": "self", "type": "at::Tensor const&", "tensor": tensor}]
    d = D.decide("at::_ops::sigmoid::call(at::Tensor const&)", args, (0, 0), TABLE)
    assert d.tensors == [("self", 0x1800010001)] and d.included == 0x800002000 and d.excluded == 0
    assert d.computed == 0x1800012001 and d.how == "computed" and d.key == "AutogradCPU"
    # below autograd: the thread excludes the autograd keys; a redispatch is handed its set
    handed = [{"type": "c10::DispatchKeySet", "keyset": 0x10001}] + args
    d = D.decide("at::_ops::sigmoid::redispatch(c10::DispatchKeySet, at::Tensor const&)", handed, (0, 0x1000000000), TABLE)
    assert d.computed == 0x10001 and d.how == "handed" and d.key == "CPU" and d.excluded == 0x1000000000
    assert D.decide("at::native::relu(at::Tensor const&)", args, None, TABLE) is None
    # with the operator's table: fallthrough keys are passed over, the key's kernel named
    rows = {"sigmoid": {"op": "aten::sigmoid", "rows": [
        {"key": "AutogradCPU", "fallthrough": True, "registered_at": "x", "kind": "autograd kernel"},
        {"key": "ADInplaceOrView", "fallthrough": True, "registered_at": "y", "kind": "backend fallback"},
        {"key": "CPU", "fallthrough": False, "registered_at": "RegisterCPU_0.cpp:1", "kind": "kernel"}]}}
    d = D.decide("at::_ops::sigmoid::call(at::Tensor const&)", args, (0, 0), TABLE, rows)
    assert d.key == "CPU" and d.passed_over == ["AutogradCPU", "ADInplaceOrView"] and d.op == "aten::sigmoid"
    assert d.kernel == "kernel registered at RegisterCPU_0.cpp:1"
    # no defaults in the table: the words are shown as stored, nothing is computed
    d = D.decide("at::_ops::sigmoid::call(at::Tensor const&)", args, (0, 0), {"keys": TABLE["keys"]})
    assert d.computed is None and "default" in d.note


def _session_with_values(tmp_path):
    out = io.BytesIO()
    interner = records.Interner()
    header = {"type": "header", "schema": records.SCHEMA, "session": {"id": "t", "mode": "run", "argv": ["x"]}}
    out.write(records.encode(header))
    out.write(records.encode({"type": "dispatch_keys", **TABLE}))
    frames = [{"kind": "python", "function": "<module>", "file": "x.py", "line": 3},
              {"kind": "native", "function": "at::_ops::sigmoid::call(at::Tensor const&)", "short": "at::_ops::sigmoid::call",
               "layer": "dispatcher"}]
    thread = {"id": 1, "name": "python3", "lwp": 5}

    def carried(sizes):
        return [{"frame": 1, "args": [{"name": "self", "type": "at::Tensor const&", "where": "*rsi",
                                       "tensor": {"sizes": sizes, "strides": [sizes[-1], 1], "dtype": "float32",
                                                  "device": "cpu", "requires_grad": False,
                                                  "key_set": 0x1800010001}}], "tls": [0, 0]}]
    for seq, sizes in enumerate([[2, 3], [2, 3], [4, 5], [2, 3]], 1):
        out.write(interner.encode_hit(seq, "op:sigmoid", thread, 1.0 + seq, frames, values=carried(sizes)))
    out.write(records.encode({"type": "end", "status": "completed", "exit_code": 0}))
    path = tmp_path / "s.jsonl"
    path.write_bytes(out.getvalue())
    return path


def test_values_are_interned_and_read_back(tmp_path):
    path = _session_with_values(tmp_path)
    text = path.read_text()
    assert text.count('"type":"args"') == 2 and text.count('"type":"site"') == 2  # each shape written once
    assert text.count('"type":"hit"') == 4 and all(len(line) < 80 for line in text.splitlines()
                                                   if line.startswith('{"type":"hit"'))
    session = storage.load(path)
    hits = list(session.hits)
    assert [h.values[0].args[0]["tensor"]["sizes"] for h in hits] == [[2, 3], [2, 3], [4, 5], [2, 3]]
    fv = hits[0].values[0]
    assert fv.frame is hits[0].frames[1]
    assert fv.decision.key == "AutogradCPU" and fv.args[0]["tensor"]["keys"] == ["CPU", "AutogradCPU", "ADInplaceOrView"]
    assert V.arg_text(fv.args[0], 0).startswith("self: float32[2, 3] strides (3, 1) cpu keys CPU, AutogradCPU")
    assert "highest key AutogradCPU" in V.decision_lines(fv)
    assert V.shapes(hits) == ["self: float32[2, 3]", "self: float32[4, 5]"]
    # the JSON contract: interned values, each hit naming its own and the frame they were read at
    doc = json.loads(json_export.render(session))
    assert len(doc["values"]) == 2 and [h["values"] for h in doc["hits"]] == [0, 0, 1, 0]
    tensor = doc["values"][1][0]["args"][0]["tensor"]
    assert {"sizes", "strides", "dtype", "device", "requires_grad"} <= set(tensor) and doc["values"][1][0]["frame"] == 1
    assert doc["values"][0][0]["decision"]["key"] == "AutogradCPU"
    from tracer.session.model import Session

    back = Session.from_dict(doc)
    assert back.hits[2].values[0].args[0]["tensor"]["sizes"] == [4, 5] and back.hits[2].values[0].frame is back.hits[2].frames[1]


def test_what_changes_from_hit_to_hit_is_kept_apart_and_put_back(tmp_path):
    """GIVEN hits of one shape whose tensors' data pointers and values change (and one that repeats)
    WHEN they are recorded THEN one args record and one site serve them all, each hit's own fields are a
    small vary record, and every view and the JSON export give each hit its own values again."""
    out = io.BytesIO()
    interner = records.Interner()
    out.write(records.encode({"type": "header", "schema": records.SCHEMA,
                              "session": {"id": "t", "mode": "run", "argv": ["x"]}}))
    out.write(records.encode({"type": "dispatch_keys", **TABLE}))
    frames = [{"kind": "native", "function": "at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)",
               "short": "at::_ops::add_Tensor::call", "layer": "dispatcher"}]
    thread = {"id": 1, "name": "python3", "lwp": 5}

    def carried(i):
        t = {"sizes": [2], "strides": [1], "dtype": "float32", "device": "cpu", "requires_grad": False,
             "key_set": 0x1800010001, "impl": 0x5000 + 0x100 * i, "data_ptr": 0x9000 + 0x40 * i, "values": [i, i + 1.5]}
        return [{"frame": 0, "args": [{"name": "self", "type": "at::Tensor const&", "where": "*rdi", "tensor": t},
                                      {"name": "other", "type": "at::TensorList", "where": "rsi",
                                       "tensors": [dict(t, values=[-i, 0.0])]},
                                      {"name": "alpha", "type": "c10::Scalar const&", "where": "*rdx", "value": 1}],
                 "tls": [0, 0]}]
    order = [0, 1, 2, 2, 3]  # the fourth hit repeats the third's tensors
    given = [carried(i) for i in order]
    for seq, values in enumerate(given, 1):
        out.write(interner.encode_hit(seq, "op:add", thread, 1.0 + seq, frames, values=values))
    assert given == [carried(i) for i in order]  # the agent's dicts are not changed
    path = tmp_path / "s.jsonl"
    path.write_bytes(out.getvalue())
    kinds = [json.loads(line)["type"] for line in path.read_text().splitlines()]
    assert kinds.count("args") == 1 and kinds.count("site") == 1 and kinds.count("vary") == 4
    assert "data_ptr" not in next(line for line in path.read_text().splitlines() if '"type":"args"' in line)
    session = storage.load(path)
    assert len(session.hits.sites) == 1
    for hit, i in zip(session.hits, order):
        self_, other, alpha = hit.values[0].args
        assert self_["tensor"]["values"] == [i, i + 1.5] and self_["tensor"]["data_ptr"] == 0x9000 + 0x40 * i
        assert self_["tensor"]["impl"] == 0x5000 + 0x100 * i and other["tensors"][0]["values"] == [-i, 0.0]
        assert "vary" not in self_["tensor"] and alpha["value"] == 1
        assert self_["tensor"]["keys"] == ["CPU", "AutogradCPU", "ADInplaceOrView"]  # decoded once, shared
        assert hit.values[0].decision.key == "AutogradCPU"
        assert V.arg_text(self_, 0).endswith(f"= [{i}, {i + 1.5}] keys CPU, AutogradCPU, ADInplaceOrView")
    doc = json.loads(json_export.render(session))
    assert [doc["values"][h["values"]][0]["args"][0]["tensor"]["data_ptr"] for h in doc["hits"]] == [
        0x9000 + 0x40 * i for i in order]
    assert len(doc["values"]) == 4 and all("vary" not in json.dumps(v) for v in doc["values"])
    # a session recorded before the split (each hit's fields inside its own args record) loads as it did
    lines = [path.read_text().splitlines()[0], json.dumps({"type": "frame", "id": 1, "frame": frames[0]}),
             json.dumps({"type": "stack", "id": 1, "frames": [1]})]
    for seq, (i, values) in enumerate(zip(order, given), 1):
        lines += [json.dumps({"type": "args", "id": seq, "frames": values}),
                  json.dumps({"type": "site", "id": seq, "breakpoint": "op:add", "thread": thread, "stack": 1, "args": seq}),
                  json.dumps({"type": "hit", "seq": seq, "time": 1.0 + seq, "site": seq})]
    (tmp_path / "old.jsonl").write_text("\n".join(lines) + "\n")
    assert [h.values[0].args[0]["tensor"]["values"] for h in storage.load(tmp_path / "old.jsonl").hits] == [
        [i, i + 1.5] for i in order]


def test_bad_values_are_skipped_with_a_reason(tmp_path):
    path = _session_with_values(tmp_path)
    lines = path.read_text().splitlines()
    lines = [line.replace('"frames":[{"frame":1', '"frames":[{"frame":"one"') if '"type":"args"' in line else line
             for line in lines]
    path.write_text("\n".join(lines) + "\n")
    report = storage.LoadReport()
    storage.load(path, report)
    assert any("args" in why for _, why in report.bad_lines)


def test_the_batch_summary_names_frames_and_lists_shapes(tmp_path):
    from rich.console import Console

    from tracer.commands._summary import print_summary

    session = storage.load(_session_with_values(tmp_path))
    session.breakpoints = [Breakpoint("op:sigmoid", locations=[Location("at::_ops::sigmoid::call", "libtorch_cpu.so",
                                                                         0x1000)], hits=4)]
    console = Console(width=200, record=True, color_system=None)
    print_summary(session, console=console)
    out = console.export_text()
    assert "dispatcher at::_ops::sigmoid::call" in out  # the frame's name, after its layer
    assert "self: float32[2, 3] strides (3, 1) cpu" in out
    assert "2 distinct argument shapes at at::_ops::sigmoid::call:" in out and "self: float32[4, 5]" in out
    # another hop of the same --op breakpoint (another function) is another signature, not another shape
    path = _session_with_values(tmp_path)
    interner_lines = path.read_bytes().splitlines(keepends=True)
    interner = records.Interner()
    kernel = [{"kind": "native", "function": "at::wrapper_CPU_sigmoid(at::Tensor const&)", "short": "at::wrapper_CPU_sigmoid",
               "layer": "kernel"}]
    extra = interner.encode_hit(9, "op:sigmoid", {"id": 1, "name": "python3", "lwp": 5}, 9.0, kernel, values=[
        {"frame": 0, "args": [{"name": "self", "type": "at::Tensor const&", "where": "*rdi",
                               "tensor": {"sizes": [9], "strides": [1], "dtype": "float32", "device": "cpu"}}]}])
    extra = extra.replace(b'"id":1,', b'"id":91,').replace(b'"frames":[1]', b'"frames":[91]').replace(
        b'"stack":1', b'"stack":91').replace(b'"args":1', b'"args":91').replace(b'"site":1', b'"site":91')
    path.write_bytes(b"".join(interner_lines[:-1]) + extra + interner_lines[-1])
    session = storage.load(path)
    assert len(session.hits) == 5
    session.breakpoints = [Breakpoint("op:sigmoid", locations=[Location("at::_ops::sigmoid::call", "libtorch_cpu.so",
                                                                         0x1000)], hits=5)]
    console = Console(width=200, record=True, color_system=None)
    print_summary(session, console=console)
    out = console.export_text()
    assert "2 distinct argument shapes at at::_ops::sigmoid::call:" in out and "float32[9]" not in out


class EntryFrame:
    """Registers at a function's first instruction (no debug information), memory from a dict."""

    def __init__(self, registers: dict):
        self.registers = registers

    def read_register(self, name):
        value = self.registers[name]
        return {"v2_int64": [value]} if name.startswith("xmm") else value

    def block(self):
        raise RuntimeError("Cannot locate block for frame.")

    def function(self):
        return None


def test_arguments_read_at_an_entry_from_registers_and_the_stack():
    from tracer.gdb.agent import arguments

    name = ("at::_ops::upsample_nearest2d::call(at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<double>, "
            "std::optional<double>)")
    mem = FakeMemory({0x5000: words(8, 9)})
    regs = {"rdi": 0x7000, "rsi": 0x6000, "rdx": 0x5000, "rcx": 2, "xmm0": struct.unpack("<q", struct.pack("<d", 1.5))[0],
            "r8": 1, "xmm1": 0, "r9": 0, "rsp": 0x8000}
    args = arguments.read_entry(EntryFrame(regs), name, str(TORCH_LIB), mem)
    assert [a["where"] for a in args] == ["*rsi", "rdx:rcx", "xmm0:r8", "xmm1:r9"]
    assert [a.get("name") for a in args] == ["self", "output_size", "scales_h", "scales_w"]
    assert args[1]["value"] == [8, 9] and args[2]["value"] == 1.5 and args[3]["none"] is True
    assert "tensor" in args[0] or "address" in args[0] or "unreadable" in args[0]  # tracer.values' part
    # a function whose name has no parameter list has none to read
    assert arguments.read_entry(EntryFrame(regs), "sigmoid_kernel", None, mem) is None


def test_an_object_known_by_its_address_is_no_shape():
    """Hits whose only difference is an object's address (a kernel functor, a stack) are one shape."""
    hits_args = [[{"name": "functor", "type": "c10::OperatorKernel*", "where": "rdi", "address": a},
                  {"name": "self", "type": "at::Tensor const&", "where": "*rsi",
                   "tensor": {"sizes": [2], "dtype": "float32"}}] for a in (0x1000, 0x2000)]
    shared = {"name": "functor", "type": "c10::OperatorKernel*", "where": "rdi", "vary": 0}  # as a site keeps it
    texts = {", ".join(V.shape_text(a) for a in args) for args in hits_args}
    assert texts == {"c10::OperatorKernel*, float32[2]"} and V.shape_text(shared) == "c10::OperatorKernel*"


def test_a_python_binding_is_named_and_read_as_torchgen_declares_it():
    """``THPVariable_sigmoid(PyObject* self_, PyObject* args[, PyObject* kwargs])`` returns a PyObject*: its
    arguments are read (no hidden return slot), named as gen_python_functions.py writes them."""
    from tracer.gdb.agent import arguments

    regs = {"rdi": 0x7000, "rsi": 0x6000, "rdx": 0, "rsp": 0x8000}
    for params, names in (("_object*, _object*, _object*", ["self_", "args", "kwargs"]), ("_object*, _object*", ["self_", "args"])):
        args = arguments.read_entry(EntryFrame(regs), f"torch::autograd::THPVariable_sigmoid({params})", str(TORCH_LIB),
                                    FakeMemory({}))
        assert [a.get("name") for a in args] == names and [a["where"] for a in args] == ["rdi", "rsi", "rdx"][: len(names)]
        assert all(a["named_by"].endswith("gen_python_functions.py") for a in args)
        assert not any("return type" in (a.get("unreadable") or "") for a in args)
