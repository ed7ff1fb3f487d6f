"""What ``pttrace run`` launches, as ``python`` itself takes it: a script, ``-m MODULE``, ``-c CODE``,
or a console script of the target's environment (``torchrun``, ``pytest``), with its arguments."""
from __future__ import annotations

import os
import re
import subprocess

from tracer.errors import UsageError

# Asks the target interpreter whether a top-level package or module exists, without importing it
# (``torch.distributed.run`` would import torch: seconds). The rest of the name is Python's to check.
_FIND_TOP = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)"


class Target:
    """The program after the interpreter: ``kind`` "script" (``value`` its path), "module" or "code". A plain
    class, not a dataclass: it is made before gdb starts, and the dataclasses module's import (with inspect and
    ast) was ~15% of pttrace's work before gdb's start."""

    __slots__ = ("kind", "value", "args")

    def __init__(self, kind: str, value: str, args: tuple[str, ...] = ()):
        self.kind, self.value, self.args = kind, value, args

    def __repr__(self) -> str:
        return f"Target({self.kind!r}, {self.value!r}, {self.args!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and (self.kind, self.value, self.args) == (other.kind, other.value, other.args)

    def __hash__(self) -> int:
        return hash((self.kind, self.value, self.args))

    def argv(self) -> list[str]:
        """What follows the interpreter on its command line."""
        if self.kind == "module":
            return ["-m", self.value, *self.args]
        if self.kind == "code":
            return ["-c", self.value, *self.args]
        if self.value.startswith("-"):  # a script named -x.py: after python's `--` it is a file, not an option
            return ["--", self.value, *self.args]
        return [self.value, *self.args]


def split_run_argv(argv: list[str], value_options: set[str], python: str) -> tuple[list[str], list[str]]:
    """Split ``pttrace run ...`` the way ``python`` reads its own command line: everything after
    ``-m MODULE`` or ``-c CODE`` belongs to the target, even what looks like pttrace's options; so
    does everything after a console script of the environment (``torchrun --nproc-per-node 2 ...``),
    a program with options of its own. Returns (what pttrace parses, the target's arguments). Only
    options before the first positional argument count: after a script, ``-m`` is argparse's."""
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok == "--" or tok == "-":
            break
        if not tok.startswith("-"):
            if interpreter_named(tok) is not None:
                # `pttrace run python3 -m pkg ...`, as after gdb's --args: what follows is python's command line
                python = tok
                i += 1
                continue
            if not os.path.exists(tok) and console_script(tok, python) is not None:
                return argv[: i + 1], argv[i + 1 :]
            break
        if tok == "--python" and i + 1 < len(argv):
            python = argv[i + 1]
        elif tok.startswith("--python="):
            python = tok.split("=", 1)[1]
        if tok in ("-m", "-c"):
            return argv[: i + 2], argv[i + 2 :]
        if tok[:2] in ("-m", "-c") and not tok.startswith("--"):  # python's -mMODULE / -cCODE
            return argv[:i] + [tok[:2], tok[2:]], argv[i + 1 :]
        if tok in value_options:
            i += 1  # its value, whatever it looks like
        i += 1
    return argv, []


_INTERPRETER_NAME = re.compile(r"^python[0-9.]*[a-z]?$")


def interpreter_named(name: str) -> str | None:
    """The path of ``name`` when it names a Python interpreter (``python3``, ``/usr/bin/python3.11``: a program
    named python*, on PATH or at that path), as the first word after gdb's ``--args`` is; None when it does
    not (a script, a console script, anything else)."""
    if not _INTERPRETER_NAME.match(os.path.basename(name)):
        return None
    if os.sep in name or os.path.exists(name):
        path: str | None = name if os.sep in name else None
    else:
        import shutil

        path = shutil.which(name)
    if path is None or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return None
    return path


def _elf(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def interpreter_first(target: list[str], python: str, python_given: bool) -> tuple[list[str], str]:
    """``pttrace run python3 script.py`` as ``pttrace run --python python3 script.py``: (the target without its
    interpreter, the interpreter). UsageError when it is a launcher (pyenv's shim, a shell script) rather than
    the interpreter gdb can run, or when --python names another."""
    if not target:
        return target, python
    path = interpreter_named(target[0])
    if path is None:
        return target, python
    if not _elf(os.path.realpath(path)):
        raise UsageError(f"{target[0]} is a launcher ({os.path.realpath(path)} is not a program gdb can run), not "
                         "the interpreter itself: give the interpreter's own path with --python PATH (with pyenv: "
                         "--python \"$(pyenv which python)\").")
    if python_given and os.path.realpath(path) != os.path.realpath(python):
        raise UsageError(f"two interpreters: --python {python} and {target[0]}; give one.")
    return target[1:], path


def console_script(name: str, python: str) -> str | None:
    """The console script ``name`` installed beside ``python`` (its environment's ``bin``), when it is
    a Python script; None otherwise."""
    if os.sep in name:
        return None
    candidate = os.path.join(os.path.dirname(os.path.abspath(python)), name)
    try:
        with open(candidate, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    return candidate if first.startswith(b"#!") and b"python" in first else None


def check_module(python: str, module: str, cwd: str | None = None) -> None:
    """UsageError when the interpreter has no top-level package or module of that name."""
    top = module.split(".", 1)[0]
    if not top or not all(part.isidentifier() for part in module.split(".")):
        raise UsageError(f"{module!r} is not a module name (-m takes a dotted name such as torch.distributed.run).")
    try:
        proc = subprocess.run([python, "-c", _FIND_TOP, top], capture_output=True, timeout=60, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{python} could not be asked for module {top} ({exc}).") from None
    if proc.returncode == 3:
        raise UsageError(f"{python} has no module named {top!r}.")


def target_from(target: list[str], module: str | None, code: str | None, python: str) -> Target:
    """The Target of ``pttrace run``'s positional arguments and ``-m``/``-c``; UsageError when it is
    missing, ambiguous or not found."""
    if module is not None and code is not None:
        raise UsageError("give -m MODULE or -c CODE, not both.")
    if module is not None:
        return Target("module", module, tuple(target))
    if code is not None:
        return Target("code", code, tuple(target))
    if not target:
        raise UsageError("give the script to run, e.g. `pttrace run scripts/hello-world.py --break initModule` "
                         "(or -m MODULE, -c CODE).")
    script, args = target[0], tuple(target[1:])
    if not os.path.exists(script):
        found = console_script(script, python)
        if found is None:
            raise UsageError(f"script not found: {script} (nor a console script of {python}'s environment).")
        script = found
    if not os.path.isfile(script) or not os.access(script, os.R_OK):
        raise UsageError(f"script is not a readable file: {script}.")
    return Target("script", script, args)
