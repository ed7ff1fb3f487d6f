"""Calls libz's zlibCompileFlags every 0.4 s until killed, saying "beat N" after each call (a hit's handling
by gdb is over then): an attach target that can be caught running, not stopped at a hit. Given a path, it
waits while that file exists, saying "held" first: a test holds it between two calls (none near a
breakpoint) while it kills gdb. (No torch: its tests' claims are about the process and gdb, and importing
torch took 2.5 s of CPU at load 8.)"""
import ctypes
import os
import sys
import time

call = ctypes.CDLL("libz.so.1").zlibCompileFlags

hold = sys.argv[1] if len(sys.argv) > 1 else None
print("ready", flush=True)
n = 0
while True:
    if hold and os.path.exists(hold):
        print("held", flush=True)
        while os.path.exists(hold):
            time.sleep(0.02)
    call()
    n += 1
    print(f"beat {n}", flush=True)
    time.sleep(0.4)
