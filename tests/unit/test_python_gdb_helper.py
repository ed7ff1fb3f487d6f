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


def _gdb_commands(tmp_path, prompt: bool) -> tuple[str, bool]:
    """The real gdb pttrace starts for a run: its auto-load safe path, and whether the helper's ``py-bt`` exists."""
    import sys

    from tracer.recorder.config import TraceConfig
    from tracer.recorder.launch import StartedGdb

    script = tmp_path / "t.py"
    script.write_text("pass\n")
    config = TraceConfig(breakpoints=("initModule",), python=sys.executable, script=str(script), session_dir=tmp_path)
    started = StartedGdb.start(config, prompt=prompt)
    try:
        started.agent.wait()
        safe = "".join(started.mi.console("show auto-load safe-path").console)
        pybt = started.mi.console("help py-bt", check=False).message != "error"
    finally:
        started.mi.close()
    assert started.mi.proc.poll() is not None  # no gdb left behind
    return safe, pybt


def test_only_a_run_with_a_gdb_prompt_loads_the_helper(tmp_path):
    """The helper gives the TUI's gdb prompt ``py-bt``; a headless run has no prompt and pttrace reads Python frames
    itself, so its gdb does not compile the helper's 71 KB (~0.02 s of gdb's CPU before the target may start)."""
    import sys

    helper = python_gdb_helper(sys.executable)
    if helper is None:
        import pytest

        pytest.skip(f"no python-gdb helper for {sys.executable}")
    safe, pybt = _gdb_commands(tmp_path, prompt=True)
    assert helper in safe and pybt
    safe, pybt = _gdb_commands(tmp_path, prompt=False)
    assert helper not in safe and not pybt
