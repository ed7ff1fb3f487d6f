"""An attach target read by an independent oracle: a module's forward calls torch.sigmoid every 50 ms
(break on wrapper_CPU_sigmoid) until the file named by argv[1] exists, then stops the process with
SIGSTOP on that same line, so the Python stack of a hit recorded there is there again for py-spy and
pystack to read. Says "ready" once torch is imported."""
import os
import signal
import sys
import time

import torch

FLAG = sys.argv[1]


class Stopper(torch.nn.Module):
    def forward(self, x):
        # One line: a hit in torch.sigmoid and the stop after it have the same Python stack.
        y = torch.sigmoid(x); os.path.exists(FLAG) and os.kill(os.getpid(), signal.SIGSTOP)  # noqa: E702
        return y


def main():
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), Stopper())
    x = torch.tensor([1.0, 2.0, 3.0])
    print("ready", flush=True)
    while True:
        model(x)
        time.sleep(0.05)


main()
