"""Eight named threads each call torch.tensor five times."""
import ctypes
import threading

import torch

libc = ctypes.CDLL(None)
PR_SET_NAME = 15
barrier = threading.Barrier(8)


def work(i):
    libc.prctl(PR_SET_NAME, f"worker-{i}".encode(), 0, 0, 0)  # the OS thread name gdb shows
    barrier.wait()
    for _ in range(5):
        torch.tensor([i])


threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
