"""Calls torch.sigmoid, forks a child, then becomes another Python program (os.execv). The child waits
until that program runs (a file it makes), calls torch.sigmoid and ends; the program waits for the child's
end (its child still: the pid stays through an exec) and 3 s more (a recorder that wrongly ends the run at
the child's end has killed it by then), then calls torch.sigmoid, prints SECOND DONE and exits 3."""
import os
import sys
import time

import torch

flag = sys.argv[1]
torch.sigmoid(torch.ones(1))
pid = os.fork()
if pid == 0:
    while not os.path.exists(flag):
        time.sleep(0.02)
    torch.sigmoid(torch.ones(2))
    os._exit(0)
code = ("import os, sys, time, torch; open(sys.argv[1], 'w').close(); os.waitpid(int(sys.argv[2]), 0); "
        "time.sleep(3); torch.sigmoid(torch.ones(3)); print('SECOND DONE', flush=True); sys.exit(3)")
os.execv(sys.executable, [sys.executable, "-c", code, flag, str(pid)])
