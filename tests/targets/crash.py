"""Calls torch.tensor once, then ends the way argv[1] says: segv, exit3, sigkill."""
import ctypes
import os
import signal
import sys

import torch

t = torch.tensor([1.0])
how = sys.argv[1]
if how == "segv":
    ctypes.string_at(0)  # reads address 0: SIGSEGV
elif how == "exit3":
    os._exit(3)
elif how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
