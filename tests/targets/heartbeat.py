"""An attach target: imports torch, says "ready" through a fifo, then calls torch.tensor and prints a
heartbeat every 50 ms until the file named by argv[2] exists. No test sleeps and guesses. With
HEARTBEAT_NO_TORCH=1 in its environment it calls libz's zlibCompileFlags instead, without importing torch
(2.5 s of CPU at load 8), for a test whose claim is about the process, not torch."""
import os
import sys
import threading
import time

NO_TORCH = os.environ.get("HEARTBEAT_NO_TORCH") == "1"
if NO_TORCH:
    import ctypes

    zlib = ctypes.CDLL("libz.so.1")
else:
    import torch

fifo, stop_file = sys.argv[1], sys.argv[2]
threaded = len(sys.argv) > 3 and sys.argv[3] == "--thread"


def work():
    n = 0
    while not os.path.exists(stop_file):
        # Each call made here, in work: the innermost Python frame of a hit, at this line (test_attach.py)
        if NO_TORCH:
            zlib.zlibCompileFlags()
            total = n
        else:
            t = torch.tensor([n])
            total = int(t.sum())
        n += 1
        print(f"heartbeat {n} {total}", flush=True)
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
