"""Eight named threads each call torch.tensor five times. With --no-torch, each calls libz's zlibCompileFlags
(through ctypes, which lets go of the GIL as torch's binding does) instead, without importing torch: for a
test whose claim is about the threads (importing torch took 2.5 s of CPU at load 8)."""
import ctypes
import sys
import threading

NO_TORCH = sys.argv[1:] == ["--no-torch"]
if NO_TORCH:
    zlib = ctypes.CDLL("libz.so.1")
else:
    import torch

libc = ctypes.CDLL(None)
PR_SET_NAME = 15
barrier = threading.Barrier(8)


def work(i):
    libc.prctl(PR_SET_NAME, f"worker-{i}".encode(), 0, 0, 0)  # the OS thread name gdb shows
    barrier.wait()
    for _ in range(5):
        if NO_TORCH:  # called here, in work: the innermost Python frame of each hit
            zlib.zlibCompileFlags()
        else:
            torch.tensor([i])


threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
