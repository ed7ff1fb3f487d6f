"""Runs of exact repeats of one ``torch.add`` hit, each broken by a change the hit must show: the first
tensor changed in place, another second tensor (other registers), another Python line, the thread renamed
(its comm file: before call 22, in a run where nothing else changes, the fourth call after the first
tensor's last change). Writes what the target saw at each call to an oracle.
``python repeat_loop.py ORACLE.json N``."""
import ctypes
import json
import sys

import torch

PR_SET_NAME = 15
libc = ctypes.CDLL(None)
a = torch.zeros(3)
b = torch.ones(3)
c = torch.full((3,), 2.0)
seen = []
n = int(sys.argv[2])
for i in range(n):
    if i == 22:
        libc.prctl(PR_SET_NAME, b"pt-repeat", 0, 0, 0)
    other = c if i % 9 == 8 else b
    with open("/proc/thread-self/comm") as fh:
        name = fh.read().strip()
    seen.append({"values": a.tolist(), "other": other.tolist(), "name": name, "line": 29 if (i // 6) % 2 else 27})
    if (i // 6) % 2 == 0:
        torch.add(a, other)  # line 27
    else:
        torch.add(a, other)  # line 29
    if i % 5 == 4:
        a.add_(1.0)
with open(sys.argv[1], "w") as fh:
    json.dump(seen, fh)
