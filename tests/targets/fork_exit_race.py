"""Ten rounds of a hit and another process's exit that reach gdb together: each round a fork child spins until
the parent sets a shared flag, then exits at once, and the parent sets the flag and calls zlibCompileFlags
(through ctypes) straight away, then waits for the child. The parent makes exactly ten calls; the children
none. Prints "ROUNDS 10" at the end.

The parent blocks SIGCHLD (waitpid needs no signal): a child's exit then meets the step over the parent's hit
only as another process's stop, never as a signal taken in the microseconds of that step, a case pttrace does
not tell (agent/stepovers.py, "Not covered"). With --sigchld it takes the signal too."""
import ctypes
import mmap
import os
import signal
import sys

ROUNDS = 10
call = ctypes.CDLL("libz.so.1").zlibCompileFlags
if "--sigchld" not in sys.argv[1:]:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
for _ in range(ROUNDS):
    flag = mmap.mmap(-1, 1)
    pid = os.fork()
    if pid == 0:
        while flag[0] == 0:
            pass
        os._exit(3)
    flag[0] = 1
    call()
    os.waitpid(pid, 0)
print("ROUNDS", ROUNDS, flush=True)
