"""``--op`` and ``pttrace ops`` on the real torch wheel: an operator's path through the dispatcher,
with the key set each hop dispatched on. Two gdb runs (each loads libtorch_cpu.so: ~6 s)."""
from __future__ import annotations

import json
import re

import pytest

from tests.conftest import HELLO, nm_defined, run_pttrace

pytestmark = [pytest.mark.gdb, pytest.mark.slow]


def record(tmp_path_factory, *args, env: dict | None = None):
    from tracer.session import storage

    session_dir = tmp_path_factory.mktemp("sessions")
    proc = run_pttrace("run", "--batch", "--session-dir", str(session_dir), *args, str(HELLO), env=env)
    assert proc.returncode == 0, proc.stderr
    files = sorted(session_dir.glob("*.jsonl"))
    assert len(files) == 1, (proc.stdout, proc.stderr)
    return proc, storage.load(files[0]), files[0]


@pytest.fixture(scope="module")
def sigmoid_run(tmp_path_factory):
    return record(tmp_path_factory, "--op", "sigmoid")


@pytest.fixture(scope="module")
def sigmoid_listed():
    """``pttrace ops sigmoid --json``, once for the tests that read it (each run resolves the op afresh)."""
    proc = run_pttrace("ops", "sigmoid", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def hops(session):
    """(short name of the innermost frame, hit) in recording order."""
    return [(h.innermost.short, h) for h in session.hits]


def first(session, short):
    found = [h for name, h in hops(session) if name == short]
    assert found, f"no hit in {short}; hits: {[n for n, _ in hops(session)]}"
    return found[0]


def test_forward_path_through_autograd_to_the_cpu_kernel(sigmoid_run):
    proc, session, _ = sigmoid_run
    assert session.info.status == "completed"
    assert [w for w in session.info.warnings if not w.startswith("--op does not break on kernels registered by hand")] \
        == []  # (that one is tested below)
    names = [n for n, _ in hops(session)]
    forward = ["at::_ops::sigmoid::call", "torch::autograd::VariableType::sigmoid", "at::_ops::sigmoid::redispatch",
               "at::wrapper_CPU_sigmoid", "at::native::structured_sigmoid_out::impl"]
    assert [n for n in names if n in forward] == forward  # each once, in call order
    kernel = first(session, "at::wrapper_CPU_sigmoid")
    assert kernel.breakpoint == "op:sigmoid"
    assert kernel.innermost.layer == "kernel" and kernel.innermost.dispatch_key == "CPU"
    shorts = [f.short for f in kernel.frames]
    assert shorts.index("torch::autograd::VariableType::sigmoid") < shorts.index("at::_ops::sigmoid::redispatch")
    py = [f for f in kernel.frames if f.kind == "python"]
    assert py[0].source == "y = model(x)" and py[-1].source == "return torch.sigmoid(input)"
    assert "operator hops" in proc.stdout and "CPU, AutogradCPU" in proc.stdout


def test_the_kernels_registered_by_hand_are_a_warning_that_names_each_one(sigmoid_run):
    # GIVEN torch's own dispatch table of aten::sigmoid (the oracle): the C++ kernels no generated file
    # registered (functorch's batch rule, the legacy batching rule)
    import torch

    table = torch._C._dispatch_dump_table("aten::sigmoid").splitlines()
    by_hand = [line.split(":")[0] for line in table if "[kernel]" in line and ".cpp:" in line
               and not re.search(r"/(Register\w+|VariableType_\d+|TraceType_\d+|ADInplaceOrViewType_\d+)\.cpp:", line)]
    assert {"FuncTorchBatched", "Batched"} <= set(by_hand), table
    # THEN the --op session says, in one warning every view shows, that none of them is broken on, by key
    # and registering file:line as the table gives them
    _, session, _ = sigmoid_run
    (warning,) = [w for w in session.info.warnings if w.startswith("--op does not break on kernels registered by hand")]
    sigmoid_part = warning.split("aten::sigmoid: ", 1)[1].split(";")[0]
    for key in by_hand:
        line = next(t for t in table if t.startswith(key + ":"))
        assert f"{key} ({line.split('/')[-1].split(' ')[0]})" in sigmoid_part, (key, warning)
    assert "aten::sigmoid_backward: " in warning and "pttrace ops NAME" in warning


def test_key_sets_are_decoded_with_the_targets_numbering(sigmoid_run):
    import torch

    _, session, path = sigmoid_run
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert sum(1 for r in records if r["type"] == "dispatch_keys") == 1
    autograd = first(session, "torch::autograd::VariableType::sigmoid").innermost
    redispatch = first(session, "at::_ops::sigmoid::redispatch").innermost
    assert {"CPU", "AutogradCPU"} <= set(autograd.keys)
    assert list(redispatch.keys) == ["CPU"]  # below autograd: only the CPU kernel is left
    for f in (autograd, redispatch):  # the decoding is torch's own reading of the recorded bits
        text = repr(torch._C.DispatchKeySet.from_raw_repr(f.keyset))
        assert text == f"DispatchKeySet({', '.join(f.keys)})"
    # Where no key set was read, none is invented.
    assert first(session, "at::_ops::sigmoid::call").innermost.keyset is None
    assert first(session, "at::wrapper_CPU_sigmoid").innermost.keys is None


def _cache_without_torch_facts(tmp_path) -> dict:
    """An XDG_CACHE_HOME whose pttrace cache has no torch facts (the key numbering: ops/) and shares the
    others with this test run's (CFI copies, symbol indexes: rebuilding them, as a wholly empty cache
    did, was half of this test's CPU and proved nothing about the key numbering)."""
    from tracer import settings

    real, ours = settings.cache_dir(), tmp_path / "cache" / "pttrace"
    ours.mkdir(parents=True)
    for name in ("cfi", "index", "gdb-index", "stack-libraries", "native-functions", "values", "scripted"):
        (real / name).mkdir(parents=True, exist_ok=True)
        (ours / name).symlink_to(real / name, target_is_directory=True)
    return {"XDG_CACHE_HOME": str(tmp_path / "cache")}


def test_key_sets_are_decoded_without_op_too(tmp_path_factory, tmp_path):
    # GIVEN a first run (no cached torch facts: asking the target's torch for its key numbering takes a
    # while, so pttrace asks it while gdb runs) with a plain --break on a hop that takes a DispatchKeySet
    _, session, path = record(tmp_path_factory, "--break", "at::_ops::sigmoid::redispatch",
                              env=_cache_without_torch_facts(tmp_path))
    # THEN the numbering is in the session, once, before its end, and the key set is decoded with it
    kinds = [json.loads(line)["type"] for line in path.read_text().splitlines()]
    assert kinds.count("dispatch_keys") == 1 and kinds.index("dispatch_keys") < kinds.index("end")
    hit = session.hits[0].innermost
    assert hit.short == "at::_ops::sigmoid::redispatch" and list(hit.keys) == ["CPU"]


def test_the_hit_says_which_cpu_capability_kernel_ran(sigmoid_run):
    import torch

    _, session, _ = sigmoid_run
    cap = torch.backends.cpu.get_cpu_capability()
    kernels = [h for h in session.hits if h.innermost.short.endswith("sigmoid_kernel")]
    assert kernels and all(h.breakpoint.endswith("]") for h in kernels)
    forward = [h for h in kernels if h.innermost.short.startswith("at::native::") and "backward" not in h.innermost.short]
    expected = cap if cap in ("DEFAULT", "AVX2", "AVX512") else None
    if expected:
        assert forward[0].breakpoint == f"op:sigmoid[{expected}]"
        assert forward[0].innermost.short == f"at::native::{expected}::sigmoid_kernel"


def test_backward_through_sigmoid_backward(sigmoid_run):
    _, session, _ = sigmoid_run
    node = first(session, "torch::autograd::generated::SigmoidBackward0::apply")
    assert node.innermost.layer == "autograd"
    kernel = first(session, "at::wrapper_CPU_sigmoid_backward")
    assert kernel.innermost.dispatch_key == "CPU"
    shorts = [f.short for f in kernel.frames]
    assert "torch::autograd::generated::SigmoidBackward0::apply" in shorts
    assert shorts.index("at::_ops::sigmoid_backward::call") < shorts.index("at::wrapper_CPU_sigmoid_backward")
    assert list(first(session, "at::_ops::sigmoid_backward::redispatch").innermost.keys) == ["CPU"]
    assert kernel.seq > first(session, "at::wrapper_CPU_sigmoid").seq


def test_layer_filter_with_op_and_break_together(tmp_path_factory):
    proc, session, _ = record(tmp_path_factory, "--op", "sigmoid_backward", "--op", "addmm", "--no-backward",
                              "--break", "wrapper_CPU_sigmoid", "--layer", "kernel")
    assert session.hits
    # wrapper_CPU_addmm exists only inlined into its boxing adapter: a stop there is addmm's CPU kernel
    inlined = [h for h in session.hits if h.innermost.layer != "kernel"]
    assert inlined and all(h.innermost.short == "wrap_kernel_functor_unboxed_<…wrapper_CPU_addmm…>::call"
                           and h.innermost.dispatch_key == "CPU" for h in inlined), \
        [(h.innermost.layer, h.innermost.short) for h in inlined]
    specs = {h.breakpoint for h in session.hits}
    assert "wrapper_CPU_sigmoid" in specs and "op:sigmoid_backward" in specs and "op:addmm" in specs
    names = {h.innermost.short for h in session.hits}
    assert "at::wrapper_CPU_sigmoid_backward" in names
    assert "at::_ops::sigmoid_backward::call" not in names  # a dispatcher hop: filtered out
    assert "at::_ops::addmm::call" not in names


def test_ops_command_lists_functions_next_to_the_dispatch_table(sigmoid_listed):
    proc = run_pttrace("ops", "sigmoid")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "dispatch table of aten::sigmoid" in out
    lines = out.splitlines()

    def table_line(key):
        return next(line for line in lines if line.strip().startswith(key + " ")
                    and ("kernel" in line or "fallback" in line))

    assert "RegisterCPU" in table_line("CPU") and "at::wrapper_CPU_sigmoid" in table_line("CPU")
    # Meta: torch 2.13 registers a Python meta kernel over the C++ wrapper_Meta_sigmoid; either is named.
    assert "kernel" in table_line("Meta") and "wrapper_Meta_sigmoid" in table_line("Meta")
    autograd = next(line for line in lines if "AutogradCPU" in line)
    assert "autograd kernel" in autograd and "VariableType::sigmoid" in autograd
    assert "at::native::AVX512::sigmoid_kernel" in out and "torch::autograd::VariableType::sigmoid" in out

    data = sigmoid_listed
    rows = {r["key"]: r for r in data["dispatch_tables"]["sigmoid"]["rows"]}
    assert any("wrapper_CPU_sigmoid(" in f for f in rows["CPU"]["functions"])
    assert rows["Meta"]["kind"] == "kernel"
    assert rows["AutogradCPU"]["kind"] == "autograd kernel"
    assert any("VariableType" in f for f in rows["AutogradCPU"]["functions"])
    assert {f["role"] for f in data["functions"]} >= {"entry", "redispatch", "autograd", "kernel wrapper",
                                                     "native kernel", "backward node"}


def test_ops_command_says_which_entries_are_inlined_and_what_they_call():
    proc = run_pttrace("ops", "relu", "--no-backward")
    assert proc.returncode == 0, proc.stderr
    cpu = next(line for line in proc.stdout.splitlines() if line.strip().startswith("CPU ") and "Register" in line)
    assert "at::wrapper_CPU__relu: no function of its own, inlined into" in cpu
    assert "wrap_kernel_functor_unboxed_<…wrapper_CPU__relu…>::call" in cpu
    assert cpu.endswith("which calls at::native::relu")
    batched = next(line for line in proc.stdout.splitlines() if line.strip().startswith("FuncTorchBatched "))
    assert "registered by hand" in batched
    data = json.loads(run_pttrace("ops", "relu", "--no-backward", "--json").stdout)
    row = next(r for r in data["dispatch_tables"]["relu"]["rows"] if r["key"] == "CPU")
    assert row["inlined"] == ["at::wrapper_CPU__relu"] and not row["registered"]
    assert [f.split("(")[0] for f in row["calls"]] == ["at::native::relu"]


# sigmoid's functions by torchgen's own naming, and the native functions native_functions.yaml registers
# for it (QuantizedCPU: sigmoid_quantized_cpu, MkldnnCPU: mkldnn_sigmoid): what nm must show --op has.
_OP = r"sigmoid(?:_backward)?"
_SIGMOID_NAMES = re.compile("|".join([
    rf"^at::_ops::{_OP}::(?:call|redispatch)\(",
    rf"::wrapper_[A-Za-z0-9]+_+{_OP}\(",
    rf"^torch::(?:autograd::VariableType|TraceType)::\(anonymous namespace\)::{_OP}\(",
    rf"^at::(?:cpu|meta|compositeexplicitautogradnonfunctional)::{_OP}\(",
    rf"^at::native::(?:[A-Z0-9]+|\(anonymous namespace\))::{_OP}_kernel\(at::TensorIteratorBase&\)$",
    rf"^at::(?:meta|native)::structured_{_OP}(?:_out)?::(?:meta|impl)\(",
    r"^at::native::(?:sigmoid_quantized_cpu|mkldnn_sigmoid)\(",
]))


def test_op_functions_are_the_librarys_own_symbols_and_none_of_its_sigmoid_functions_is_missed(sigmoid_run,
                                                                                               sigmoid_listed):
    """The oracle is nm's listing of libtorch_cpu.so (not pttrace's index): each function --op sigmoid broke
    on is a symbol nm lists at that address under that name, and each of nm's symbols that torchgen's
    naming makes one of sigmoid's (or sigmoid_backward's) is among them."""
    _, session, _ = sigmoid_run
    functions = sigmoid_listed["functions"]
    # what `pttrace ops` lists is what the run broke on (each CPU capability's kernels a breakpoint of its own)
    broken = [loc.function for b in session.breakpoints if b.spec.startswith("op:sigmoid") for loc in b.locations]
    assert sorted(broken) == sorted(f["function"] for f in functions)
    libraries = {f["library"] for f in functions}
    assert len(libraries) == 1 and next(iter(libraries)).endswith("libtorch_cpu.so"), libraries
    nm = nm_defined(next(iter(libraries)))
    # Only the lines either check reads (our addresses, and every name holding "sigmoid", which each of
    # _SIGMOID_NAMES's patterns does): all 242,000 addresses through the regex took 6 s of CPU.
    ours_hex = {f"{f['address']:016x}" for f in functions}
    at: dict[int, set[str]] = {}
    for line in nm.splitlines():
        if line[:16] not in ours_hex and "sigmoid" not in line:
            continue
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "Tt" and "[clone " not in parts[2]:  # .cold, .isra: parts of one
            at.setdefault(int(parts[0], 16), set()).add(parts[2])
    for f in functions:
        assert f["function"] in at.get(f["address"], ()), (hex(f["address"]), f["function"], at.get(f["address"]))
    ours = {f["address"] for f in functions}
    theirs = {a: names for a, names in at.items() if any(_SIGMOID_NAMES.search(n) for n in names)}
    assert len(theirs) >= 30, theirs
    missed = {a: names for a, names in theirs.items() if a not in ours}
    assert not missed, missed
