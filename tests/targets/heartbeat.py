"""An attach target: imports torch, says "ready" through a fifo, then calls torch.tensor and prints a
heartbeat every 50 ms until the file named by argv[2] exists. No test sleeps and guesses. With
HEARTBEAT_NO_TORCH=1 in its environment it calls libz's zlibCompileFlags instead, without importing torch
(2.5 s of CPU at load 8), for a test whose claim is about the process, not torch."""
import os
import sys
import threading
import time

if os.environ.get("HEARTBEAT_NO_TORCH") == "1":
    import ctypes

    _flags = ctypes.CDLL("libz.so.1").zlibCompileFlags

    def call(n: int) -> int:
        _flags()
        return n
else:
    import torch

    def call(n: int) -> int:
        return int(torch.tensor([n]).sum())

fifo, stop_file = sys.argv[1], sys.argv[2]
threaded = len(sys.argv) > 3 and sys.argv[3] == "--thread"


def work():
    n = 0
    while not os.path.exists(stop_file):
        total = call(n)
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
