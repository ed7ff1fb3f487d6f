"""Forks N children (default 200) at once, each calling torch.sigmoid once; prints how many did. With
--no-torch after N, each child calls libz's zlibCompileFlags (through ctypes) instead, in a process that never
imported torch.

A child's exit code says it ran its call (0), so the count printed is the target's own."""
import ctypes
import os
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
if sys.argv[2:] == ["--no-torch"]:
    call = ctypes.CDLL("libz.so.1").zlibCompileFlags
else:
    import torch

    x = torch.ones(2)

    def call():
        torch.sigmoid(x)
pids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        call()
        os._exit(0)
    pids.append(pid)
ran = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 for pid in pids)
print("SIGMOIDS", ran, flush=True)
