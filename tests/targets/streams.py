"""Writes a line to its stdout, one to its stderr and one to its stdout again, each saying whether its
stream is a terminal, with a torch.sigmoid call between them (libz's zlibCompileFlags with
STREAMS_NO_TORCH=1 in its environment, without importing torch: 2.5 s of CPU at load 8, for a test whose
claim is the streams')."""
import os
import sys

if os.environ.get("STREAMS_NO_TORCH") == "1":
    import ctypes

    call = ctypes.CDLL("libz.so.1").zlibCompileFlags
else:
    import torch

    def call():
        torch.sigmoid(torch.ones(1))

print(f"OUT1 tty={sys.stdout.isatty()}", flush=True)
print(f"ERR tty={sys.stderr.isatty()}", file=sys.stderr, flush=True)
call()
print("OUT2", flush=True)
