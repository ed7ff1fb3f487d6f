"""A fork through libz, no torch: the parent calls zlibCompileFlags (through ctypes: a name gdb resolves, not
pttrace's index), forks a child that calls it twice and exits with code 3, prints "FORKED <pid>"; with
--again the parent then calls it once more."""
import ctypes
import os
import sys

call = ctypes.CDLL("libz.so.1").zlibCompileFlags
call()
pid = os.fork()
if pid == 0:
    call()
    call()
    os._exit(3)
os.waitpid(pid, 0)
print("FORKED", pid, flush=True)
if "--again" in sys.argv[1:]:
    call()
