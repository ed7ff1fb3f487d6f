"""Process records in a session file: merged by pid on load, a hit's process by its thread's pid, and a
session without any (one process, or recorded before children were followed) loads as before."""
from __future__ import annotations

from tracer.session import records, storage
from tracer.export import processes as PR
from tracer.session.model import SessionInfo


def _write(path, procs: list[dict], hits: list[tuple[int, int]]) -> None:
    interner = records.Interner()
    with open(path, "wb") as fh:
        fh.write(records.encode({"type": "header", "schema": records.SCHEMA,
                                 "session": SessionInfo(id="t", mode="run", argv=["python", "x.py"]).to_dict()}))
        for p in procs:
            fh.write(records.encode(records.process(**p)))
        frame = {"kind": "native", "function": "f", "library": "libx.so", "layer": "kernel"}
        for seq, pid in hits:
            thread = {"id": 1, "name": "python", "lwp": pid}
            if pid:
                thread["pid"] = pid
            fh.write(interner.encode_hit(seq, "f", thread, float(seq), [frame]))
        fh.write(records.encode({"type": "end", "status": "completed", "exit_code": 0}))


def test_records_of_one_pid_are_merged_and_hits_grouped_by_process(tmp_path):
    path = tmp_path / "s.jsonl"
    _write(path, [{"pid": 10, "ppid": 1, "argv": ["python", "x.py"], "started": "a"},
                  {"pid": 11, "ppid": 10, "argv": ["python", "x.py"], "started": "b"},
                  {"pid": 11, "role": "DataLoader worker 0", "worker": 0},
                  {"pid": 11, "ended": "c", "exit_code": 0, "state": "exited"}],
           [(1, 10), (2, 11), (3, 11)])
    report = storage.LoadReport()
    s = storage.load(path, report)
    assert not report.bad_lines
    assert [p.pid for p in s.processes] == [10, 11]
    worker = s.process(11)
    assert (worker.ppid, worker.role, worker.worker, worker.exit_code, worker.ended) == (10, "DataLoader worker 0", 0,
                                                                                        0, "c")
    assert worker.argv == ["python", "x.py"] and worker.started == "b"
    assert PR.several(s)
    groups = PR.groups(s)
    assert [(g.pid, len(g.hits)) for g in groups] == [(10, 1), (11, 2)]
    assert [h.seq for h in groups[1].hits] == [2, 3]


def test_a_session_of_one_process_has_no_processes_and_no_grouping(tmp_path):
    path = tmp_path / "s.jsonl"
    _write(path, [], [(1, 0), (2, 0)])
    s = storage.load(path)
    assert s.processes == [] and not PR.several(s)
    assert all(h.thread.pid is None for h in s.hits)


def test_a_process_record_of_the_wrong_type_is_a_damaged_line_not_a_crash(tmp_path):
    path = tmp_path / "s.jsonl"
    _write(path, [{"pid": 10, "ppid": "one"}], [(1, 10)])
    report = storage.LoadReport()
    s = storage.load(path, report)
    assert report.bad_lines and "process" in report.bad_lines[0][1]
    assert len(s.hits) == 1


def test_the_session_of_a_child_that_executed_python_is_read_with_the_main_one(tmp_path):
    main_path = tmp_path / "s.jsonl"
    (tmp_path / "s.children").mkdir()
    _write(tmp_path / "s.children" / "c.jsonl", [{"pid": 20, "ppid": 10, "argv": ["python", "-c", "x"],
                                                  "started": "b", "ended": "c", "exit_code": 0}], [(1, 20), (2, 20)])
    _write(main_path, [{"pid": 10, "argv": ["python", "x.py"], "started": "a"},
                       {"pid": 20, "session": "s.children/c.jsonl", "attached_late": True},
                       {"pid": 30, "session": "../elsewhere.jsonl"}], [(1, 10), (2, 10)])
    s = storage.load(main_path)
    assert [(h.seq, h.thread.pid) for h in s.hits] == [(1, 10), (2, 10), (3, 20), (4, 20)]
    child = s.process(20)
    assert child.exit_code == 0 and child.ppid == 10 and child.attached_late
    assert s.breakpoints == [] or all(bp.hits for bp in s.breakpoints)
    assert any("outside this session's directory" in w for w in s.info.warnings), s.info.warnings


def _two_hosts(tmp_path, hosts: tuple[str | None, str | None]):
    path = tmp_path / "s.jsonl"
    procs = [{"pid": 10, "ppid": 1, "argv": ["python", "train.py"], "started": "2026-01-01T10:00:00", "rank": 0,
              "role": "rank 0"},
             {"pid": 20, "ppid": 1, "argv": ["python", "train.py"], "started": "2026-01-01T10:00:01", "rank": 1,
              "role": "rank 1"}]
    for p, host in zip(procs, hosts):
        if host is not None:
            p["host"] = host
    _write(path, procs, [(1, 10), (2, 20)])
    return storage.load(path)


def test_processes_of_several_hosts_say_where_they_ran_in_every_view(tmp_path, capsys):
    import json

    from tracer.commands._summary import print_summary
    from tracer.export import render

    s = _two_hosts(tmp_path, ("node-1", "node-2"))
    assert [p.host for p in s.processes] == ["node-1", "node-2"]
    assert PR.hosts(s.processes) == ["node-1", "node-2"]
    notes = render(s, "markdown")
    assert "| **hosts** | `node-1`, `node-2` |" in notes
    assert "| process | host | parent |" in notes and "| pid 20 (rank 1) | node-2 | 1 |" in notes
    doc = json.loads(render(s, "json"))
    assert [p["host"] for p in doc["processes"]] == ["node-1", "node-2"]
    from rich.console import Console

    print_summary(s, console=Console(width=200, highlight=False))
    out = capsys.readouterr().out
    assert "processes: 2 on 2 hosts" in out and "on node-2" in out


def test_one_host_is_not_shown_but_exported_and_old_sessions_have_none(tmp_path):
    import json

    from tracer.export import render

    one = _two_hosts(tmp_path, ("node-1", "node-1"))
    notes = render(one, "markdown")
    assert "hosts" not in notes and "| process | parent |" in notes
    assert "node-1" not in PR.describe(one.processes[0], len(PR.hosts(one.processes)) > 1)
    assert [p["host"] for p in json.loads(render(one, "json"))["processes"]] == ["node-1", "node-1"]
    old = _two_hosts(tmp_path, (None, None))  # a session recorded before processes had a host
    assert [p.host for p in old.processes] == [None, None] and PR.hosts(old.processes) == []
    assert "host" not in render(old, "markdown")
    assert all("host" not in p for p in json.loads(render(old, "json"))["processes"])


def test_a_name_torch_defines_in_a_library_never_loaded_is_not_offered_as_its_own_suggestion(tmp_path, capsys):
    # GIVEN a session whose breakpoint never resolved, torch's libraries defining that very name
    from rich.console import Console

    from tracer.commands._summary import NOT_LOADED, print_summary
    from tracer.session.model import Breakpoint
    from tracer.tui.widgets.breakpoints import _summary

    s = _two_hosts(tmp_path, ("node-1", "node-1"))
    bp = Breakpoint(spec="initModule", suggestions=["initModule", "torch::cpu::initModule"],
                    error="never resolved: no loaded library defines a function of that name")
    s.breakpoints = [bp]
    # THEN the summary says where the name is, and offers only the other names
    print_summary(s, console=Console(width=200, highlight=False))
    out = capsys.readouterr().out
    assert NOT_LOADED in out and "did you mean: torch::cpu::initModule\n" in out, out
    # and the TUI's breakpoint row says it too
    assert "never loaded" in _summary(bp, None).plain
