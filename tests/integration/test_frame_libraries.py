"""Which file a recorded native frame's code is in (real gdb, a real target): a frame whose pc is in no file
(code a program wrote into anonymous memory, as a JIT does) has no library, as gdb's ``bt`` gives it none
(``0x... in ?? ()``, no ``from``); before, every pc outside the shared libraries was labelled with the
executable's name."""
from __future__ import annotations

import os
import re
import sys

import pytest

from tests.integration.test_processes import record
from tests.support import run_child

pytestmark = pytest.mark.gdb

# Calls getppid from a few instructions it wrote into an anonymous executable page (no file, no CFI).
TARGET = '''\
import ctypes, mmap
libc = ctypes.CDLL(None)
target = ctypes.cast(libc.getppid, ctypes.c_void_p).value
# sub $8,%rsp; movabs $getppid,%rax; call *%rax; add $8,%rsp; ret
code = b"\\x48\\x83\\xec\\x08\\x48\\xb8" + target.to_bytes(8, "little") + b"\\xff\\xd0\\x48\\x83\\xc4\\x08\\xc3"
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
print("CODE", address, flush=True)
print("PPID", ctypes.CFUNCTYPE(ctypes.c_int)(address)(), flush=True)
'''


def test_a_frame_in_no_file_has_no_library_and_the_executables_frames_keep_it(tmp_path):
    # GIVEN a target calling getppid from code in anonymous memory
    (tmp_path / "anon.py").write_text(TARGET)
    # WHEN it is recorded at getppid (and at Py_BytesMain: a frame in the executable, its _start)
    proc, session = record(tmp_path, "--break", "getppid", "--break", "Py_BytesMain", "anon.py", timeout=120)
    assert proc.returncode == 0, proc.stderr
    code = int(re.search(rb"^CODE (\d+)", proc.stdout, re.M).group(1))
    [hit] = [h for h in session.hits if h.breakpoint == "getppid"]
    inner = list(reversed(hit.frames))
    # AND plain gdb stops the same program there
    out = run_child(["gdb", "-nx", "--batch", "-ex", "set breakpoint pending on", "-ex", "break getppid", "-ex", "run",
                     "-ex", "bt", "--args", sys.executable, str(tmp_path / "anon.py")], capture_output=True,
                    timeout=120).stdout.decode(errors="replace")
    theirs = re.findall(r"^#\d+\s+(?:0x([0-9a-f]+) in )?(\S+) \(.*?\)(?: from (\S+))?(?: at \S+)?$", out, re.M)
    assert theirs and theirs[0][1].endswith("getppid") and theirs[1][1] == "??" and not theirs[1][2], out
    # THEN the frame in the anonymous page is recorded at its pc there with no library, as gdb names none
    assert inner[0].function.endswith("getppid") and inner[0].library.endswith("libc.so.6")
    assert code <= inner[1].address < code + 4096 and inner[1].library is None and inner[1].function is None, \
        [(f.function, f.library, f.address) for f in inner]
    # AND pttrace's frames past it are gdb's: same count, none with a library (gdb's bt: a pc of 0 ends it)
    assert len(inner) == len(theirs) and all(f.library is None for f in inner[1:]), (inner, theirs)
    # AND the executable's own frame still names the executable
    [start] = [h for h in session.hits if h.breakpoint == "Py_BytesMain"]
    assert os.path.realpath(start.frames[0].library) == os.path.realpath(sys.executable), start.frames[0]
