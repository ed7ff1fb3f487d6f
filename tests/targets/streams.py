"""Writes a line to its stdout, one to its stderr and one to its stdout again, each saying whether its
stream is a terminal, with a torch.sigmoid call between them."""
import sys

import torch

print(f"OUT1 tty={sys.stdout.isatty()}", flush=True)
print(f"ERR tty={sys.stderr.isatty()}", file=sys.stderr, flush=True)
torch.sigmoid(torch.ones(1))
print("OUT2", flush=True)
