"""Several processes for the TUI: the parent and an ``os.fork`` child each call torch.sigmoid twice (break on
wrapper_CPU_sigmoid; the child ends with exit code 5), then a Python subprocess (traced by a recorder of its
own after its exec) calls it once. Prints "CHILD <pid>", "SUB <pid>" and "DONE <pid>"."""
import os
import subprocess
import sys

import torch

x = torch.ones(2)
pid = os.fork()
if pid == 0:
    torch.sigmoid(x)
    torch.sigmoid(x)
    os._exit(5)
torch.sigmoid(x)
os.waitpid(pid, 0)
print("CHILD", pid, flush=True)
sub = subprocess.Popen([sys.executable, "-c", "import time, torch; time.sleep(1); torch.sigmoid(torch.ones(1))"])
sub.wait()
print("SUB", sub.pid, flush=True)
torch.sigmoid(x)
print("DONE", os.getpid(), flush=True)
