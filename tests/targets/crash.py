"""Calls torch.tensor once, then ends the way argv[1] says: segv, exit3, sigkill. With --no-torch after it,
calls libz's zlibVersion once instead (a breakpoint's one hit, for a test whose claim is about how the
process ends: importing torch took 2.5 s of CPU at load 8)."""
import ctypes
import os
import signal
import sys

if sys.argv[2:] == ["--no-torch"]:
    ctypes.CDLL("libz.so.1").zlibVersion()
else:
    import torch

    t = torch.tensor([1.0])
how = sys.argv[1]
if how == "segv":
    ctypes.string_at(0)  # reads address 0: SIGSEGV
elif how == "exit3":
    os._exit(3)
elif how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
