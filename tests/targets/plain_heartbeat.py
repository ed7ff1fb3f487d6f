"""heartbeat.py without torch, for a test whose claim is about the process, not torch (importing torch
took 2.5 s of CPU at load 8): says "ready" through a fifo, then calls libz's zlibCompileFlags (through ctypes:
a breakpoint's hit) and prints a heartbeat every 50 ms until the file named by argv[2] exists."""
import ctypes
import os
import sys
import time

fifo, stop_file = sys.argv[1], sys.argv[2]
call = ctypes.CDLL("libz.so.1").zlibCompileFlags
with open(fifo, "w") as fh:
    fh.write(f"ready {os.getpid()}\n")
n = 0
while not os.path.exists(stop_file):
    call()
    n += 1
    print(f"heartbeat {n}", flush=True)
    time.sleep(0.05)
print("bye", flush=True)
