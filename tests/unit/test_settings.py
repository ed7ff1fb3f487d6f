"""The settings object: every PTTRACE_* variable read in one place, flags over them, frozen."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tracer.recorder.shutdown import final_status
from tracer.settings import Settings, cache_dir

ENV = {
    "PTTRACE_GDB": "/opt/gdb/bin/gdb",
    "PTTRACE_SESSION_DIR": "/tmp/s",
    "PTTRACE_NO_CFI": "1",
    "PTTRACE_CFI_LIBS": "liba.so:libb.so",
    "PTTRACE_BREAK_BY_NAME": "1",
    "PTTRACE_DEBUG_DIRS": "/d1::/d2",
    "PTTRACE_NO_STACK_REUSE": "1",
    "PTTRACE_STACK_REUSE_STATS": "/tmp/stats.json",
    "PTTRACE_SOURCE_DIR": "/src/pytorch",
    "PTTRACE_NO_ARGS": "1",
}


def test_every_variable_is_read():
    s = Settings.from_environment(ENV)
    assert s.gdb == "/opt/gdb/bin/gdb" and s.session_dir == Path("/tmp/s")
    assert not s.cfi and s.cfi_libs == ("liba.so", "libb.so") and s.break_by_name
    assert s.debug_dirs == ("/d1", "/d2") and not s.stack_reuse and s.stack_reuse_stats == "/tmp/stats.json"
    assert not s.all_symbols and not s.use_cfi and s.source_dir == "/src/pytorch" and not s.arguments


def test_defaults_without_variables():
    s = Settings.from_environment({})
    assert s == Settings()
    assert s.use_cfi and s.stack_reuse and s.session_dir == Path("sessions") and s.arguments


def test_flags_win_over_the_environment_and_none_means_not_given():
    s = Settings.from_environment(ENV, gdb="gdb-13", cfi=None, verbose=True)
    assert s.gdb == "gdb-13" and not s.cfi and s.verbose
    assert Settings.from_environment({"PTTRACE_ALL_SYMBOLS": "1"}).use_cfi is False


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().gdb = "x"  # type: ignore[misc]


def test_every_field_is_documented():
    import inspect

    source = inspect.getsource(Settings)
    for f in dataclasses.fields(Settings):
        after = source.split(f"    {f.name}:", 1)[1].split("\n", 2)[1]
        assert after.strip().startswith('"""'), f"{f.name} has no docstring"


@pytest.mark.parametrize("command", [["run", "script.py"], ["attach", "1"]])
def test_a_source_dir_that_is_not_a_directory_is_one_sentence(command, tmp_path, monkeypatch, capsys):
    # Said before gdb starts or any process is looked at: exit 2, no traceback.
    from tracer.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "script.py").write_text("pass\n")
    missing = tmp_path / "nope"
    assert main([*command, "--source-dir", str(missing)]) == 2
    assert capsys.readouterr().err == f"pttrace: --source-dir {missing} is not a directory\n"


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "pttrace"


@pytest.mark.parametrize("status,reason,attached,final", [
    ("running", "max-hits", False, "completed"),
    ("running", "exited", True, "completed"),
    ("running", "sigint", True, "detached"),
    ("running", "sigterm", False, "interrupted"),
    ("completed", "timeout", False, "interrupted"),  # the target exited while the run was being cut short
    ("target-crashed", "crashed with SIGSEGV", False, "target-crashed"),
    ("detached", "sigint", True, "detached"),
])
def test_final_status(status, reason, attached, final):
    assert final_status(status, reason, attached) == final
