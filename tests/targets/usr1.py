"""Handles SIGUSR1 itself: sends itself one between two torch.tensor calls, then waits (up to its own
deadline) for one from outside. Prints what its handler counted: the target's own word that each signal
reached it, whoever traces it."""
import os
import signal
import time

import torch

got = []
signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
torch.tensor([1])
os.kill(os.getpid(), signal.SIGUSR1)  # its own signal, delivered before kill() returns
print(f"own signal handled: {len(got)}", flush=True)
print(f"waiting {os.getpid()}", flush=True)
deadline = time.monotonic() + 300
while len(got) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
torch.tensor([2])
print(f"signals handled: {len(got)}", flush=True)
