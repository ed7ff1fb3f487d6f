"""torch.compile on CPU: inductor fuses sigmoid, mul, tanh and add into one generated kernel (argv[1]:
the backend, inductor by default); h has a graph break, so dynamo makes two graphs of it."""
import sys

import torch

backend = sys.argv[1] if len(sys.argv) > 1 else "inductor"


def g(x):
    return torch.sigmoid(x) * 2.0 + torch.tanh(x)


def h(x):
    y = torch.sigmoid(x) + 1.0
    torch._dynamo.graph_break()
    return torch.tanh(y) * 3.0


cg = torch.compile(g, backend=backend)
ch = torch.compile(h, backend=backend)
x = torch.ones(8)
y = cg(x)
y = cg(x)
z = ch(x)
print(float(y.sum()), float(z.sum()))
# dynamo's own numbering: each graph is in the compiled frame's globals as __compiled_fn_N_<uuid>
print("GRAPHS", *sorted(k.split("_")[4] for k in globals() if k.startswith("__compiled_fn_")))
