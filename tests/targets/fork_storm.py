"""Forks N children (default 200) at once, each calling torch.sigmoid once; prints how many did.

A child's exit code says it ran its sigmoid (0), so the count printed is the target's own."""
import os
import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
x = torch.ones(2)
pids = []
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        torch.sigmoid(x)
        os._exit(0)
    pids.append(pid)
ran = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0 for pid in pids)
print("SIGMOIDS", ran, flush=True)
