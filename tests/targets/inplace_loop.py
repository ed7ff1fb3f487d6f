"""The same two tensors at every hit of ``torch.add``, the first changed in place between hits, two hits a
line, then two at another line of the loop: what the agent kept of the hit before must not be handed out
once a byte of it changed. Writes what the target saw at each call to an oracle.
``python inplace_loop.py ORACLE.json N``."""
import json
import sys

import torch

a = torch.zeros(3)
b = torch.ones(3)
seen = []
for i in range(int(sys.argv[2])):
    seen.append({"values": a.tolist(), "line": 18 if (i // 2) % 2 else 16})
    if (i // 2) % 2 == 0:
        torch.add(a, b)  # line 16
    else:
        torch.add(a, b)  # line 18
    a.add_(1.5)
with open(sys.argv[1], "w") as fh:
    json.dump(seen, fh)
