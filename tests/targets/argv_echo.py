"""Prints its arguments as JSON, then calls torch.tensor once; with ARGV_ECHO_NO_TORCH=1 in its
environment, libz's zlibVersion instead, without importing torch (2.5 s of CPU at load 8), for a test
whose claim is about the arguments."""
import json
import os
import sys

print("ARGV=" + json.dumps(sys.argv[1:]), flush=True)
if os.environ.get("ARGV_ECHO_NO_TORCH") == "1":
    import ctypes

    ctypes.CDLL("libz.so.1").zlibVersion()
else:
    import torch

    torch.tensor([1])
