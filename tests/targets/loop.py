"""Calls torch.tensor forever (until killed): a target for faults in the middle of a run.

With a file name as its argument it writes its own count of calls there after each one, so that a
test can see it make progress without a breakpoint (its own count, not pttrace's)."""
import os
import sys
import time

import torch

counter = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644) if len(sys.argv) > 1 else None
print("looping", flush=True)
n = 0
while True:
    torch.tensor([n])
    n += 1
    if counter is not None:
        os.pwrite(counter, f"{n:>12}\n".encode(), 0)
    time.sleep(0.01)
