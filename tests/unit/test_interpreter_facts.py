"""What pttrace learns of the target interpreter before gdb starts: its version and its torch, asked in-process
when it is pttrace's own interpreter, of a child interpreter otherwise, with the same answer."""
from __future__ import annotations

import os
import sys
import sysconfig

from tests.support import run_child
from tracer import symbols
from tracer.recorder.launch import describe_python
from tracer.symbols import same_interpreter, torch_libraries


def _venv_with_a_torch(root) -> tuple[str, str]:
    """A venv of this very interpreter (its bin/python a link to the same file) whose site-packages holds a
    torch of its own: a package with one library. Its python, and that library."""
    run_child([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    purelib = sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)})
    torch = os.path.join(purelib, "torch")
    os.makedirs(os.path.join(torch, "lib"))
    with open(os.path.join(torch, "__init__.py"), "w") as fh:
        fh.write("")
    with open(os.path.join(torch, "version.py"), "w") as fh:
        fh.write("__version__ = '9.9.9+other'\ngit_version = 'abc123'\n")
    with open(os.path.join(torch, "lib", "libtorch_other.so"), "w") as fh:
        fh.write("")
    return str(root / "bin" / "python"), os.path.join(torch, "lib", "libtorch_other.so")


def test_two_venvs_of_one_python_are_two_interpreters(tmp_path):
    # GIVEN a venv made from the interpreter running pttrace: its python is a link to the same file
    other, its_library = _venv_with_a_torch(tmp_path / "other")
    assert os.path.samefile(other, sys.executable)
    # THEN it is not pttrace's interpreter, while a second name for it in its own directory is
    assert not same_interpreter(other, sys.executable)
    assert same_interpreter(other, os.path.join(os.path.dirname(other), "python3"))
    assert same_interpreter(sys.executable, sys.executable)
    # AND its torch is its own: its libraries and its version, not pttrace's
    assert torch_libraries(other) == [its_library]
    facts = describe_python(other)
    assert (facts["torch_version"], facts["torch_git_version"]) == ("9.9.9+other", "abc123")


def test_own_interpreter_answers_as_a_child_interpreter_does(monkeypatch):
    # GIVEN pttrace's own interpreter, the default --python: answered in-process
    here = describe_python(sys.executable)
    # WHEN the same is asked of a child interpreter
    monkeypatch.setattr(symbols, "same_interpreter", lambda a, b: False)
    child = describe_python(sys.executable)
    # THEN the facts are the same, torch's version read from its version.py
    assert here == child
    assert here["torch"] and here["torch_version"].startswith("2.")
