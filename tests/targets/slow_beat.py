"""Calls torch.tensor every 0.4 s until killed, saying "beat N" after each call (a hit's handling by
gdb is over then): an attach target that can be caught running, not stopped at a hit. Given a path, it
waits while that file exists, saying "held" first: a test holds it between two calls (none near a
breakpoint) while it kills gdb."""
import os
import sys
import time

import torch

hold = sys.argv[1] if len(sys.argv) > 1 else None
print("ready", flush=True)
n = 0
while True:
    if hold and os.path.exists(hold):
        print("held", flush=True)
        while os.path.exists(hold):
            time.sleep(0.02)
    torch.tensor([n])
    n += 1
    print(f"beat {n}", flush=True)
    time.sleep(0.4)
