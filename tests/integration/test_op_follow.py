"""``--op conv2d --follow`` and ``--op pttrace_demo::scale_add`` (a TORCH_LIBRARY operator of the debug
extension, loaded after start-up) on the real wheel: one recording of tests/targets/ops_follow.py, checked
through the session, ``show``, the markdown export and ``pttrace ops``; the TORCH_LIBRARY operator's key
sets against gdb's own read of each hop's ``dispatchKeySet`` parameter (DWARF) at the same calls."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import PTTRACE, ROOT, run_pttrace
from tests.support import allowance, fifo_line, run_child, stop_process, wait_for

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "ops_follow.py"
LIBRARY_OP = "pttrace_demo::scale_add"


@pytest.fixture(scope="module")
def recording(tmp_path_factory, debug_ext):
    from tracer.session import storage

    session_dir = tmp_path_factory.mktemp("sessions")
    proc = run_pttrace("run", "--batch", "--session-dir", str(session_dir), "--op", "conv2d", "--follow",
                       "--op", LIBRARY_OP, str(TARGET), str(debug_ext))
    assert proc.returncode == 0, proc.stderr
    (path,) = sorted(session_dir.glob("*.jsonl"))
    return proc, storage.load(path), path


def calls_from(session, line):
    from tracer.export import op_calls

    return [c for c in op_calls.group_calls(session.hits) if (op_calls.call_site(c).line == line)]


def test_the_decomposition_is_recorded_down_to_a_cpu_kernel(recording):
    _, session, _ = recording
    assert session.info.status == "completed"
    # The one word about --follow is what it cannot see (every view shows it); nothing was left unfollowed.
    about = [w for w in session.info.warnings if "follow" in w or "CompositeImplicitAutograd" in w]
    assert len(about) == 1 and about[0].startswith("--follow-ops conv2d: operators entered only through a boxed"), about
    calls = calls_from(session, 14)  # y = F.conv2d(x, w), twice
    assert len(calls) == 2
    first = calls[0]
    hops = first.hops()
    shorts = [h.frame.short for h in hops]
    assert shorts[0] == "at::_ops::conv2d::call"
    # Each operator conv2d runs is a child of the one that called it, down to a backend kernel.
    chain = ["at::_ops::convolution::call", "at::_ops::_convolution::call"]
    assert all(s in shorts for s in chain) and shorts.index(chain[0]) < shorts.index(chain[1])
    depth = {h.frame.short: h.depth for h in hops}
    assert depth["at::_ops::conv2d::call"] == 0 and depth[chain[0]] == 1 and depth[chain[1]] == 2
    backend = [h for h in hops if h.frame.short.startswith("at::native::") and h.depth >= 3
               and h.op in ("mkldnn_convolution", "_slow_conv2d_forward", "_nnpack_spatial_convolution",
                            "slow_conv2d_forward")]
    assert backend, shorts
    assert first.followed()[:2] == ["convolution", "_convolution"]
    # The entry of an operator met for the first time is recorded from its own frame, not the trigger's.
    assert not any("getStepCallbacks" in (f.short or "") for h in first.hits for f in h.frames)
    # The second call took the same hops with the same key sets: one variant of the call site.
    assert calls[1].signature() == first.signature()
    # Key sets are read at the followed operators' hops too: the autograd kernel of convolution.
    (autograd,) = [h for h in hops if h.frame.short == "torch::autograd::VariableType::convolution"]
    assert {"CPU", "AutogradCPU"} <= set(autograd.keys)


def test_a_followed_operator_called_from_elsewhere_is_not_recorded(recording):
    _, session, _ = recording
    # torch.convolution on line 15 runs convolution's functions, outside every conv2d call.
    followed = [h for h in session.hits if ">" in (h.breakpoint or "")]
    assert followed and not calls_from(session, 15)
    assert {h.breakpoint.split("[")[0] for h in followed} >= {"op:conv2d>convolution", "op:conv2d>_convolution"}


def test_show_and_markdown_nest_the_followed_operators(recording, tmp_path):
    from tracer.export import markdown

    _, session, path = recording
    proc = run_pttrace("show", str(path), env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "2 calls of aten::conv2d, following convolution, _convolution" in out
    # Each hop with its key set, decoded, and what changed since the hop before.
    assert "torch::autograd::VariableType::convolution [Autograd]  keys: CPU, AutogradOther, AutogradCPU" in out
    assert "at::_ops::convolution::redispatch  keys: CPU (0x10001)  handled AutogradOther, AutogradCPU" in out
    md = markdown.render(session)
    assert "| # | operator | hop | layer | called with | since the hop before |" in md
    assert "| &nbsp;&nbsp;↳ `convolution` | `at::_ops::convolution::redispatch` | dispatcher | CPU | handled " in md


def test_library_operator_loaded_at_run_time_is_found(recording):
    proc, session, _ = recording
    assert "--op pttrace_demo::scale_add: its kernels are looked for" in proc.stderr
    from tracer.export import op_calls

    mine = [c for c in op_calls.group_calls(session.hits) if c.ops() == [LIBRARY_OP]]
    assert [op_calls.call_site(c).line for c in mine] == [19, 20, 20]  # once, then twice from scale_add_twice
    for call in mine:
        shorts = [h.frame.short for h in call.hops()]
        assert shorts[-1] == "pttrace_demo::scale_add_cpu" and call.hops()[-1].frame.layer == "kernel"
        assert "c10::impl::wrap_kernel_functor_unboxed_<…>::call" in shorts
    # The outer hops of scale_add_twice (the same templates: one function type) are not scale_add's.
    twice = mine[1].hits[0].frames
    assert any((f.short or "").startswith("pttrace_demo::scale_add_twice") for f in twice)


GDB_READ = r'''
import gdb, json
calls = []
class Kernel(gdb.Breakpoint):
    def stop(self):
        hops = []
        f = gdb.newest_frame().older()
        while f is not None and f.function() is not None and f.function().name.startswith("c10::impl::"):
            try:
                value = int(f.read_var("dispatchKeySet")["repr_"])
            except ValueError:  # a template without that parameter
                value = None
            hops.append(value)
            f = f.older()
        calls.append(hops[::-1])
        return False
# Only the extension's symbols: the boxing templates walked are its own instantiations. Reading every
# library's (libtorch_cpu's above all) made this run 8.6 s of CPU, 2.5 s without, same three calls (load 9).
gdb.execute("set auto-solib-add off")
gdb.execute("set breakpoint pending on")
Kernel("pttrace_demo::scale_add_cpu")
gdb.execute("catch load pttrace_demo")
gdb.execute("run")
gdb.execute("sharedlibrary pttrace_demo")
gdb.execute("continue")
print("CALLS " + json.dumps(calls))
'''


def test_library_operator_key_sets_agree_with_gdbs_own_read(recording, debug_ext, tmp_path):
    """The same calls under plain gdb: at the kernel, each boxing template above it is read by its DWARF
    parameter ``dispatchKeySet``; pttrace read them at each template's entry from the ABI's register."""
    from tracer.export import op_calls

    _, session, _ = recording
    script = tmp_path / "read.py"
    script.write_text(GDB_READ)
    proc = run_child(["gdb", "-nx", "-batch", "-x", str(script), "--args", sys.executable, str(TARGET),
                      str(debug_ext)], capture_output=True, text=True, timeout=300)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("CALLS "))
    gdb_calls = json.loads(line[6:])
    ours = [[h.frame.keyset for h in c.hops()[:-1]] for c in op_calls.group_calls(session.hits)
            if c.ops() == [LIBRARY_OP]]
    assert len(gdb_calls) == 3 and all(len(c) >= 4 for c in gdb_calls)
    assert [len(c) for c in ours] == [len(c) for c in gdb_calls]
    compared = 0
    for mine, theirs in zip(ours, gdb_calls):
        for i, (a, b) in enumerate(zip(mine, theirs)):
            if b is not None:
                assert a == b, (mine, theirs)
                compared += 1
            elif a is not None:
                # wrap_kernel_functor_unboxed_::call leaves its DispatchKeySet parameter unnamed (no DWARF
                # name to read): its caller hands on its own, unchanged.
                assert a == theirs[i - 1], (mine, theirs)
    assert compared >= 9
    assert all(v is None or v & 1 for c in ours for v in c)  # the CPU backend bit, never a pointer


def test_ops_lists_a_library_operators_kernels(debug_ext):
    proc = run_pttrace("ops", LIBRARY_OP, "--lib", str(debug_ext), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    roles = {(f["short"], f["role"], f["dispatch_key"]) for f in data["functions"]}
    assert ("pttrace_demo::scale_add_cpu", "kernel", "CPU") in roles
    assert not any(f["short"].startswith("pttrace_demo::scale_add_twice") for f in data["functions"])
    rows = {r["key"]: r for r in data["dispatch_tables"][LIBRARY_OP]["rows"]}
    assert "CPU" in rows and "pttrace_demo.cpp" in rows["CPU"]["registered_at"]


def test_the_tui_shows_a_followed_operator_inside_its_caller(recording):
    """The recorded session in the TUI (pilot): a hit of a followed operator names, over its call path,
    the operator it ran inside; the path holds conv2d's frames above it."""
    from tests.tui.support import run_pilot, wait_until
    from tracer.tui.app import make_app
    from tracer.tui.sources import SessionSource

    _, session, path = recording
    hit = next(h for h in session.hits if (h.breakpoint or "").startswith("op:conv2d>_convolution"))

    async def scenario():
        app = make_app(SessionSource.open(path))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.state.status is not None and app.call_path.hit is not None)
            app.hits_table.select_seq(hit.seq)
            await wait_until(pilot, lambda: app.call_path.hit is not None and app.call_path.hit.seq == hit.seq)
            assert "_convolution, inside conv2d (--follow-ops)" in app.call_path.border_title
            shorts = [f.short for f in app.call_path.frames]
            assert shorts.index("at::_ops::conv2d::call") < shorts.index("at::_ops::_convolution::call")

    run_pilot(scenario())


def test_attach_finds_a_library_operator_loaded_before_it(debug_ext, tmp_path):
    """Attached after the library was loaded: its kernels are found in what the process has mapped, and
    broken on once although gdb tells of every library again as it attaches."""
    from tracer.session import storage
    from tracer.export import op_calls

    fifo, stop = tmp_path / "ready.fifo", tmp_path / "stop"
    os.mkfifo(fifo)
    target = subprocess.Popen([sys.executable, str(ROOT / "tests" / "targets" / "library_op_loop.py"),
                               str(debug_ext), str(fifo), str(stop)], stdout=subprocess.DEVNULL)
    tracer = None
    try:
        assert fifo_line(fifo, target).startswith("ready")
        tracer = subprocess.Popen([*PTTRACE, "attach", str(target.pid), "--batch", "--session-dir",
                                   str(tmp_path / "s"), "--op", LIBRARY_OP], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT)

        def kernel_hit():
            """a call reaching scale_add_cpu in the session being written"""
            assert tracer.poll() is None, f"pttrace ended ({tracer.returncode}) before a call was recorded"
            files = sorted((tmp_path / "s").glob("*.jsonl"))
            return files and any(h.frame.short == "pttrace_demo::scale_add_cpu" for c in
                                 op_calls.group_calls(storage.load(files[0]).hits) for h in c.hops())

        # Ctrl-C once a call is recorded (not a fixed --duration): pttrace detaches and ends.
        wait_for(kernel_hit, 120, step=0.2)
        tracer.send_signal(signal.SIGINT)
        _out, err = tracer.communicate(timeout=allowance(120))
        assert tracer.returncode == 130, err  # 128 + SIGINT: ended by the signal, as asked
        assert target.poll() is None  # detached, running on
        (path,) = sorted((tmp_path / "s").glob("*.jsonl"))
        calls = op_calls.group_calls(storage.load(path).hits)
        assert calls
        for call in calls:
            shorts = [h.frame.short for h in call.hops()]
            assert shorts.count("pttrace_demo::scale_add_cpu") == 1, shorts
            assert shorts[0] == "c10::impl::make_boxed_from_unboxed_functor<…>::call"
    finally:
        stop.touch()
        try:
            target.wait(allowance(30))
        finally:
            for proc in (tracer, target):
                stop_process(proc)
