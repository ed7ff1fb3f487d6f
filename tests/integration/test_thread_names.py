"""The OS name recorded with each hit is the thread's name at that hit.

GIVEN tests/targets/renamed_threads.py: the main thread hits PyNumber_ToBase, renames itself (its /proc
comm file) and hits it twice more, two short-lived threads rename themselves and hit it once each, the
main thread renames itself again and hits it
WHEN pttrace records every hit (the agent reads a thread's name through a descriptor of its comm file
kept open, osnames.py)
THEN each hit carries the name its thread had then (a rename between two hits of one thread is seen at the
second), and the main thread's threading name is still read beside it.
"""
from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT, run_pttrace
from tracer.session import storage

pytestmark = [pytest.mark.gdb]

TARGET = ROOT / "tests" / "targets" / "renamed_threads.py"


def test_each_hit_has_the_os_name_of_its_thread_then(tmp_path):
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path), "--python", sys.executable,
                       "--break", "PyNumber_ToBase", str(TARGET))
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) == 1, files
    hits = storage.load(files[0]).hits
    names = [h.thread.name for h in hits]
    assert len(hits) == 6, names
    first = names[0]
    assert first and first not in ("pt-renamed", "pt-first", "pt-second", "pt-last"), names
    assert names[1:] == ["pt-renamed", "pt-renamed", "pt-first", "pt-second", "pt-last"], names
    main_lwp = hits[0].thread.lwp
    assert [h.thread.lwp == main_lwp for h in hits] == [True, True, True, False, False, True]
    assert all(h.thread.python_name == "MainThread" for h in hits if h.thread.lwp == main_lwp), \
        [h.thread.python_name for h in hits]
