"""A hit in an intra-op worker thread records which thread launched its region, and that thread's stack
at that moment: one recording of tests/targets/parallel.py (torch.set_num_threads(2); sigmoid, then neg)
breaking on ``at::internal::set_thread_num``, which both the launching thread and the OpenMP worker run."""
from __future__ import annotations

import pytest

from tests.conftest import ROOT, run_pttrace

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "parallel.py"


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    from tracer.session import storage

    session_dir = tmp_path_factory.mktemp("sessions")
    proc = run_pttrace("run", "--batch", "--session-dir", str(session_dir), "--break", "at::internal::set_thread_num",
                       str(TARGET))
    assert proc.returncode == 0, proc.stderr
    (path,) = sorted(session_dir.glob("*.jsonl"))
    return proc, storage.load(path), path


def test_worker_hits_name_their_launcher_and_its_python_line(recording):
    from tracer.export import paths as P

    _, session, _ = recording
    main = {h.thread.id for h in session.hits if any(f.kind == "python" for f in h.frames)}
    workers = [h for h in session.hits if h.thread.id not in main]
    assert len(main) == 1 and len(workers) >= 2
    (main_id,) = main
    for h in workers:
        assert P.in_parallel_worker(h.frames)
        lb = h.launched_by
        assert lb is not None and lb.thread is not None and lb.thread.id == main_id, lb
        shorts = [f.short for f in lb.frames]
        # the launcher waits for its workers in libgomp (GOMP_parallel, or gomp_team_end below it)
        assert any((f.library or "").endswith("libgomp.so.1") for f in lb.frames), shorts
        origin = P.launch_origin(h)
        op = next(s for s in reversed(shorts) if s and s.startswith("at::_ops::"))
        # the launcher's stack is named from pttrace's index, as the hits' frames are (fill records)
        assert (origin.source.strip(), op) in {("b = a.sigmoid()", "at::_ops::sigmoid::redispatch"),
                                               ("c = a.neg()", "at::_ops::neg::redispatch")}, (origin.source, op)
    assert {P.launch_origin(h).line for h in workers} == {6, 7}
    # the launching thread's own hits have no launcher: they are not workers'
    assert all(h.launched_by is None for h in session.hits if h.thread.id == main_id)


def test_views_split_worker_paths_by_launching_line(recording):
    from tracer.export import markdown

    _, session, path = recording
    md = markdown.render(session)
    worker_headings = [line for line in md.splitlines() if line.startswith("### Path ")
                       and "set_thread_num" in line]
    assert any("parallel.py:6" in line for line in worker_headings)
    assert any("parallel.py:7" in line for line in worker_headings)
    launches = [line for line in md.splitlines() if "launched by thread" in line]
    assert any("from tests/targets/parallel.py:6 via at::\\_ops::sigmoid::redispatch in at::native::" in line
               for line in launches)
    assert any("from tests/targets/parallel.py:7 via at::\\_ops::neg::redispatch in at::native::" in line
               for line in launches)
    proc = run_pttrace("show", str(path), env={"COLUMNS": "400"})  # no wrapping inside the label
    assert proc.returncode == 0, proc.stderr
    assert "a parallel worker; launched by thread" in proc.stdout
