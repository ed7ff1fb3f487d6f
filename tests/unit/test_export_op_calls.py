"""Operator calls in an export: the hops of one call grouped, by Python call site, with their key sets.

Stacks built from real frame names of the torch 2.13 wheel (as a ``--op add_`` run records them); the
recorded run itself is checked in tests/integration/test_op_keysets.py."""
from __future__ import annotations

from tests.unit.export_support import load_sigmoid, native, python, tables
from tracer.export import markdown
from tracer.export import op_calls as O
from tracer.session.model import Hit, Thread

USER = python("<module>", "/work/train.py", 21, "w.add_(w.grad, alpha=-0.1)")
BINDING = native("torch::autograd::THPVariable_add_(_object*, _object*, _object*)",
                 "/x/site-packages/torch/lib/libtorch_python.so")
ENTRY = native("at::_ops::add__Tensor::call(at::Tensor&, at::Tensor const&, c10::Scalar const&)")
AUTOGRAD = native("torch::autograd::VariableType::(anonymous namespace)::add__Tensor(c10::DispatchKeySet, at::Tensor&, "
                  "at::Tensor const&, c10::Scalar const&)")
REDISPATCH = native("at::_ops::add__Tensor::redispatch(c10::DispatchKeySet, at::Tensor&, at::Tensor const&, "
                    "c10::Scalar const&)")
WRAPPER = native("at::(anonymous namespace)::wrapper_CPU_add__Tensor(at::Tensor&, at::Tensor const&, c10::Scalar const&)")
META = native("at::meta::structured_add_Tensor::meta(at::Tensor const&, at::Tensor const&, c10::Scalar const&)")
IMPL = native("at::native::structured_ufunc_add_CPU::impl(at::Tensor const&, at::Tensor const&, c10::Scalar const&, "
              "at::Tensor const&)")


def keyed(frame, keys):
    f = native(frame.function)
    f.keyset, f.keys = 1, list(keys)
    return f


def call_hits(start: int, user=USER, thread: int = 1) -> list[Hit]:
    """One call of add_: each hop's stack is the one before plus the function it stopped in."""
    base = [user, BINDING]
    stacks = [
        base + [ENTRY],
        base + [ENTRY, keyed(AUTOGRAD, ["CPU", "ADInplaceOrView", "AutogradCPU"])],
        base + [ENTRY, AUTOGRAD, keyed(REDISPATCH, ["CPU", "ADInplaceOrView"])],
        base + [ENTRY, AUTOGRAD, REDISPATCH, WRAPPER],
        base + [ENTRY, AUTOGRAD, REDISPATCH, WRAPPER, META],  # a sibling of the next hop, not its parent
        base + [ENTRY, AUTOGRAD, REDISPATCH, WRAPPER, IMPL],
    ]
    return [Hit(seq=start + i, breakpoint="op:add_", thread=Thread(id=thread), time=0.0, frames=s)
            for i, s in enumerate(stacks)]


def test_hops_of_one_call_are_one_call_and_a_new_call_starts_a_new_one():
    hits = call_hits(1) + call_hits(7)
    other = Hit(seq=13, breakpoint="initModule", thread=Thread(id=1), time=0.0, frames=[USER, BINDING])
    calls = O.group_calls(hits + [other])
    assert [[h.seq for h in c.hits] for c in calls] == [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
    assert calls[0].deepest.seq == 5 and calls[0].ops() == ["add_"]
    hops = calls[0].hops()
    assert hops[2].handled() == ["AutogradCPU"] and hops[2].added() == []
    assert hops[3].keys is None and hops[3].handled() == []


def test_threads_do_not_mix_and_sites_group_equal_calls():
    elsewhere = python("<module>", "/work/train.py", 30, "w.add_(g)")
    hits = call_hits(1) + call_hits(7, thread=2) + call_hits(13, user=elsewhere)
    calls = O.group_calls(hits)
    assert len(calls) == 3
    sites = O.by_call_site(calls)
    assert [(s.frame.line, s.calls, len(s.variants)) for s in sites] == [(21, 2, 1), (30, 1, 1)]


def test_markdown_lists_hops_once_per_call_and_counts_a_call_as_one_path():
    session = load_sigmoid()
    session.hits = call_hits(1) + call_hits(7)
    md = markdown.render(session)
    assert "## Operator calls" in md and "### `/work/train.py:21`: `w.add_(w.grad, alpha=-0.1)`" in md
    assert "2 calls of `aten::add_` (hits #1 to #12)" in md
    hop_table = next(t for t in tables(md) if t[0] == ["#", "hop", "layer", "called with", "since the hop before"])
    assert [r[1] for r in hop_table[1:]][:3] == ["`at::_ops::add__Tensor::call`",
                                                 "`torch::autograd::VariableType::add__Tensor` [Autograd]",
                                                 "`at::_ops::add__Tensor::redispatch`"]
    assert hop_table[2][3] == "CPU, ADInplaceOrView, AutogradCPU" and hop_table[3][4] == "handled AutogradCPU"
    assert "computes one from the arguments" in hop_table[1][3]
    assert md.count("### Path ") == 1  # both calls took the same path: one path, two hits
    assert "12 in 1 distinct call path (2 operator calls)" in md


def test_an_op_breakpoint_is_one_row_with_its_functions_folded():
    from tracer.session.model import Breakpoint, Location

    session = load_sigmoid()
    lib = "/x/site-packages/torch/lib/libtorch_cpu.so"
    session.breakpoints = [Breakpoint("op:add_", locations=[Location(function=f.function, library=lib)
                                                            for f in (ENTRY, AUTOGRAD, REDISPATCH, WRAPPER)], hits=4)]
    md = markdown.render(session)
    (bp_row,) = tables(md)[1][1:]
    assert bp_row[0] == "`op:add_`" and bp_row[2] == "4"
    assert bp_row[1].startswith("4 functions of `aten::add_` in `libtorch_cpu.so`<details><summary>")
    assert "<code>at::_ops::add__Tensor::redispatch</code>" in bp_row[1] and "(c10::DispatchKeySet" not in bp_row[1]


def test_a_worker_thread_path_says_its_launcher_is_not_recorded():
    from tracer.export import paths as P

    # A hit in an OpenMP worker (torch.set_num_threads(2); recorded breaking on at::internal::set_thread_num).
    gomp = "/x/site-packages/torch/lib/libgomp.so.1"
    worker = [native("clone3", "/lib/x86_64-linux-gnu/libc.so.6"), native("start_thread", "/lib/x86_64-linux-gnu/libc.so.6"),
              native("gomp_thread_start", gomp), native("at::internal::set_thread_num(int)")]
    assert P.in_parallel_worker(worker)
    assert not P.in_parallel_worker([USER, BINDING, ENTRY])
    session = load_sigmoid()
    session.hits = [Hit(seq=1, breakpoint="at::internal::set_thread_num", thread=Thread(id=3), time=0.0,
                        frames=worker)]
    assert P.WORKER_NOTE in markdown.render(session)


def test_a_launch_round_trips_and_says_why_when_no_launcher_was_found():
    from tracer.export import paths as P
    from tracer.session.model import Launch

    gomp = "/x/site-packages/torch/lib/libgomp.so.1"
    worker = [native("gomp_thread_start", gomp), native("at::internal::set_thread_num(int)")]
    launcher = [USER, BINDING, ENTRY, native("GOMP_parallel", gomp)]
    hit = Hit(seq=2, breakpoint="b", thread=Thread(id=3), time=0.0, frames=worker,
              launched_by=Launch(Thread(id=1), launcher))
    again = Hit.from_dict(hit.to_dict())
    assert again.launched_by.thread.id == 1 and [f.function for f in again.launched_by.frames] == \
        [f.function for f in launcher]
    parent = Hit(seq=1, breakpoint="op:add_", thread=Thread(id=1), time=0.0, frames=[USER, BINDING, ENTRY])
    text = P.launch_text(hit, [parent, hit], cwd="/work")
    assert text == "launched by thread 1 from train.py:21 via at::_ops::add__Tensor::call (inside hit #1)"
    lost = Hit(seq=3, breakpoint="b", thread=Thread(id=3), time=0.0, frames=worker,
               launched_by=Launch(None, why="2 threads are inside a parallel launcher"))
    assert P.launch_text(lost, [lost]) == "launcher not found: 2 threads are inside a parallel launcher"
    assert Hit.from_dict(lost.to_dict()).launched_by.why.startswith("2 threads")
    # hits from different launching lines are different paths
    other = Hit(seq=4, breakpoint="b", thread=Thread(id=3), time=0.0, frames=worker,
                launched_by=Launch(Thread(id=1), [python("<module>", "/work/train.py", 30)] + launcher[1:]))
    assert len(P.group([hit, other])) == 2 and len(P.group([hit, hit])) == 1


def test_followed_operators_nest_under_the_call_that_ran_them():
    """--follow: hops labelled op:conv2d>X are one call with conv2d's, each at the depth of its operator."""
    conv2d = native("at::_ops::conv2d::call(at::Tensor const&, at::Tensor const&)")
    composite = native("at::native::conv2d_symint(at::Tensor const&, at::Tensor const&)")
    conv = native("at::_ops::convolution::call(at::Tensor const&, at::Tensor const&)")
    conv_kernel = native("at::native::convolution(at::Tensor const&, at::Tensor const&)")
    inner = native("at::_ops::_convolution::call(at::Tensor const&, at::Tensor const&)")
    base = [USER, BINDING]
    stacks = [("op:conv2d", [conv2d]), ("op:conv2d", [conv2d, composite]),
              ("op:conv2d>convolution", [conv2d, composite, conv]),
              ("op:conv2d>convolution", [conv2d, composite, conv, conv_kernel]),
              ("op:conv2d>_convolution", [conv2d, composite, conv, conv_kernel, inner])]
    hits = [Hit(seq=i + 1, breakpoint=label, thread=Thread(id=1), time=0.0, frames=base + s)
            for i, (label, s) in enumerate(stacks)]
    (call,) = O.group_calls(hits)
    assert call.followed() == ["convolution", "_convolution"]
    assert [(h.op, h.depth) for h in call.hops()] == [("conv2d", 0), ("conv2d", 0), ("convolution", 1),
                                                       ("convolution", 1), ("_convolution", 2)]
    assert O.qualified("conv2d") == "aten::conv2d" and O.qualified("myns::op") == "myns::op"
