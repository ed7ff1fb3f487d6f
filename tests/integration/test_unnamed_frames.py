"""Frames nothing can name are a warning every view shows, once per library, with what would name them.

Real cases on this machine: Debian's /usr/bin/python3.11 (a static libpython with no .symtab and no DWARF:
its static functions, 4 frames of a torch call's path) and, for contrast, the test venv's pyenv 3.11 (DWARF)
with torch's wheel (named by its .symtab): no such warning.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from tests import pythons
from tests.conftest import ROOT, run_pttrace
from tests.support import UNNAMED_FRAMES, assert_only_unnamed, unnamed_frames_in
from tracer import elfparts
from tracer.session import storage

pytestmark = [pytest.mark.gdb]

DEBIAN_PYTHON = "/usr/bin/python3.11"


def _apt_knows(package: str) -> str | None:
    """The version apt offers of ``package``, None if it knows none (asked here, as pttrace asks)."""
    out = subprocess.run(["apt-cache", "show", "--no-all-versions", package], capture_output=True, text=True,
                         env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout
    return next((line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("Version: ")), None)


def test_debian_python_frames_without_names_are_one_warning_in_show_and_the_exports(tmp_path):
    python = pythons.debian_torch_python()
    if python is None:
        pytest.skip("Debian's python3.11 is not here (or the tests do not run on 3.11)")
    # WHEN torch.sigmoid's kernel is recorded on Debian's python3.11
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path), "--python", str(python),
                       "--break", "wrapper_CPU_sigmoid", "--max-hits", "1", "scripts/hello-world.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = tmp_path.glob("*.jsonl")
    session = storage.load(path)
    # THEN its nameless interpreter frames are in the hit, by library and address
    [hit] = session.hits
    nameless = [f for f in hit.frames if f.kind == "native" and not f.function and not f.inlined]
    assert nameless and {f.library for f in nameless} == {DEBIAN_PYTHON}, [f.to_dict() for f in nameless]
    # AND one warning names that executable (the other: no python-gdb helper beside a venv's python)
    told = [w for w in session.info.warnings if UNNAMED_FRAMES in w]
    assert_only_unnamed(told, "python3.11")
    assert [w for w in session.info.warnings if w not in told and "python-gdb helper" not in w] == []
    [warning] = told
    assert warning.startswith(f"frames in {DEBIAN_PYTHON} have no function name ({len(nameless)} frames of the "
                              "first call path through it)"), warning
    # AND it says what would name them, each step true here: the build-id for --debug-dir, apt's debug package
    build_id = elfparts.file_build_id(DEBIAN_PYTHON)
    assert f"build-id {build_id}" in warning and "`--debug-dir DIR`" in warning, warning
    assert "`--python` an interpreter built from source with debug info" in warning, warning
    offered = _apt_knows("python3.11-dbg")
    if offered:
        assert f"python3.11-dbg={offered}" in warning, warning
    # AND every view shows it: show, the markdown export, the JSON export
    shown = run_pttrace("show", str(path))
    assert shown.returncode == 0, shown.stderr
    assert f"warning: {warning}" in " ".join(shown.stdout.split()), shown.stdout[:3000]
    md = run_pttrace("export", str(path), "-o", "-")
    escaped = warning.replace("`", "\\`")  # a table cell: its backquotes are the text's, not code spans
    assert md.returncode == 0 and f"<br>{escaped} |" in md.stdout, md.stdout[:3000]
    doc = json.loads(run_pttrace("export", str(path), "--format", "json", "-o", "-").stdout)
    assert warning in doc["session"]["warnings"], doc["session"].get("warnings")


def test_a_pyenv_interpreter_with_dwarf_and_torchs_wheel_name_every_frame(hello_recording):
    """The test venv's python (pyenv 3.11, DWARF) and torch's wheel (.symtab): no unnamed-frames warning over
    hello-world's initModule, sigmoid, tensor and backward hits."""
    proc, session = hello_recording
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(session.hits) >= 4
    assert [w for w in session.info.warnings if unnamed_frames_in(w) is not None] == [], session.info.warnings
    nameless = {f.library for h in session.hits for f in h.frames
                if f.kind == "native" and not f.function and not f.inlined}
    assert nameless == set(), nameless


def test_a_frame_in_code_written_to_anonymous_memory_is_told_as_in_no_file(tmp_path):
    """No file holds it: the warning names no library and advises no debug package (before, such a pc was
    labelled with the executable, whose debug symbols would not have named it)."""
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path), "--break", "zlibVersion",
                       str(ROOT / "tests" / "targets" / "anon_code.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    start, length = (int(x) for x in next(line for line in proc.stdout.splitlines()
                                           if line.startswith("CODE ")).split()[1:])
    (path,) = tmp_path.glob("*.jsonl")
    session = storage.load(path)
    [hit] = session.hits
    # THEN the caller of zlibVersion is the page's code, recorded with no library and no name
    caller = hit.frames[-2]
    assert hit.frames[-1].function == "zlibVersion" and start <= caller.address < start + length, hit.to_dict()
    assert caller.library is None and caller.function is None
    # AND the one warning says so, with no advice that would not help
    [warning] = [w for w in session.info.warnings if unnamed_frames_in(w) == ""]
    assert "apt" not in warning and "--debug-dir" not in warning, warning
    assert warning.startswith("frames outside every file the target mapped have no function name ("), warning
