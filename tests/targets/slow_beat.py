"""Calls torch.tensor every 0.4 s until killed: an attach target that is mostly running, not stopped
at a hit, when something happens to gdb."""
import time

import torch

print("ready", flush=True)
n = 0
while True:
    torch.tensor([n])
    n += 1
    time.sleep(0.4)
