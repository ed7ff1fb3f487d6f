"""An attach target: imports torch, says "ready" through a fifo, then calls torch.tensor and prints a
heartbeat every 50 ms until the file named by argv[2] exists. No test sleeps and guesses."""
import os
import sys
import threading
import time

import torch

fifo, stop_file = sys.argv[1], sys.argv[2]
threaded = len(sys.argv) > 3 and sys.argv[3] == "--thread"


def work():
    n = 0
    while not os.path.exists(stop_file):
        t = torch.tensor([n])
        n += 1
        print(f"heartbeat {n} {int(t.sum())}", flush=True)
        time.sleep(0.05)


with open(fifo, "w") as fh:
    fh.write(f"ready {os.getpid()}\n")

if threaded:
    th = threading.Thread(target=work, name="worker-thread")
    th.start()
    th.join()
else:
    work()
print("bye", flush=True)
