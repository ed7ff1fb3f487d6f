"""An attach target with a TORCH_LIBRARY operator loaded before pttrace comes: loads the library given,
says "ready" through a fifo, then calls pttrace_demo::scale_add every 50 ms until a stop file exists."""
import os
import sys
import time

import torch

library, fifo, stop_file = sys.argv[1], sys.argv[2], sys.argv[3]
torch.ops.load_library(library)
a = torch.arange(4, dtype=torch.float32)
with open(fifo, "w") as fh:
    fh.write(f"ready {os.getpid()}\n")
while not os.path.exists(stop_file):
    torch.ops.pttrace_demo.scale_add(a, a, 2.0)
    time.sleep(0.05)
