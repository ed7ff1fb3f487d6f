"""Bad input to ``run`` and ``attach`` is refused before anything starts (no gdb, no target): one
sentence on stderr and exit 2. ``main(argv)`` runs in-process: a refusal that started gdb would show as
a test taking seconds, and a leftover gdb is checked by the integration suite's own cases."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import gdb_pids
from tracer.cli import main
from tracer.commands._target import Target
from tracer.recorder.config import TraceConfig

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "scripts" / "hello-world.py")


def _refused(capsys, argv: list[str], says: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("spec, says", [
    (f"{SCRIPT}:0", "line numbers start at 1"),
    (f"{SCRIPT}:-5", "line numbers start at 1"),
    (f"{SCRIPT}:99999", "has "),
    ("no/such/file.cpp:12", "there is no file no/such/file.cpp"),
    (f"{ROOT / 'scripts'}:3", "is not a file"),
])
def test_a_file_line_that_cannot_exist_is_refused(capsys, tmp_path, spec, says):
    _refused(capsys, ["run", "--batch", "--session-dir", str(tmp_path), "-b", spec, SCRIPT], says)
    assert not list(tmp_path.iterdir()), "a session was started"


def test_a_session_dir_that_is_a_file_is_refused_with_what_it_is_and_no_gdb_is_left(capsys, tmp_path):
    # mkdir's own word for it was "File exists"; and the gdb already started was left running
    (tmp_path / "f").write_text("")
    before = gdb_pids()
    _refused(capsys, ["run", "--batch", "--session-dir", str(tmp_path / "f"), "-b", "initModule", SCRIPT],
             f"{tmp_path / 'f'} is not a directory.")
    assert gdb_pids() <= before, "a gdb was left running"


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_timeouts_that_are_not_a_number_of_seconds_are_refused(capsys, tmp_path, value):
    _refused(capsys, ["run", "--batch", "--timeout", value, "-b", "x", SCRIPT], "--timeout must be a positive")
    _refused(capsys, ["attach", "1", "--batch", "--duration", value, "-b", "x"], "--duration must be a positive")


@pytest.mark.parametrize("argv, says", [
    (["-c", "print(1)", "-b", "initModule"], "-b after -c CODE is the target's argument"),
    (["-m", "json.tool", "--op", "sigmoid"], "--op after -m MODULE is the target's argument"),
    (["-c", "print(1)", "--break=initModule"], "put pttrace's options before -c"),
])
def test_pttrace_options_after_c_or_m_get_a_sentence_that_says_why(capsys, argv, says):
    _refused(capsys, ["run", "--batch", *argv], says)


def test_a_script_whose_name_starts_with_a_dash_runs_as_a_script():
    # python reads `python -x.py` as its option -x; after `--` it is the file
    assert Target("script", "-x.py", ("a",)).argv() == ["--", "-x.py", "a"]
    config = TraceConfig(breakpoints=("f",), python=sys.executable, script="-x.py", script_args=("a",))
    assert config.program() == ["--", "-x.py", "a"]
    assert Target("script", "x.py").argv() == ["x.py"]


def test_a_non_python_process_under_force_is_looked_at_with_the_given_python(capsys):
    # GIVEN a process that is not Python (sleep); WHEN --force attaches with a bad --python
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        code = main(["attach", str(sleeper.pid), "--force", "--batch", "-b", "x", "--python", "/bin/true"])
        err = capsys.readouterr().err
        # THEN the message names the --python given, never the target's own program
        assert code == 2 and "--python /bin/true" in err and "sleep" not in err, err
    finally:
        sleeper.send_signal(signal.SIGKILL)
        sleeper.wait()
