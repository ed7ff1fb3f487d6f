"""Every key set pttrace records is the DispatchKeySet argument of that call, read where the function's
signature puts it, or is marked unknown: one recording of tests/targets/ops_mix.py (a functional op under
autograd, a view, backward, an in-place SGD step, an out= call, the debug extension's TORCH_LIBRARY ops),
checked hop by hop against torch's own key sets, against gdb's own read of the argument from DWARF at
the same calls, and through the markdown export."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_pttrace
from tests.support import run_child

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "ops_mix.py"
OPS = ["relu", "threshold_backward", "add_", "view", "add"]
# Hops in the debug extension, where gdb has DWARF: the functions of the boxed path that take a key set.
EXT_BREAKS = ["call_functor_with_args_from_stack", "c10::BoxedKernel::callBoxed"]


@pytest.fixture(scope="module")
def recording(tmp_path_factory, debug_ext):
    from tracer.session import storage

    session_dir = tmp_path_factory.mktemp("sessions")
    args = ["run", "--batch", "--session-dir", str(session_dir), "--variants"]
    for op in OPS:
        args += ["--op", op]
    for name in EXT_BREAKS:
        args += ["--break", name]
    proc = run_pttrace(*args, str(TARGET), str(debug_ext))
    assert proc.returncode == 0, proc.stderr
    (path,) = sorted(session_dir.glob("*.jsonl"))
    return proc, storage.load(path)


@pytest.fixture(scope="module")
def tensor_keys():
    """The raw key sets of the target's tensors, as torch computes them (the same torch, in this process)."""
    import torch

    w = torch.randn(4, 4, requires_grad=True)
    return torch._C._dispatch_keys(w).raw_repr() | torch._C._dispatch_keys(torch.randn(4, 4)).raw_repr()


def hops(session, short):
    found = [h.innermost for h in session.hits if h.innermost.short == short]
    assert found, f"no hit in {short}: {sorted({h.innermost.short for h in session.hits})}"
    return found


def names(frame):
    return list(frame.keys) if frame.keys is not None else None


def test_every_key_set_read_is_one_torch_could_have_passed(recording, tensor_keys):
    from tracer.dispatch import keyset_abi

    _, session = recording
    read = [h.innermost for h in session.hits if h.innermost.keyset is not None]
    assert len(read) >= 15
    for f in read:
        # Only keys of the call's tensors: a pointer or a functor read as a key set has other bits.
        assert f.keyset and f.keyset & ~tensor_keys == 0, (f.short, hex(f.keyset), f.keys)
        assert "CPU" in f.keys
    for h in session.hits:
        f = h.innermost
        if keyset_abi.takes_keyset(f.function or ""):
            assert (f.keyset is None) != (f.keyset_note is None), (f.short, f.keyset, f.keyset_note)
        else:  # a function without a key-set parameter gets neither, never a value from somewhere else
            assert f.keyset is None and f.keyset_note is None, f.short


def test_the_boxing_adapter_reads_the_key_set_after_the_functor(recording):
    # The issue: wrap_kernel_functor_unboxed_<…add__Tensor…>::call(functor, ks, ...) printed the functor.
    _, session = recording
    for short in ("wrap_kernel_functor_unboxed_<…add__Tensor…>::call", "wrap_kernel_functor_unboxed_<…add_out_out…>::call"):
        (adapter,) = hops(session, short)
        assert names(adapter) == ["CPU", "ADInplaceOrView"] and adapter.keyset == 0x400010001
    # A functional kernel's adapter returns an at::Tensor: its return slot comes first, the key set third.
    (relu,) = hops(session, "wrap_kernel_functor_unboxed_<…wrapper_CPU__relu…>::call")
    assert names(relu) == ["CPU"]


def test_each_hop_hands_on_a_subset_and_handles_its_own_key(recording):
    from tracer.export import op_calls

    _, session = recording
    calls = {c.first.innermost.short: c for c in op_calls.group_calls(session.hits)}
    expected = {
        # in-place under no_grad: autograd, then ADInplaceOrView (an adapter), then the CPU kernel
        "at::_ops::add__Tensor::call": [["CPU", "ADInplaceOrView", "AutogradCPU"], ["CPU", "ADInplaceOrView"],
                                        ["CPU", "ADInplaceOrView"], ["CPU"]],
        "at::_ops::add_out::call": [["CPU", "ADInplaceOrView", "AutogradCPU"], ["CPU", "ADInplaceOrView"],
                                    ["CPU", "ADInplaceOrView"], ["CPU"]],
        # a view: ADInplaceOrView has a function of its own
        "at::_ops::view::call": [["CPU", "ADInplaceOrView", "AutogradCPU"], ["CPU", "ADInplaceOrView"],
                                 ["CPU", "ADInplaceOrView"], ["CPU"], ["CPU"]],
    }
    for entry, keysets in expected.items():
        got = [list(h.keys) for h in calls[entry].hops() if h.keys is not None]
        assert got == keysets, (entry, got)
    for call in calls.values():
        seen = [h.frame.keyset for h in call.hops() if h.frame.keyset is not None]
        assert all(b & ~a == 0 for a, b in zip(seen, seen[1:])), call.first.innermost.short


def test_backward_hops_carry_their_key_sets(recording):
    _, session = recording
    (autograd,) = hops(session, "torch::autograd::VariableType::threshold_backward")
    assert {"CPU", "AutogradCPU"} <= set(names(autograd))
    below = [f for f in hops(session, "at::_ops::threshold_backward::redispatch")]
    assert below and all(names(f) == ["CPU"] for f in below)


def test_plain_native_functions_are_hit(recording):
    _, session = recording
    for short, under in (("at::native::relu", "wrap_kernel_functor_unboxed_<…wrapper_CPU__relu…>::call"),
                         ("at::native::view", "wrap_kernel_functor_unboxed_<…wrapper_CPU__view…>::call")):
        (hit,) = [h for h in session.hits if h.innermost.short == short]
        assert hit.breakpoint.startswith("op:") and under in [f.short for f in hit.frames]


GDB_READ = r'''
import gdb, json
values = []
class Read(gdb.Breakpoint):
    def stop(self):
        frame = gdb.newest_frame()
        lib = gdb.solib_name(frame.pc()) or ""
        # the extension's own copies, with DWARF (not its @plt stubs, not libtorch's copies)
        if lib.endswith("pttrace_demo.so") and frame.function() is not None:
            values.append([frame.function().name.split("(")[0].split("<")[0],
                           int(gdb.parse_and_eval("dispatchKeySet")["repr_"])])
        return False
# Only the extension's symbols, added as it loads (the values read are its copies'): reading every
# library's (libtorch_cpu's above all) is most of a plain gdb run's CPU (test_op_follow: 8.6 s, 2.5 s without).
gdb.execute("set auto-solib-add off")
gdb.execute("set breakpoint pending on")
for name in NAMES:
    Read(name)
gdb.execute("catch load pttrace_demo")
gdb.execute("run")
gdb.execute("sharedlibrary pttrace_demo")
gdb.execute("continue")
print("VALUES " + json.dumps(values))
'''


def test_debug_build_hops_agree_with_gdbs_own_read(recording, debug_ext, tmp_path):
    """The same calls under plain gdb: it stops after each prologue and reads the parameter by its DWARF
    name (``dispatchKeySet``); pttrace read the same calls from the registers the ABI gives."""
    _, session = recording
    script = tmp_path / "read.py"
    script.write_text(GDB_READ.replace("NAMES", repr(EXT_BREAKS)))
    proc = run_child(["gdb", "-nx", "-batch", "-x", str(script), "--args", sys.executable, str(TARGET),
                      str(debug_ext)], capture_output=True, text=True, timeout=300)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("VALUES "))
    gdb_values = [(name.rsplit("::", 1)[-1], value) for name, value in json.loads(line[7:])]
    ours = [(h.innermost.short.split("<")[0].rsplit("::", 1)[-1], h.innermost.keyset) for h in session.hits
            if (h.innermost.library or "").endswith(Path(debug_ext).name) and h.innermost.keyset is not None]
    assert len(gdb_values) >= 4 and ours == gdb_values


def test_markdown_shows_each_hops_key_set(recording, tmp_path):
    from tracer.export import markdown

    _, session = recording
    md = markdown.render(session)
    assert "## Operator calls" in md and "### `tests/targets/ops_mix.py:20`: `w.add_(w.grad, alpha=-0.1)`" in md
    add_section = md[md.index("ops_mix.py:20`"):md.index("ops_mix.py:21`")]
    assert "| CPU, ADInplaceOrView | handled AutogradCPU |" in add_section
    assert "| CPU | handled ADInplaceOrView |" in add_section
    assert "FPGA" not in md and "Metal" not in md
