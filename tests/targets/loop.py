"""Calls torch.tensor forever (until killed): a target for faults in the middle of a run."""
import sys
import time

import torch

print("looping", flush=True)
n = 0
while True:
    torch.tensor([n])
    n += 1
    time.sleep(0.01)
