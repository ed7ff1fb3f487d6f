"""Calls torch.tensor forever (until killed): a target for faults in the middle of a run.

With a file name as its argument it writes its own count of calls there after each one, so that a
test can see it make progress without a breakpoint (its own count, not pttrace's). With --no-torch
first, it calls libz's zlibVersion instead, without importing torch (2.5 s of CPU at load 8), for a
test whose claim is about the run, not torch."""
import ctypes
import os
import sys
import time

args = sys.argv[1:]
if args[:1] == ["--no-torch"]:
    del args[0]
    call = ctypes.CDLL("libz.so.1").zlibVersion
else:
    import torch

    def call():
        torch.tensor([n])

counter = os.open(args[0], os.O_WRONLY | os.O_CREAT, 0o644) if args else None
print("looping", flush=True)
n = 0
while True:
    call()
    n += 1
    if counter is not None:
        os.pwrite(counter, f"{n:>12}\n".encode(), 0)
    time.sleep(0.01)
