"""Forks N children (default 200) at once, each calling torch.sigmoid once; prints how many did. With
--no-torch after N, each child calls libz's zlibCompileFlags (through ctypes) instead, in a process that never
imported torch.

A child's exit code says it ran its call (0), so the count printed is the target's own; it prints each child's
pid and exit code too."""
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
codes = {pid: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids}
# each child's pid and exit code as its parent's waitpid got them: the facts pttrace's session must hold
print("EXITS", " ".join(f"{pid}:{code}" for pid, code in codes.items()), flush=True)
print("SIGMOIDS", sum(code == 0 for code in codes.values()), flush=True)
