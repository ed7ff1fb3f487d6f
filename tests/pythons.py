"""The interpreters the Python-frame tests run on, and a target stopped at a known Python stack.

- pyenv 3.10-3.13 (debug info, shared libpython) under ~/.pyenv/versions;
- Debian's /usr/bin/python3.11 (static libpython, no DWARF);
- copies of pyenv builds with their debug info stripped (``strip --strip-debug`` on the executable
  and libpython, no ``-gdb.py`` helper, RUNPATH pointed at the copy with patchelf), like the conda,
  python.org, Docker and uv builds; made once and cached in ``tests/.cache/stripped-python``.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import Lines, allowance, run_child

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "tests" / "targets" / "known_stack.py"
PYENV = Path.home() / ".pyenv" / "versions"
MINORS = (10, 11, 12, 13)
DEBIAN = Path("/usr/bin/python3.11")
CACHE = Path(os.environ.get("PTTRACE_CACHE") or ROOT / "tests" / ".cache") / "stripped-python"
VENV_BIN = Path(sys.executable).parent


def pyenv_python(minor: int) -> Path | None:
    """pyenv's newest 3.``minor`` patch release here (any patch: CI's machine and a user's differ)."""
    found = []
    for home in PYENV.glob(f"3.{minor}.*") if PYENV.is_dir() else ():
        patch = home.name.split(".", 2)[2]
        exe = home / "bin" / f"python3.{minor}"
        if patch.isdigit() and exe.exists():
            found.append((int(patch), exe))
    return max(found)[1] if found else None


def stripped_python(minor: int) -> Path | None:
    """A copy of pyenv's 3.``minor`` without DWARF (None if pyenv, strip or patchelf is missing)."""
    source = pyenv_python(minor)
    patchelf = shutil.which("patchelf") or (VENV_BIN / "patchelf")
    if source is None or shutil.which("strip") is None or not Path(patchelf).exists():
        return None
    prefix = source.parent.parent
    lib = prefix / "lib" / f"libpython3.{minor}.so.1.0"
    st = lib.stat()
    stamp = f"{lib} {st.st_size} {st.st_mtime_ns}"
    home = CACHE / f"3.{minor}"
    exe = home / "bin" / f"python3.{minor}"
    CACHE.mkdir(parents=True, exist_ok=True)
    # One maker at a time: two test processes (pytest-xdist's workers) must not rebuild the copy
    # under each other.
    with open(CACHE / f".3.{minor}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (home / "stamp").exists() and (home / "stamp").read_text() == stamp and exe.exists():
            return exe
        shutil.rmtree(home, ignore_errors=True)
        (home / "bin").mkdir(parents=True)
        (home / "lib").mkdir()
        shutil.copy2(source, exe)
        shutil.copy2(lib, home / "lib" / lib.name)
        subprocess.run(["strip", "--strip-debug", str(exe), str(home / "lib" / lib.name)], check=True)
        subprocess.run([str(patchelf), "--set-rpath", "$ORIGIN/../lib", str(exe)], check=True)
        # The standard library is the original's (Python finds lib/python3.X next to its executable).
        (home / "lib" / f"python3.{minor}").symlink_to(prefix / "lib" / f"python3.{minor}")
        (home / "stamp").write_text(stamp)
    return exe


def interpreters() -> list[tuple[str, Path | None]]:
    out = [(f"pyenv-3.{m}", pyenv_python(m)) for m in MINORS]
    out.append(("debian-3.11", DEBIAN if DEBIAN.exists() else None))
    out += [(f"stripped-3.{m}", m) for m in (10, 12, 13)]
    return out


def resolve(spec) -> Path | None:
    return stripped_python(spec) if isinstance(spec, int) else spec


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[-1].split()[0]


def start_stopped(python: Path, timeout: float = 30) -> subprocess.Popen:
    """known_stack.py on ``python``, stopped by its own SIGSTOP at the bottom of its known stack."""
    proc = subprocess.Popen([str(python), str(TARGET), "stop"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = Lines(proc.stdout, str(python)).next(120)
    except AssertionError as e:
        line = str(e)
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"{python} did not start the target: {line!r} {proc.stderr.read()[-2000:]}")
    deadline = time.monotonic() + allowance(timeout)
    while _state(proc.pid) != "T":
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the target did not stop")
        time.sleep(0.01)
    return proc


def finish(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=allowance(30))
    for stream in (proc.stdout, proc.stderr):
        stream.close()


_PYSTACK_THREAD = re.compile(r"^Traceback for thread (\d+) ")
_PYSTACK_FRAME = re.compile(r'^\s+\(Python\) File "(.*)", line (\d+), in (.*)$')


def pystack_threads(pid: int) -> dict[int, list[tuple[str, int, str]]]:
    """``pystack remote --no-block``: each thread's (file, line, code name), innermost first."""
    out = run_child([str(VENV_BIN / "pystack"), "remote", "--no-block", str(pid)], capture_output=True,
                    text=True, timeout=120)
    threads: dict[int, list] = {}
    current = None
    for line in out.stdout.splitlines():
        m = _PYSTACK_THREAD.match(line)
        if m:
            current = threads.setdefault(int(m.group(1)), [])
            continue
        m = _PYSTACK_FRAME.match(line)
        if m and current is not None:
            current.append((m.group(1), int(m.group(2)), m.group(3)))
    if not threads:
        raise RuntimeError(f"pystack read nothing: {out.stderr[-2000:]}")
    return {tid: frames[::-1] for tid, frames in threads.items()}


_SPY_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(.*?\)(?:: "(.*)")?$')
_SPY_FRAME = re.compile(r"^\s+(.*) \((.*):(\d+)\)$")


def py_spy_threads(pid: int) -> dict[int, tuple[str | None, list[tuple[str, int, str]]]]:
    """``py-spy dump --nonblocking``: each thread's name and (file's base name, line, function)."""
    out = run_child([str(VENV_BIN / "py-spy"), "dump", "--nonblocking", "--pid", str(pid)],
                    capture_output=True, text=True, timeout=120)
    threads: dict[int, tuple] = {}
    current = None
    for line in out.stdout.splitlines():
        m = _SPY_THREAD.match(line)
        if m:
            current = []
            threads[int(m.group(1), 0)] = (m.group(2), current)
            continue
        m = _SPY_FRAME.match(line)
        if m and current is not None:
            current.append((m.group(2), int(m.group(3)), m.group(1)))
    if not threads:
        raise RuntimeError(f"py-spy read nothing: {out.stderr[-2000:]}")
    return threads


@dataclass
class Oracle:
    """One stopped target read three ways: pttrace's hit (recorded through gdb, which then detached),
    and py-spy's and pystack's reading of the same Python stack once the target stopped itself."""

    pid: int
    pttrace: subprocess.CompletedProcess
    session: Path | None
    py_spy: dict
    pystack: dict


def attach_then_stop(python: Path, target: list[str], pttrace: list[str], breakpoint: str, workdir: Path,
                     env: dict | None = None) -> Oracle:
    """``target`` (a script that says "ready", then calls ``breakpoint``'s function on a line that stops
    the process once the file given as its last argument exists) on ``python``; ``pttrace attach
    --max-hits 1`` records one hit there and detaches; the file is made; the target stops on that line;
    py-spy and pystack read it. The target is killed at the end."""
    flag = workdir / "stop-now"
    sessions = workdir / "sessions"
    proc = subprocess.Popen([str(python), *target, str(flag)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        try:
            line = Lines(proc.stdout, str(python)).next(120)
        except AssertionError as e:
            line = str(e)
        if line.strip() != "ready":
            raise RuntimeError(f"{python} did not start the target: {line!r} {proc.stderr.read()[-2000:]}")
        ran = run_child([*pttrace, "attach", "--batch", "--session-dir", str(sessions), "--break", breakpoint,
                         "--max-hits", "1", "--max-depth", "2000", str(proc.pid)], capture_output=True,
                        text=True, timeout=300, env=dict(os.environ, **(env or {})), cwd=ROOT)
        files = sorted(sessions.glob("*.jsonl"))
        flag.touch()
        deadline = time.monotonic() + allowance(30)
        while _state(proc.pid) != "T":
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the target did not stop itself after pttrace detached")
            time.sleep(0.01)
        return Oracle(proc.pid, ran, files[0] if len(files) == 1 else None, py_spy_threads(proc.pid),
                      pystack_threads(proc.pid))
    finally:
        finish(proc)


def oracle_disagreements(frames: list[tuple[str, int, str]], oracle: Oracle, lwp: int, name: str) -> list[str]:
    """Where a hit's Python frames (file, line, qualified name; innermost first) differ from what py-spy
    and pystack read of thread ``lwp`` (threading name ``name``); empty when all three agree."""
    out = []
    # py-spy names a thread by its LWP where the interpreter keeps it (3.11+), else by its pthread_t
    spy = oracle.py_spy.get(lwp) or next((t for t in oracle.py_spy.values() if t[0] == name), (None, []))
    spy = spy[1]
    if not same_frames(frames, spy):
        out.append(f"py-spy read {len(spy)} frames {spy[:4]}..., pttrace recorded {len(frames)} {frames[:4]}...")
    theirs = [(os.path.realpath(f) if f.startswith("/") else f, line, fn)
              for f, line, fn in oracle.pystack.get(lwp, [])]
    ours = [(os.path.realpath(f) if f.startswith("/") else f, line, fn.rsplit(".", 1)[-1]) for f, line, fn in frames]
    if ours != theirs:
        out.append(f"pystack read {len(theirs)} frames {theirs[:4]}..., pttrace recorded {len(ours)} {ours[:4]}...")
    return out


def same_frames(ours, theirs) -> bool:
    """py-spy names a file by its path shortened to its package (or its base name), a function by its
    qualified name on 3.11+ (the code name on 3.10)."""
    return len(ours) == len(theirs) and all(
        (line, fn) == (tline, tfn) and (file == tfile or file.endswith("/" + tfile))
        for (file, line, fn), (tfile, tline, tfn) in zip(ours, theirs))


def debian_torch_python() -> Path | None:
    """Debian's python3.11 (no DWARF) in a venv that sees the test venv's torch (a cp311 wheel runs on
    any CPython 3.11): ``python3 -m venv`` as a Debian user makes it, without a second torch install."""
    if not DEBIAN.exists() or sys.version_info[:2] != (3, 11):
        return None
    home = CACHE.parent / "debian-torch-venv"
    python = home / "bin" / "python"
    site = [p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)]
    if not python.exists():
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([str(DEBIAN), "-m", "venv", "--without-pip", str(home)], check=True)
    if not site:
        return None
    (home / "lib" / "python3.11" / "site-packages" / "pttrace-torch.pth").write_text(site[0] + "\n")
    return python
