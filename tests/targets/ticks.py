"""Says its pid, then calls libz's zlibCompileFlags and prints "tick N" every 50 ms until the file named by
argv[1] exists; prints how many it made. (No torch: the claims it serves are about the process's stops and
signals; importing torch took 2.5 s of CPU at load 8.)"""
import ctypes
import os
import sys
import time

call = ctypes.CDLL("libz.so.1").zlibCompileFlags
print(f"PID {os.getpid()}", flush=True)
n = 0
while not os.path.exists(sys.argv[1]):
    call()
    n += 1
    print(f"tick {n}", flush=True)
    time.sleep(0.05)
print(f"TICKS {n}", flush=True)
