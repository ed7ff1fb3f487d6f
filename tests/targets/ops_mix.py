"""Operators of every kind --op meets, each from a line of its own: a functional op under autograd, a
view, backward, an in-place SGD step, an out= call, and (given the debug extension's path) a
TORCH_LIBRARY op (the CPU kernel through the boxed path, and a CompositeImplicitAutograd one calling it)."""
import sys

import torch

lib = sys.argv[1] if len(sys.argv) > 1 else None
if lib:
    torch.ops.load_library(lib)
torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
x = torch.randn(4, 4)
out = torch.empty(4, 4)

h = torch.relu(x @ w)
loss = h.view(16).sum()
loss.backward()
with torch.no_grad():
    w.add_(w.grad, alpha=-0.1)
torch.add(x, x, out=out)
if lib:
    torch.ops.pttrace_demo.scale_add(x, x, 2.0)
    torch.ops.pttrace_demo.scale_add_twice(x, x, 1.0)
