"""Says its pid, then calls torch.sigmoid and prints "tick N" every 50 ms until the file named by argv[1]
exists; prints how many it made."""
import os
import sys
import time

import torch

x = torch.ones(2)
print(f"PID {os.getpid()}", flush=True)
n = 0
while not os.path.exists(sys.argv[1]):
    torch.sigmoid(x)
    n += 1
    print(f"tick {n}", flush=True)
    time.sleep(0.05)
print(f"TICKS {n}", flush=True)
