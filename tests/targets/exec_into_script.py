"""Calls libz's zlibCompileFlags (ctypes), then becomes another Python script (os.execv of exec_second.py,
same pid) that calls it again. Prints "FIRST <pid>" before the exec. (No torch: its test's claims are about
the processes, their gdbs and the steps; importing torch twice, and gdb reading libtorch_cpu.so's symbols
for the steps, was most of the test's CPU.)"""
import ctypes
import os
import sys
from pathlib import Path

ctypes.CDLL("libz.so.1").zlibCompileFlags()
print("FIRST", os.getpid(), flush=True)
os.execv(sys.executable, [sys.executable, str(Path(__file__).with_name("exec_second.py"))])
