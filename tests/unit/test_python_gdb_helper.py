"""Which python-gdb helper pttrace lets gdb auto-load: the interpreter's own, wherever it was installed."""
from __future__ import annotations

import os
from pathlib import Path

from tracer.recorder.launch import python_gdb_helper


def test_distribution_helper_under_gdbs_auto_load_directory(tmp_path):
    # Debian's python3.11-dbg installs /usr/share/gdb/auto-load/usr/bin/python3.11-gdb.py
    bindir = tmp_path / "usr" / "bin"
    bindir.mkdir(parents=True)
    python = bindir / "python3.11"
    python.write_text("")
    auto_load = tmp_path / "auto-load"
    helper = auto_load / str(python.resolve()).lstrip("/")
    helper = helper.with_name("python3.11-gdb.py")
    helper.parent.mkdir(parents=True)
    helper.write_text("")
    assert python_gdb_helper(str(python), auto_load=str(auto_load)) == str(helper)


def test_helper_beside_the_executable_wins(tmp_path):
    python = tmp_path / "bin" / "python3.12"
    python.parent.mkdir()
    python.write_text("")
    beside = Path(str(python) + "-gdb.py")
    beside.write_text("")
    link = tmp_path / "python"
    os.symlink(python, link)
    assert python_gdb_helper(str(link), auto_load=str(tmp_path / "none")) == str(beside)


def test_no_helper(tmp_path):
    python = tmp_path / "bin" / "python3.13"
    python.parent.mkdir()
    python.write_text("")
    assert python_gdb_helper(str(python), auto_load=str(tmp_path / "none")) is None
