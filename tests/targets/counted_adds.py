"""A hot loop whose length the test does not choose: 3,000 to 3,499 calls of torch.add (from the pid),
each adding one to a tensor, so torch's own arithmetic counts the calls. Prints that count at the end."""
import os

import torch

n = 3000 + os.getpid() % 500
one = torch.ones(1)
count = torch.zeros(1)
for _ in range(n):
    count = torch.add(count, one)  # COUNTED
print(f"COUNTED {int(count.item())}", flush=True)
