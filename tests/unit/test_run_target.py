"""What ``pttrace run`` launches: ``-m``/``-c`` read as python reads them, console scripts of the
target's environment, and one sentence when the target does not exist."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tracer.commands._target import Target, check_module, console_script, split_run_argv, target_from
from tracer.errors import UsageError

VALUE_OPTIONS = {"-b", "--break", "--python", "--max-hits", "--timeout"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv, ours, theirs", [
    # Everything after -m MODULE is the module's, pttrace-looking options included.
    (["run", "-b", "f", "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-hits", "1", "t.py"],
     ["run", "-b", "f", "-m", "torch.distributed.run"], ["--nproc-per-node", "2", "--max-hits", "1", "t.py"]),
    (["run", "-c", "import sys; print(sys.argv)", "-b", "x"], ["run", "-c", "import sys; print(sys.argv)"], ["-b", "x"]),
    (["run", "-mpkg.mod", "a"], ["run", "-m", "pkg.mod"], ["a"]),
    (["run", "-m", "mod", "--", "a"], ["run", "-m", "mod"], ["--", "a"]),  # python keeps the "--" too
    # An option's value is never taken for -m / -c.
    (["run", "--break", "-m", "s.py"], ["run", "--break", "-m", "s.py"], []),
    # After the script, -m belongs to argparse (and to the script only after `--`).
    (["run", "s.py", "-m", "x"], ["run", "s.py", "-m", "x"], []),
    (["run", "--", "-m", "x"], ["run", "--", "-m", "x"], []),
])
def test_split_reads_the_command_line_as_python_does(argv, ours, theirs):
    assert split_run_argv(argv, VALUE_OPTIONS, sys.executable) == (ours, theirs)


def test_a_console_scripts_options_are_its_own():
    if not (Path(sys.executable).parent / "torchrun").is_file():
        pytest.skip("torch's torchrun is not installed beside this Python")
    argv = ["run", "-b", "f", "torchrun", "--nproc-per-node", "2", "--max-hits", "3", "t.py"]
    assert split_run_argv(argv, VALUE_OPTIONS, sys.executable) == (argv[:4], argv[4:])
    # Not a console script of *that* interpreter's environment: argparse reads on.
    argv = ["run", "--python", "/usr/bin/python3", "torchrun", "--max-hits", "3"]
    assert split_run_argv(argv, VALUE_OPTIONS, sys.executable) == (argv, [])


def test_target_argv_is_what_follows_the_interpreter():
    assert Target("module", "torch.utils.collect_env", ("-h",)).argv() == ["-m", "torch.utils.collect_env", "-h"]
    assert Target("code", "print(1)", ("a",)).argv() == ["-c", "print(1)", "a"]
    assert Target("script", "s.py", ("a",)).argv() == ["s.py", "a"]


def test_a_console_script_of_the_environment_is_found_beside_its_interpreter():
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.is_file():
        pytest.skip("torch's torchrun is not installed beside this Python")
    assert console_script("torchrun", sys.executable) == str(torchrun)
    assert target_from(["torchrun", "--nproc-per-node", "2", "t.py"], None, None, sys.executable) == \
        Target("script", str(torchrun), ("--nproc-per-node", "2", "t.py"))
    assert console_script("python", sys.executable) is None  # the interpreter is no script
    assert console_script("../torchrun", sys.executable) is None


def test_missing_targets_are_one_sentence():
    with pytest.raises(UsageError, match="script not found: no_such_script.py"):
        target_from(["no_such_script.py"], None, None, sys.executable)
    with pytest.raises(UsageError, match="not both"):
        target_from([], "m", "print(1)", sys.executable)
    with pytest.raises(UsageError, match="give the script to run"):
        target_from([], None, None, sys.executable)
    with pytest.raises(UsageError, match="has no module named 'no_such_module_xyz'"):
        check_module(sys.executable, "no_such_module_xyz.run")
    with pytest.raises(UsageError, match="is not a module name"):
        check_module(sys.executable, "torch/distributed")
    check_module(sys.executable, "torch.distributed.run")  # found without importing torch
    check_module(sys.executable, "json.tool")
