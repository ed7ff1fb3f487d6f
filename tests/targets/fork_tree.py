"""A tree of processes DEPTH levels deep (default 5: 31 processes), each calling torch.sigmoid once and
forking two children below the last level; prints how many sigmoids ran, counted through exit codes."""
import os
import sys

import torch

depth = int(sys.argv[1]) if len(sys.argv) > 1 else 5
x = torch.ones(2)


def grow(level: int) -> int:
    torch.sigmoid(x)
    if level == depth:
        return 1
    kids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            os._exit(grow(level + 1))
        kids.append(pid)
    return 1 + sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in kids)


print("SIGMOIDS", grow(1), flush=True)
