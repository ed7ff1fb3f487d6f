"""Calls torch.tensor every 0.4 s until killed, saying "beat N" after each call (a hit's handling by
gdb is over then): an attach target that can be caught running, not stopped at a hit."""
import time

import torch

print("ready", flush=True)
n = 0
while True:
    torch.tensor([n])
    n += 1
    print(f"beat {n}", flush=True)
    time.sleep(0.4)
