"""Calls libz's zlibCompileFlags (through ctypes, without importing torch: the claims made with it are about
the processes), forks a child, then becomes another Python program (os.execv). The child waits until that
program runs (a file it makes), makes the same call and ends; the program waits for the child's end (its child
still: the pid stays through an exec) and 3 s more (a recorder that wrongly ends the run at the child's end has
killed it by then), then makes the call, prints SECOND DONE and exits 3."""
import ctypes
import os
import sys
import time

flag = sys.argv[1]
call = ctypes.CDLL("libz.so.1").zlibCompileFlags
call()
pid = os.fork()
if pid == 0:
    while not os.path.exists(flag):
        time.sleep(0.02)
    call()
    os._exit(0)
code = ("import ctypes, os, sys, time; open(sys.argv[1], 'w').close(); os.waitpid(int(sys.argv[2]), 0); "
        "time.sleep(3); ctypes.CDLL('libz.so.1').zlibCompileFlags(); print('SECOND DONE', flush=True); sys.exit(3)")
os.execv(sys.executable, [sys.executable, "-c", code, flag, str(pid)])
