"""Helper programs that are not Python fold into one line per program (tracer/session/helpers.py), from
the warnings and process records exec_hold.py writes for torch.compile's g++ and openssl runs."""
from tracer.session.helpers import fold_warnings, helper_programs
from tracer.session.model import Process


def test_not_python_warnings_fold_by_program_where_the_first_was():
    # GIVEN the five warnings a warm torch.compile run wrote, between two others
    warnings = [
        "the first",
        "process 16625 executes g++ --version, not Python: it is not traced",
        "process 16626 executes g++ -v, not Python: it is not traced",
        "process 16687 (python3 -c …) is not followed",
        "process 16917 executes g++ /tmp/tmp1vm4a3r3/header.hpp -D, not Python: it is not traced",
        "process 16982 executes /usr/bin/openssl sha512 /tmp/x.i, not Python: it is not traced",
    ]
    # WHEN folded
    out = fold_warnings(warnings)
    # THEN one line per program with its count and pids, the others unchanged and in order
    assert out == [
        "the first",
        "g++: 3 processes executed it, not Python: not traced (pids 16625, 16626, 16917)",
        "process 16687 (python3 -c …) is not followed",
        "openssl: 1 process executed it, not Python: not traced (pid 16982)",
    ]
    assert fold_warnings(out) == out  # a folded list stays as it is


def test_a_raw_exec_warning_keeps_its_reason():
    raw = ("process 7 executes sleep 1, not Python: it is not traced (process 7 executed sleep by a raw "
           "system call, not libc's execve, and was caught at the new program's first instruction)")
    assert fold_warnings([raw]) == [raw]


def test_helper_processes_by_program_without_those_with_hits_or_a_session():
    procs = [Process(1, argv=["python3", "t.py"]),
             Process(2, argv=["g++", "--version"], state="detached", detached="exec of /usr/bin/g++"),
             Process(3, argv=["g++", "-v"], state="detached", detached="exec of /usr/bin/g++"),
             Process(4, argv=["python3", "-c", "x"], state="detached", detached="exec of /usr/bin/python3",
                     session="s.children/4.jsonl"),
             Process(5, argv=["openssl", "sha512"], state="detached", detached="exec of /usr/bin/openssl")]
    found = helper_programs(procs, pids_with_hits=[1, 5])
    assert [(h.program, h.pids) for h in found] == [("g++", [2, 3])]


def test_unnamed_frames_of_a_library_are_said_once_whichever_process_met_them():
    # GIVEN the main process's libffi warning, then two children's (their recorders' own, merged)
    ffi = ("frames in /lib/x86_64-linux-gnu/libffi.so.8 have no function name (2 frames of the first call path "
           "through it): neither gdb nor pttrace's symbol index has a symbol there")
    other = "frames in /usr/bin/python3.11 have no function name (4 frames of the first call path through it): …"
    warnings = [ffi, "something else", f"process 42: {ffi}", f"process 43: {other}", f"process 44: {other}",
                "frames outside every file the target mapped have no function name (1 frame of the first call path)",
                "process 45: frames outside every file the target mapped have no function name (2 frames of the "
                "first call path)"]
    # THEN each library's first one stays, in its place
    assert fold_warnings(warnings) == [ffi, "something else", f"process 43: {other}", warnings[5]]
