"""Calls torch.sigmoid, then becomes another Python script (os.execv of exec_second.py, same pid) that calls it
again. Prints "FIRST <pid>" before the exec."""
import os
import sys
from pathlib import Path

import torch

torch.sigmoid(torch.ones(2))
print("FIRST", os.getpid(), flush=True)
os.execv(sys.executable, [sys.executable, str(Path(__file__).with_name("exec_second.py"))])
